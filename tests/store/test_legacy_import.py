"""Upgrade in place: the workspace today's qwenpipe wrote (tests/fixtures/legacy_workspace, made
by tests/fixtures/make_legacy_workspace.py at fedc608) imported into the store tells the same
story as today's readers of the same files, once, all or nothing, and leaves the files alone."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
import store_workers

from pipeline.contract import upgrade
from pipeline.contract.article import ArticleState
from pipeline.contract.journal import Journal, read_lines
from pipeline.contract.quota import local_day_start, next_local_midnight, sends_today
from pipeline.store.dbfile import DB_NAME
from pipeline.store.protocol import DEFAULT_ACCOUNT, Event
from pipeline.store.sqlite import SQLiteStore
from pipeline.wiring import open_sqlite

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "legacy_workspace"
SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def workspace(tmp_path) -> Path:
    return shutil.copytree(FIXTURE, tmp_path / "legacy")


@pytest.fixture
def state_dir(workspace) -> Path:
    return workspace / "articles" / ".qwenpipe"


@pytest.fixture
def store(state_dir):
    opened = open_sqlite(state_dir)
    yield opened
    opened.close()


def journal_entries(state_dir: Path) -> list[dict]:
    return list(read_lines(state_dir / "journal.jsonl"))


def files_of(workspace: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(workspace)): p.read_bytes()
        for p in sorted(workspace.rglob("*"))
        if p.is_file() and not p.name.startswith(DB_NAME)
    }


def test_the_fixture_holds_every_situation_the_upgrade_must_carry():
    names = {p.name for p in (FIXTURE / "articles").iterdir()}
    assert {"chat-done.md", "router-done.md", "multi-turn.md", "quota-hit.md"} <= names
    assert {"generating.md.url", "dead.md.failed", "interrupted.md.sending", "torn.md.sending"} <= names
    assert (FIXTURE / "articles" / ".qwenpipe" / "quota.json").exists()
    raw = (FIXTURE / "articles" / ".qwenpipe" / "journal.jsonl").read_bytes().splitlines()
    assert len(raw) == len(journal_entries(FIXTURE / "articles" / ".qwenpipe")) + 1  # one torn line
    assert not (FIXTURE / "profile").exists()


def test_imported_events_are_the_journal_as_journal_py_reads_it(store, state_dir):
    events = list(store.events())
    entries = journal_entries(state_dir)
    assert [{k: v for k, v in e.to_entry().items() if k != "account"} for e in events] == entries
    assert {e.account for e in events if e.event == "sending"} == {DEFAULT_ACCOUNT}
    assert [e.slug for e in events if e.slug == "torn"] == []  # its only line is the torn one


def test_imported_records_are_the_state_files_as_article_state_reads_them(store, state_dir):
    records = store.articles()
    states = {p.stem: ArticleState.read_file(p) for p in (state_dir / "state").glob("*.json")}
    assert len(states) == 7
    for slug, state in states.items():
        record = asdict(records[slug])
        assert record.pop("slug") == slug and record.pop("intent") is None
        record["errors"] = list(record["errors"])
        read = asdict(state)
        assert read.pop("slug") == "" and read.pop("intent") is None  # an old file holds neither
        assert record == read, slug
    assert records["dead"].hard_failures == 3 and len(records["dead"].errors) == 6
    assert records["backoff"].attempts == 1 and records["backoff"].last_error_code == "error_banner"
    assert (records["multi-turn"].turn, records["multi-turn"].turns) == (3, 3)


def test_the_intent_markers_become_open_intents(store, workspace):
    import json

    for slug in ("interrupted", "torn"):
        marker = json.loads((workspace / "articles" / f"{slug}.md.sending").read_text())
        intent = store.article(slug).intent
        assert (intent.turn, intent.time, intent.prompt_sha256, intent.pid, intent.account) == (
            1,
            marker["time"],
            marker["prompt_sha256"],
            marker["pid"],
            DEFAULT_ACCOUNT,
        )
    assert all(
        r.intent is None for slug, r in store.articles().items() if slug not in ("interrupted", "torn")
    )


def test_every_sent_article_has_its_send_with_the_chat_url_of_its_sidecar(store, workspace):
    sidecars = {
        p.name.removesuffix(".md.url"): p.read_text().strip()
        for p in (workspace / "articles").glob("*.md.url")
    }
    assert set(sidecars) == {"backoff", "chat-done", "dead", "generating", "multi-turn"}
    for slug, url in sidecars.items():
        sends = store.sends(slug)
        assert sends and {s.chat_url for s in sends} == {url}, slug
    assert [s.turn for s in store.sends("multi-turn")] == [1, 2, 3]
    assert store.sends("router-done") == [] and store.sends("quota-hit") == []


def test_the_quota_block_and_the_sends_of_the_day_are_what_quota_py_says(store, state_dir):
    entries = journal_entries(state_dir)
    now = entries[-1]["ts"]
    until, _since, reason = upgrade.read_quota(state_dir / "quota.json")
    block = store.quota_block(DEFAULT_ACCOUNT, now)
    assert (block.until, block.reason) == (until, reason)
    counts = store.send_counts(local_day_start(now), next_local_midnight(now))
    assert counts.total == counts.of(DEFAULT_ACCOUNT) == sends_today(Journal(store), now) == 9


def test_each_articles_last_event_is_its_last_journal_line(store, state_dir):
    lines = {entry["slug"]: entry for entry in journal_entries(state_dir)}
    last = {e.slug: e for e in store.events()}  # oldest first: each slug's newest stays
    assert set(last) == set(lines)
    for slug, event in last.items():
        assert (event.event, event.ts) == (lines[slug]["event"], lines[slug]["ts"]), slug


def test_a_second_import_adds_nothing(store, state_dir):
    before = (list(store.events()), store.articles(), store.send_counts(0).total)
    assert upgrade.import_once(store, state_dir) is None
    store.close()
    again = open_sqlite(state_dir)
    try:
        assert (list(again.events()), again.articles(), again.send_counts(0).total) == before
    finally:
        again.close()


def test_the_old_files_are_left_in_place_and_readable(workspace, state_dir):
    before = files_of(workspace)
    open_sqlite(state_dir).close()
    assert files_of(workspace) == before
    assert len(journal_entries(state_dir)) == 41


def test_torn_and_corrupt_journal_lines_are_skipped_as_journal_py_skips_them(workspace, state_dir):
    with open(state_dir / "journal.jsonl", "ab") as journal:
        journal.write(b'{"ts": 1e20, "slug": "x", "event": "sent"}\nnot json\n{"slug": 5, "ts": 1}\n')
        journal.write(b'{"time": "t", "ts": 5.0, "slug": "late", "event": "poll", "pid": 1}\n{"ts": 6, "slu')
    with open_sqlite(state_dir) as store:
        assert len(list(store.events())) == len(journal_entries(state_dir)) == 42
        assert [e.slug for e in store.events()][-1] == "late"


def test_an_import_killed_midway_leaves_nothing_and_the_next_run_imports_it_all(state_dir):
    worker = SPAWN.Process(target=store_workers.import_and_die, args=(str(state_dir),))
    worker.start()
    worker.join(60)
    assert worker.exitcode == 1
    with SQLiteStore.open(state_dir) as half:  # opened without importing
        assert list(half.events()) == [] and half.articles() == {} and half.meta(upgrade.IMPORT_KEY) is None
    with open_sqlite(state_dir) as store:
        assert len(list(store.events())) == 41 and len(store.articles()) == 9


def test_deleting_the_database_loses_history_never_an_article(workspace, state_dir):
    article_files = {
        k: v for k, v in files_of(workspace).items() if k.startswith("articles/") and "/." not in k
    }
    body = (workspace / "articles" / "chat-done.md").read_text().split("+++")[-1].strip().splitlines()[-1]
    with open_sqlite(state_dir) as store, store.transaction() as tx:
        tx.append(Event("chat-done", "note", 9e9))
    database = (state_dir / DB_NAME).read_bytes()
    assert body.encode() not in database  # the store holds no article body
    for path in state_dir.glob(f"{DB_NAME}*"):
        path.unlink()
    assert {k: v for k, v in files_of(workspace).items() if k in article_files} == article_files
    with open_sqlite(state_dir) as store:  # made again from the files: the later history is gone
        assert [e.event for e in store.events("chat-done")] == ["sending", "sent", "done"]


def test_processes_upgrading_at_once_import_it_once(state_dir):
    start = SPAWN.Event()
    store_workers.run_at_once(store_workers.open_at_once, [(str(state_dir), start)] * 4, start=start)
    with SQLiteStore.open(state_dir) as store:
        assert len(list(store.events())) == 41 and store.send_counts(0).total == 9


def test_a_workspace_with_nothing_old_imports_nothing_and_is_not_looked_at_again(tmp_path):
    state_dir = tmp_path / "articles" / ".qwenpipe"
    with open_sqlite(state_dir) as store:
        assert list(store.events()) == [] and store.articles() == {}
        assert store.meta(upgrade.IMPORT_KEY) is not None


def test_an_import_that_another_process_finished_while_it_read_the_files_adds_nothing(state_dir, monkeypatch):
    ours, theirs = SQLiteStore.open(state_dir), SQLiteStore.open(state_dir)
    read_sends = upgrade._sends

    def they_import_meanwhile(entries):  # after our "not imported yet", before our step
        monkeypatch.setattr(upgrade, "_sends", read_sends)
        assert upgrade.import_once(theirs, state_dir) is not None
        return read_sends(entries)

    monkeypatch.setattr(upgrade, "_sends", they_import_meanwhile)
    try:
        assert upgrade.import_once(ours, state_dir) is None
        assert len(list(ours.events())) == 41 and ours.send_counts(0).total == 9
    finally:
        ours.close()
        theirs.close()


def test_each_article_has_what_status_showed_before_the_upgrade(store):
    """tests/fixtures/legacy_status.json: `status --json` of the fixture by the code that wrote it."""
    import json

    shown = json.loads((FIXTURE.parent / "legacy_status.json").read_text())["articles"]
    assert len(shown) == 9
    records = store.articles()
    for row in shown:
        record = records[row["slug"]]
        sends = store.sends(row["slug"])
        assert (record.engine or None) == row["engine"], row["slug"]
        assert ((sends[0].chat_url if sends else "") or None) == row["chat_url"], row["slug"]
        assert (record.attempts, record.hard_failures) == (row["attempts"], row["hard_failures"]), row["slug"]
        assert (record.intent is not None) == (row["state"] == "sending"), row["slug"]


@pytest.mark.timeout(30)
def test_a_fifo_or_a_link_at_an_old_intent_marker_is_never_opened_by_the_import(tmp_path):
    """The marker's presence still counts as an open intent; its contents are not read through
    a FIFO (that would hang) or a link (that would read another file)."""
    articles = tmp_path / "articles"
    (articles / ".qwenpipe").mkdir(parents=True)
    os.mkfifo(articles / "tea.md.sending")
    secret = tmp_path / "elsewhere.json"
    secret.write_text('{"time": 5, "pid": 7, "prompt_sha256": "not-this-one"}')
    (articles / "coffee.md.sending").symlink_to(secret)
    with open_sqlite(articles / ".qwenpipe") as store:
        intents = {slug: record.intent for slug, record in store.articles().items()}
    assert set(intents) == {"tea", "coffee"}
    assert intents["coffee"].prompt_sha256 == "" and intents["coffee"].pid == 0


@pytest.mark.parametrize(
    "text",
    [
        '{"attempts": 0, "hard_failures": 1.7976931348623157e+308, "next_try": 0.0}',
        '{"attempts": 1e999, "next_try": 0.0}',
        '{"attempts": 10000000000000000000000, "turn": 2}',
        '{"next_try": 1e999}',
        '{"attempts": true, "engine": {"x": 1}}',
    ],
)
def test_an_old_state_file_with_numbers_the_store_cannot_hold_imports_as_a_fresh_record(tmp_path, text):
    state_dir = tmp_path / "articles" / ".qwenpipe"
    (state_dir / "state").mkdir(parents=True)
    (state_dir / "state" / "tea.json").write_text(text)
    (state_dir / "journal.jsonl").write_text('{"ts": 1.0, "slug": "tea", "event": "sending", "turn": 1}\n')
    with open_sqlite(state_dir) as store:
        record = store.article("tea")
    assert record is None or (record.attempts, record.hard_failures, record.engine) == (0, 0, "")
    assert ArticleState.read_file(state_dir / "state" / "tea.json") == ArticleState()
