"""What a test process starts outside itself, the shared Chromium (tests/shared_browser.py) and
a throwaway PostgreSQL (tests/pg_server.py), never outlives it, even when it is killed outright
and runs no teardown (a mutant's timeout, a cancelled CI job): left behind, either would run on
for hours (tests/orphan_guard.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import wait_until
from orphan_guard import group_gone

TESTS = Path(__file__).resolve().parent.parent

KILLED_WITH_ITS_BROWSER = f"""
import os, signal, sys
sys.path.insert(0, {str(TESTS)!r})
import shared_browser
shared_browser.cdp_url()
print(shared_browser._process.pid, shared_browser._folder.name, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_holding(script: str) -> list[str]:
    """Run `script`, which starts something, prints what identifies it and SIGKILLs itself."""
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    return killed.stdout.split()


@pytest.mark.browser
def test_a_test_process_killed_outright_leaves_no_browser_and_no_profile():
    group, profile = killed_holding(KILLED_WITH_ITS_BROWSER)
    wait_until(lambda: group_gone(int(group)) and not Path(profile).exists(), 30)
    left = group_gone(int(group))
    if not left:  # the guard failed: stop the browser this test started, by its group
        os.killpg(int(group), signal.SIGKILL)
    assert left, "the shared browser outlived its killed test process"
    assert not Path(profile).exists(), f"its profile stayed: {profile}"


KILLED_WITH_ITS_SERVER = f"""
import os, signal, sys
sys.path.insert(0, {str(TESTS)!r})
from pg_server import PostgresServer
server = PostgresServer().start()
print(server.port, server.folder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_test_process_killed_outright_leaves_no_postgresql_and_no_folder():
    port, folder = killed_holding(KILLED_WITH_ITS_SERVER)
    wait_until(lambda: not accepts(int(port)) and not Path(folder).exists(), 60)
    left = accepts(int(port))
    if left:  # the guard failed: stop the server this test started, by its data folder's pid
        from pg_server import PostgresServer

        PostgresServer(Path(folder), int(port)).close()
    assert not left, "the PostgreSQL server outlived its killed test process"
    assert not Path(folder).exists(), f"its folder stayed: {folder}"
