"""`send_hours` (pipeline/send_hours.py): new sends only in a range of the day in a named time
zone; outside it they wait (not a failure, no router). The step's clock is the test's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from accounts_project import accounts_project
from project_files import add_prompt, write_config

from pipeline.batch.status import collect
from pipeline.config import ConfigError, load
from pipeline.contract.step import Status, generate
from pipeline.send_hours import parse


def utc(hour: int, minute: int = 0, day: int = 4) -> float:
    return datetime(2026, 12, day, hour, minute, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        ("07:00-22:00 UTC", [utc(7), utc(21, 59)], [utc(6, 59), utc(22), utc(3)]),
        ("07:00-22:00 Europe/Berlin", [utc(6), utc(20, 59)], [utc(5, 59), utc(21)]),  # UTC+1 in December
        ("22:00-06:00 UTC", [utc(22), utc(23, 59), utc(0), utc(5, 59)], [utc(6), utc(12), utc(21, 59)]),
        ("07:00-24:00 UTC", [utc(7), utc(23, 59)], [utc(0), utc(6, 59)]),
        (" 9:30 - 10:00  America/New_York ", [utc(14, 30)], [utc(14, 29), utc(15)]),
    ],
)
def test_a_range_allows_its_own_minutes_only(text, inside, outside):
    hours = parse(text)
    assert [hours.allows(t) for t in inside] == [True] * len(inside)
    assert [hours.allows(t) for t in outside] == [False] * len(outside)


def test_the_range_next_begins_in_its_own_zone():
    assert parse("07:00-22:00 UTC").next_start(utc(3)) == utc(7)
    assert parse("07:00-22:00 UTC").next_start(utc(23)) == utc(7, day=5)
    assert parse("07:00-22:00 Europe/Berlin").next_start(utc(3)) == utc(6)
    assert parse("") is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("7-22", "not a range of the day with a time zone"),
        ("07:00-22:00", "not a range of the day with a time zone"),  # no zone
        ("07:00-22:00 Mars/Olympus", "names no time zone"),
        ("07:00-25:00 UTC", "not one of the day"),
        ("07:61-08:00 UTC", "not one of the day"),
        ("07:00-07:00 UTC", "is empty"),
    ],
)
@pytest.mark.parametrize("place", ["qwen", "accounts.a"])
def test_a_bad_value_is_refused_at_load_naming_it_and_the_fix(project, value, says, place):
    write_config(project, f'[{place}]\nsend_hours = "{value}"\n')
    with pytest.raises(ConfigError) as caught:
        load(project / "config.toml")
    message = str(caught.value)
    assert f"{place}.send_hours" in message and value in message and says in message
    assert '"07:00-22:00 Europe/Berlin"' in message and "\n" not in message.strip()


def test_outside_its_hours_a_new_send_waits_without_the_router_and_goes_when_they_begin(project):
    ws, chats, router, engines = accounts_project(
        project, '[qwen]\npoll_interval = 0\nsend_hours = "07:00-22:00 UTC"\n[article]\nmin_words = 0\n'
    )
    add_prompt(project, "tea")
    night = generate(ws, "tea", engines(), clock=lambda: utc(3))
    assert night.status is Status.WORKING and night.reason == "account"
    assert "send_hours" in night.message and "07:00-22:00 UTC" in night.message
    assert chats["default"].sends == 0 and not router.history
    said = collect(ws, utc(3))  # status says why
    assert said.totals["quota"] == 1
    assert any("sends only 07:00-22:00 UTC (send_hours)" in w for w in said.warnings), said.warnings
    assert not [w for w in collect(ws, utc(12)).warnings if "send_hours" in w]
    assert generate(ws, "tea", engines(), clock=lambda: utc(7)).status is Status.QUEUED


def test_an_accounts_own_hours_send_the_prompt_to_an_account_in_its_hours(project):
    ws, chats, router, engines = accounts_project(
        project,
        "[qwen]\npoll_interval = 0\n[article]\nmin_words = 0\n"
        '[accounts.a]\nsend_hours = "22:00-06:00 UTC"\n[accounts.b]\n',
    )
    add_prompt(project, "tea")
    assert generate(ws, "tea", engines(), clock=lambda: utc(12)).account == "b"
    add_prompt(project, "milk", "Write about milk.")
    assert generate(ws, "milk", engines(), clock=lambda: utc(23)).account == "a"  # a first in config order
