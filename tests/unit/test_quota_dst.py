"""The day the send counts and quota blocks end on is local midnight, with midnight's own UTC
offset: on the days the clocks change it is not the offset of the moment asked about (issue 29)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pytest

from pipeline.contract.quota import local_day_start, next_local_midnight


@pytest.fixture
def berlin():
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    yield
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("now", "day_start", "next_midnight"),
    [
        # 29 March 2026: 02:00 CET becomes 03:00 CEST. Noon is +02:00, that midnight was +01:00.
        ("2026-03-29T10:00:00", "2026-03-28T23:00:00", "2026-03-29T22:00:00"),
        # The day before: noon is +01:00, the next midnight (the change day's) is +01:00 too.
        ("2026-03-28T11:00:00", "2026-03-27T23:00:00", "2026-03-28T23:00:00"),
        # 25 October 2026: 03:00 CEST becomes 02:00 CET. Noon is +01:00, that midnight was +02:00.
        ("2026-10-25T11:00:00", "2026-10-24T22:00:00", "2026-10-25T23:00:00"),
        # The day before: noon is +02:00, the next midnight is still +02:00.
        ("2026-10-24T10:00:00", "2026-10-23T22:00:00", "2026-10-24T22:00:00"),
        # An ordinary winter day.
        ("2026-12-03T11:00:00", "2026-12-02T23:00:00", "2026-12-03T23:00:00"),
    ],
)
def test_the_local_day_begins_and_ends_at_midnight_on_the_days_the_clocks_change(
    berlin, now, day_start, next_midnight
):
    assert local_day_start(utc(now)) == utc(day_start)
    assert next_local_midnight(utc(now)) == utc(next_midnight)
