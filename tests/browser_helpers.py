"""Browser set-ups the browser tests share: a BrowserSession config, and a Chromium started the
way a user starts one for `browser.cdp_url` (its own profile, a debugging port)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pipeline.config import Browser
from pipeline.engines.qwen.browser import find_executable, launch_args


def browser_config(folder: Path, **changes) -> Browser:
    """A `[browser]` section for a headless BrowserSession whose profile and state live in `folder`."""
    paths = {"profile_dir": str(folder / "profile"), "storage_state": str(folder / "state.json")}
    return Browser(**{"headless": True, **paths, **changes})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chromium_executable() -> str:
    """The Chromium qwenpipe itself would launch (skips the test when there is none)."""
    try:
        path, _ = find_executable("")
    except Exception as err:
        pytest.skip(f"no Chromium to start: {err}")
    if path is None:  # Playwright's bundled Chromium
        from pipeline.engines.qwen.browser import playwright_driver

        with playwright_driver() as p:
            path = p.chromium.executable_path
    return path


@contextmanager
def users_chromium(profile: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """(process, http://127.0.0.1:PORT) of a running Chromium with a debugging port; killed (its
    whole process group) at the end, whatever happened."""
    port = free_port()
    args = [
        chromium_executable(),
        f"--remote-debugging-port={port}",
        "--headless=new",
        "--no-sandbox",
        f"--user-data-dir={profile}",
        *launch_args(),
        "about:blank",
    ]
    proc = subprocess.Popen(
        dict.fromkeys(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/json/version", timeout=2) as answer:
                    json.loads(answer.read())
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"Chromium did not open its debugging port {port}")
                time.sleep(0.2)
        yield proc, url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


def page_tabs(endpoint: str) -> list[str]:
    """The address of each tab (page target) of the browser at DevTools `endpoint` (http://...)."""
    with urllib.request.urlopen(endpoint + "/json/list", timeout=5) as answer:
        return [target["url"] for target in json.loads(answer.read()) if target["type"] == "page"]


def wait_until(condition, seconds: float = 60.0) -> bool:
    """Whether `condition()` holds within `seconds`: what another process does (a browser or
    an Xvfb stopping, a guard at work) takes its own time, so tests wait for it, never sleep."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
