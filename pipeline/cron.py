"""Scheduling helpers: a crontab line and a systemd service + timer that work as written."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def qwenpipe_command() -> str:
    """The absolute path of this installation's `qwenpipe`, else `python -m pipeline`."""
    beside = Path(sys.executable).parent / "qwenpipe"
    if beside.exists():
        return str(beside)
    found = shutil.which("qwenpipe")
    return found or f"{sys.executable} -m pipeline"


def crontab_line(config: Path, *, every_minutes: int = 5) -> str:
    folder = config.parent
    log = folder / "qwenpipe-cron.log"
    return (
        f"*/{every_minutes} * * * * cd {folder} && {qwenpipe_command()} --config {config} cycle >> {log} 2>&1"
    )


def systemd_units(config: Path, *, every_minutes: int = 5) -> tuple[str, str]:
    folder = config.parent
    service = f"""[Unit]
Description=qwenpipe: one cycle over the prompts in {folder}

[Service]
Type=oneshot
WorkingDirectory={folder}
ExecStart={qwenpipe_command()} --config {config} cycle
# 42 (sent) and 3 (still working) are normal outcomes of a cycle, not failures.
SuccessExitStatus=3 42
"""
    timer = f"""[Unit]
Description=Run qwenpipe cycle every {every_minutes} minutes

[Timer]
OnBootSec=2min
OnUnitActiveSec={every_minutes}min
Persistent=true

[Install]
WantedBy=timers.target
"""
    return service, timer
