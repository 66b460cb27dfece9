"""Scheduling helpers: a crontab line and a systemd service + timer that work as written."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from ..errors import UsageProblem

DAY_MINUTES = 24 * 60
_EVERY = re.compile(r"(?:(\d+)h)?(?:(\d+)m(?:in)?)?")


def parse_every(text: str) -> int:
    """`--every`: minutes ("5", "90m") or hours ("2h", "1h30m"), as minutes. UsageProblem unless it
    is 1 minute to 24 hours and, from an hour on, divides a day, so every gap is equal. Under an
    hour any number of minutes is taken, as before; `uneven_note` says when the gaps differ."""
    text = text.strip().lower()
    match = None if text.isdigit() else _EVERY.fullmatch(text)
    if text.isdigit():
        minutes = int(text)
    elif match and any(match.groups()):
        minutes = int(match[1] or 0) * 60 + int(match[2] or 0)
    else:
        raise UsageProblem(f"--every {text!r}: give minutes (5, 90m) or hours (2h, 1h30m)")
    if not 1 <= minutes <= DAY_MINUTES:
        raise UsageProblem(f"--every {text}: choose 1 minute to 24 hours (24h)")
    if minutes < 60 and DAY_MINUTES % minutes:
        return minutes  # `*/N` as always (earlier versions printed it); `uneven_note` says the catch
    if DAY_MINUTES % minutes:
        near = [m for m in range(1, DAY_MINUTES + 1) if DAY_MINUTES % m == 0]
        lower = max(m for m in near if m < minutes)
        upper = min(m for m in near if m > minutes)
        raise UsageProblem(
            f"--every {text}: cron cannot run every {minutes} minutes evenly (a day is not a whole "
            f"number of them); choose an interval that divides 24 h, "
            f"e.g. {describe(lower)} or {describe(upper)}"
        )
    return minutes


def uneven_note(minutes: int) -> str | None:
    """What to tell a user whose interval cron cannot keep evenly (`*/7` restarts every hour)."""
    if minutes >= 60 or DAY_MINUTES % minutes == 0:
        return None
    near = [m for m in range(1, 61) if DAY_MINUTES % m == 0]
    lower, upper = max(m for m in near if m < minutes), min(m for m in near if m > minutes)
    return (
        f"note: cron starts */{minutes} again at every full hour, so one gap an hour is "
        f"{60 % minutes or minutes} minute(s); --every {lower} or {upper} keeps every gap equal"
    )


def describe(minutes: int) -> str:
    """ "5m", "90m", "2h" (the way `--every` takes it back)."""
    return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


def cron_schedules(every_minutes: int) -> list[str]:
    """The crontab time fields (`minute hour * * *`) that together fire every `every_minutes`
    from midnight: one line when the interval divides an hour or is whole hours, a few otherwise
    (90m: `0 */3 * * *` and `30 1-22/3 * * *`)."""
    if DAY_MINUTES % every_minutes:  # under an hour (parse_every refuses the rest): as cron can
        return [f"*/{every_minutes} * * * *"]
    hours_by_minute: dict[int, list[int]] = {}
    for start in range(0, DAY_MINUTES, every_minutes):
        hours_by_minute.setdefault(start % 60, []).append(start // 60)
    minutes_by_hours: dict[tuple[int, ...], list[int]] = {}
    for minute, hours in sorted(hours_by_minute.items()):
        minutes_by_hours.setdefault(tuple(hours), []).append(minute)
    return [
        f"{_field(minutes, 60)} {_field(list(hours), 24)} * * *"
        for hours, minutes in sorted(minutes_by_hours.items(), key=lambda item: item[1][0])
    ]


def _field(values: list[int], size: int) -> str:
    """A cron field for sorted `values` out of 0..size-1: *, */n, a-b/n or a list."""
    if len(values) == size:
        return "*"
    step = values[1] - values[0] if len(values) > 1 else 0
    if step and all(b - a == step for a, b in zip(values, values[1:], strict=False)):
        if values[0] == 0 and values[-1] + step >= size:
            return f"*/{step}"
        if len(values) > 2:
            return f"{values[0]}-{values[-1]}/{step}"
    return ",".join(map(str, values))


def qwenpipe_command() -> str:
    """The absolute path of this installation's `qwenpipe`, else `python -m pipeline`."""
    beside = Path(sys.executable).parent / "qwenpipe"
    if beside.exists():
        return str(beside)
    found = shutil.which("qwenpipe")
    return found or f"{sys.executable} -m pipeline"


CRON_LOG = "qwenpipe-cron.log"


def crontab_line(config: Path, *, every_minutes: int = 5) -> str:
    """The crontab entry (one line, or a few for intervals such as 90m) running `cycle
    --cron-exit`: 0 unless a person is needed, so cron reports only what needs one."""
    folder = config.parent
    log = folder / CRON_LOG
    command = f"cd {folder} && {qwenpipe_command()} --config {config} cycle --cron-exit >> {log} 2>&1"
    return "\n".join(f"{when} {command}" for when in cron_schedules(every_minutes))


def logrotate_snippet(config: Path) -> str:
    """A logrotate rule for the cron line's log (copytruncate: the line appends to it by name)."""
    return f"""{config.parent / CRON_LOG} {{
    weekly
    rotate 8
    compress
    delaycompress
    missingok
    notifempty
    copytruncate
}}
"""


def key_note(config) -> str | None:
    """What to tell a user whose router key cron will not see: the key is in this shell's
    environment (router.api_key_env) and no router.api_key_file is set; a crontab line carries
    no environment, so every fallback would fail with 401."""
    router = config.router
    if not router.enabled or router.api_key_file:
        return None
    import os

    if os.environ.get(router.api_key_env):
        lead = f"{router.api_key_env} is set in this shell, but cron runs without it"
    else:
        lead = "cron runs without your shell's environment"
    return (
        f"note: {lead}: put the router key in a file (chmod 600) and set router.api_key_file "
        "to its path, or the router fallback fails under cron (401)"
    )


def systemd_units(config: Path, *, every_minutes: int = 5) -> tuple[str, str]:
    folder = config.parent
    service = f"""[Unit]
Description=qwenpipe: one cycle over the prompts in {folder}

[Service]
Type=oneshot
WorkingDirectory={folder}
ExecStart={qwenpipe_command()} --config {config} cycle --cron-exit
# --cron-exit: 0 unless a person is needed (see `qwenpipe cycle --help`).
"""
    timer = f"""[Unit]
Description=Run qwenpipe cycle every {_spoken(every_minutes)}

[Timer]
OnBootSec=2min
OnUnitActiveSec={every_minutes}min
Persistent=true

[Install]
WantedBy=timers.target
"""
    return service, timer


def _spoken(minutes: int) -> str:
    if minutes % 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours = minutes // 60
    return f"{hours} hour{'s' if hours != 1 else ''}"
