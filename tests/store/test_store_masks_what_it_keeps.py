"""The store keeps no secret: every value a step writes is bound through the one mask on what is
kept (pipeline/store/sql.py `kept`, redact.mask_kept), in SQLite and PostgreSQL alike, whichever
write method carries it. Run on every store (the `store` fixture: SQLite, and a database on the
throwaway PostgreSQL server of tests/pg_server.py).
"""

from __future__ import annotations

import base64
import inspect
from pathlib import Path
from urllib.parse import quote

from pipeline import redact
from pipeline.redact import MASK, MIN_RUN
from pipeline.store import sql
from pipeline.store.postgres import PostgresTransaction
from pipeline.store.protocol import (
    ArticleRecord,
    ChatDeletion,
    Event,
    Finished,
    Intent,
    PromptCheck,
    QuotaBlock,
    StatusRow,
)
from pipeline.store.sqlite import SQLiteTransaction

KEY = "Wq3+Rt/Yuiop=Asd+Fghjk/Lzxcv=Bnm45+6789/Qwert=Yuiop+Mnbv/Cxz12"
ENCODED = quote(KEY, safe="")
BASE64 = base64.b64encode(KEY.encode()).decode()
# What a router or a hook may print: the key whole, URL-encoded, base64, in 9-character pieces.
LEAK = "\n".join(
    [f"401: bad key {KEY}", ENCODED, BASE64, *(KEY[at : at + 9] for at in range(0, len(KEY), 9))]
)

# The writes of a step, each given the leak below; the rest write no text of their own.
WRITES = {
    "append",
    "put_article",
    "put_prompt_checks",
    "put_status_rows",
    "record_intent",
    "name_chat",
    "record_sent",
    "block_quota",
    "put_finished",
    "serve",
    "put_chat_deletion",
    "claim_meta",
    "put_meta",
}
CHAT = "https://chat.qwen.ai/c/0a1b2c3d-0000-4000-8000-000000000000"
NO_TEXT = {"article", "withdraw_intent", "forget_sends", "check_lease", "changes_one"}


def pieces(key: str = KEY) -> set[str]:
    """Every MIN_RUN characters in a row of the key as it is, URL-encoded and base64."""
    forms = [key, quote(key, safe=""), base64.b64encode(key.encode()).decode()]
    return {form[at : at + MIN_RUN] for form in forms for at in range(len(form) - MIN_RUN + 1)}


def leaked(text: str) -> list[str]:
    return sorted(piece for piece in pieces() if piece in text)


def test_the_test_names_every_write_a_step_has():
    """A new write method of the steps must be given the leak below (or said to write no text)."""
    methods = {
        name
        for cls in (sql.SQLTransaction, SQLiteTransaction, PostgresTransaction)
        for name, _ in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }
    assert methods == WRITES | NO_TEXT


def write_everywhere(store, text: str, slug: str = "tea", name: str = "acct") -> None:
    """Every write of a step: `text` wherever a value is text (an error, a reason, a field), `slug`
    and `name` wherever it is a name a row is found by (an account, a host, an owner); the chat's
    URL and id are the site's."""
    with store.transaction() as tx:
        tx.append(Event(slug, "router_failed", 1.0, account=name, fields={"error": text, "errors": [text]}))
        tx.append(Event(slug, "sent", 2.0, fields={"chat_url": CHAT, "engine": text}))
        tx.put_article(
            ArticleRecord(
                slug,
                engine=text,
                last_error=text,
                last_error_code=text,
                progress=text,
                sent_sha256=text,
                errors=({"time": 1.0, "engine": "router", "code": "auth", "error": text},),
            )
        )
        tx.put_prompt_checks([PromptCheck(slug, text, text)])
        # A kept status row: its shown text masked, its keys and its account (a name) as they are.
        tx.put_status_rows(
            [
                StatusRow(
                    slug, 0, "ctx", "3|", "-", 9.0, "done", text, last_error=text, chat_url=CHAT, account=name
                )
            ]
        )
        tx.record_intent(slug, Intent(1, 3.0, text, account=name, owner=name, chat_id=""))
        tx.name_chat(slug, 1, CHAT.rpartition("/")[2])
        tx.record_sent(slug, 1, CHAT, 4.0)
        tx.block_quota(QuotaBlock(name, 9e9, text, 5.0))
        tx.put_finished(Finished(slug, name, name, name, 6.0, "the article"))
        tx.serve(name, [name], 7.0)
        tx.put_chat_deletion(ChatDeletion(CHAT, slug, name, 8.0, last_error=text))
        tx.claim_meta(name, text)
        tx.put_meta(f"{name}-cache", text)


def everything_read(store, slug: str = "tea", name: str = "acct") -> str:
    found = [
        list(store.events()),
        store.articles(),
        store.sends(),
        store.summaries(),
        store.prompt_checks(),
        store.status_rows(),
        store.quota_blocks(0.0),
        store.finished([slug]),
        store.served(),
        store.chat_deletions(),
        store.meta(name),
        store.meta(f"{name}-cache"),
    ]
    return repr(found)


def test_no_write_of_a_step_keeps_the_key_in_any_form(store, place):
    redact.register(KEY)
    write_everywhere(store, LEAK)
    read = everything_read(store)
    assert MASK in read and "the article" in read
    assert not leaked(read), read
    if place.kind == "sqlite":  # the bytes on disk too: the database, its write-ahead log
        kept = [path for path in Path(place.where).iterdir() if path.is_file()]
        assert any(path.name.endswith("-wal") for path in kept), kept
        for path in kept:
            assert not leaked(path.read_bytes().decode("latin-1")), path


def test_a_name_holding_a_run_of_a_weak_secret_is_kept_so_its_row_is_found(store):
    """A proxy password `password1` must not turn the slug `password-tips` or the account
    `password1-home` into [REDACTED]: every name a row is found by is bound as it is."""
    redact.register("password1")
    slug, name = "password-tips", "password1-home"
    write_everywhere(store, "a text", slug, name)
    assert store.article(slug).last_error == "a text"
    assert [send.account for send in store.sends(slug)] == [name]
    assert store.meta(name) == "a text" and name in store.served()
    assert store.quota_block(name, 0.0) is not None and store.finished([slug])[slug].host == name
    assert store.lease(slug, 0.0) is None and store.claim_lease(slug, name, 60, 0.0)
    assert store.lease(slug, 0.0).owner == name
    read = everything_read(store, slug, name)
    assert MASK not in read, read


def test_the_postgres_step_binds_its_values_through_the_same_mask(monkeypatch):
    """Unit level, no server: every statement of a PostgresTransaction binds what `kept` returns."""
    bound: list[tuple] = []

    class Connection:
        def execute(self, statement, params=()):
            bound.append(params)
            return self

        def fetchone(self):
            return (1,)

    monkeypatch.setattr(sql, "kept", lambda params: ("KEPT", *params))
    tx = PostgresTransaction(Connection(), "batch")
    tx.append(Event("tea", "router_failed", 1.0, fields={"error": LEAK}))
    tx.put_article(ArticleRecord("tea", last_error=LEAK))
    assert bound and all(params[0] == "KEPT" for params in bound)


def test_an_article_body_is_kept_verbatim(store):
    """The finished table's document is the article (refused before it is written when it holds a
    key, contract/checks.py): the store keeps it exactly, as the host's SLUG.md is written."""
    redact.register(KEY)
    body = f"An article that quotes {KEY[:12]} as it is."
    with store.transaction() as tx:
        tx.put_finished(Finished("tea", "router", document=body))
    assert store.finished(["tea"])["tea"].document == body
