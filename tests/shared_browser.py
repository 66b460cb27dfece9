"""One Chromium per test process, which the `qwenpipe` commands of the CLI tests attach to over
CDP (`[browser] cdp_url`, the way a user attaches qwenpipe to the Chrome they run) instead of each
launching its own.

A launch costs about 1.1 CPU-seconds of the 2 to 4 that a `qwenpipe generate` against the
simulator takes, and the suite is CPU-bound on two cores (issue 28; figures in
bench/bench_slowest_tests.py). Attached, a command opens its pages in the browser's default
context and closes only them; the simulator without accounts answers every request for its one
account, so nothing a test leaves in that context (a cookie of another simulator, a cached
script) changes what the next one sees.

Tests whose point is the launch itself keep launching: a profile, its lock, a saved login, a
proxy, a headed window, the launch count, a command killed with its pages open
(`make_project(..., own_browser=True)`).

The browser is started on first use, in its own process group, and stopped by its PID when the
test process ends (conftest's session fixture `_shared_browser_stopped`), or by its guard
(tests/orphan_guard.py) when the test process is killed outright.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from orphan_guard import Guard, group_gone

from pipeline.engines.qwen.browser import find_executable, launch_args

START_SECONDS = 30
# The same Chromium build's old headless mode (Debian's chromium-headless-shell, what Playwright
# itself runs for headless by default): a page held open costs about a sixth of the CPU it does
# in the full browser's headless mode (0.18 against 1.14 CPU-seconds, bench/bench_browser_pages.py),
# and the CLI tests open hundreds. The tests of the launch itself use the full `chromium`.
HEADLESS_SHELL = "chromium-headless-shell"

_process: subprocess.Popen | None = None
_guard: Guard | None = None  # stops the browser if this process is killed outright
_folder: tempfile.TemporaryDirectory | None = None
_url = ""


def cdp_url() -> str:
    """The DevTools address of this process's shared Chromium, started on first use."""
    global _process, _folder, _url, _guard
    if _process is not None and _process.poll() is None:
        return _url
    stop()
    executable = headless_shell() or find_executable("")[0]
    if executable is None:
        raise RuntimeError("no Chromium on PATH for the shared test browser")
    _folder = tempfile.TemporaryDirectory(prefix="qwenpipe-shared-chromium-")
    profile = Path(_folder.name)
    _process = subprocess.Popen(
        [
            executable,
            "--headless",
            "--remote-debugging-port=0",  # loopback; Chromium picks the port and writes it down
            f"--user-data-dir={profile}",
            *launch_args(),
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its renderers and helpers stop with it, by its group
    )
    atexit.register(stop)  # a process that ends without its session's teardown stops it too
    _guard = Guard(group=_process.pid, remove=[profile])
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        lines = port_file.read_text().split() if port_file.exists() else []
        if lines:
            _url = f"http://127.0.0.1:{lines[0]}"
            return _url
        if _process.poll() is not None:
            break
        time.sleep(0.05)
    stop()
    raise RuntimeError(f"the shared test browser ({executable}) did not start in {START_SECONDS} s")


def headless_shell() -> str | None:
    """The headless shell's path, or None when it is not installed (then the full Chromium)."""
    return shutil.which(HEADLESS_SHELL)


def stop() -> None:
    """Stop the shared Chromium (its process group, by the PID we started) and remove its profile."""
    global _process, _folder, _url, _guard
    if _guard is not None:  # first: it must never act on a group id the browser has left free
        _guard.cancel()
        _guard = None
    if _process is not None:
        if _process.poll() is None:
            try:
                os.killpg(_process.pid, signal.SIGTERM)
                _process.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(_process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _process.wait()
        _group_gone(_process.pid)
        _process = None
    if _folder is not None:
        _folder.cleanup()
        _folder = None
    _url = ""


def _group_gone(group: int, seconds: float = 10.0) -> None:
    """Wait until no process of the browser's group is left (its helpers may outlive the browser
    by a moment, still writing to the profile), then SIGKILL what remains."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if group_gone(group):
            return
        time.sleep(0.05)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
