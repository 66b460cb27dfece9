"""Rotating sessions end to end (issue 36): the late-2026 site trades the session cookie for a
900 s access token at every page load and ends the old session each time
(pipeline/simulator/sessions.py). Two accounts in one Chromium, several cron cycles, the
site's clock moved past the access token's life between them: each cycle opens the accounts
from what the last one's browser held, so no account is logged out, nothing is dead-lettered,
and every article is written by its chat."""

from __future__ import annotations

import json

import pytest
from sim_project import (
    add_accounts,
    journal,
    make_project,
    prompt,
    read_article,
    senders,
    wait_stored_finished,
)
from tests_cli_helpers import qwenpipe_in_process

from pipeline.signin.saved import state_token_expiry
from pipeline.simulator import Simulator
from pipeline.simulator.api import token_payload
from pipeline.simulator.sessions import ACCESS_SECONDS
from pipeline.times import clock

pytestmark = pytest.mark.browser


@pytest.fixture
def sim():
    with Simulator(
        port=0,
        answer_seconds=0.0,
        thinking_seconds=0.0,
        url_delay=0.1,
        accounts=("a", "b"),
        rotating_sessions=True,
    ).start() as server:
        yield server


def later(sim) -> None:
    """The site's clock moves on past the access token's life (and any grace of an old session)."""
    sim.set(clock_offset=sim.store.snapshot().clock_offset + ACCESS_SECONDS + 60)


def saved_session(path) -> int:
    cookie = next(c for c in json.loads(path.read_text())["cookies"] if c["name"] == "token")
    return token_payload(cookie["value"])["sid"]


def test_two_accounts_with_rotating_sessions_stay_logged_in_over_cycles(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    config = project / "config.toml"
    config.write_text(config.read_text().replace("max_attempts = 3", "max_attempts = 2"))
    states = add_accounts(project, ["a", "b"], max_sends_per_day=1)
    for name, path in states.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sim.login_state(name)))
    texts = {f"r{i}": prompt(project, f"r{i}", f"Write article {i} about sessions.") for i in range(2)}
    sim.set(hold_answers=True)  # sent, their answers waiting in the chat
    first = qwenpipe_in_process("cycle", cwd=project)
    assert first.returncode == 42, first.stderr
    for _ in range(3):  # more cycles than qwen.max_attempts (2)
        later(sim)
        waiting = qwenpipe_in_process("cycle", cwd=project)
        assert waiting.returncode == 3, waiting.stderr
    sim.set(hold_answers=False)
    later(sim)
    done = qwenpipe_in_process("cycle", cwd=project)
    assert done.returncode == 0, done.stderr
    assert not list((project / "articles").glob("*.failed"))
    events = journal(project)
    assert not [e for e in events if e.get("code") == "logged_out"], [e for e in events if e.get("code")]
    taken = senders(sim)
    assert sorted(account for (account,) in (taken[text] for text in texts.values())) == ["a", "b"]
    for slug, text in texts.items():
        meta, _ = read_article(project / "articles" / f"{slug}.md")
        assert meta["engine"] == "qwen" and meta["account"] == taken[text][0], slug
    listed = qwenpipe_in_process("accounts", cwd=project)
    for name, path in states.items():  # each file holds the session the site knows as current
        assert saved_session(path) == sim.store.sessions.current(name), name
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        # `accounts` tells the login by that session (30 days), not the page's 900 s access token
        assert f"expires {clock(state_token_expiry(path))}" in listed.stdout, listed.stdout


def test_one_account_through_its_own_profile_saves_what_its_browser_holds_too(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False, own_browser=True)  # [browser]: one profile
    state = project / "state.json"
    state.write_text(json.dumps(sim.login_state("a")))
    text = prompt(project, "solo", "Write an article about one profile.")
    for _ in range(2):
        result = qwenpipe_in_process("cycle", cwd=project)
        assert result.returncode in (0, 42), result.stderr
        if result.returncode == 42:
            wait_stored_finished(sim, (project / "articles" / "solo.md.url").read_text())
        later(sim)
        assert saved_session(state) == sim.store.sessions.current("a")  # the file is the browser's login
    assert read_article(project / "articles" / "solo.md")[0]["engine"] == "qwen"
    assert senders(sim) == {text: ["a"]}
