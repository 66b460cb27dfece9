"""Holds (issue 26, items 3 and 5): a bot check stops the account, not just the article; an
empty answer is the account's limit, not the prompt's fault. Real processes and real Chromium
against the simulator with accounts a and b (its slider and empty answers per account)."""

from __future__ import annotations

import json
import os
import re
import stat
import time

import pytest
from sim_project import (
    add_accounts,
    journal,
    make_project,
    prompt,
    read_article,
    sign_in_as,
    wait_stored_finished,
)
from tests_cli_helpers import qwenpipe_in_process

from pipeline.accounts import account_named
from pipeline.config import load
from pipeline.contract.quota import next_local_midnight
from pipeline.setup.login import end_bot_check, run_login
from pipeline.simulator import Simulator
from pipeline.wiring import workspace as open_workspace

pytestmark = pytest.mark.browser

# "bot check since T on account a: ... (or it is tried again at T2)", both times as status prints them
BOT_CHECK_LINE = re.compile(
    r"bot check since (\d{4}-\d\d-\d\d \d\d:\d\d) on account a: run `qwenpipe login --account a` "
    r"on a desktop to solve it \(or it is tried again at (\d{4}-\d\d-\d\d \d\d:\d\d)\)"
)


@pytest.fixture(scope="module")
def sim():
    with Simulator(
        port=0, answer_seconds=0.0, thinking_seconds=0.0, url_delay=0.1, accounts=("a", "b")
    ).start() as server:
        yield server


@pytest.fixture
def fresh(sim):
    sim.set(clear_accounts=True, slider_accounts=[], empty_accounts=[], empty_answers=False)
    yield sim, len(sim.ledger())
    sim.set(slider_accounts=[], empty_accounts=[], empty_answers=False)


def signed_in_project(sim, tmp_path):
    project = make_project(tmp_path, sim)
    states = add_accounts(project, ["a", "b"])
    for name, state in states.items():
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps(sim.login_state(name)))
    return project


def entries(sim, start: int, account: str) -> list[dict]:
    return [e for e in sim.ledger()[start:] if e["account"] == account]


def accounts_of(project) -> dict[str, dict]:
    """`qwenpipe accounts --json`, by account name."""
    listed = json.loads(qwenpipe_in_process("accounts", "--json", cwd=project).stdout)["accounts"]
    return {account["name"]: account for account in listed}


def takers(sim, start: int, text: str) -> list[tuple[str, bool]]:
    """(account, accepted) of each time the prompt `text` reached the site since entry `start`."""
    return [(e["account"], e["accepted"]) for e in sim.ledger()[start:] if e["prompt"] == text]


def words(text: str) -> str:
    return " ".join(text.split())


def test_a_slider_holds_the_account_and_only_a_login_or_its_pause_ends_it(fresh, tmp_path):
    sim, start = fresh
    project = signed_in_project(sim, tmp_path)
    sim.set(slider_accounts=["a"])
    text = prompt(project, "first", "Write about sliders.")

    before = time.time()
    result = qwenpipe_in_process("generate", "first", "--account", "a", cwd=project)
    assert result.returncode == 0, result.stderr
    meta, _ = read_article(project / "articles" / "first.md")
    assert meta["engine"] == "router"  # the router wrote it
    refused = entries(sim, start, "a")
    assert [(e["prompt"], e["accepted"], e["scenario"]) for e in refused] == [(text, False, "slider")]
    assert not (project / "articles" / "first.md.sending").exists()
    assert "bot check" in words(result.stderr) and "qwenpipe login --account a" in words(result.stderr)

    accounts = accounts_of(project)
    assert accounts["a"]["sends_today"] == 0  # a refused send is no send
    hold = accounts["a"]["hold"]
    assert hold["kind"] == "bot check"
    pause = load(project / "config.toml").qwen.bot_check_pause_first * 3600  # the first hold: short
    until = time.mktime(time.strptime(hold["until"][:19], "%Y-%m-%dT%H:%M:%S"))
    assert before + pause - 60 <= until <= time.time() + pause + 60

    shot = project / "articles" / ".qwenpipe" / "bot-check-a.png"
    assert shot.read_bytes().startswith(b"\x89PNG") and stat.S_IMODE(os.stat(shot).st_mode) == 0o600
    events = [e for e in journal(project) if e["event"] == "hold"]
    assert events and events[-1]["code"] == "bot_check" and events[-1]["account"] == "a"

    # The next cycle sends nothing to a; b goes on.
    second = prompt(project, "second", "Write about the account that goes on.")
    mark = len(sim.ledger())
    cycle = qwenpipe_in_process("cycle", cwd=project)
    assert cycle.returncode in (0, 3, 42), cycle.stderr
    assert entries(sim, mark, "a") == []
    assert [e["prompt"] for e in entries(sim, mark, "b") if e["accepted"]] == [second]

    for command in (["status"], ["accounts"], ["doctor"]):
        ran = qwenpipe_in_process(*command, cwd=project)
        shown = words(ran.stdout + ran.stderr)  # status: its warnings go to stderr
        found = BOT_CHECK_LINE.search(shown)
        assert found, (command, shown)
        assert found.group(1) <= found.group(2)

    # A login brought from a desktop ends the hold: a's sends start again.
    source = tmp_path / "a.json"
    source.write_text(json.dumps(sim.login_state("a")))
    login = qwenpipe_in_process("login", "--account", "a", "--import", str(source), cwd=project)
    assert login.returncode == 0, login.stderr
    assert "the bot check hold on account a is over" in words(login.stderr)
    accounts = accounts_of(project)
    assert accounts["a"]["hold"] is None
    status = qwenpipe_in_process("status", cwd=project)
    assert not BOT_CHECK_LINE.search(words(status.stdout + status.stderr))


def test_several_accounts_a_slider_passes_the_prompt_to_the_next_account_unsent(fresh, tmp_path):
    sim, start = fresh
    project = signed_in_project(sim, tmp_path)
    sim.set(slider_accounts=["a"])
    text = prompt(project, "rotated", "Write about being passed along.")
    result = qwenpipe_in_process("generate", "rotated", cwd=project)  # rotation: a first (config order)
    assert result.returncode == 42, result.stderr
    assert takers(sim, start, text) == [
        ("a", False),
        ("b", True),
    ]
    accounts = accounts_of(project)
    assert accounts["a"]["sends_today"] == 0 and accounts["b"]["sends_today"] == 1
    assert accounts["a"]["hold"]["kind"] == "bot check"


def test_the_login_window_shows_the_slider_and_sliding_it_ends_the_hold(fresh, tmp_path, monkeypatch):
    sim, _ = fresh
    project = signed_in_project(sim, tmp_path)
    sim.set(slider_accounts=["a"])
    prompt(project, "held", "Write about the slider page.")
    assert qwenpipe_in_process("generate", "held", "--account", "a", cwd=project).returncode == 0
    workspace = open_workspace(load(project / "config.toml"))
    hold = workspace.chat_quota.held(time.time(), "a")
    assert hold is not None and "_____tmd_____/punish" in hold.reason

    monkeypatch.setenv("QWENPIPE_LOGIN_HEADLESS", "1")
    said = []

    def slide(page) -> None:
        page.click("#nc_1_n1z")  # what a person drags on the slider page

    account = account_named(workspace.config, "a")
    run_login(
        workspace.config,
        account,
        timeout=30,
        on_page=sign_in_as("a@example.com"),
        say=said.append,
        bot_check=hold.reason,
        on_slider=slide,
    )
    assert any("slide the slider in the window" in line for line in said)
    assert not sim.store.slider_up("a")  # the site took the slide
    assert end_bot_check(workspace, "a")
    assert workspace.chat_quota.held(time.time(), "a") is None

    mark = len(sim.ledger())
    again = prompt(project, "after", "Write about a solved slider.")
    result = qwenpipe_in_process("generate", "after", "--account", "a", cwd=project)
    assert result.returncode == 42, result.stderr
    assert [(e["prompt"], e["accepted"]) for e in entries(sim, mark, "a")] == [(again, True)]


def test_an_empty_answer_holds_the_account_until_midnight_and_the_router_writes_it(fresh, tmp_path):
    sim, start = fresh
    project = signed_in_project(sim, tmp_path)
    sim.set(empty_accounts=["a"])
    text = prompt(project, "empty", "Write about nothing at all.")
    sent = qwenpipe_in_process("generate", "empty", "--account", "a", cwd=project)
    assert sent.returncode == 42, sent.stderr
    wait_stored_finished(sim, (project / "articles" / "empty.md.url").read_text())

    polled = qwenpipe_in_process("generate", "empty", cwd=project)
    assert polled.returncode == 0, polled.stderr
    meta, body = read_article(project / "articles" / "empty.md")
    assert meta["engine"] == "router" and body.strip()
    assert "answers came back empty" in words(polled.stderr)
    # Sent once, to a: never again to another account.
    assert takers(sim, start, text) == [("a", True)]

    accounts = accounts_of(project)
    hold = accounts["a"]["hold"]
    assert hold["kind"] == "answers came back empty"
    until = time.mktime(time.strptime(hold["until"][:19], "%Y-%m-%dT%H:%M:%S"))
    assert abs(until - next_local_midnight(time.time())) < 2
    status = qwenpipe_in_process("status", cwd=project)
    assert "answers came back empty on account a" in words(status.stdout + status.stderr)
    events = [e for e in journal(project) if e["event"] == "hold"]
    assert events and events[-1]["code"] == "empty_answer" and events[-1]["slug"] == "empty"

    mark = len(sim.ledger())
    later = prompt(project, "later", "Write about the other account.")
    assert qwenpipe_in_process("generate", "later", cwd=project).returncode == 42
    assert [(e["account"], e["prompt"]) for e in sim.ledger()[mark:]] == [("b", later)]


def test_generate_wait_on_an_empty_answer_ends_through_the_router_not_at_its_timeout(fresh, tmp_path):
    sim, start = fresh
    project = signed_in_project(sim, tmp_path)
    sim.set(empty_accounts=["b"])
    text = prompt(project, "waited", "Write about waiting for nothing.")
    started = time.monotonic()
    result = qwenpipe_in_process("generate", "waited", "--account", "b", "--wait", cwd=project)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60  # not qwen.answer_timeout (1800 s)
    meta, _ = read_article(project / "articles" / "waited.md")
    assert meta["engine"] == "router"
    assert takers(sim, start, text) == [("b", True)]


def test_a_slider_with_the_router_failing_too_leaves_no_marker_and_no_stale_sending(fresh, tmp_path):
    # Issue 27, item 9: a hard failure before the site took the prompt, and no router to fall
    # back on: the article fails (exit 1), and nothing says a send is under way.
    sim, start = fresh
    project = signed_in_project(sim, tmp_path)
    sim.set(slider_accounts=["a"], router_scenario="auth", router_fail_times=100)
    prompt(project, "stuck", "Write about sliders and routers.")

    result = qwenpipe_in_process("generate", "stuck", "--account", "a", cwd=project)

    sim.router.reset()
    assert result.returncode == 1, result.stderr
    assert not (project / "articles" / "stuck.md.sending").exists()
    assert [e["accepted"] for e in entries(sim, start, "a")] == [False]
    rows = json.loads(qwenpipe_in_process("status", "--json", cwd=project).stdout)["articles"]
    (row,) = [r for r in rows if r["slug"] == "stuck"]
    assert row["state"] != "sending"
    again = qwenpipe_in_process("generate", "stuck", "--account", "a", cwd=project)
    assert "interrupted" not in again.stderr.lower()  # no interrupted send to look for
