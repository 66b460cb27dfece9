"""Crash recovery and honest send counts end to end: `qwenpipe` processes, real Chromium, the simulator.

The simulator's ledger is the truth about sends: every prompt that reached it is there.
"""

from __future__ import annotations

import json

import pytest
from sim_project import journal, make_project, prompt
from tests_cli_helpers import qwenpipe, qwenpipe_in_process

pytestmark = pytest.mark.browser


# Answers complete once sent (these tests are about sends and recovery, not an answer's growth).
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.2}  # conftest.py `sim`


def status_json(project) -> dict:
    result = qwenpipe_in_process("status", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def ledger_of(sim, text: str) -> list[dict]:
    return [entry for entry in sim.ledger() if entry["prompt"] == text]


# -- 6: a send that never reached the site is not a send ------------------------------------------


def test_logged_out_attempts_send_nothing_count_nothing_and_leave_no_marker(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False, extra="max_sends_per_day = 1")
    text = prompt(project, "tea", "Write about tea while logged out.")
    sim.set(scenario="logged_out")
    for _ in range(4):  # more than max_attempts = 3: a logged-out account is not the article's failure
        result = qwenpipe_in_process("generate", "tea", cwd=project)
        assert result.returncode == 1, result.stderr
        assert "login" in result.stderr and "Traceback" not in result.stderr
        assert not (project / "articles" / "tea.md.sending").exists(), "a marker for a send never made"
    assert ledger_of(sim, text) == []
    assert status_json(project)["sends"]["today"] == 0
    assert not (project / "articles" / "tea.md.failed").exists()  # never dead-lettered for it
    row = status_json(project)["articles"][0]
    assert row["state"] == "pending" and row["hard_failures"] == 0, row
    assert "recovering" not in [e["event"] for e in journal(project)]

    sim.set(scenario="ok")  # logged in again: today's one send is still there to spend
    sent = qwenpipe_in_process("generate", "tea", cwd=project)
    assert sent.returncode == 42, sent.stderr
    assert "looking for its chat" not in sent.stderr
    assert len(ledger_of(sim, text)) == 1
    assert status_json(project)["sends"]["today"] == 1


# -- 5: recovery adopts only this article's chat --------------------------------------------------

CRASH_BEFORE_SEND = {"QWENPIPE_CRASH_AT": "before_send"}


def test_two_prompts_with_the_same_text_and_a_crash_before_the_second_send_never_share_a_chat(sim, tmp_path):
    project = make_project(tmp_path, sim)
    text = prompt(project, "tea", "Write about tea from a template.")
    prompt(project, "tea-again", text)
    assert qwenpipe_in_process("generate", "tea", cwd=project).returncode == 42
    crashed = qwenpipe("generate", "tea-again", cwd=project, env=CRASH_BEFORE_SEND)
    assert crashed.returncode == -9, crashed.stderr
    assert (project / "articles" / "tea-again.md.sending").exists()

    rerun = qwenpipe_in_process("generate", "tea-again", cwd=project)
    assert rerun.returncode == 3, rerun.stderr  # in doubt: counted, not sent again at once
    assert not (project / "articles" / "tea-again.md.url").exists(), "two articles share one chat"
    assert "is tea's" in rerun.stderr and "is in doubt" in rerun.stderr
    assert len([e for e in sim.sends() if e["prompt"] == text]) == 1
    doubt = [e for e in journal(project) if e["event"] == "recovery_in_doubt"]
    assert [e["slug"] for e in doubt] == ["tea-again"] and "tea" in doubt[0]["reason"]


def test_a_second_workspace_on_the_same_account_never_adopts_the_firsts_chat(sim, tmp_path):
    text = "Write about tea in two workspaces."
    one = make_project(tmp_path / "one", sim)
    prompt(one, "tea", text)
    sim.set(clock_offset=-120.0)  # the first workspace's chat was made two minutes ago
    assert qwenpipe_in_process("generate", "tea", cwd=one).returncode == 42
    sim.set(clock_offset=0.0)

    two = make_project(tmp_path / "two", sim)
    prompt(two, "tea", text)
    crashed = qwenpipe("generate", "tea", cwd=two, env=CRASH_BEFORE_SEND)
    assert crashed.returncode == -9, crashed.stderr
    rerun = qwenpipe_in_process("generate", "tea", cwd=two)
    assert rerun.returncode == 3, rerun.stderr  # in doubt: counted, not sent again at once
    assert "before this send" in rerun.stderr, rerun.stderr
    assert not (two / "articles" / "tea.md.url").exists(), "adopted the first workspace's chat"
    assert len([e for e in sim.sends() if e["prompt"] == text]) == 1


def test_a_crash_after_the_send_still_finds_its_own_chat_and_sends_nothing(sim, tmp_path):
    project = make_project(tmp_path, sim)
    text = prompt(project, "tea", "Write about tea, interrupted after the click.")
    crashed = qwenpipe("generate", "tea", cwd=project, env={"QWENPIPE_CRASH_AT": "after_send"})
    assert crashed.returncode == -9, crashed.stderr
    rerun = qwenpipe_in_process("generate", "tea", cwd=project)
    assert rerun.returncode in (0, 3), rerun.stderr
    assert "found the chat the interrupted send made" in rerun.stderr
    assert len([e for e in sim.sends() if e["prompt"] == text]) == 1


# -- 7: clock jumps ------------------------------------------------------------------------------


def test_times_a_clock_jump_left_days_ahead_are_re_planned_by_generate_and_cycle(sim, tmp_path):
    import time

    project = make_project(tmp_path, sim)
    config = project / "config.toml"
    config.write_text(config.read_text().replace("poll_interval = 0", "poll_interval = 60"))
    prompt(project, "tea", "Write about tea across clock jumps.")
    prompt(project, "coffee", "Write about coffee across clock jumps.")
    assert qwenpipe_in_process("cycle", cwd=project).returncode == 42
    from dataclasses import replace

    from pipeline.wiring import open_sqlite

    def shift(slug, **fields):
        with open_sqlite(project / "articles" / ".qwenpipe") as store, store.transaction() as tx:
            tx.put_article(replace(tx.article(slug), **fields))

    def record(slug):
        with open_sqlite(project / "articles" / ".qwenpipe") as store:
            return store.article(slug)

    # As if the last look and the last error happened with the clock two days ahead.
    ahead = time.time() + 2 * 86400
    shift("tea", last_poll=ahead)
    shift("coffee", next_try=ahead, attempts=1, last_error="the chat page timed out")
    looked = qwenpipe_in_process("generate", "tea", cwd=project)
    assert looked.returncode == 3, looked.stderr
    waits = [int(word) for word in looked.stderr.split("next look in ")[1].split()[:1]]
    assert waits and waits[0] <= 60, looked.stderr
    cycled = qwenpipe_in_process("cycle", cwd=project)
    assert cycled.returncode == 3, cycled.stderr
    for slug in ("tea", "coffee"):
        state = record(slug)
        assert state.last_poll <= time.time() and state.next_try <= time.time() + 60, (slug, state)
