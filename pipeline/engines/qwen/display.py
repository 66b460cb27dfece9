"""A screen for a headed browser on a server: which one a run uses, and Xvfb started for the run.

The site flags headless Chromium far more often than a headed one, and a server has no screen.
`browser.display` decides what a headed launch (`headless = false`) does there:
- "auto": the screen in DISPLAY / WAYLAND_DISPLAY when there is one, else an Xvfb of our own;
- "xvfb": always an Xvfb of our own (even when DISPLAY is set);
- "none": no Xvfb; without a screen the run stops with the NoDisplay message.

Our Xvfb lives exactly as long as the browser that uses it: stopped when the session closes,
and killed by the kernel when qwenpipe dies any other way (a SIGKILL, the watchdog's _exit),
so a cron job never leaves one behind.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import UsageProblem

if TYPE_CHECKING:  # the section's type only: engines do not import the config
    from ...config import Browser

XVFB_NAME = "Xvfb"
XVFB_INSTALL = "apt-get install -y xvfb"
START_SECONDS = 10.0  # Xvfb announces its display within milliseconds; this only bounds a hang
STOP_SECONDS = 5.0
SCREEN = "1920x1080x24"
PR_SET_PDEATHSIG = 1


class NoDisplay(UsageProblem):
    """A visible browser was needed and there is no screen (exit 2): the message says the ways."""


def has_display(env: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """Whether a visible browser can open: always on macOS and Windows, on Linux with X or Wayland."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux") and "bsd" not in platform:
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def find_xvfb() -> str | None:
    """Where Xvfb is on PATH (Debian's `xvfb` package puts it in /usr/bin, on cron's PATH), or None."""
    return shutil.which(XVFB_NAME)


@dataclass(frozen=True)
class DisplayPlan:
    """What a launch of this [browser] config will show its window on."""

    mode: str  # browser.display as configured
    use: str  # "headless", "attached", "screen", "xvfb" or "missing" (the launch must stop)
    detail: str  # one line for people (doctor)
    xvfb: str | None  # Xvfb's path when installed

    @property
    def starts_xvfb(self) -> bool:
        return self.use == "xvfb"


def plan_display(
    browser: Browser, env: Mapping[str, str] | None = None, platform: str | None = None
) -> DisplayPlan:
    """Which screen a browser launched with `browser` (the [browser] section) will use here."""
    mode = browser.display
    xvfb = find_xvfb()
    if browser.cdp_url:
        return DisplayPlan(mode, "attached", "attached over CDP: the browser has its own screen", xvfb)
    if browser.headless:
        return DisplayPlan(mode, "headless", "headless: no screen needed", xvfb)
    screen = has_display(env, platform)
    if screen and mode != "xvfb":
        return DisplayPlan(mode, "screen", "headed, on this session's screen (DISPLAY)", xvfb)
    if mode == "none":
        return DisplayPlan(mode, "missing", "headed, no screen (no DISPLAY), no Xvfb allowed", xvfb)
    if xvfb is None:
        return DisplayPlan(mode, "missing", "headed, no screen (no DISPLAY), and no Xvfb to start", xvfb)
    return DisplayPlan(mode, "xvfb", f"headed, on an Xvfb started for the run ({xvfb})", xvfb)


def no_display_message(plan: DisplayPlan) -> str:
    """The one line a launch that cannot show its window stops with: what, and the fixes."""
    if plan.mode != "none" and plan.xvfb is None:
        return (
            f"browser.headless = false needs a screen, there is none (no DISPLAY) and Xvfb is not "
            f'installed: `{XVFB_INSTALL}` (then browser.display = "{plan.mode}" starts one for each '
            "run), or set browser.headless = true"
        )
    return (
        "browser.headless = false needs a screen and there is none (neither DISPLAY nor WAYLAND_DISPLAY "
        'is set); browser.display = "none" starts no Xvfb: set browser.display = "auto" '
        f"(with `{XVFB_INSTALL}`), or browser.headless = true"
    )


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends it SIGTERM when qwenpipe dies.

    Strictly, when the thread that started it ends: a browser session is started and closed by
    one thread (its Playwright objects belong to that thread anyway), so that is the same here."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != _PARENT[0]:  # qwenpipe died between the fork and the prctl
        os._exit(1)


_PARENT = [0]  # set just before each start: the pid the child must outlive


# Looked up before any fork: the child must not load libraries between fork and exec.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class XvfbFailed(UsageProblem):
    """Xvfb would not start: its own words, and what to try."""


class VirtualDisplay:
    """One Xvfb server on the first free display number, for as long as this object is started."""

    def __init__(self, executable: str):
        self.executable = executable
        self.process: subprocess.Popen | None = None
        self.display: str | None = None
        self._log: Any = None  # Xvfb's stderr: a file, since a full pipe would block the server

    def start(self, timeout: float = START_SECONDS) -> str:
        """Start Xvfb and return its DISPLAY (":N") once it accepts clients; XvfbFailed if not.

        `-displayfd` has Xvfb pick a free number itself and write it once it is ready, so two
        runs at once never race for one number and nothing has to poll a socket.
        """
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as Xvfb; closed in stop()
        read_end, write_end = os.pipe()
        _PARENT[0] = os.getpid()
        command = [self.executable, "-displayfd", str(write_end), "-screen", "0", SCREEN, "-nolisten", "tcp"]
        try:
            self.process = subprocess.Popen(
                command,
                pass_fds=(write_end,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                preexec_fn=_die_with_parent if _LIBC is not None else None,
            )
        except OSError as err:
            self.stop()
            raise XvfbFailed(
                f"cannot start {self.executable}: {err.strerror}; reinstall it (`{XVFB_INSTALL}`)"
            ) from None
        finally:
            os.close(write_end)
        try:
            number = _read_display(read_end, timeout)
        finally:
            os.close(read_end)
        if number is None:
            words = self._stderr()
            self.stop()
            raise XvfbFailed(
                f"{self.executable} did not start within {timeout:g} s"
                + (f" ({words})" if words else "")
                + "; or run without it: browser.headless = true"
            )
        self.display = f":{number}"
        return self.display

    def _stderr(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read().decode("utf-8", "replace").splitlines()
        return " ".join(line.strip() for line in lines if line.strip())[-300:]

    def stop(self) -> None:
        """Stop Xvfb (SIGTERM, then SIGKILL) and reap it; nothing when it is not running."""
        process, self.process, self.display = self.process, None, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log, self._log = self._log, None
        if log is not None:
            log.close()


def _read_display(fd: int, timeout: float) -> str | None:
    """The display number Xvfb writes to `fd` once it is ready; None if it exits or hangs first."""
    deadline = time.monotonic() + timeout
    text = b""
    while b"\n" not in text:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 64)
        if not chunk:  # Xvfb exited before announcing a display
            return None
        text += chunk
    number = text.split(b"\n")[0].strip().decode("ascii", "replace")
    return number if number.isdigit() else None
