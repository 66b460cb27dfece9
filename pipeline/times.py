"""Times and durations as people read them: every message, table and log line that shows a
moment or a length of time says it through here, so each reads the same everywhere."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime


def clock(ts: float) -> str:
    """A moment in local time, to the minute: "2026-11-02 14:00"."""
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M")


def duration(seconds: float) -> str:
    """A person's duration: "6 days 23 h", "1 day 4 h", "5 h 12 min", "12 min"."""
    seconds = max(int(seconds), 0)
    days, hours, minutes = seconds // 86400, seconds % 86400 // 3600, seconds % 3600 // 60
    if days:
        return f"{days} day{'s' if days != 1 else ''} {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"


def short_duration(seconds: float) -> str:
    """A duration for a table's narrow column: 45s, 12m, 3h05m, 2d04h."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def describe_expiry(
    expires: float | None, now: float | None = None, *, length: Callable[[float], str] = duration
) -> str:
    """A saved login's end: "expires 2026-11-02 14:00 (in 6 days 23 h)", "expired ... (2 h 5 min
    ago)", or why it is not known; `length` says the time left (short_duration in a table)."""
    if expires is None:
        return "token expiry not readable"
    now = time.time() if now is None else now
    left = expires - now
    if left <= 0:
        return f"expired {clock(expires)} ({length(-left)} ago)"
    return f"expires {clock(expires)} (in {length(left)})"
