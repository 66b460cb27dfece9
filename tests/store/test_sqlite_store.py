"""What only the SQLite store does: its file, its journal mode, its schema version, its busy timeout."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from pipeline.store import schema
from pipeline.store.dbfile import DB_NAME
from pipeline.store.protocol import Event, StoreBusy, StoreError, Summary
from pipeline.store.sqlite import SQLiteStore


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_database_is_private_in_a_private_folder(tmp_path):
    folder = tmp_path / "articles" / ".qwenpipe"
    with SQLiteStore.open(folder) as store, store.transaction() as tx:
        tx.append(Event("a", "x", 1.0))
        assert mode(folder / f"{DB_NAME}-wal") & 0o077 == 0  # SQLite's own files follow the database
    assert mode(folder) == 0o700 and mode(folder / DB_NAME) == 0o600


def test_an_existing_open_folder_and_database_are_made_private(tmp_path):
    folder = tmp_path / ".qwenpipe"
    folder.mkdir(mode=0o755)
    (folder / DB_NAME).touch(mode=0o644)
    os.chmod(folder / DB_NAME, 0o644)
    SQLiteStore.open(folder).close()
    assert mode(folder) == 0o700 and mode(folder / DB_NAME) == 0o600


def test_a_symlinked_database_is_refused_not_followed(tmp_path):
    folder, elsewhere = tmp_path / ".qwenpipe", tmp_path / "elsewhere.db"
    folder.mkdir()
    (folder / DB_NAME).symlink_to(elsewhere)
    with pytest.raises(StoreError, match="symlink"):
        SQLiteStore.open(folder)
    assert not elsewhere.exists()


def test_a_symlinked_folder_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / ".qwenpipe").symlink_to(real)
    with pytest.raises(StoreError, match="not a plain folder"):
        SQLiteStore.open(tmp_path / ".qwenpipe")
    assert list(real.iterdir()) == []


def test_the_store_runs_in_wal_mode_at_the_current_schema_version(tmp_path):
    with SQLiteStore.open(tmp_path / ".qwenpipe"):
        pass
    conn = sqlite3.connect(tmp_path / ".qwenpipe" / DB_NAME)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION >= 1
    conn.close()


def test_migrating_twice_changes_nothing(tmp_path):
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    assert schema.migrate(conn, "x.db") == schema.SCHEMA_VERSION
    tables = conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    assert schema.migrate(conn, "x.db") == schema.SCHEMA_VERSION
    assert conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall() == tables
    conn.close()


def test_a_database_from_a_newer_qwenpipe_is_refused_with_the_fix(tmp_path):
    folder = tmp_path / ".qwenpipe"
    SQLiteStore.open(folder).close()
    conn = sqlite3.connect(folder / DB_NAME)
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this qwenpipe knows .*upgrade qwenpipe"):
        SQLiteStore.open(folder)


def test_a_file_that_is_not_a_database_gets_a_clear_error(tmp_path):
    folder = tmp_path / ".qwenpipe"
    folder.mkdir(mode=0o700)
    (folder / DB_NAME).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a qwenpipe store .*move it away"):
        SQLiteStore.open(folder)


def test_a_store_held_by_another_writer_is_busy_after_the_timeout_not_a_hang(tmp_path):
    folder = tmp_path / ".qwenpipe"
    holder = SQLiteStore.open(folder)
    waiter = SQLiteStore.open(folder, busy_timeout=0.2)
    try:
        with holder.transaction() as tx:
            tx.append(Event("a", "x", 1.0))
            with (
                pytest.raises(StoreBusy, match="another process holds the store"),
                waiter.transaction() as other,
            ):
                other.append(Event("b", "x", 2.0))
            assert [e.slug for e in waiter.events()] == []  # WAL: a reader never waits for the writer
        assert [e.slug for e in waiter.events()] == ["a"]
    finally:
        holder.close()
        waiter.close()


def test_a_database_error_inside_a_step_is_a_store_error_and_undoes_the_step(tmp_path):
    with SQLiteStore.open(tmp_path / ".qwenpipe") as store:
        with pytest.raises(StoreError, match="qwenpipe.db: .*no such table"), store.transaction() as tx:
            tx.append(Event("a", "x", 1.0))
            tx._conn.execute("INSERT INTO nowhere VALUES (1)")
        assert list(store.events()) == []


def test_a_migration_script_splits_into_whole_statements_even_with_a_trigger():
    script = """
    CREATE TABLE a (x INTEGER);
    CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO a VALUES (new.x + 1); SELECT 1; END;
    CREATE INDEX i ON a (x)
    """
    found = schema.statements(script)
    assert len(found) == 3 and found[1].startswith("CREATE TRIGGER") and found[1].endswith("END;")


def test_a_store_folder_that_cannot_be_made_gets_a_clear_error(tmp_path):
    (tmp_path / "articles").write_text("a file where the folder should be")
    with pytest.raises(StoreError, match="cannot make the store's folder"):
        SQLiteStore.open(tmp_path / "articles" / ".qwenpipe")


def test_a_first_version_store_gains_the_summaries_of_its_events(tmp_path):
    """Migration 1 -> 2 builds each article's summary from the events already there."""
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    conn.execute("BEGIN")
    for statement in schema.statements(schema.MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("COMMIT")
    rows = [
        (1.0, "a", "sending", '{"engine": "qwen"}'),
        (2.0, "a", "sent", '{"engine": "qwen", "chat_url": "u-a"}'),
        (3.0, "b", "done", '{"engine": "router", "turns": 2}'),
        (4.0, "a", "poll", "{}"),
        (5.0, "c", "done", '{"engine": "qwen", "turns": "two"}'),
    ]
    conn.executemany("INSERT INTO events (ts, slug, event, fields) VALUES (?, ?, ?, ?)", rows)
    conn.close()
    with SQLiteStore(tmp_path / "x.db") as store:
        assert store.summaries() == {
            "a": Summary("a", last_event="poll", sent_ts=2.0, chat_url="u-a", engine="qwen"),
            "b": Summary("b", last_event="done", engine="router", turns=2),
            "c": Summary("c", last_event="done", engine="qwen", turns=0),
        }


class Refusing:
    """The store's connection, but the database refuses one statement once (as a full disk, an
    I/O error or a lock does): `rolls_back` = SQLite ended the transaction itself, as it does on
    some of those errors (the store's own ROLLBACK then fails: "no transaction is active")."""

    def __init__(self, conn: sqlite3.Connection, statement: str, error: str, *, rolls_back: bool = False):
        self._conn, self._statement, self._error, self._rolls_back = conn, statement, error, rolls_back

    def execute(self, sql, *args):
        if sql == self._statement:
            self._statement = None
            if self._rolls_back:
                self._conn.execute("ROLLBACK")
            raise sqlite3.OperationalError(self._error)
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


@pytest.mark.parametrize("rolls_back", [False, True], ids=["left open", "rolled back by SQLite"])
def test_a_commit_the_database_refuses_is_a_store_error_and_writes_nothing(tmp_path, rolls_back):
    with SQLiteStore.open(tmp_path / ".qwenpipe") as store:
        real = store._conn
        store._conn = Refusing(real, "COMMIT", "disk I/O error", rolls_back=rolls_back)
        with pytest.raises(StoreError, match="qwenpipe.db: disk I/O error"), store.transaction() as tx:
            tx.append(Event("a", "x", 1.0))
        store._conn = real
        assert list(store.events()) == [] and not real.in_transaction
        with store.transaction() as tx:  # and the next step goes through
            tx.append(Event("b", "x", 2.0))
        assert [e.slug for e in store.events()] == ["b"]


def test_a_step_the_database_will_not_begin_runs_nothing_of_its_block(tmp_path):
    ran = []
    with SQLiteStore.open(tmp_path / ".qwenpipe") as store:
        real = store._conn
        store._conn = Refusing(real, "BEGIN IMMEDIATE", "database is locked")
        with pytest.raises(StoreBusy, match="another process holds the store"), store.transaction() as tx:
            ran.append(True)  # outside a transaction these writes would not be one step
            tx.append(Event("a", "x", 1.0))
        store._conn = real
        assert ran == [] and list(store.events()) == []
