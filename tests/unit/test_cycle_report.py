"""What a cycle tells cron: its summary, its warnings and the time on every line."""

from __future__ import annotations

import re

from fakes import took_nothing
from project_files import add_prompt
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

ISO_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d \S")


def test_cycle_lines_off_a_terminal_start_with_an_iso_time(project):
    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("+++\ntitle = 'Tea'\n+++\n# Tea\n")
    result = qwenpipe("cycle", cwd=project)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and all(ISO_LINE.match(line) for line in lines), result.stderr
    assert " cycle: 1 done" in lines[-1]


def test_cycle_names_each_invalid_prompt_once_and_sends_the_rest(project, chat, router):
    from pipeline.batch.cycle import run_cycle
    from pipeline.config import load
    from pipeline.contract.workspace import Engines
    from pipeline.wiring import workspace as open_workspace

    ws = open_workspace(load(project / "config.toml"))
    add_prompt(project, "tea")
    add_prompt(project, "My_Post")
    add_prompt(project, "broken", meta="title = ")
    lines: list[str] = []
    engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    report = run_cycle(ws, engines, say=lines.append)
    assert report.sent == ["tea"] and chat.sends == 1
    assert sorted(report.invalid) == ["My_Post", "broken"] and report.exit_code == 1
    named = [line for line in lines if line.startswith("invalid prompt: ")]
    assert len(named) == 2, lines
    assert any("My_Post" in line and "rename it to" in line for line in named)
    assert any("broken.md" in line and "not valid TOML" in line for line in named)
    assert not any("skipped" in line for line in lines), lines
    assert "2 invalid" in report.summary()


def test_a_logged_out_chat_is_said_plainly_by_the_cycle_and_status(project, chat, router):
    from pipeline.batch.cycle import run_cycle
    from pipeline.batch.status import collect
    from pipeline.config import load
    from pipeline.contract.workspace import Engines
    from pipeline.engines.base import HardError
    from pipeline.wiring import workspace as open_workspace

    ws = open_workspace(load(project / "config.toml"))
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    chat.send_error = took_nothing(
        HardError("not logged in to the chat site: run `qwenpipe login`", code="logged_out")
    )

    def engines():
        return Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)

    report = run_cycle(ws, engines())
    assert report.exit_code == 0 and sorted(report.routed_logged_out) == ["coffee", "tea"]
    notice = "the chat is logged out: the router wrote 2 article(s) instead; run `qwenpipe login`"
    assert notice in report.summary()

    def login_warnings():
        return [w for w in collect(ws).warnings if "logged out" in w]

    warned = login_warnings()
    assert len(warned) == 1 and "the router wrote 2 article(s)" in warned[0] and "qwenpipe login" in warned[0]
    assert collect(ws).to_json()["last_cycle"]["chat_logged_out"] is True

    assert run_cycle(ws, engines()).exit_code == 0  # nothing to do: still known to be logged out
    assert len(login_warnings()) == 1

    chat.send_error = None  # logged in again: the next send works and the warning goes
    add_prompt(project, "milk", "Write about milk.")
    assert run_cycle(ws, engines()).exit_code == 42
    assert login_warnings() == []


def test_logged_out_with_the_router_off_says_what_could_not_be_written(project, chat, router):
    from pipeline.batch.cycle import run_cycle
    from pipeline.config import load
    from pipeline.contract.workspace import Engines
    from pipeline.engines.base import HardError
    from pipeline.wiring import workspace as open_workspace

    (project / "config.toml").write_text(
        "[qwen]\npoll_interval = 0\nmax_attempts = 3\n[article]\nmin_words = 0\n[router]\nenabled = false\n"
    )
    ws = open_workspace(load(project / "config.toml"))
    add_prompt(project, "tea")
    chat.send_error = took_nothing(HardError("not logged in", code="logged_out"))
    engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    report = run_cycle(ws, engines)
    assert report.exit_code == 1
    notice = "the chat is logged out: 1 article(s) could not be written; run `qwenpipe login`"
    assert notice in report.summary()


def test_an_article_the_busy_store_held_back_is_counted_as_waiting_for_the_store(
    project, chat, router, monkeypatch
):
    """A step the store refused (held by another process, or unreachable) is no generating chat:
    the cycle's summary says what it waits for (issue 29: `Outcome.reason` is a `Reason`)."""
    from pipeline.batch.cycle import run_cycle
    from pipeline.config import load
    from pipeline.contract import step
    from pipeline.contract.workspace import Engines
    from pipeline.store.protocol import StoreBusy
    from pipeline.wiring import workspace as open_workspace

    add_prompt(project, "tea")
    workspace = open_workspace(load(project / "config.toml"))
    engines = Engines(workspace.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)

    def held(_self):
        raise StoreBusy("another process holds the store (database is locked); try again in a moment")

    monkeypatch.setattr(step.Step, "run", held)
    report = run_cycle(workspace, engines)
    assert report.counts["store_busy"] == 1 and report.counts["generating"] == 0, report.counts
    assert "1 waiting for the store" in report.summary()


def test_the_cycle_counts_the_browsers_its_chat_engines_launched(project, chat, router):
    """Through the engine protocol (ChatEngine.launches): this cycle's launches, not the
    process's, so engines that outlive a cycle count once."""
    from pipeline.batch.cycle import run_cycle
    from pipeline.config import load
    from pipeline.contract.workspace import Engines
    from pipeline.engines.base import Generating
    from pipeline.wiring import workspace as open_workspace

    ws = open_workspace(load(project / "config.toml"))
    add_prompt(project, "tea")

    def launching(_config):
        chat.launches += 1  # as the qwen engine's first page launches its browser
        return chat

    engines = Engines(ws.config, chat_factory=launching, router_factory=lambda _c: router)
    assert run_cycle(ws, engines).browser_launches == 1
    chat.enqueue_check(Generating())
    report = run_cycle(ws, engines)  # the same engine looks again: no new browser
    assert chat.history[-1][0] == "check" and report.browser_launches == 0
