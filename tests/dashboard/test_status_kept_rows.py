"""`status` shows the rows it kept in the store (batch/status_cache.py), and `status --json` the
document it kept whole (batch/status_document.py), only while nothing they were made from
changed: every kind of change a person (or another process) can make between two statuses is
seen by the next one. The oracle for each: the same status with nothing kept."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import asdict

import pytest
from fakes import FakeChat, FakeRouter, took_nothing
from project_files import add_prompt

from pipeline import redact
from pipeline.batch.status import collect
from pipeline.batch.status_document import META_KEY
from pipeline.config import load
from pipeline.contract.article import ArticleState
from pipeline.contract.journal import NO_ARTICLE
from pipeline.contract.step import Status, generate
from pipeline.contract.workspace import Engines, Workspace
from pipeline.engines.base import Answer, HardError, TransientError
from pipeline.redact import masked_json
from pipeline.store.protocol import Event, QuotaBlock
from pipeline.wiring import workspace

BODY = "# Tea\n\n" + " ".join("Tea is grown, traded and brewed in many lands." for _ in range(12))
SETTINGS = "[qwen]\npoll_interval = 30\nmax_attempts = 2\nmax_sends_per_day = 50\n"
LATER = 60.0  # statuses are asked as of a minute on: the files are older than status_cache.RACY


def open_workspace(project) -> Workspace:
    return workspace(load(project / "config.toml"))


@pytest.fixture
def batch(project):
    """An article in each state a hand change can move: all written by `generate`."""
    (project / "config.toml").write_text(SETTINGS)
    ws = open_workspace(project)
    chat, router = FakeChat(), FakeRouter()
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    for slug in ("pending", "sending", "generating", "done", "dead", "backoff", "orphan", "spare"):
        add_prompt(project, slug, f"Write about {slug}.")
    chat.crash_after_send = RuntimeError("killed between the click and the URL")
    with pytest.raises(RuntimeError):
        generate(ws, "sending", eng)
    chat.crash_after_send = None
    at = lambda t: lambda: t  # noqa: E731 - a frozen clock
    earlier = time.time() - 200  # sent before poll_interval: their chats may be looked at now
    for slug in ("generating", "done", "backoff", "orphan"):
        assert generate(ws, slug, eng, clock=at(earlier)).status is Status.QUEUED
    chat.enqueue_check(Answer(markdown=BODY, engine="qwen", title="Tea"))
    assert generate(ws, "done", eng).status is Status.DONE
    chat.enqueue_check(TransientError("WAF page", code="waf"))
    assert generate(ws, "backoff", eng).status is Status.WORKING
    chat.send_error = took_nothing(HardError("logged out", code="logged_out"))
    for _ in range(2):
        router.enqueue(HardError("router: HTTP 500", code="router_http"))
        generate(ws, "dead", eng)
    (project / "prompts" / "orphan.md").unlink()
    ws.close()
    return project


def rows_of(project, now: float) -> dict[str, dict]:
    with open_workspace(project) as ws:
        return {row.slug: asdict(row) for row in collect(ws, now).rows}


def kept_slugs(project) -> set[str]:
    with sqlite3.connect(project / "articles" / ".qwenpipe" / "qwenpipe.db") as db:
        return {slug for (slug,) in db.execute("SELECT slug FROM status_rows")}


def forget_kept(project) -> None:
    with sqlite3.connect(project / "articles" / ".qwenpipe" / "qwenpipe.db") as db:
        db.execute("DELETE FROM status_rows")
        db.execute("DELETE FROM meta WHERE key = ?", (META_KEY,))


def made_rows_json(project, now: float) -> dict[str, dict]:
    """The rows as `status --json` writes them, each made as a Row (no kept text)."""
    with open_workspace(project) as ws:
        return {row.slug: row.to_json() for row in collect(ws, now).rows}


def document_rows(project, now: float) -> tuple[dict[str, dict], bool]:
    """`status --json`'s articles as of `now`, and whether they came from the kept document."""
    with open_workspace(project) as ws:
        status = collect(ws, now, as_text=True)
        shown = {row["slug"]: row for row in status.to_json()["articles"]}
        assert json.loads(status.json_text()) == status.to_json(), "the text is the document"
        return shown, status.rows_text is not None and not status.rows  # no row made: the text kept


def same_size_same_mtime(path, text: str) -> None:
    """Write `text` over the file, keeping its size and putting its mtime back (a tool that
    preserves times): only its ctime says it changed."""
    before = path.stat()
    data = text.encode()
    assert len(data) == before.st_size, (len(data), before.st_size)
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _url(project, slug):
    return project / "articles" / f"{slug}.md.url"


def _put_record(project, slug, **fields):
    with open_workspace(project) as ws, ws.store.transaction() as tx:
        record = tx.article(slug)
        state = ArticleState.from_record(record) if record else ArticleState()
        for name, value in fields.items():
            setattr(state, name, value)
        tx.put_article(state.to_record(slug))


def _append(project, slug, event, **fields):
    with open_workspace(project) as ws, ws.store.transaction() as tx:
        tx.append(Event(slug, event, time.time(), fields=fields))


def _config(project, text):
    (project / "config.toml").write_text(SETTINGS + text)


def _sends_elsewhere(project, count):
    """`count` sends of other articles today (another process's): the daily limit, no setting."""
    with open_workspace(project) as ws, ws.store.transaction() as tx:
        for n in range(count):
            tx.append(
                Event(f"other-{n}", "sending", time.time(), account="default", fields={"engine": "qwen"})
            )


def _block_quota(project):
    """The site said the quota is spent (another process's look): a limit, no article's rows."""
    with open_workspace(project) as ws, ws.store.transaction() as tx:
        tx.block_quota(QuotaBlock("default", until=time.time() + 7200, reason="quota", since=time.time()))


# Each kind of change between two statuses: (name, the change, what the next status must show).
CHANGES = [
    (
        "article edited in place",
        lambda p: (p / "articles/done.md").write_text(BODY + "\nmore"),
        ("done", "done"),
    ),
    ("article deleted", lambda p: (p / "articles/done.md").unlink(), ("done", "generating")),
    ("article added by hand", lambda p: (p / "articles/pending.md").write_text(BODY), ("pending", "done")),
    (
        "article renamed by hand",
        lambda p: (p / "articles/done.md").rename(p / "articles/spare.md"),
        ("spare", "done"),
    ),
    ("chat URL file removed", lambda p: _url(p, "generating").unlink(), ("generating", "pending")),
    (
        "chat URL file edited",
        lambda p: _url(p, "generating").write_text("not a url\n"),
        ("generating", "invalid"),
    ),
    (
        "chat URL file edited: same size, mtime put back",
        lambda p: same_size_same_mtime(
            _url(p, "generating"), _url(p, "generating").read_text().replace("https", "ftp:s")
        ),
        ("generating", "invalid"),
    ),
    ("chat URL file of a done article edited", lambda p: _url(p, "done").write_text("x\n"), ("done", "done")),
    (
        "chat URL file of an orphan edited",
        lambda p: _url(p, "orphan").write_text("x\n"),
        ("orphan", "orphan"),
    ),
    (
        "chat URL file made a symlink",
        lambda p: (_url(p, "generating").unlink(), _url(p, "generating").symlink_to(p / "config.toml")),
        ("generating", "invalid"),
    ),
    (
        "intent marker edited (another account)",
        lambda p: (p / "articles/sending.md.sending").write_text('{"account": "other", "time": 1}\n'),
        ("sending", "other"),
    ),
    ("intent marker removed", lambda p: (p / "articles/sending.md.sending").unlink(), ("sending", "pending")),
    ("dead letter removed", lambda p: (p / "articles/dead.md.failed").unlink(), ("dead", "failed")),
    (
        "dead letter added by hand",
        lambda p: (p / "articles/pending.md.failed").write_text("x = 1\n"),
        ("pending", "dead"),
    ),
    ("prompt added", lambda p: add_prompt(p, "newcomer", "Write about newcomers."), ("newcomer", "pending")),
    ("prompt touched", lambda p: os.utime(p / "prompts/pending.md"), ("pending", "pending")),
    (
        "prompt renamed",
        lambda p: (p / "prompts/pending.md").rename(p / "prompts/renamed.md"),
        ("renamed", "pending"),
    ),
    (
        "article moved out of the batch",
        lambda p: (p / "articles/done.md").rename(p / "done.md"),
        ("done", "generating"),
    ),
    (
        "prompt replaced by a link to an empty file",
        lambda p: (
            (p / "empty.md").write_text(""),
            (p / "prompts/pending.md").unlink(),
            (p / "prompts/pending.md").symlink_to(p / "empty.md"),
        ),
        ("pending", "invalid"),
    ),
    (
        "prompt edited (now empty)",
        lambda p: (p / "prompts/pending.md").write_text(""),
        ("pending", "invalid"),
    ),
    (
        "prompt edited: same size, mtime put back",
        lambda p: same_size_same_mtime(p / "prompts/pending.md", "+++\n=\n+++\nabout pend"),
        ("pending", "invalid"),
    ),
    ("prompt removed", lambda p: (p / "prompts/generating.md").unlink(), ("generating", "orphan")),
    ("prompt restored to an orphan", lambda p: add_prompt(p, "orphan", "Back."), ("orphan", "generating")),
    (
        "lock made a symlink",
        lambda p: (p / "articles/.qwenpipe/locks/spare.lock").symlink_to(p / "config.toml"),
        ("spare", "invalid"),
    ),
    (
        "record written by another process",
        lambda p: _put_record(p, "generating", attempts=4),
        ("generating", 4),
    ),
    (
        "journal step by another process",
        lambda p: _append(p, "pending", "sending", engine="qwen"),
        ("pending", "pending"),
    ),
    (
        "settings changed (base_url)",
        lambda p: _config(p, "base_url = 'https://example.org'\n"),
        ("generating", "invalid"),
    ),
    ("chat quota blocked by another process", lambda p: _block_quota(p), ("pending", "quota")),
    (
        "daily send limit reached by sends of other articles",
        lambda p: _sends_elsewhere(p, 50),
        ("pending", "quota"),
    ),
]


@pytest.mark.parametrize("name, change, expected", CHANGES, ids=[c[0] for c in CHANGES])
def test_each_kind_of_change_is_seen_by_the_next_status(batch, name, change, expected):
    now = time.time() + LATER
    first = rows_of(batch, now)
    assert rows_of(batch, now) == first
    assert kept_slugs(batch) == set(first), "every row was kept: the next status may show them"
    change(batch)
    seen = rows_of(batch, now + 1)
    forget_kept(batch)
    assert seen == rows_of(batch, now + 1), f"{name}: the kept rows hid the change"
    assert_shown(seen, name, expected)


def assert_shown(seen: dict, name: str, expected: tuple) -> None:
    """The changed article's row shows what the change `name` made of it (`expected`)."""
    slug, shown = expected
    field = "account" if name.startswith("intent marker edited") else "state"
    field = "attempts" if isinstance(shown, int) else field
    assert seen[slug][field] == shown, (name, seen[slug])


@pytest.mark.parametrize("name, change, expected", CHANGES, ids=[c[0] for c in CHANGES])
def test_each_kind_of_change_is_seen_by_the_next_status_json(batch, name, change, expected):
    """The same changes, through the document `status --json` keeps whole."""
    now = time.time() + LATER
    first, _ = document_rows(batch, now)
    again, kept = document_rows(batch, now)
    assert kept and again == first, "the second status --json showed the document kept by the first"
    change(batch)
    seen, _ = document_rows(batch, now + 1)
    forget_kept(batch)
    assert seen == made_rows_json(batch, now + 1), f"{name}: the kept document hid the change"
    assert_shown(seen, name, expected)


def test_status_json_ages_count_to_now_and_a_backoff_ends_by_the_clock(batch):
    """A kept document's ages are counted to the time of the look; it holds until its first
    row's next try, then the rows are made afresh."""
    now = time.time() + 3
    before, _ = document_rows(batch, now)
    later, kept = document_rows(batch, now + 10)
    assert kept and later == made_rows_json(batch, now + 10)
    assert later["done"]["age_seconds"] == before["done"]["age_seconds"] + 10
    assert later["backoff"]["next_try"] == before["backoff"]["next_try"]
    after, kept = document_rows(batch, now + 3600)
    assert not kept and after["backoff"]["state"] == "generating" and after["backoff"]["next_try"] is None


def test_a_document_is_not_kept_over_what_its_stamps_cannot_vouch_for(batch):
    """A folder changed within RACY seconds of the look, a prompt that is a link (what it points
    to may change while its folder does not), a look before the document was made (the clock
    went back): the rows are made afresh."""
    now = time.time() + LATER
    document_rows(batch, now)
    articles = batch / "articles"
    os.utime(articles, (now - 1, now - 1))  # articles/ changed a second before the look
    document_rows(batch, now)
    assert not document_rows(batch, now)[1]
    assert not document_rows(batch, now - 1)[1], "an earlier look than the document's"
    (batch / "prompts" / "linked.md").symlink_to(batch / "prompts" / "spare.md")
    document_rows(batch, now)
    assert not document_rows(batch, now)[1]
    (batch / "prompts" / "linked.md").unlink()
    document_rows(batch, now + 10)
    assert document_rows(batch, now + 10)[1]


def test_the_batchs_own_steps_keep_the_document(batch):
    """A cycle writes its start and end in the journal (the batch's own steps, no article's):
    no row shows them, so the document holds across a cycle that changed nothing."""
    now = time.time() + LATER
    document_rows(batch, now)
    _append(batch, NO_ARTICLE, "cycle_start")
    assert document_rows(batch, now)[1]
    _append(batch, "pending", "sending", engine="qwen")
    assert not document_rows(batch, now)[1], "an article's step unmakes it"


def test_a_linked_prompts_file_emptied_is_seen_by_the_next_status_json(batch):
    """What a prompt that is a link points to changes while prompts/ does not: no document is
    kept over it, and the next status sees the change."""
    target = batch / "linked-prompt.md"
    target.write_text("Write about links.")
    (batch / "prompts" / "linked.md").symlink_to(target)
    now = time.time() + LATER
    assert document_rows(batch, now)[0]["linked"]["state"] == "pending"
    target.write_text("")
    seen, kept = document_rows(batch, now + 1)
    assert not kept and seen["linked"]["state"] == "invalid"


def test_a_backoff_ends_by_the_clock_alone(batch):
    """A kept row holds until its next try: after it, the article is made afresh."""
    now = time.time() + 3  # its files older than RACY, its next try (poll_interval 30) ahead
    before = rows_of(batch, now)
    assert before["backoff"]["state"] == "backoff" and "backoff" in kept_slugs(batch)
    after = rows_of(batch, now + 3600)
    assert after["backoff"]["state"] == "generating" and after["backoff"]["next_try"] is None


def test_a_file_changed_within_the_stamps_tick_is_not_kept(batch):
    """A file changed less than RACY seconds before the look: its row is shown, never kept (a
    second edit of the same size in the same tick would leave the same stamp)."""
    _url(batch, "generating").write_text(_url(batch, "generating").read_text())
    rows_of(batch, time.time())
    assert "generating" not in kept_slugs(batch)
    rows_of(batch, time.time() + LATER)
    assert "generating" in kept_slugs(batch)


def test_rows_of_articles_gone_are_forgotten(batch):
    now = time.time() + LATER
    rows_of(batch, now)
    (batch / "prompts" / "pending.md").unlink()
    rows_of(batch, now)
    assert "pending" not in kept_slugs(batch)


def test_a_store_that_cannot_keep_rows_still_shows_them(batch, monkeypatch):
    """Keeping rows is a cache: a store that refuses the write (busy, read-only) leaves the
    status as it is, with nothing kept."""
    import contextlib

    from pipeline.store.protocol import StoreError
    from pipeline.store.sqlite import SQLiteStore

    @contextlib.contextmanager
    def refused(self):
        raise StoreError("attempt to write a readonly database")
        yield

    now = time.time() + LATER
    expected = rows_of(batch, now)
    forget_kept(batch)
    monkeypatch.setattr(SQLiteStore, "transaction", refused)
    assert rows_of(batch, now) == expected and kept_slugs(batch) == set()


def test_a_kept_next_try_beyond_its_own_wait_is_made_afresh():
    """The clock went back since the row was kept: its next try is further ahead than the
    article's own wait (phases.schedule pulls such a time in), so the kept row is not shown."""
    from pipeline.batch.status_cache import FOREVER, within_wait
    from pipeline.config import Qwen
    from pipeline.store.protocol import StatusRow

    qwen = Qwen(poll_interval=30)
    kept = StatusRow("a", 0, "c", "f", "l", 1000.0, "backoff", attempts=1)
    assert within_wait(kept, 1000.0 - 30, qwen), "as far ahead as one attempt's wait: kept"
    assert not within_wait(kept, 1000.0 - 31, qwen), "further: the clock went back"
    assert within_wait(kept._replace(until=FOREVER), 0.0, qwen)
    assert within_wait(kept._replace(attempts=0), 1000.0 - 3600, qwen)
    assert not within_wait(kept._replace(attempts=0), 1000.0 - 3601, qwen)


NEW_SECRET = "Zq7-registered-since-0123456789"
SHOWN_SLUGS = {  # what the extra article's slug puts in its row
    "nothing to mask": "tea-for-two",
    "a password hint": "reset-your-password",  # the word alone: looked at again, nothing masked
    "a secret registered since it was kept": f"tea-{NEW_SECRET.lower()}",
}


@pytest.mark.parametrize("kind", SHOWN_SLUGS)
def test_the_kept_rows_are_shown_masked_as_the_whole_document_would_be(batch, kind):
    """`status --json` for a script (BatchStatus.script_json) looks for a password again only
    outside kept rows that had no hint of one; every registered secret is looked for
    everywhere, one registered since the rows were kept included. The oracle: the document
    masked as a whole (redact.masked_json)."""
    slug = SHOWN_SLUGS[kind]
    add_prompt(batch, slug, "Write about it.")
    now = time.time() + LATER
    for look in ("made and kept", "shown from what was kept"):
        with open_workspace(batch) as ws:
            status = collect(ws, now, as_text=True)
            if look == "shown from what was kept" and kind.startswith("a secret"):
                redact.register(NEW_SECRET.lower())
            shown = status.script_json()
        assert shown == masked_json(status.to_json(), ensure_ascii=False), look
    assert status.rows_text is not None and not status.rows  # the second look: the kept text
    assert status.json_text().endswith(f"[{status.rows_text}]}}")  # the part not looked at again
    assert status.rows_unhinted is (kind != "a password hint")
    if kind.startswith("a secret"):
        assert NEW_SECRET.lower() not in shown and '"slug": "tea-' in shown  # its row shown, masked
