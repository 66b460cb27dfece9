"""Crash recovery and honest send counts end to end: `qwenpipe` processes, real Chromium, the simulator.

The simulator's ledger is the truth about sends: every prompt that reached it is there.
"""

from __future__ import annotations

import json

import pytest
from sim_project import journal, make_project, prompt
from tests_cli_helpers import qwenpipe

from pipeline.simulator import Simulator

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def sim():
    with Simulator(port=0, answer_seconds=1.0, thinking_seconds=0.2, url_delay=0.2).start() as server:
        yield server


@pytest.fixture
def fresh(sim):
    sim.set(scenario="ok", api_shape="2026-08", answer_seconds=1.0, url_delay=0.2, ui="current")
    yield sim


def status_json(project) -> dict:
    result = qwenpipe("status", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def ledger_of(sim, text: str) -> list[dict]:
    return [entry for entry in sim.ledger() if entry["prompt"] == text]


# -- 6: a send that never reached the site is not a send ------------------------------------------


def test_logged_out_attempts_send_nothing_count_nothing_and_leave_no_marker(fresh, tmp_path):
    project = make_project(tmp_path, fresh, router=False, extra="max_sends_per_day = 1")
    text = prompt(project, "tea", "Write about tea while logged out.")
    fresh.set(scenario="logged_out")
    for _ in range(3):  # max_attempts = 3: the third hard failure dead-letters it
        result = qwenpipe("generate", "tea", cwd=project)
        assert result.returncode == 1, result.stderr
        assert "login" in result.stderr and "Traceback" not in result.stderr
        assert not (project / "articles" / "tea.md.sending").exists(), "a marker for a send never made"
    assert ledger_of(fresh, text) == []
    assert status_json(project)["sends"]["today"] == 0
    assert qwenpipe("replay", "tea", cwd=project).returncode == 0
    row = status_json(project)["articles"][0]
    assert row["state"] == "pending", row
    assert "recovering" not in [e["event"] for e in journal(project)]

    fresh.set(scenario="ok")  # logged in again: today's one send is still there to spend
    sent = qwenpipe("generate", "tea", cwd=project)
    assert sent.returncode == 42, sent.stderr
    assert "looking for its chat" not in sent.stderr
    assert len(ledger_of(fresh, text)) == 1
    assert status_json(project)["sends"]["today"] == 1
