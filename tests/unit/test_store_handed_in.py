"""The store is handed in (issue 29, item 1): the workspace opens it once and closes it; the
journal, the quota and the article records take the store they are given, so the contract runs
as well on a store in memory; a process that runs many commands keeps no database open."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from project_files import add_prompt
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

from pipeline import wiring
from pipeline.config import load
from pipeline.contract.article import ArticleFiles, ArticleState
from pipeline.contract.journal import Journal
from pipeline.contract.quota import ChatQuota, sends_today
from pipeline.contract.step import Status, generate
from pipeline.contract.workspace import Engines
from pipeline.store.protocol import StoreError
from pipeline.store.sqlite import IN_MEMORY, SQLiteStore
from pipeline.wiring import workspace as open_workspace

NOW = 1_800_000_000.0


@pytest.fixture
def memory():
    with SQLiteStore(IN_MEMORY) as store:
        yield store


def test_the_journal_and_the_quota_work_on_the_store_they_are_given(memory, tmp_path):
    journal, quota = Journal(memory), ChatQuota(memory)
    journal.append("tea", "sending", engine="qwen", account="a")
    journal.append("milk", "sending", engine="qwen", account="b")
    assert [e["slug"] for e in journal.read()] == ["tea", "milk"]
    now = time.time()  # the journal's steps are stamped with the time they happen
    assert sends_today(journal, now) == 2 and sends_today(journal, now, ["a"]) == 1
    until = quota.block(NOW, 3600, "the site said so", account="a")
    assert quota.blocked_until(NOW + 60, account="a") == (until, "the site said so")
    assert quota.held(NOW + 60, "b") is None
    assert list(tmp_path.iterdir()) == [], "no file anywhere"


def test_an_article_record_is_saved_to_and_loaded_from_the_store_given(memory, tmp_path):
    article = ArticleFiles("tea", tmp_path)
    state = ArticleState.load(memory, article)
    state.attempts = 2
    state.save(memory, "tea")
    assert ArticleState.load(memory, article).attempts == 2 and memory.article("tea").attempts == 2


def test_a_workspace_handed_a_store_in_memory_generates_without_a_database_file(project, chat, router):
    add_prompt(project, "tea")
    with open_workspace(load(project / "config.toml"), store=SQLiteStore(IN_MEMORY)) as ws:
        engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
        outcome = generate(ws, "tea", engines)
        assert outcome.status is Status.QUEUED and outcome.sent
        assert [e["event"] for e in ws.journal.read(slug="tea")] == ["sending", "sent"]
        assert ws.store.sends("tea")[0].chat_url == (project / "articles" / "tea.md.url").read_text().strip()
    assert not (project / "articles" / ".qwenpipe" / "qwenpipe.db").exists()


def test_a_workspace_opens_its_store_once_for_all_its_threads_and_closes_it(project, monkeypatch):
    opened = []
    real = wiring.open_sqlite

    def open_sqlite(state_dir):
        opened.append(state_dir)
        return real(state_dir)

    monkeypatch.setattr(wiring, "open_sqlite", open_sqlite)
    ws = open_workspace(load(project / "config.toml"))
    assert opened == [], "opened on first use only"
    start, seen = threading.Barrier(8), []

    def ask() -> None:
        start.wait()
        seen.append(ws.store)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(opened) == 1 and len({id(store) for store in seen}) == 1
    assert ws.journal.store is ws.chat_quota.store is seen[0]
    ws.close()
    with pytest.raises(StoreError):  # closed: its connection is gone
        seen[0].meta("anything")


def open_databases(folder: Path) -> list[str]:
    """The files of `folder`'s stores this process holds open (from /proc/self/fd)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)) and "qwenpipe.db" in target:
            found.append(target)
    return found


def test_commands_run_in_one_process_leave_no_store_open(project):
    from pipeline.entry import answered_status, run_cycle

    add_prompt(project, "tea", meta="title = ")  # invalid: the cycle sends nothing
    config = str(project / "config.toml")
    for _ in range(3):
        for args in (["store", "init"], ["status", "--json"], ["log"], ["show", "tea"]):
            qwenpipe(*args, cwd=project)
            assert (project / "articles" / ".qwenpipe" / "qwenpipe.db").is_file()
            assert open_databases(project) == [], args
        run_cycle(config)  # the cron fast path, without Typer
        assert open_databases(project) == [], "cycle"
        answered_status(config, {"state_filter": [], "pattern": [], "sort": "state"})
        assert open_databases(project) == [], "status --json"
