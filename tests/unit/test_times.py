"""pipeline/times.py: moments and durations as every message says them."""

from __future__ import annotations

from datetime import datetime

from pipeline.times import clock, describe_expiry, duration, short_duration

HOUR = 3600


def test_a_moment_is_local_time_to_the_minute():
    ts = datetime(2026, 11, 2, 14, 0, 59).timestamp()
    assert clock(ts) == "2026-11-02 14:00"


def test_durations_in_words_and_in_a_narrow_column():
    lengths = [45, 12 * 60, 5 * HOUR + 12 * 60, 28 * HOUR, 6 * 24 * HOUR + 23 * HOUR, -5]
    assert [duration(s) for s in lengths] == [
        "0 min",
        "12 min",
        "5 h 12 min",
        "1 day 4 h",
        "6 days 23 h",
        "0 min",
    ]
    assert [short_duration(s) for s in lengths] == ["45s", "12m", "5h12m", "1d04h", "6d23h", "0s"]


def test_a_logins_end_ahead_behind_or_unknown():
    now = datetime(2026, 11, 2, 14, 0).timestamp()
    assert describe_expiry(now + 5 * HOUR, now) == "expires 2026-11-02 19:00 (in 5 h 0 min)"
    assert describe_expiry(now - HOUR, now) == "expired 2026-11-02 13:00 (1 h 0 min ago)"
    assert (
        describe_expiry(now + 5 * HOUR, now, length=short_duration) == "expires 2026-11-02 19:00 (in 5h00m)"
    )
    assert describe_expiry(None, now) == "token expiry not readable"
