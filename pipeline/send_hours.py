"""When an account may send: `send_hours` ([qwen] for every account, [accounts.NAME] for one).

Bot checks follow the time of day (docs/qwen-site.md, "Login"), so a user may keep sends to the
hours they choose. The value is a range of the day in a named time zone:
"07:00-22:00 Europe/Berlin" (an IANA name, read with zoneinfo; "UTC" too). A range whose end
comes before its start runs over midnight ("22:00-06:00 UTC"). "" = any time. Outside the range
a new send waits (not a failure; the router is not used for it); chats already sent are looked
at whatever the hour.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, tzinfo
from functools import lru_cache
from typing import NamedTuple

from .times import clock

EXAMPLE = '"07:00-22:00 Europe/Berlin"'


@lru_cache(maxsize=1)  # compiled when a send_hours is first read: most setups have none
def _range() -> re.Pattern[str]:
    return re.compile(r"(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s+(\S+)")


class SendHours(NamedTuple):
    start: int  # minutes after midnight, in `zone`
    end: int  # the first minute no longer in the range (may be before start: over midnight)
    zone: str
    text: str  # as written

    def _minute(self, now: float) -> int:
        local = datetime.fromtimestamp(now, _zone(self.zone))
        return local.hour * 60 + local.minute

    def allows(self, now: float) -> bool:
        """Whether a send may go at `now` (epoch seconds)."""
        minute = self._minute(now)
        if self.start < self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end

    def next_start(self, now: float) -> float:
        """When the range next begins after `now` (epoch seconds)."""
        zone = _zone(self.zone)
        local = datetime.fromtimestamp(now, zone)
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        for days in range(3):
            begins = (day + timedelta(days=days)).replace(hour=self.start // 60, minute=self.start % 60)
            if begins.timestamp() > now:
                return begins.timestamp()
        return now  # not reached: a day has a start in it

    def words(self, now: float) -> str:
        return f"sends only {self.text} (send_hours): it waits until {clock(self.next_start(now))}"


def _zone(name: str) -> tzinfo:
    """The IANA time zone `name`. zoneinfo is imported here, when a range is set: its import
    reads the platform's settings (sysconfig), 2 ms of every command's start-up otherwise."""
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


@lru_cache(maxsize=64)
def parse(text: str) -> SendHours | None:
    """The range `text` names; None for "" (any time). ValueError says what is wrong."""
    if not text.strip():
        return None
    match = _range().fullmatch(text.strip())
    if not match:
        raise ValueError("is not a range of the day with a time zone")
    h1, m1, h2, m2, zone = match.groups()
    start, end = int(h1) * 60 + int(m1), int(h2) * 60 + int(m2)
    if int(h1) > 24 or int(h2) > 24 or int(m1) > 59 or int(m2) > 59 or max(start, end) > 24 * 60:
        raise ValueError("has a time that is not one of the day (00:00 to 24:00)")
    if start % (24 * 60) == end % (24 * 60):
        raise ValueError('is empty (its start is its end); "" = any time')
    from zoneinfo import ZoneInfoNotFoundError

    try:
        _zone(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"names no time zone zoneinfo knows ({zone!r}; e.g. Europe/Berlin, UTC)") from None
    return SendHours(start % (24 * 60), end % (24 * 60), zone, text.strip())


def problem(value: str) -> str | None:
    """What is wrong with a `send_hours` value, with the fix (config validation); None when fine."""
    try:
        parse(value)
    except ValueError as err:
        return f'{err}: write a range in a named time zone, such as {EXAMPLE}, or "" for any time'
    return None
