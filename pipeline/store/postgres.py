"""The Store on PostgreSQL (psycopg 3): one batch shared by several hosts.

The same guarantees as the SQLite store, from a server instead of a file lock:
- every step is one transaction that first takes the batch's advisory lock, the way SQLite's
  `BEGIN IMMEDIATE` takes the write lock: the steps of all hosts happen one after another, so
  a read-then-write inside a step is never lost to another host's step;
- a lock held past the busy timeout (`lock_timeout`) is StoreBusy, and a server that cannot be
  reached (or a connection killed mid-step, which the server rolls back) is StoreUnreachable:
  nothing of the step was written, the caller sends nothing and tries later; the next call
  reconnects;
- the unique constraint on (batch, slug, turn) makes a second send impossible to record.

The password comes from libpq's usual sources (PGPASSWORD, ~/.pgpass), never from config.toml.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from ..redact import Verbatim, first_line
from . import pg_schema
from .protocol import Finished, StoreBusy, StoreError, StoreUnreachable
from .sql import FINISHED_COLUMNS, Dialect, SQLStore, SQLTransaction

BUSY_TIMEOUT = 5.0
# A step is milliseconds of work; a transaction left idle longer is a host frozen inside it
# (SIGSTOP, a frozen VM), holding the batch's lock: the server ends that session (rolling the
# step back) before the shortest lease (10 s) runs out, so the other hosts go on.
STEP_IDLE_TIMEOUT = 8.0
CONNECT_TIMEOUT = 10


def shown_url(url: str) -> str:
    """The URL as messages show it: never a password written into it (`user:PW@` or a
    `?password=` parameter; config refuses both, this is for any that comes anyway)."""
    from ..redact import mask_passwords

    return mask_passwords(url)


def _dialect(batch: str) -> Dialect:
    """psycopg's marks; every row keyed by its batch; ON CONFLICT for a row that replaces another."""
    return Dialect(mark="%s", key=("batch",), values=(Verbatim(batch),), or_replace=False)  # sql.named


class PostgresStore(SQLStore):
    """One batch's store in a PostgreSQL database. Safe to share between a process's threads."""

    def __init__(
        self,
        url: str,
        *,
        batch: str = "default",
        busy_timeout: float = BUSY_TIMEOUT,
        migrate: bool = False,
        check: bool = True,
        host: str = "",
    ):
        self.url, self.batch, self.busy_timeout = url, batch, busy_timeout
        self.host = host  # this host's name: every event it appends says it
        self.where = f"store {shown_url(url)}"
        self._dialect = _dialect(batch)
        self._lock = threading.RLock()
        self._conn: Any = None
        with self._lock:
            conn = self._connection()
            try:
                if migrate:
                    pg_schema.migrate(conn, self.where)
                if check:
                    pg_schema.check(conn, self.where)
            except BaseException as err:
                failure = self._error(err) if _is_psycopg(err) else err
                self._drop()
                raise failure from None

    @classmethod
    def open(cls, url: str, **options: Any) -> PostgresStore:
        return cls(url, **options)

    @classmethod
    def init(cls, url: str, *, batch: str = "default") -> tuple[int, int]:
        """`qwenpipe store init`: create or migrate the schema; (version before, version after)."""
        store = cls(url, batch=batch, migrate=False, check=False)
        try:
            with store._connected() as conn:
                return pg_schema.migrate(conn, store.where)
        finally:
            store.close()

    # -- the connection --------------------------------------------------------------------

    def _connection(self) -> Any:
        import psycopg

        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self._drop()
        try:
            self._conn = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                application_name="qwenpipe",
                options=f"-c lock_timeout={int(self.busy_timeout * 1000)} "
                f"-c idle_in_transaction_session_timeout={int(STEP_IDLE_TIMEOUT * 1000)}",
            )
        except psycopg.Error as err:
            raise self._error(err) from None
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def _error(self, err: BaseException) -> StoreError:
        import psycopg
        from psycopg import errors

        text = first_line(err)
        if isinstance(err, StoreError):
            return err
        if isinstance(err, errors.LockNotAvailable):
            return StoreBusy(f"{self.where}: another host holds the batch ({text}); try again in a moment")
        if isinstance(err, psycopg.OperationalError) or self._conn is None or self._conn.broken:
            self._drop()
            return StoreUnreachable(
                f"store unreachable: {shown_url(self.url)} ({text}); nothing was sent; "
                "the next run reconnects"
            )
        return StoreError(f"{self.where}: {text}")

    @contextlib.contextmanager
    def _connected(self) -> Iterator[Any]:
        with self._lock:
            conn = self._connection()
            try:
                yield conn
            except BaseException as err:
                if _is_psycopg(err):
                    raise self._error(err) from None
                raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PostgresTransaction]:
        with self._connected() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.batch,))
            yield PostgresTransaction(conn, self.batch, self.host)

    # -- reading what only PostgreSQL says so ------------------------------------------------

    def finished(self, slugs: list[str] | None = None) -> dict[str, Finished]:
        if slugs is None:
            rows = self._rows(f"SELECT {FINISHED_COLUMNS} FROM finished WHERE batch = %s")
        else:
            rows = self._rows(
                f"SELECT {FINISHED_COLUMNS}, document FROM finished WHERE batch = %s AND slug = ANY(%s)",
                (list(slugs),),
            )
        return {row[0]: Finished(*row) for row in rows}

    def close(self) -> None:
        with self._lock:
            self._drop()


class PostgresTransaction(SQLTransaction):
    """The writes of one `PostgresStore.transaction()` transaction (the batch's advisory lock held)."""

    def __init__(self, conn: Any, batch: str, host: str = ""):
        super().__init__(conn, _dialect(batch), host)

    def _append_row(self, sql: str, params: tuple) -> int:
        return int(self._run(f"{sql} RETURNING seq", params).fetchone()[0])

    def _insert_unique(self, sql: str, params: tuple) -> bool:
        from psycopg import errors

        try:
            with self._conn.transaction():  # a savepoint: the refused insert leaves the step usable
                self._run(sql, params)
        except errors.UniqueViolation:
            return False
        return True


def _is_psycopg(err: BaseException) -> bool:
    import psycopg

    return isinstance(err, psycopg.Error)
