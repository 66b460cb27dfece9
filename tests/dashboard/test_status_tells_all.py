"""What `status` hid or misstated (issue 27, items 8 and 12): a next try the clock left days ahead,
a refused chat URL file, a lock that is a link, "turn None", a dead cycle "running", an unreadable
last_cycle.json, a folder that is no project; and chat URLs cut at 200 columns (item 15)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time

import pytest
from fakes import FakeChat, FakeRouter, answer
from project_files import add_prompt
from rich.console import Console
from tests_cli_helpers import qwenpipe_in_process

from pipeline.batch.cycle import run_cycle
from pipeline.batch.dashboard import cells, cycle_line, rich_status
from pipeline.batch.status import collect
from pipeline.config import load
from pipeline.contract.phases import backoff_delay
from pipeline.contract.step import Status, generate
from pipeline.contract.workspace import Engines, Workspace
from pipeline.engines.base import TransientError
from pipeline.wiring import workspace as open_workspace

DAY = 86400.0


def spaced(project) -> Workspace:
    (project / "config.toml").write_text(
        "[qwen]\npoll_interval = 30\nmax_attempts = 5\n[article]\nmin_words = 0\n"
    )
    return open_workspace(load(project / "config.toml"))


def rows(ws, now=None) -> dict:
    return {row.slug: row for row in collect(ws, now).rows}


@pytest.mark.parametrize("ahead", [DAY, 2 * DAY, 365 * DAY])
def test_a_backoff_stamped_while_the_clock_was_ahead_shows_no_more_than_its_own_delay(project, ahead):
    ws = spaced(project)
    chat = FakeChat()
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: FakeRouter())
    add_prompt(project, "tea")
    now = time.time()
    assert generate(ws, "tea", eng, clock=lambda: now + ahead - 60).status is Status.QUEUED
    chat.enqueue_check(TransientError("WAF page", code="waf"))
    assert generate(ws, "tea", eng, clock=lambda: now + ahead).reason == "backoff"
    delay = backoff_delay(ws.config.qwen, 1)
    row = rows(ws, now)["tea"]
    assert row.state == "backoff" and row.next_try is not None
    assert now < row.next_try <= now + delay, (row.next_try - now, delay)
    assert cells(row, now)[7] == "in 30s", cells(row, now)
    shown = json.loads(qwenpipe_in_process("status", "--json", cwd=project).stdout)["articles"][0]["next_try"]
    assert shown is not None and "T" in shown  # as its next step plans it, not days away


URL_FILES = {
    "another site": b"https://evil.example/c/0b2f6b7a-0c2f-4e1a-9b3d-8f7e6d5c4b3a\n",
    "javascript": b"javascript:alert(1)\n",
    "empty": b"",
    "two lines": b"https://chat.qwen.ai/c/one\nhttps://chat.qwen.ai/c/two\n",
    "not UTF-8": b"\xff\xfe\x00",
    "not a chat": b"https://chat.qwen.ai/settings\n",
}


@pytest.mark.parametrize("what", list(URL_FILES))
def test_a_chat_url_file_its_step_refuses_is_invalid_with_the_problem_not_generating(project, what):
    ws = open_workspace(load(project / "config.toml"))
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    url = project / "articles" / "tea.md.url"
    url.write_bytes(URL_FILES[what])
    (project / "articles" / "coffee.md.url").write_text(
        "https://chat.qwen.ai/c/5d1e6b7a-0c2f-4e1a-9b3d-8f7e6d5c4b3a\n"
    )
    found = rows(ws)
    assert found["tea"].state == "invalid", found["tea"]
    assert str(url) in found["tea"].last_error and "tea.md.url" in found["tea"].last_error
    assert found["coffee"].state == "generating"  # a good one as before
    chat = FakeChat()
    report = run_cycle(
        ws, Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: FakeRouter())
    )
    assert "tea" in report.invalid, report.summary()  # the cycle says the same
    assert chat.sends == 0


@pytest.mark.parametrize("kind", ["dangling link", "link to a file", "fifo"])
def test_an_article_lock_that_is_not_a_file_shows_invalid_naming_it_and_is_not_sent(project, outside, kind):
    ws = open_workspace(load(project / "config.toml"))
    add_prompt(project, "tea")
    locks = project / "articles" / ".qwenpipe" / "locks"
    locks.mkdir(parents=True)
    lock = locks / "tea.lock"
    if kind == "dangling link":
        lock.symlink_to(project / "nowhere")
    elif kind == "link to a file":
        lock.symlink_to(outside)
    else:
        os.mkfifo(lock)
    row = rows(ws)["tea"]
    assert row.state == "invalid" and str(lock) in row.last_error, row
    chat = FakeChat()
    report = run_cycle(
        ws, Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: FakeRouter())
    )
    assert report.invalid == ["tea"] and chat.sends == 0
    assert outside.read_text() == "the user's own file\n"


THREE_TURNS = "One.\n=== next turn ===\nTwo.\n=== next turn ===\nThree."


def test_no_cell_says_none_for_a_finished_multi_turn_article(project, workspace, engines, chat):
    add_prompt(project, "tea", THREE_TURNS)
    for _ in range(8):
        chat.enqueue_check(answer())
        if generate(workspace, "tea", engines).status is Status.DONE:
            break
    now = time.time()
    row = rows(workspace, now)["tea"]
    assert row.state == "done" and row.turns == 3
    for compact in (False, True):
        shown = cells(row, now, compact=compact)
        assert not any("None" in cell for cell in shown), shown
    assert cells(row, now)[1] == "done (3 turns)"


def write_cycle(ws, **record):
    ws.state_dir.mkdir(parents=True, exist_ok=True)
    (ws.state_dir / "last_cycle.json").write_text(json.dumps(record))


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_cycle_whose_process_is_gone_is_not_running(project, workspace):
    add_prompt(project, "tea")
    now = time.time()
    write_cycle(workspace, started=now - 30, pid=dead_pid(), host=os.uname().nodename)
    status = collect(workspace, now)
    assert "stopped without finishing" in cycle_line(status.last_cycle, now)
    assert "running since" not in cycle_line(status.last_cycle, now)
    doc = status.to_json()["last_cycle"]
    assert doc["running"] is False and doc["gone"] is True
    assert any("stopped without finishing" in warning for warning in status.warnings)
    write_cycle(workspace, started=now - 30, pid=os.getpid(), host=os.uname().nodename)
    assert "running since" in cycle_line(collect(workspace, now).last_cycle, now)  # alive: running


@pytest.mark.parametrize("kind", ["dangling link", "fifo"])
def test_an_unreadable_last_cycle_record_is_reported_not_a_failure(project, workspace, kind):
    add_prompt(project, "tea")
    workspace.state_dir.mkdir(parents=True, exist_ok=True)
    record = workspace.state_dir / "last_cycle.json"
    if kind == "fifo":
        os.mkfifo(record)
    else:
        record.symlink_to(project / "nowhere.json")
    status = qwenpipe_in_process("status", cwd=project, timeout=30)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert "the last cycle's record cannot be read" in status.stderr and str(record) in status.stderr
    assert "last cycle: unknown" in status.stdout
    as_json = qwenpipe_in_process("status", "--json", cwd=project, timeout=30)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["last_cycle"]["problem"]
    show = qwenpipe_in_process("show", "tea", cwd=project, timeout=30)
    assert show.returncode == 0, show.stderr


@pytest.mark.parametrize("args", [["status"], ["status", "--json"]])
def test_status_in_a_folder_that_is_no_project_is_exit_2_saying_where_it_looked(tmp_path, args):
    result = qwenpipe_in_process(*args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "no prompts folder" in result.stderr and "qwenpipe init" in result.stderr
    assert result.stdout == ""


def test_whole_chat_urls_at_200_columns(project, workspace):
    urls = {}
    for number, slug in enumerate(("tea", "a-rather-long-slug-about-green-tea-and-its-history", "milk")):
        add_prompt(project, slug, f"Write about {slug}.")
        urls[slug] = f"https://chat.qwen.ai/c/{number:08d}-3f1c-4b7e-9a2d-{number:012d}"
        (project / "articles" / f"{slug}.md.url").write_text(urls[slug] + "\n")
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, soft_wrap=True, force_terminal=True, color_system=None)
    console.print(rich_status(collect(workspace), width=200))
    shown = buffer.getvalue()
    for url in urls.values():
        assert url in shown, shown
