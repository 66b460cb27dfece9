"""The store's part in keeping status rows (batch/status_cache.py), on both stores: every write of
an article's articles, summaries or sends rows raises its status_changes counter, whoever writes
(the store's own triggers); kept rows are read back as written, replaced, forgotten; and a store
of the previous schema version is upgraded to one that has them."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from pipeline.contract.journal import NO_ARTICLE
from pipeline.store import pg_schema, schema
from pipeline.store.postgres import PostgresStore
from pipeline.store.protocol import ArticleRecord, Event, Intent, StatusRow
from pipeline.store.sqlite import SQLiteStore

BATCH = "main"
# Each write a step can make of the rows a status row is made from: (what, the write).
WRITES = [
    ("put_article", lambda tx: tx.put_article(ArticleRecord("a", attempts=2))),
    ("append (its summary)", lambda tx: tx.append(Event("a", "poll", 5.0))),
    ("record_intent", lambda tx: tx.record_intent("a", Intent(2, 5.0, "sha"))),
    (
        "record_sent",
        lambda tx: tx.record_sent("a", 1, "https://chat.qwen.ai/c/1234567890abcdef1234", 6.0),
    ),
    ("name_chat", lambda tx: tx.name_chat("a", 1, "1234567890abcdef1234")),
    ("withdraw_intent", lambda tx: tx.withdraw_intent("a", 1)),
    ("forget_sends", lambda tx: tx.forget_sends("a")),
]


def row(slug: str, **fields) -> StatusRow:
    return StatusRow(slug, 0, "ctx", "3", "-", float("inf"), "done", **fields)


@pytest.mark.parametrize("what, write", WRITES, ids=[w[0] for w in WRITES])
def test_every_write_of_an_articles_rows_raises_its_counter(store, what, write):
    with store.transaction() as tx:  # something to update, withdraw or forget
        tx.record_intent("a", Intent(1, 1.0, "sha"))
        tx.put_article(ArticleRecord("a"))
    before = store.status_changes()
    generation = store.status_generation(NO_ARTICLE)
    with store.transaction() as tx:
        write(tx)
    after = store.status_changes()
    assert after["a"] > before["a"], what
    assert "b" not in after, "another article's counter is not raised"
    assert store.status_generation(NO_ARTICLE) > generation, f"{what}: the store's generation rises too"


def test_the_generation_leaves_out_the_batchs_own_steps_and_kept_values(store):
    """What no status row shows raises no generation: the batch's own steps (a cycle's start),
    kept rows, a kept document."""
    with store.transaction() as tx:
        tx.append(Event("a", "poll", 5.0))
    generation = store.status_generation(NO_ARTICLE)
    with store.transaction() as tx:
        tx.append(Event(NO_ARTICLE, "cycle_start", 6.0))
        tx.put_status_rows([row("a")])
        tx.put_meta("status_document", "kept")
    assert store.status_generation(NO_ARTICLE) == generation
    assert store.meta("status_document") == "kept"


def test_kept_rows_are_read_as_written_replaced_and_forgotten(store):
    kept = [row("a", engine="qwen", sent_at=3.5, account="main"), row("b", last_error="WAF page")]
    with store.transaction() as tx:
        tx.put_status_rows(kept)
    assert store.status_rows() == {"a": kept[0], "b": kept[1]}
    with store.transaction() as tx:
        tx.put_status_rows([row("a", engine="router")], ["b"])
    assert store.status_rows() == {"a": row("a", engine="router")}
    assert store.status_changes(["a"]) == {}, "keeping rows raises no counter"


def test_reads_of_some_slugs_give_theirs_alone(store):
    with store.transaction() as tx:
        for n in range(1200):  # more slugs than one read binds
            tx.put_article(ArticleRecord(f"s{n}", attempts=n))
            tx.append(Event(f"s{n}", "poll", float(n)))
            tx.record_intent(f"s{n}", Intent(1, 1.0, "sha"))
    wanted = [f"s{n}" for n in range(0, 1200, 2)]
    assert set(store.articles(wanted)) == set(wanted)
    assert store.articles(wanted)["s600"].attempts == 600
    assert set(store.summaries(wanted)) == set(store.first_sends(wanted)) == set(wanted)
    assert set(store.status_changes(wanted)) == set(wanted)
    assert store.articles([]) == {} and store.summaries([]) == {}


def test_a_sqlite_store_of_the_previous_version_is_upgraded(tmp_path):
    """A store of schema 5 (the version before status rows) opens at this version, its rows
    kept; its next writes raise their counters."""
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    conn.execute("BEGIN")
    for script in schema.MIGRATIONS[: schema.SCHEMA_VERSION - 1]:
        for statement in schema.statements(script):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION - 1}")
    conn.execute("COMMIT")
    conn.execute("INSERT INTO articles (slug, attempts) VALUES ('a', 3)")
    conn.close()
    with SQLiteStore(tmp_path / "x.db") as store:
        assert store.articles()["a"].attempts == 3
        assert store.status_rows() == {} and store.status_changes() == {}
        with store.transaction() as tx:
            tx.put_article(ArticleRecord("a", attempts=4))
        assert store.status_changes()["a"] >= 1
    assert sqlite3.connect(tmp_path / "x.db").execute("PRAGMA user_version").fetchone()[0] == 6


def test_a_postgres_store_of_the_previous_version_is_upgraded(postgres_server):
    url = postgres_server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("CREATE TABLE qwenpipe_schema (version INTEGER NOT NULL)")
            for script in pg_schema.MIGRATIONS[: pg_schema.SCHEMA_VERSION - 1]:
                conn.execute(script)
            conn.execute("INSERT INTO qwenpipe_schema VALUES (%s)", (pg_schema.SCHEMA_VERSION - 1,))
        conn.execute("INSERT INTO articles (batch, slug, attempts) VALUES (%s, 'a', 3)", (BATCH,))
        assert pg_schema.migrate(conn, "test") == (pg_schema.SCHEMA_VERSION - 1, pg_schema.SCHEMA_VERSION)
    with PostgresStore(url, batch=BATCH) as store:
        assert store.articles()["a"].attempts == 3 and store.status_changes() == {}
        with store.transaction() as tx:
            tx.put_article(ArticleRecord("a", attempts=4))
        assert store.status_changes()["a"] >= 1
