"""What a test process starts outside itself (the shared Chromium, a throwaway PostgreSQL) must
end with it, even when it is killed outright: a SIGKILL (a mutant's timeout in bench/mutants.py, a
cancelled CI job) runs no teardown, and the browser or the server would run on for hours.

`Guard(...)` starts a small process in its own session (a kill of the test process's group does
not reach it) that blocks on a pipe whose write end only the test process holds. When the test
process is gone, however it went, the pipe closes and the guard stops what it was given: a
process group by the id the test process started it with (SIGKILL until none is left), a command
(`pg_ctl stop`), then folders to remove. The normal teardown calls `cancel()` first, so a guard
never acts on an id that the stopped group has left free for someone else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

GUARD = """
import json, os, shutil, signal, subprocess, sys, time
sys.stdin.buffer.read()
plan = json.loads(sys.argv[1])
if plan["group"]:
    for _ in range(200):
        try:
            os.killpg(plan["group"], signal.SIGKILL)
        except ProcessLookupError:
            break
        time.sleep(0.05)
if plan["command"]:
    try:
        subprocess.run(plan["command"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        pass
for path in plan["remove"]:
    shutil.rmtree(path, ignore_errors=True)
"""


def group_gone(group: int) -> bool:
    """Whether no process of the process group `group` is left."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


class Guard:
    def __init__(self, *, group: int = 0, command: list[str] | None = None, remove: Sequence[Path] = ()):
        plan = {"group": group, "command": command or [], "remove": [str(p) for p in remove]}
        read_end, self._pipe = os.pipe()  # not inherited by anything else this process starts
        try:
            self._process: subprocess.Popen | None = subprocess.Popen(
                [sys.executable, "-c", GUARD, json.dumps(plan)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            os.close(read_end)

    def cancel(self) -> None:
        """The test process stops it itself: the guard goes, having done nothing."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None
            os.close(self._pipe)
