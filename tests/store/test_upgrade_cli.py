"""Upgrade in place, through the commands: a workspace written before the store (the fixture)
tells the same story in `status --json`, `show` and `log` as it did then."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from datetime import datetime
from pathlib import Path

import pytest
from tests_cli_helpers import qwenpipe_in_process as qwenpipe
from tests_cli_helpers import spawn

from pipeline.batch.status import collect, collect_story
from pipeline.config import load
from pipeline.contract.journal import read_lines
from pipeline.wiring import workspace as open_workspace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BEFORE = json.loads((FIXTURES / "legacy_status.json").read_text())
THEN = datetime.fromisoformat(BEFORE["generated_at"]).timestamp()
TIMELESS = ("slug", "state", "engine", "attempts", "hard_failures", "last_error", "chat_url", "turn", "turns")


@pytest.fixture
def legacy(tmp_path) -> Path:
    return shutil.copytree(FIXTURES / "legacy_workspace", tmp_path / "legacy")


def old_lines(root: Path, slug: str | None = None) -> list[dict]:
    entries = read_lines(root / "articles" / ".qwenpipe" / "journal.jsonl")
    return [e for e in entries if slug is None or e["slug"] == slug]


def test_status_json_on_an_old_workspace_says_what_it_said_before(legacy):
    result = qwenpipe("status", "--json", cwd=legacy)
    assert result.returncode == 0, result.stderr
    now = json.loads(result.stdout)
    assert (legacy / "articles" / ".qwenpipe" / "qwenpipe.db").is_file(), "imported on first open"
    assert {k: now["totals"][k] for k in BEFORE["totals"]} == BEFORE["totals"]  # (+ "invalid" since)
    assert [{k: row[k] for k in TIMELESS} for row in now["articles"]] == [
        {k: row[k] for k in TIMELESS} for row in BEFORE["articles"]
    ]


def test_status_at_the_time_of_the_old_one_gives_the_same_sends_quota_and_ages(legacy):
    with open_workspace(load(legacy / "config.toml")) as workspace:
        status = collect(workspace, THEN).to_json()
    assert status["sends"] == BEFORE["sends"] and status["chat_quota"] == BEFORE["chat_quota"]
    for row, old in zip(status["articles"], BEFORE["articles"], strict=True):
        assert {k: row[k] for k in TIMELESS} == {k: old[k] for k in TIMELESS}
        if old["age_seconds"] is None:
            assert row["age_seconds"] is None, row["slug"]
        else:  # the old `now` had a fraction of a second more
            assert abs(row["age_seconds"] - old["age_seconds"]) <= 1, row["slug"]


@pytest.mark.parametrize("slug", ["chat-done", "multi-turn", "dead", "interrupted", "quota-hit"])
def test_show_on_an_old_workspace_tells_each_journal_step_of_the_article(legacy, slug):
    with open_workspace(load(legacy / "config.toml")) as workspace:
        story = collect_story(workspace, slug)
    shown = [{k: v for k, v in e.items() if k not in ("seq", "account")} for e in story.entries]
    assert shown == old_lines(legacy, slug) and shown
    result = qwenpipe("show", slug, cwd=legacy, env={"NO_COLOR": "1", "TERM": "dumb"})
    assert result.returncode == 0, result.stderr
    assert f"journal ({len(shown)} entries)" in result.stdout


def test_log_json_prints_every_old_journal_line_once(legacy):
    result = qwenpipe("log", "--json", cwd=legacy)
    assert result.returncode == 0, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [{k: v for k, v in e.items() if k != "account"} for e in printed] == old_lines(legacy)


def test_log_of_one_article_prints_its_steps_as_lines(legacy):
    result = qwenpipe("log", "chat-done", cwd=legacy)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[2] for line in lines] == [e["event"] for e in old_lines(legacy, "chat-done")]
    assert all(line.split()[1] == "chat-done" for line in lines)


def test_log_of_a_bad_slug_is_a_usage_error(legacy):
    result = qwenpipe("log", "../etc", cwd=legacy)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_log_follow_prints_a_step_written_after_it_started(legacy):
    process = spawn(
        "log",
        "--follow",
        "--json",
        "router-done",
        cwd=legacy,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    guard = threading.Timer(60, process.kill)  # a hung --follow fails the test, never hangs it
    guard.start()
    try:
        first = [json.loads(process.stdout.readline()) for _ in old_lines(legacy, "router-done")]
        assert [e["event"] for e in first] == [e["event"] for e in old_lines(legacy, "router-done")]
        with open_workspace(load(legacy / "config.toml")) as workspace:
            workspace.journal.append("router-done", "note", why="test")
            workspace.journal.append("other", "note")
        later = json.loads(process.stdout.readline() or "{}")  # waits until --follow prints it
        assert (later["slug"], later["event"], later["why"]) == ("router-done", "note", "test")
    finally:
        guard.cancel()
        process.terminate()
        process.wait(timeout=30)
