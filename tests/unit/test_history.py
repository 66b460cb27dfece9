"""`status --history` (issue 38, item 7): the last 14 local days of the journal as a chart a person
reads without colour, and as JSON with the same numbers."""

from __future__ import annotations

import json
import time

from accounts_project import accounts_project
from project_files import add_prompt
from tests_cli_helpers import qwenpipe_in_process

from pipeline.batch.history import DAYS, collect_history
from pipeline.config import load
from pipeline.contract.quota import day_start, next_local_midnight
from pipeline.store.protocol import Event, Intent
from pipeline.wiring import workspace as open_workspace


def now_clear_of_midnight(margin: float = 60.0) -> float:
    """The real clock, read where the command line's will fall on the same local day: a test that
    starts within `margin` seconds of midnight waits for the new day first (the CI that found this
    ran across midnight with the time read when the module was collected)."""
    now = time.time()
    tomorrow = next_local_midnight(now)
    if tomorrow - now < margin:
        time.sleep(max(0.0, tomorrow - now) + 1)
        now = time.time()
    return now


def past(ws, ts: float, slug: str, event: str, **fields) -> None:
    """A journal step written at `ts` (the store keeps what the event says)."""
    with ws.store.transaction() as tx:
        tx.append(Event(slug, event, ts, account=fields.pop("account", ""), fields=fields))


def sent(ws, ts: float, slug: str, account: str) -> None:
    with ws.store.transaction() as tx:
        tx.record_intent(slug, Intent(1, ts, "0" * 64, account=account))
        tx.append(Event(slug, "sending", ts, account=account, fields={"engine": "qwen"}))


def history_project(project, now: float):
    tables = "[accounts.main]\nmax_sends_per_day = 4\n[accounts.spare]\n"
    ws, _chats, _router, _engines = accounts_project(project, "[article]\nmin_words = 0\n" + tables)
    add_prompt(project, "tea")
    today, yesterday, long_ago = day_start(now, 0) + 60, day_start(now, 1) + 60, day_start(now, DAYS) + 60
    sent(ws, today, "tea", "main")
    sent(ws, today + 1, "milk", "main")
    sent(ws, today + 2, "oolong", "spare")
    sent(ws, yesterday, "sencha", "main")
    sent(ws, long_ago, "ancient", "main")  # before the fortnight: not shown
    past(ws, today + 10, "tea", "done", engine="qwen", account="main")
    past(ws, today + 11, "milk", "done", engine="router")
    past(ws, yesterday + 10, "sencha", "done", engine="qwen", account="main")
    past(ws, yesterday + 20, "matcha", "dead_letter", error="x")
    past(ws, long_ago + 10, "ancient", "done", engine="qwen")
    return ws


def test_the_fortnight_counts_each_day_by_engine_account_and_dead_letter(project):
    now = now_clear_of_midnight()
    ws = history_project(project, now)
    found = collect_history(ws, now).to_json()
    days = found["days"]
    assert len(days) == DAYS and days[-1]["day"] < "9999" and days[0]["day"] < days[-1]["day"]
    assert days[-1]["done"] == {"chat": 1, "router": 1} and days[-1]["dead_letters"] == 0
    assert days[-1]["sends"] == {"main": 2, "spare": 1}
    assert days[-2]["done"] == {"chat": 1, "router": 0} and days[-2]["sends"] == {"main": 1}
    assert days[-2]["dead_letters"] == 1
    assert sum(d["done"]["chat"] + d["done"]["router"] for d in days) == 3  # the one before: left out
    assert found["accounts"] == [{"name": "main", "limit": 4}, {"name": "spare", "limit": None}]


def test_the_chart_reads_without_colour_and_json_gives_the_same_numbers(project):
    history_project(project, now_clear_of_midnight())
    shown = qwenpipe_in_process("status", "--history", cwd=project, env={"NO_COLOR": "1"})
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "\x1b[" not in text and "SENDS main (of 4)" in text and "SENDS spare" in text
    lines = text.splitlines()
    assert sum(1 for line in lines if line[:3] in ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")) == DAYS
    last = lines[-1]
    assert "#" in last and "=" in last and " 1+1" in last and " 2/4" in last and " 1" in last
    as_json = qwenpipe_in_process("status", "--history", "--json", cwd=project)
    assert (
        json.loads(as_json.stdout) == collect_history(open_workspace(load(project / "config.toml"))).to_json()
    )


def test_history_with_a_pattern_or_watch_is_exit_2_saying_why(project):
    history_project(project, time.time())
    for extra in (["tea"], ["--watch"], ["--state", "done"]):
        result = qwenpipe_in_process("status", "--history", *extra, cwd=project)
        assert result.returncode == 2 and "--history is the whole batch's fortnight" in result.stderr
