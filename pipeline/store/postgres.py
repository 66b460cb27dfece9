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
from dataclasses import astuple
from typing import Any

from . import pg_schema
from .protocol import (
    ENGINE_EVENTS,
    SEND_EVENT,
    SENT_EVENTS,
    UNSENT_EVENT,
    AlreadySent,
    ArticleRecord,
    Event,
    Finished,
    Intent,
    Lease,
    LeaseLost,
    PromptCheck,
    QuotaBlock,
    Send,
    SendCounts,
    Served,
    StoreBusy,
    StoreError,
    StoreUnreachable,
    Summary,
    dumps,
)
from .sqlite import (
    ARTICLE_COLUMNS,
    EVENT_COLUMNS,
    FINISHED_COLUMNS,
    SEND_COLUMNS,
    _article,
    _event,
    _open_intent,
)

BUSY_TIMEOUT = 5.0
# A step is milliseconds of work; a transaction left idle longer is a host frozen inside it
# (SIGSTOP, a frozen VM), holding the batch's lock: the server ends that session (rolling the
# step back) before the shortest lease (10 s) runs out, so the other hosts go on.
STEP_IDLE_TIMEOUT = 8.0
CONNECT_TIMEOUT = 10


def shown_url(url: str) -> str:
    """The URL as messages show it: never a password written into it."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ":***@"
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}{port}"))


class PostgresStore:
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
            with store._lock:
                conn = store._connection()
                try:
                    return pg_schema.migrate(conn, store.where)
                except BaseException as err:
                    raise store._error(err) if _is_psycopg(err) else err from None
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

        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
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

    # -- writing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self) -> Iterator[PostgresStep]:
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.batch,))
                    yield PostgresStep(conn, self.batch, self.host)
            except BaseException as err:
                if _is_psycopg(err):
                    raise self._error(err) from None
                raise

    # -- reading ---------------------------------------------------------------------------

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            conn = self._connection()
            try:
                return conn.execute(sql, (self.batch, *params)).fetchall()
            except BaseException as err:
                if _is_psycopg(err):
                    raise self._error(err) from None
                raise

    def events(self, slug: str | None = None, *, after: int = 0, since: float = 0.0) -> Iterator[Event]:
        where, params = "batch = %s AND seq > %s AND ts >= %s", [after, since]
        if slug is not None:
            where += " AND slug = %s"
            params.append(slug)
        rows = self._rows(f"SELECT {EVENT_COLUMNS} FROM events WHERE {where} ORDER BY seq", tuple(params))
        return iter([_event(row) for row in rows])

    def last_events(self, kinds: tuple[str, ...] = ()) -> dict[str, Event]:
        among = "AND event = ANY(%s) " if kinds else ""
        rows = self._rows(
            f"SELECT DISTINCT ON (slug) {EVENT_COLUMNS} FROM events WHERE batch = %s {among}"
            "ORDER BY slug, seq DESC",
            (list(kinds),) if kinds else (),
        )
        return {row[2]: _event(row) for row in rows}

    def summaries(self) -> dict[str, Summary]:
        rows = self._rows(
            "SELECT slug, last_event, sent_ts, chat_url, engine, turns FROM summaries WHERE batch = %s"
        )
        return {row[0]: Summary(*row) for row in rows}

    def prompt_checks(self) -> dict[str, PromptCheck]:
        rows = self._rows("SELECT slug, stamp, problem FROM prompt_checks WHERE batch = %s")
        return {row[0]: PromptCheck(*row) for row in rows}

    def article(self, slug: str) -> ArticleRecord | None:
        with self._lock:
            conn = self._connection()
            try:
                return _read_article(conn, self.batch, slug)
            except BaseException as err:
                if _is_psycopg(err):
                    raise self._error(err) from None
                raise

    def articles(self) -> dict[str, ArticleRecord]:
        by_slug: dict[str, list[tuple]] = {}
        for row in self._rows(f"SELECT {SEND_COLUMNS} FROM sends WHERE batch = %s AND chat_url = ''"):
            by_slug.setdefault(row[0], []).append(row)
        records = {
            row[0]: _article(row, _open_intent(by_slug.get(row[0], [])))
            for row in self._rows(f"SELECT {ARTICLE_COLUMNS} FROM articles WHERE batch = %s")
        }
        for slug, intents in by_slug.items():
            records.setdefault(slug, ArticleRecord(slug, intent=_open_intent(intents)))
        return records

    def sends(self, slug: str | None = None) -> list[Send]:
        if slug is None:
            rows = self._rows(f"SELECT {SEND_COLUMNS} FROM sends WHERE batch = %s ORDER BY slug, turn")
        else:
            rows = self._rows(
                f"SELECT {SEND_COLUMNS} FROM sends WHERE batch = %s AND slug = %s ORDER BY turn", (slug,)
            )
        return [Send(*row) for row in rows]

    def first_sends(self) -> dict[str, Send]:
        rows = self._rows(f"SELECT {SEND_COLUMNS} FROM sends WHERE batch = %s AND turn = 1")
        return {row[0]: Send(*row) for row in rows}

    def send_counts(self, start: float, end: float = float("inf")) -> SendCounts:
        # A send is taken back by the article's next send step when that one is `unsent`.
        rows = self._rows(
            "SELECT account, count(*) FROM (SELECT account, event, "
            "lead(event) OVER (PARTITION BY slug ORDER BY seq) AS next FROM events "
            "WHERE batch = %s AND event IN (%s, %s) AND ts >= %s AND ts < %s) AS steps "
            "WHERE event = %s AND (next IS NULL OR next != %s) GROUP BY account",
            (SEND_EVENT, UNSENT_EVENT, start, min(end, 1e300), SEND_EVENT, UNSENT_EVENT),
        )
        return SendCounts({account: int(count) for account, count in rows})

    def quota_block(self, account: str, now: float) -> QuotaBlock | None:
        rows = self._rows(
            "SELECT account, until, reason, since FROM quota_blocks WHERE batch = %s AND account = %s "
            "AND until > %s",
            (account, now),
        )
        return QuotaBlock(*rows[0]) if rows else None

    def quota_blocks(self, now: float) -> list[QuotaBlock]:
        rows = self._rows(
            "SELECT account, until, reason, since FROM quota_blocks WHERE batch = %s AND until > %s "
            "ORDER BY account",
            (now,),
        )
        return [QuotaBlock(*row) for row in rows]

    def meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE batch = %s AND key = %s", (key,))
        return rows[0][0] if rows else None

    def finished(self, slugs: list[str] | None = None) -> dict[str, Finished]:
        if slugs is None:
            rows = self._rows(f"SELECT {FINISHED_COLUMNS} FROM finished WHERE batch = %s")
        else:
            rows = self._rows(
                f"SELECT {FINISHED_COLUMNS}, document FROM finished WHERE batch = %s AND slug = ANY(%s)",
                (list(slugs),),
            )
        return {row[0]: Finished(*row) for row in rows}

    def served(self) -> dict[str, Served]:
        rows = self._rows("SELECT account, host, seen FROM served WHERE batch = %s ORDER BY seen")
        return {row[0]: Served(*row) for row in rows}  # the latest host of each account wins

    # -- leases (each its own transaction) -------------------------------------------------

    def claim_lease(self, slug: str, owner: str, seconds: float, now: float) -> bool:
        with self.step() as step:
            return step.execute(
                "INSERT INTO leases (batch, slug, owner, expires) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (batch, slug) DO UPDATE SET owner = excluded.owner, expires = excluded.expires "
                "WHERE leases.expires <= %s OR leases.owner = excluded.owner",
                (slug, owner, now + seconds, now),
            )

    def renew_lease(self, slug: str, owner: str, seconds: float, now: float) -> bool:
        with self.step() as step:
            return step.execute(
                "UPDATE leases SET expires = %s "
                "WHERE batch = %s AND slug = %s AND owner = %s AND expires > %s",
                (now + seconds, self.batch, slug, owner, now),
                batch_first=False,
            )

    def release_lease(self, slug: str, owner: str) -> bool:
        with self.step() as step:
            return step.execute(
                "DELETE FROM leases WHERE batch = %s AND slug = %s AND owner = %s", (slug, owner)
            )

    def lease(self, slug: str, now: float) -> Lease | None:
        rows = self._rows(
            "SELECT slug, owner, expires FROM leases WHERE batch = %s AND slug = %s AND expires > %s",
            (slug, now),
        )
        return Lease(*rows[0]) if rows else None

    def leases(self, now: float) -> dict[str, Lease]:
        rows = self._rows("SELECT slug, owner, expires FROM leases WHERE batch = %s AND expires > %s", (now,))
        return {row[0]: Lease(*row) for row in rows}

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PostgresStep:
    """The writes of one `PostgresStore.step()` transaction (the batch's advisory lock held)."""

    def __init__(self, conn: Any, batch: str, host: str = ""):
        self._conn, self._batch, self._host = conn, batch, host

    def batched(self, *params: Any) -> tuple:
        return (self._batch, *params)

    def execute(self, sql: str, params: tuple = (), *, batch_first: bool = True) -> bool:
        """Run one statement; whether it changed exactly one row."""
        cursor = self._conn.execute(sql, self.batched(*params) if batch_first else params)
        return cursor.rowcount == 1

    def append(self, event: Event) -> int:
        fields = dict(event.fields)
        if self._host:
            fields.setdefault("host", self._host)
        row = self._conn.execute(
            "INSERT INTO events (batch, ts, slug, event, pid, account, fields) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING seq",
            self.batched(event.ts, event.slug, event.event, event.pid, event.account, dumps(fields)),
        ).fetchone()
        self._summarize(event)
        return int(row[0])

    def _summarize(self, event: Event) -> None:
        """The article's summary row, in the same transaction as its event."""
        slug = event.slug
        self.execute(
            "INSERT INTO summaries (batch, slug, last_event) VALUES (%s, %s, %s) "
            "ON CONFLICT (batch, slug) DO UPDATE SET last_event = excluded.last_event",
            (slug, event.event),
        )
        if event.event in SENT_EVENTS:
            url = event.fields.get("chat_url")
            self._conn.execute(
                "UPDATE summaries SET sent_ts = %s, chat_url = %s WHERE batch = %s AND slug = %s",
                (event.ts, url if isinstance(url, str) else "", self._batch, slug),
            )
        if event.event in ENGINE_EVENTS:
            engine, turns = event.fields.get("engine"), event.fields.get("turns")
            if event.event != "done" or not isinstance(turns, int) or isinstance(turns, bool):
                turns = 0
            self._conn.execute(
                "UPDATE summaries SET engine = %s, turns = %s WHERE batch = %s AND slug = %s",
                (engine if isinstance(engine, str) else "", turns, self._batch, slug),
            )

    def put_prompt_checks(self, checks: list[PromptCheck]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO prompt_checks (batch, slug, stamp, problem) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (batch, slug) DO UPDATE SET stamp = excluded.stamp, problem = excluded.problem",
                [self.batched(*astuple(check)) for check in checks],
            )

    def article(self, slug: str) -> ArticleRecord | None:
        return _read_article(self._conn, self._batch, slug)

    def put_article(self, record: ArticleRecord) -> None:
        values = astuple(record)[:-2]  # all but errors and intent
        columns = ARTICLE_COLUMNS.split(", ")
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns[1:])
        self.execute(
            f"INSERT INTO articles (batch, {ARTICLE_COLUMNS}) VALUES ({', '.join(['%s'] * 15)}) "
            f"ON CONFLICT (batch, slug) DO UPDATE SET {updates}",
            (*values, dumps([dict(e) for e in record.errors])),
        )

    def record_intent(self, slug: str, intent: Intent) -> None:
        from psycopg import errors

        try:
            with self._conn.transaction():  # a savepoint: the refused insert leaves the step usable
                self.execute(
                    "INSERT INTO sends (batch, slug, turn, account, prompt_sha256, intent_at, pid, owner) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        slug,
                        intent.turn,
                        intent.account,
                        intent.prompt_sha256,
                        intent.time,
                        intent.pid,
                        intent.owner,
                    ),
                )
        except errors.UniqueViolation:
            raise AlreadySent(self._send(slug, intent.turn)) from None

    def record_sent(self, slug: str, turn: int, chat_url: str, when: float) -> None:
        send = self._send(slug, turn)
        if send is None:
            raise StoreError(f"{slug}: turn {turn} has no recorded intent; record it before the click")
        if send.chat_url and send.chat_url != chat_url:
            raise AlreadySent(send)
        if not send.chat_url:
            self._conn.execute(
                "UPDATE sends SET chat_url = %s, sent_at = %s WHERE batch = %s AND slug = %s AND turn = %s",
                (chat_url, when, self._batch, slug, turn),
            )

    def withdraw_intent(self, slug: str, turn: int) -> bool:
        return self.execute(
            "DELETE FROM sends WHERE batch = %s AND slug = %s AND turn = %s AND chat_url = ''", (slug, turn)
        )

    def forget_sends(self, slug: str) -> int:
        return self._conn.execute(
            "DELETE FROM sends WHERE batch = %s AND slug = %s", self.batched(slug)
        ).rowcount

    def block_quota(self, block: QuotaBlock) -> None:
        self.execute(
            "INSERT INTO quota_blocks (batch, account, until, since, reason) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (batch, account) DO UPDATE SET until = excluded.until, since = excluded.since, "
            "reason = excluded.reason",
            (block.account, block.until, block.since, block.reason),
        )

    def check_lease(self, slug: str, owner: str, now: float) -> None:
        row = self._conn.execute(
            "SELECT 1 FROM leases WHERE batch = %s AND slug = %s AND owner = %s AND expires > %s",
            self.batched(slug, owner, now),
        ).fetchone()
        if row is None:
            raise LeaseLost(
                f"{slug}: the lease of {owner} expired or was taken over; stopping before any send"
            )

    def put_finished(self, finished: Finished) -> bool:
        return self.execute(
            f"INSERT INTO finished (batch, {FINISHED_COLUMNS}, document) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (batch, slug) DO NOTHING",
            astuple(finished),
        )

    def serve(self, host: str, accounts: list[str], now: float) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO served (batch, account, host, seen) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (batch, account, host) DO UPDATE SET seen = excluded.seen",
                [self.batched(account, host, now) for account in accounts],
            )

    def claim_meta(self, key: str, value: str) -> bool:
        return self.execute(
            "INSERT INTO meta (batch, key, value) VALUES (%s, %s, %s) ON CONFLICT (batch, key) DO NOTHING",
            (key, value),
        )

    def _send(self, slug: str, turn: int) -> Send | None:
        row = self._conn.execute(
            f"SELECT {SEND_COLUMNS} FROM sends WHERE batch = %s AND slug = %s AND turn = %s",
            self.batched(slug, turn),
        ).fetchone()
        return Send(*row) if row else None


def _read_article(conn: Any, batch: str, slug: str) -> ArticleRecord | None:
    """One article's record with its open intent (a store read, or inside a step)."""
    row = conn.execute(
        f"SELECT {ARTICLE_COLUMNS} FROM articles WHERE batch = %s AND slug = %s", (batch, slug)
    ).fetchone()
    intents = conn.execute(
        f"SELECT {SEND_COLUMNS} FROM sends WHERE batch = %s AND slug = %s AND chat_url = ''", (batch, slug)
    ).fetchall()
    intent = _open_intent(intents)
    if row is None:
        return ArticleRecord(slug, intent=intent) if intent else None
    return _article(row, intent)


def _is_psycopg(err: BaseException) -> bool:
    import psycopg

    return isinstance(err, psycopg.Error)
