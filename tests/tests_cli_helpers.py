"""Run the real `qwenpipe` command in a subprocess, as cron and users do."""

from __future__ import annotations

import os
import subprocess
import sys


def qwenpipe(*args, cwd, env=None, timeout=120):
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def qwenpipe_at_once(*args, cwd, count: int, timeout=120) -> list[tuple[int, str]]:
    """`count` processes of `qwenpipe ARGS` started one after the other without waiting, as
    overlapping cron runs are: (exit code, stderr) of each, in the order they were started."""
    env = {**os.environ, "NO_COLOR": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pipeline", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    return [(p.wait(timeout=timeout), p.stderr.read()) for p in procs]
