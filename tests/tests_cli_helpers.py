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
