"""`cycle --cron-exit` (what `qwenpipe cron` prints): 0 when all is well or merely in progress,
1 only when something needs a person; the cycle's own codes and generate's stay as they were."""

from __future__ import annotations

import pytest
from fakes import answer, took_nothing
from project_files import add_prompt
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

import pipeline.wiring as wiring
from pipeline.batch import cronexit
from pipeline.cli.running import cycle_command
from pipeline.config import load
from pipeline.contract.workspace import Engines
from pipeline.engines.base import Generating, HardError
from pipeline.entry import cycle_config
from pipeline.exitcodes import ExitCode
from pipeline.files import FileLock
from pipeline.wiring import workspace as open_workspace


@pytest.fixture
def cron(project, chat, router, monkeypatch):
    """(workspace, run): run(cron_exit) is `qwenpipe cycle [--cron-exit]` with the fake engines."""

    def fake_engines(config, workspace=None):
        return Engines(config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)

    monkeypatch.setattr(wiring, "engines", fake_engines)

    def run(config_text: str = "", *, cron_exit: bool = True) -> int:
        if config_text:
            (project / "config.toml").write_text(config_text)
        return cycle_command(open_workspace(load(project / "config.toml")), cron_exit=cron_exit)

    return run


def test_a_cycle_that_sends_or_waits_is_0_under_cron_and_keeps_its_own_codes_without(project, chat, cron):
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    assert cron() == ExitCode.DONE  # sent both: 42 for the cycle itself
    chat.enqueue_check(Generating(), Generating())
    assert cron(cron_exit=False) == ExitCode.WORKING  # the cycle's own code, unchanged
    chat.enqueue_check(Generating(), Generating())
    assert cron() == ExitCode.DONE  # still writing: in progress
    add_prompt(project, "milk", "Write about milk.")
    chat.enqueue_check(Generating(), Generating())
    assert cron(cron_exit=False) == ExitCode.QUEUED
    chat.enqueue_check(answer(), answer(), answer())
    assert cron() == ExitCode.DONE


def test_a_dead_letter_needs_a_person_in_the_cycle_that_makes_it_and_every_one_after(
    project, chat, router, cron, capfd
):
    config = (
        "[qwen]\npoll_interval = 0\nmax_attempts = 1\n[article]\nmin_words = 0\n[router]\nenabled = false\n"
    )
    add_prompt(project, "tea")
    chat.send_error = took_nothing(HardError("the chat refused it", code="chat_error"))
    assert cron(config) == cronexit.NEEDS_PERSON
    assert (project / "articles" / "tea.md.failed").exists()
    assert "needs a person: 1 article(s) dead-lettered" in capfd.readouterr().err
    chat.send_error = None
    add_prompt(project, "coffee", "Write about coffee.")
    # A plain cycle's 0 is "everything is done": a dead letter waiting for replay is 1 there too
    assert cron(cron_exit=False) == ExitCode.FAILED
    chat.enqueue_check(answer())
    assert cron(cron_exit=False) == ExitCode.FAILED
    assert cron() == cronexit.NEEDS_PERSON, "a health check would call a batch with a dead letter fine"


def test_logged_out_needs_a_person_only_when_the_router_did_not_write_it(project, chat, router, cron, capfd):
    add_prompt(project, "tea")
    chat.send_error = took_nothing(HardError("not logged in", code="logged_out"))
    assert cron() == ExitCode.DONE  # the router wrote it
    assert (project / "articles" / "tea.md").exists()
    add_prompt(project, "coffee", "Write about coffee.")
    router.enqueue(HardError("router: HTTP 401 Missing API key", code="router_auth"))
    assert cron() == cronexit.NEEDS_PERSON
    said = capfd.readouterr().err
    assert (
        "the chat is logged out and the router did not write 1 article(s)" in said
        and "qwenpipe login" in said
    )


def test_an_invalid_prompt_needs_a_person(project, cron):
    add_prompt(project, "broken", meta="title = ")
    assert cron() == cronexit.NEEDS_PERSON


def test_another_cycle_at_work_is_0_under_cron(project, cron):
    add_prompt(project, "tea")
    ws = open_workspace(load(project / "config.toml"))
    ws.state_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(ws.cycle_lock, purpose="cycle").acquire()
    try:
        assert cron(cron_exit=False) == ExitCode.WORKING
        assert cron() == ExitCode.DONE
    finally:
        lock.release()


def test_the_cron_line_is_recognised_by_the_fast_path():
    assert cycle_config(["cycle", "--cron-exit"]) == (None, True)
    assert cycle_config(["--config", "c.toml", "cycle", "--cron-exit"]) == ("c.toml", True)
    assert cycle_config(["cycle"]) == (None, False)
    assert cycle_config(["--cron-exit", "cycle"]) is None  # not qwenpipe's own option: the full CLI refuses
    assert cycle_config(["cycle", "--cron-exit", "--cron-exit"]) is None


UNREACHABLE = '[store]\nurl = "postgresql://qwenpipe@127.0.0.1:9/none"\nhost_id = "h1"\n'


def test_an_unreachable_store_is_0_for_two_cycles_then_needs_a_person_and_status_says_so(project):
    pytest.importorskip("psycopg")
    (project / "config.toml").write_text(UNREACHABLE)
    add_prompt(project, "tea")
    (project / "articles" / "coffee.md.url").write_text("https://chat.qwen.ai/c/abc\n")
    add_prompt(project, "coffee", "Write about coffee.")
    plain = qwenpipe("cycle", cwd=project)
    assert plain.returncode == ExitCode.WORKING and "store unreachable" in plain.stderr  # its own code
    second = qwenpipe("cycle", "--cron-exit", cwd=project)
    assert second.returncode == 0 and "2 in a row" in second.stderr, second.stderr
    third = qwenpipe("cycle", "--cron-exit", cwd=project)
    assert third.returncode == 1 and "the store stopped 3 cycles in a row" in third.stderr, third.stderr
    full_cli = qwenpipe("cycle", "--cron-exit", "--config", str(project / "config.toml"), cwd=project)
    assert full_cli.returncode == 1  # the same through Typer (an option after the flag)
    status = qwenpipe("status", cwd=project)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert (
        "the store cannot be read" in status.stderr
        and "4 cycle(s) in a row stopped on the store" in status.stderr
    )
    assert "running since" not in status.stdout and "stopped early" in status.stdout, status.stdout
    assert "tea" in status.stdout and "coffee" in status.stdout  # what this host's files say
    doc = qwenpipe("status", "--json", cwd=project)
    assert doc.returncode == 0 and '"store_error": "store' in doc.stdout
