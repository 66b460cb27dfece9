"""The tests' shared Chromium (tests/shared_browser.py) never outlives the test process that
started it, even one killed outright, which runs no teardown (a mutant's timeout, a cancelled
CI job): left behind, it would run on for hours."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

TESTS = Path(__file__).resolve().parent.parent

KILLED_WITH_ITS_BROWSER = f"""
import os, signal, sys
sys.path.insert(0, {str(TESTS)!r})
import shared_browser
shared_browser.cdp_url()
print(shared_browser._process.pid, shared_browser._folder.name, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_test_process_killed_outright_leaves_no_browser_and_no_profile():
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WITH_ITS_BROWSER], capture_output=True, text=True, timeout=90
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    group, profile = killed.stdout.split()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (gone(int(group)) and not Path(profile).exists()):
        time.sleep(0.1)
    left = gone(int(group))
    if not left:  # the guard failed: stop the browser this test started, by its group
        os.killpg(int(group), signal.SIGKILL)
    assert left, "the shared browser outlived its killed test process"
    assert not Path(profile).exists(), f"its profile stayed: {profile}"
