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
from pipeline.store.postgres import PostgresStep
from pipeline.store.protocol import (
    ArticleRecord,
    ChatDeletion,
    Event,
    Finished,
    Intent,
    PromptCheck,
    QuotaBlock,
)
from pipeline.store.sqlite import SQLiteStep

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
    "record_intent",
    "name_chat",
    "record_sent",
    "block_quota",
    "put_finished",
    "serve",
    "put_chat_deletion",
    "claim_meta",
}
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
        for cls in (sql.SQLStep, SQLiteStep, PostgresStep)
        for name, _ in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }
    assert methods == WRITES | NO_TEXT


def write_the_leak_everywhere(store) -> None:
    redact.register(KEY)
    with store.step() as step:
        step.append(
            Event("tea", "router_failed", 1.0, account=LEAK, fields={"error": LEAK, "errors": [LEAK]})
        )
        step.append(Event("tea", "sent", 2.0, fields={"chat_url": LEAK, "engine": LEAK}))
        step.put_article(
            ArticleRecord(
                "tea",
                engine=LEAK,
                last_error=LEAK,
                last_error_code=LEAK,
                progress=LEAK,
                sent_sha256=LEAK,
                errors=({"time": 1.0, "engine": "router", "code": "auth", "error": LEAK},),
            )
        )
        step.put_prompt_checks([PromptCheck("tea", LEAK, LEAK)])
        step.record_intent("tea", Intent(1, 3.0, LEAK, account=LEAK, owner=LEAK, chat_id=""))
        step.name_chat("tea", 1, LEAK)
        step.record_sent("tea", 1, LEAK, 4.0)
        step.block_quota(QuotaBlock(LEAK, 9e9, LEAK, 5.0))
        step.put_finished(Finished("tea", LEAK, LEAK, LEAK, 6.0, "the article"))
        step.serve(LEAK, [LEAK], 7.0)
        step.put_chat_deletion(ChatDeletion(LEAK, "tea", LEAK, 8.0, last_error=LEAK))
        step.claim_meta("key", LEAK)


def everything_read(store) -> str:
    found = [
        list(store.events()),
        store.articles(),
        store.sends(),
        store.summaries(),
        store.prompt_checks(),
        store.quota_blocks(0.0),
        store.finished(["tea"]),
        store.served(),
        store.chat_deletions(),
        store.meta("key"),
    ]
    return repr(found)


def test_no_write_of_a_step_keeps_the_key_in_any_form(store, place):
    write_the_leak_everywhere(store)
    read = everything_read(store)
    assert MASK in read and "the article" in read
    assert not leaked(read), read
    if place.kind == "sqlite":  # the bytes on disk too: the database, its write-ahead log
        kept = [path for path in Path(place.where).iterdir() if path.is_file()]
        assert any(path.name.endswith("-wal") for path in kept), kept
        for path in kept:
            assert not leaked(path.read_bytes().decode("latin-1")), path


def test_the_postgres_step_binds_its_values_through_the_same_mask(monkeypatch):
    """Unit level, no server: every statement of a PostgresStep binds what `kept` returns."""
    bound: list[tuple] = []

    class Connection:
        def execute(self, statement, params=()):
            bound.append(params)
            return self

        def fetchone(self):
            return (1,)

    monkeypatch.setattr(sql, "kept", lambda params: ("KEPT", *params))
    step = PostgresStep(Connection(), "batch")
    step.append(Event("tea", "router_failed", 1.0, fields={"error": LEAK}))
    step.put_article(ArticleRecord("tea", last_error=LEAK))
    assert bound and all(params[0] == "KEPT" for params in bound)


def test_an_article_body_is_kept_verbatim(store):
    """The finished table's document is the article (refused before it is written when it holds a
    key, contract/checks.py): the store keeps it exactly, as the host's SLUG.md is written."""
    redact.register(KEY)
    body = f"An article that quotes {KEY[:12]} as it is."
    with store.step() as step:
        step.put_finished(Finished("tea", "router", document=body))
    assert store.finished(["tea"])["tea"].document == body
