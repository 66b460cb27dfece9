"""The Store on stdlib sqlite3, at `articles/.qwenpipe/qwenpipe.db`: the one-machine store.

WAL lets readers (status, show) run beside a writer without waiting; every write is one short
`BEGIN IMMEDIATE` transaction (the write lock taken up front, so two writers never deadlock
upgrading a read lock), bounded by a busy timeout: a store held too long by another process
is StoreBusy (try later), never a hang. `synchronous = FULL`: a committed step survives a
power cut as well as a kill.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import astuple
from pathlib import Path

from . import dbfile, schema
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
    Summary,
    dumps,
)

BUSY_TIMEOUT = 5.0  # seconds: far longer than any step, far shorter than a cron period
ARTICLE_COLUMNS = (
    "slug, attempts, hard_failures, next_try, last_poll, sent_at, engine, last_error, "
    "last_error_code, progress, turn, turns, sent_sha256, errors"
)
SEND_COLUMNS = "slug, turn, account, prompt_sha256, intent_at, pid, owner, sent_at, chat_url"
EVENT_COLUMNS = "seq, ts, slug, event, pid, account, fields"
FINISHED_COLUMNS = "slug, engine, account, host, ts"


class SQLiteStore:
    """One batch's store in one SQLite file. Safe to share between the threads of a process."""

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

    # -- writing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as err:
                raise _store_error(err, self.path) from None
            try:
                yield self._conn
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

    @contextlib.contextmanager
    def step(self) -> Iterator[SQLiteStep]:
        with self._transaction() as conn:
            yield SQLiteStep(conn)

    # -- reading ---------------------------------------------------------------------------

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as err:
                raise _store_error(err, self.path) from None

    def events(self, slug: str | None = None, *, after: int = 0, since: float = 0.0) -> Iterator[Event]:
        where, params = "seq > ? AND ts >= ?", [after, since]
        if slug is not None:
            where += " AND slug = ?"
            params.append(slug)
        rows = self._rows(f"SELECT {EVENT_COLUMNS} FROM events WHERE {where} ORDER BY seq", tuple(params))
        return iter([_event(row) for row in rows])

    def last_events(self, kinds: tuple[str, ...] = ()) -> dict[str, Event]:
        among = f"WHERE event IN ({', '.join('?' * len(kinds))}) " if kinds else ""
        rows = self._rows(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE seq IN "
            f"(SELECT max(seq) FROM events {among}GROUP BY slug)",
            tuple(kinds),
        )
        return {row[2]: _event(row) for row in rows}

    def summaries(self) -> dict[str, Summary]:
        rows = self._rows("SELECT slug, last_event, sent_ts, chat_url, engine, turns FROM summaries")
        return {row[0]: Summary(*row) for row in rows}

    def prompt_checks(self) -> dict[str, PromptCheck]:
        return {
            row[0]: PromptCheck(*row) for row in self._rows("SELECT slug, stamp, problem FROM prompt_checks")
        }

    def article(self, slug: str) -> ArticleRecord | None:
        with self._lock:
            try:
                return _read_article(self._conn, slug)
            except sqlite3.DatabaseError as err:
                raise _store_error(err, self.path) from None

    def articles(self) -> dict[str, ArticleRecord]:
        by_slug: dict[str, list[tuple]] = {}
        for row in self._rows(f"SELECT {SEND_COLUMNS} FROM sends WHERE chat_url = ''"):
            by_slug.setdefault(row[0], []).append(row)
        records = {
            row[0]: _article(row, _open_intent(by_slug.get(row[0], [])))
            for row in self._rows(f"SELECT {ARTICLE_COLUMNS} FROM articles")
        }
        for slug, intents in by_slug.items():
            records.setdefault(slug, ArticleRecord(slug, intent=_open_intent(intents)))
        return records

    def sends(self, slug: str | None = None) -> list[Send]:
        if slug is None:
            return [Send(*row) for row in self._rows(f"SELECT {SEND_COLUMNS} FROM sends ORDER BY slug, turn")]
        return [
            Send(*row)
            for row in self._rows(f"SELECT {SEND_COLUMNS} FROM sends WHERE slug = ? ORDER BY turn", (slug,))
        ]

    def first_sends(self) -> dict[str, Send]:
        return {row[0]: Send(*row) for row in self._rows(f"SELECT {SEND_COLUMNS} FROM sends WHERE turn = 1")}

    def send_counts(self, start: float, end: float = float("inf")) -> SendCounts:
        # A send is taken back by the article's next send step when that one is `unsent`.
        rows = self._rows(
            "SELECT account, count(*) FROM (SELECT account, event, "
            "lead(event) OVER (PARTITION BY slug ORDER BY seq) AS next FROM events "
            "WHERE event IN (?, ?) AND ts >= ? AND ts < ?) "
            "WHERE event = ? AND (next IS NULL OR next != ?) GROUP BY account",
            (SEND_EVENT, UNSENT_EVENT, start, min(end, 1e300), SEND_EVENT, UNSENT_EVENT),
        )
        return SendCounts(dict(rows))

    def quota_block(self, account: str, now: float) -> QuotaBlock | None:
        rows = self._rows(
            "SELECT account, until, reason, since FROM quota_blocks WHERE account = ? AND until > ?",
            (account, now),
        )
        return QuotaBlock(*rows[0]) if rows else None

    def quota_blocks(self, now: float) -> list[QuotaBlock]:
        rows = self._rows(
            "SELECT account, until, reason, since FROM quota_blocks WHERE until > ? ORDER BY account", (now,)
        )
        return [QuotaBlock(*row) for row in rows]

    def meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

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

    def served(self) -> dict[str, Served]:
        rows = self._rows("SELECT account, host, seen FROM served ORDER BY seen")
        return {row[0]: Served(*row) for row in rows}  # the latest host of each account wins

    # -- leases (each its own transaction) -------------------------------------------------

    def claim_lease(self, slug: str, owner: str, seconds: float, now: float) -> bool:
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO leases (slug, owner, expires) VALUES (?, ?, ?) ON CONFLICT (slug) DO UPDATE "
                "SET owner = excluded.owner, expires = excluded.expires "
                "WHERE leases.expires <= ? OR leases.owner = excluded.owner",
                (slug, owner, now + seconds, now),
            )
            return cursor.rowcount == 1

    def renew_lease(self, slug: str, owner: str, seconds: float, now: float) -> bool:
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE leases SET expires = ? WHERE slug = ? AND owner = ? AND expires > ?",
                (now + seconds, slug, owner, now),
            )
            return cursor.rowcount == 1

    def release_lease(self, slug: str, owner: str) -> bool:
        with self._transaction() as conn:
            return (
                conn.execute("DELETE FROM leases WHERE slug = ? AND owner = ?", (slug, owner)).rowcount == 1
            )

    def lease(self, slug: str, now: float) -> Lease | None:
        rows = self._rows(
            "SELECT slug, owner, expires FROM leases WHERE slug = ? AND expires > ?", (slug, now)
        )
        return Lease(*rows[0]) if rows else None

    def leases(self, now: float) -> dict[str, Lease]:
        rows = self._rows("SELECT slug, owner, expires FROM leases WHERE expires > ?", (now,))
        return {row[0]: Lease(*row) for row in rows}

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SQLiteStep:
    """The writes of one `SQLiteStore.step()` transaction."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def append(self, event: Event) -> int:
        cursor = self._conn.execute(
            "INSERT INTO events (ts, slug, event, pid, account, fields) VALUES (?, ?, ?, ?, ?, ?)",
            (event.ts, event.slug, event.event, event.pid, event.account, dumps(dict(event.fields))),
        )
        self._summarize(event)
        return int(cursor.lastrowid or 0)

    def _summarize(self, event: Event) -> None:
        """The article's summary row, in the same transaction as its event."""
        execute, slug = self._conn.execute, event.slug
        execute(
            "INSERT INTO summaries (slug, last_event) VALUES (?, ?) "
            "ON CONFLICT (slug) DO UPDATE SET last_event = excluded.last_event",
            (slug, event.event),
        )
        if event.event in SENT_EVENTS:
            url = event.fields.get("chat_url")
            execute(
                "UPDATE summaries SET sent_ts = ?, chat_url = ? WHERE slug = ?",
                (event.ts, url if isinstance(url, str) else "", slug),
            )
        if event.event in ENGINE_EVENTS:
            engine, turns = event.fields.get("engine"), event.fields.get("turns")
            if event.event != "done" or not isinstance(turns, int) or isinstance(turns, bool):
                turns = 0
            execute(
                "UPDATE summaries SET engine = ?, turns = ? WHERE slug = ?",
                (engine if isinstance(engine, str) else "", turns, slug),
            )

    def put_prompt_checks(self, checks: list[PromptCheck]) -> None:
        self._conn.executemany(
            "INSERT OR REPLACE INTO prompt_checks (slug, stamp, problem) VALUES (?, ?, ?)",
            [astuple(check) for check in checks],
        )

    def article(self, slug: str) -> ArticleRecord | None:
        return _read_article(self._conn, slug)

    def put_article(self, record: ArticleRecord) -> None:
        values = astuple(record)[:-2]  # all but errors and intent
        self._conn.execute(
            f"INSERT OR REPLACE INTO articles ({ARTICLE_COLUMNS}) VALUES ({', '.join('?' * 14)})",
            (*values, dumps([dict(e) for e in record.errors])),
        )

    def record_intent(self, slug: str, intent: Intent) -> None:
        try:
            self._conn.execute(
                "INSERT INTO sends (slug, turn, account, prompt_sha256, intent_at, pid, owner) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
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
        except sqlite3.IntegrityError:
            raise AlreadySent(self._send(slug, intent.turn)) from None

    def record_sent(self, slug: str, turn: int, chat_url: str, when: float) -> None:
        send = self._send(slug, turn)
        if send is None:
            raise StoreError(f"{slug}: turn {turn} has no recorded intent; record it before the click")
        if send.chat_url and send.chat_url != chat_url:
            raise AlreadySent(send)
        if not send.chat_url:
            self._conn.execute(
                "UPDATE sends SET chat_url = ?, sent_at = ? WHERE slug = ? AND turn = ?",
                (chat_url, when, slug, turn),
            )

    def withdraw_intent(self, slug: str, turn: int) -> bool:
        cursor = self._conn.execute(
            "DELETE FROM sends WHERE slug = ? AND turn = ? AND chat_url = ''", (slug, turn)
        )
        return cursor.rowcount == 1

    def forget_sends(self, slug: str) -> int:
        return self._conn.execute("DELETE FROM sends WHERE slug = ?", (slug,)).rowcount

    def block_quota(self, block: QuotaBlock) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO quota_blocks (account, until, since, reason) VALUES (?, ?, ?, ?)",
            (block.account, block.until, block.since, block.reason),
        )

    def check_lease(self, slug: str, owner: str, now: float) -> None:
        row = self._conn.execute(
            "SELECT 1 FROM leases WHERE slug = ? AND owner = ? AND expires > ?", (slug, owner, now)
        ).fetchone()
        if row is None:
            raise LeaseLost(
                f"{slug}: the lease of {owner} expired or was taken over; stopping before any send"
            )

    def put_finished(self, finished: Finished) -> bool:
        cursor = self._conn.execute(
            f"INSERT OR IGNORE INTO finished ({FINISHED_COLUMNS}, document) VALUES (?, ?, ?, ?, ?, ?)",
            astuple(finished),
        )
        return cursor.rowcount == 1

    def serve(self, host: str, accounts: list[str], now: float) -> None:
        self._conn.executemany(
            "INSERT OR REPLACE INTO served (account, host, seen) VALUES (?, ?, ?)",
            [(account, host, now) for account in accounts],
        )

    def claim_meta(self, key: str, value: str) -> bool:
        return (
            self._conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, value)).rowcount
            == 1
        )

    def _send(self, slug: str, turn: int) -> Send | None:
        row = self._conn.execute(
            f"SELECT {SEND_COLUMNS} FROM sends WHERE slug = ? AND turn = ?", (slug, turn)
        ).fetchone()
        return Send(*row) if row else None


# status decodes one row per article: the bare decoder, and no decoding of empty values, halve that.
_decode = json.JSONDecoder().decode


def _event(row: tuple) -> Event:
    seq, ts, slug, event, pid, account, fields = row
    fields = {} if fields == "{}" else _decode(fields)
    return Event(slug=slug, event=event, ts=ts, pid=pid, account=account, fields=fields, seq=seq)


def _article(row: tuple, intent: Intent | None) -> ArticleRecord:
    *values, errors = row
    return ArticleRecord(*values, errors=() if errors == "[]" else tuple(_decode(errors)), intent=intent)


def _read_article(conn: sqlite3.Connection, slug: str) -> ArticleRecord | None:
    row = conn.execute(f"SELECT {ARTICLE_COLUMNS} FROM articles WHERE slug = ?", (slug,)).fetchone()
    intents = conn.execute(f"SELECT {SEND_COLUMNS} FROM sends WHERE slug = ? AND chat_url = ''", (slug,))
    intent = _open_intent(intents.fetchall())
    if row is None:
        return ArticleRecord(slug, intent=intent) if intent else None
    return _article(row, intent)


def _open_intent(rows: list[tuple]) -> Intent | None:
    """The latest turn's intent among rows of sends without a URL."""
    return max((Send(*row) for row in rows), key=lambda s: s.turn).intent if rows else None


def _store_error(err: sqlite3.DatabaseError, path: Path) -> StoreError:
    text = str(err)
    if "locked" in text or "busy" in text:
        return StoreBusy(f"{path}: another process holds the store ({text}); try again in a moment")
    if isinstance(err, sqlite3.DatabaseError) and "not a database" in text:
        return StoreError(f"{path}: not a qwenpipe store ({text}); move it away and run again")
    return StoreError(f"{path}: {text}")
