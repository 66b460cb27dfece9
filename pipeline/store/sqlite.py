"""The Store on stdlib sqlite3, at `articles/.qwenpipe/qwenpipe.db`: the one-machine store.

WAL lets readers (status, show) run beside a writer without waiting; every write is one short
`BEGIN IMMEDIATE` transaction (the write lock taken up front, so two writers never deadlock
upgrading a read lock), bounded by a busy timeout: a store held too long by another process
is StoreBusy (try later), never a hang. `synchronous = FULL`: a committed step survives a
power cut as well as a kill.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from . import dbfile, schema
from .protocol import Finished, StoreBusy, StoreError
from .sql import FINISHED_COLUMNS, Dialect, SQLStore, SQLTransaction

BUSY_TIMEOUT = 5.0  # seconds: far longer than any step, far shorter than a cron period
DIALECT = Dialect()  # a file is one batch: no batch column, SQLite's own conflict clauses
IN_MEMORY = Path(":memory:")  # sqlite3's name for a database with no file: it ends with its store


class SQLiteStore(SQLStore):
    """One batch's store in one SQLite file (or none: `SQLiteStore(IN_MEMORY)`, a store that
    lives in its connection, for a test of what sits above the store). Safe to share between the
    threads of a process."""

    _dialect = DIALECT

    def __init__(self, path: Path, *, busy_timeout: float = BUSY_TIMEOUT):
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.DatabaseError as err:
            raise _store_error(err, self.path) from None
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            schema.migrate(self._conn, self.path)
        except BaseException as err:
            self._conn.close()
            if isinstance(err, sqlite3.DatabaseError):
                raise _store_error(err, self.path) from None
            raise

    @classmethod
    def open(cls, state_dir: Path, *, busy_timeout: float = BUSY_TIMEOUT) -> SQLiteStore:
        """The store in `state_dir` (articles/.qwenpipe), made private and migrated on first use."""
        return cls(dbfile.prepare(state_dir), busy_timeout=busy_timeout)

    # -- the connection --------------------------------------------------------------------

    @contextlib.contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.DatabaseError as err:
                raise _store_error(err, self.path) from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[SQLiteTransaction]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as err:
                raise _store_error(err, self.path) from None
            try:
                yield SQLiteTransaction(self._conn)
            except BaseException as err:
                with contextlib.suppress(sqlite3.DatabaseError):  # keep the error that mattered
                    self._conn.execute("ROLLBACK")
                if isinstance(err, sqlite3.DatabaseError):
                    raise _store_error(err, self.path) from None
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError as err:
                with contextlib.suppress(sqlite3.DatabaseError):
                    self._conn.execute("ROLLBACK")
                raise _store_error(err, self.path) from None

    # -- reading what only SQLite says so ----------------------------------------------------

    def finished(self, slugs: list[str] | None = None) -> dict[str, Finished]:
        if slugs is None:
            return {row[0]: Finished(*row) for row in self._rows(f"SELECT {FINISHED_COLUMNS} FROM finished")}
        found: dict[str, Finished] = {}
        for start in range(0, len(slugs), 500):  # SQLite's limit on bound values, well under
            chunk = slugs[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = self._rows(
                f"SELECT {FINISHED_COLUMNS}, document FROM finished WHERE slug IN ({marks})", tuple(chunk)
            )
            found.update({row[0]: Finished(*row) for row in rows})
        return found

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class SQLiteTransaction(SQLTransaction):
    """The writes of one `SQLiteStore.transaction()` transaction."""

    def __init__(self, conn: sqlite3.Connection):
        super().__init__(conn, DIALECT)

    def _append_row(self, sql: str, params: tuple) -> int:
        return int(self._run(sql, params).lastrowid or 0)

    def _insert_unique(self, sql: str, params: tuple) -> bool:
        try:
            self._run(sql, params)
        except sqlite3.IntegrityError:
            return False
        return True


def _store_error(err: sqlite3.DatabaseError, path: Path) -> StoreError:
    text = str(err)
    if "locked" in text or "busy" in text:
        return StoreBusy(f"{path}: another process holds the store ({text}); try again in a moment")
    if isinstance(err, sqlite3.DatabaseError) and "not a database" in text:
        return StoreError(f"{path}: not a qwenpipe store ({text}); move it away and run again")
    return StoreError(f"{path}: {text}")
