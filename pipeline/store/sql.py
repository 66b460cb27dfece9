"""The SQL of both stores, written once: a Store's reads, a step's writes, the rows they decode.

SQLiteStore and PostgresStore differ in how they hold a connection and a transaction (their own
modules) and in what a `Dialect` says: a bound value's mark, the batch a server's rows carry in
every key, and how a row replaces another. Statements are written the SQLite way (`?` marks, no
batch); the dialect makes each one its database's.

Every write of a step binds its values through `kept` (SQLTransaction._run and _run_many, which every
write statement passes; `kept_rows` for many rows at once): the one mask on everything kept
(redact.mask_kept) for both databases, so no writer (an event's fields, a record's last_error
and errors) has to remember it. What is bound `named` (redact.Verbatim) is kept as it is: the
names a row is found by (`named` says why), and an article's body (the finished table's
document: an article holding a key is refused before it is written, never masked).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import astuple
from typing import Any, NamedTuple, Self

from ..redact import Verbatim, mask_kept
from .protocol import (
    ENGINE_EVENTS,
    SEND_EVENT,
    SENT_EVENTS,
    UNSENT_EVENT,
    AlreadySent,
    ArticleRecord,
    ChatDeletion,
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
    StatusRow,
    StoreError,
    Summary,
    dumps,
)

ARTICLE_COLUMNS = (
    "slug, attempts, hard_failures, next_try, last_poll, sent_at, engine, last_error, "
    "last_error_code, progress, turn, turns, sent_sha256, errors"
)
INTENT_COLUMNS = "slug, turn, account, prompt_sha256, intent_at, pid, owner"
SEND_COLUMNS = f"{INTENT_COLUMNS}, sent_at, chat_url, chat_id"
EVENT_COLUMNS = "seq, ts, slug, event, pid, account, fields"
FINISHED_COLUMNS = "slug, engine, account, host, ts"
DELETION_COLUMNS = "chat_url, slug, account, since, deleted_at, tries, last_error"
STATUS_COLUMNS = ", ".join(StatusRow._fields)
NO_URL = "chat_url = ''"  # an intent: a send the site has not taken yet
CHUNK = 500  # slugs bound in one read: SQLite's limit on bound values, well under


class Dialect(NamedTuple):
    """What the SQL of one store's database differs in (the defaults are SQLite's). A named
    tuple, as tables.Table is."""

    mark: str = "?"  # a bound value: sqlite3's `?`, psycopg's `%s`
    key: tuple[str, ...] = ()  # columns that lead every table's key: a server's ("batch",)
    values: tuple = ()  # their values: the batch
    or_replace: bool = True  # SQLite's INSERT OR REPLACE / OR IGNORE, where a server says ON CONFLICT

    def sql(self, statement: str) -> str:
        return statement if self.mark == "?" else statement.replace("?", self.mark)

    def keyed(self, *params: Any) -> tuple:
        """Bound values of a statement whose first marks are the key's (a `where` or an insert)."""
        return (*self.values, *params)

    def where(self, condition: str = "") -> str:
        """` WHERE condition` on this batch's rows ("" for every row of a one-batch file)."""
        parts = [*(f"{column} = ?" for column in self.key), *([condition] if condition else [])]
        return f" WHERE {' AND '.join(parts)}" if parts else ""

    def insert(self, table: str, columns: str, verb: str = "INSERT") -> str:
        names = [*self.key, *columns.split(", ")]
        return f"{verb} INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"

    def upsert(self, table: str, columns: str, key: str, updated: str) -> str:
        """Insert a row, or set `updated` of the row with its `key` (both databases say it so)."""
        sets = ", ".join(f"{column} = excluded.{column}" for column in updated.split(", "))
        return f"{self.insert(table, columns)} ON CONFLICT ({self._conflict(key)}) DO UPDATE SET {sets}"

    def replace(self, table: str, columns: str, key: str) -> str:
        """Insert a whole row over the one with its `key`."""
        if self.or_replace:
            return self.insert(table, columns, "INSERT OR REPLACE")
        updated = ", ".join(c for c in columns.split(", ") if c not in key.split(", "))
        return self.upsert(table, columns, key, updated)

    def insert_new(self, table: str, columns: str, key: str) -> str:
        """Insert a row unless one with its `key` is there (nothing changes then)."""
        if self.or_replace:
            return self.insert(table, columns, "INSERT OR IGNORE")
        return f"{self.insert(table, columns)} ON CONFLICT ({self._conflict(key)}) DO NOTHING"

    def among(self, column: str, count: int) -> str:
        """A condition: `column` is one of `count` bound values (a server binds them as one list)."""
        if self.or_replace:
            return f"{column} IN ({', '.join('?' * count)})"
        return f"{column} = ANY(?)"

    def bound(self, values: list) -> tuple:
        """The bound values of `among`."""
        return tuple(values) if self.or_replace else ([str(value) for value in values],)

    def _conflict(self, key: str) -> str:
        return ", ".join([*self.key, key])


class SQLStore:
    """A Store's reads and leases over a connection that `_connected` lends (the lock held, the
    database's errors turned into StoreErrors) and the transactions `transaction` opens."""

    _dialect: Dialect

    def _connected(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[SQLTransaction]:
        raise NotImplementedError

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """The rows of a read; every read's first marks are its `where`'s key."""
        with self._connected() as conn:
            return conn.execute(self._dialect.sql(sql), self._dialect.keyed(*params)).fetchall()

    def _where(self, condition: str = "") -> str:
        return self._dialect.where(condition)

    def _rows_of(self, sql: str, slugs: list[str] | None, condition: str = "") -> list[tuple]:
        """The rows of `sql` + its where (`condition`, and the slug among `slugs` unless None),
        read a chunk of slugs at a time."""
        if slugs is None:
            return self._rows(f"{sql}{self._where(condition)}")
        rows: list[tuple] = []
        dialect, also = self._dialect, f" AND {condition}" if condition else ""
        for start in range(0, len(slugs), CHUNK):
            chunk = slugs[start : start + CHUNK]
            rows += self._rows(
                f"{sql}{self._where(dialect.among('slug', len(chunk)) + also)}", dialect.bound(chunk)
            )
        return rows

    def events(self, slug: str | None = None, *, after: int = 0, since: float = 0.0) -> Iterator[Event]:
        condition, params = "seq > ? AND ts >= ?", [after, since]
        if slug is not None:
            condition += " AND slug = ?"
            params.append(slug)
        rows = self._rows(
            f"SELECT {EVENT_COLUMNS} FROM events{self._where(condition)} ORDER BY seq", tuple(params)
        )
        return iter([event_of(row) for row in rows])

    def summaries(self, slugs: list[str] | None = None) -> dict[str, Summary]:
        rows = self._rows_of(
            "SELECT slug, last_event, sent_ts, chat_url, engine, turns FROM summaries", slugs
        )
        return {row[0]: Summary(*row) for row in rows}

    def prompt_checks(self, slugs: list[str] | None = None) -> dict[str, PromptCheck]:
        rows = self._rows_of("SELECT slug, stamp, problem FROM prompt_checks", slugs)
        return {row[0]: PromptCheck(*row) for row in rows}

    def status_rows(self) -> dict[str, StatusRow]:
        new = tuple.__new__  # 100,000 rows: the named tuple's own __new__ is the slow way
        return {
            row[0]: new(StatusRow, row)
            for row in self._rows_of(f"SELECT {STATUS_COLUMNS} FROM status_rows", None)
        }

    def status_changes(self, slugs: list[str] | None = None) -> dict[str, int]:
        return dict(self._rows_of("SELECT slug, n FROM status_changes", slugs))

    def status_generation(self, but: str) -> int:
        rows = self._rows(f"SELECT coalesce(sum(n), 0) FROM status_changes{self._where('slug <> ?')}", (but,))
        return int(rows[0][0])

    def article(self, slug: str) -> ArticleRecord | None:
        with self._connected() as conn:
            return read_article(conn, self._dialect, slug)

    def articles(self, slugs: list[str] | None = None) -> dict[str, ArticleRecord]:
        by_slug: dict[str, list[tuple]] = {}
        for row in self._rows_of(f"SELECT {SEND_COLUMNS} FROM sends", slugs, NO_URL):
            by_slug.setdefault(row[0], []).append(row)
        records = {
            row[0]: article_of(row, open_intent(by_slug.get(row[0], [])))
            for row in self._rows_of(f"SELECT {ARTICLE_COLUMNS} FROM articles", slugs)
        }
        for slug, intents in by_slug.items():
            records.setdefault(slug, ArticleRecord(slug, intent=open_intent(intents)))
        return records

    def sends(self, slug: str | None = None) -> list[Send]:
        if slug is None:
            rows = self._rows(f"SELECT {SEND_COLUMNS} FROM sends{self._where()} ORDER BY slug, turn")
        else:
            rows = self._rows(
                f"SELECT {SEND_COLUMNS} FROM sends{self._where('slug = ?')} ORDER BY turn", (slug,)
            )
        return [Send(*row) for row in rows]

    def first_sends(self, slugs: list[str] | None = None) -> dict[str, Send]:
        rows = self._rows_of(f"SELECT {SEND_COLUMNS} FROM sends", slugs, "turn = 1")
        return {row[0]: Send(*row) for row in rows}

    def send_counts(self, start: float, end: float = float("inf")) -> SendCounts:
        # A send is taken back by the article's next send step when that one is `unsent`.
        steps = self._where("event IN (?, ?) AND ts >= ? AND ts < ?")
        rows = self._rows(
            "SELECT account, count(*) FROM (SELECT account, event, "
            f"lead(event) OVER (PARTITION BY slug ORDER BY seq) AS next FROM events{steps}) AS steps "
            "WHERE event = ? AND (next IS NULL OR next != ?) GROUP BY account",
            (SEND_EVENT, UNSENT_EVENT, start, min(end, 1e300), SEND_EVENT, UNSENT_EVENT),
        )
        return SendCounts({account: int(count) for account, count in rows})

    def quota_block(self, account: str, now: float) -> QuotaBlock | None:
        rows = self._rows(
            "SELECT account, until, reason, since FROM quota_blocks"
            f"{self._where('account = ? AND until > ?')}",
            (account, now),
        )
        return QuotaBlock(*rows[0]) if rows else None

    def quota_blocks(self, now: float) -> list[QuotaBlock]:
        rows = self._rows(
            "SELECT account, until, reason, since FROM quota_blocks"
            f"{self._where('until > ?')} ORDER BY account",
            (now,),
        )
        return [QuotaBlock(*row) for row in rows]

    def meta(self, key: str) -> str | None:
        rows = self._rows(f"SELECT value FROM meta{self._where('key = ?')}", (key,))
        return rows[0][0] if rows else None

    def served(self) -> dict[str, Served]:
        rows = self._rows(f"SELECT account, host, seen FROM served{self._where()} ORDER BY seen")
        return {row[0]: Served(*row) for row in rows}  # the latest host of each account wins

    def chat_deletions(self, slug: str | None = None, *, pending: bool = False) -> list[ChatDeletion]:
        conditions, params = [], []
        if slug is not None:
            conditions.append("slug = ?")
            params.append(slug)
        if pending:
            conditions.append("deleted_at = 0")
        rows = self._rows(
            f"SELECT {DELETION_COLUMNS} FROM chat_deletions{self._where(' AND '.join(conditions))} "
            "ORDER BY since, chat_url",
            tuple(params),
        )
        return [ChatDeletion(*row) for row in rows]

    # -- leases (each its own transaction) -------------------------------------------------

    def claim_lease(self, slug: str, owner: str, seconds: float, now: float) -> bool:
        claim = self._dialect.upsert("leases", "slug, owner, expires", "slug", "owner, expires")
        with self.transaction() as tx:
            return tx.changes_one(
                f"{claim} WHERE leases.expires <= ? OR leases.owner = excluded.owner",
                self._dialect.keyed(*named(slug, owner), now + seconds, now),
            )

    def renew_lease(self, slug: str, owner: str, seconds: float, now: float) -> bool:
        with self.transaction() as tx:
            return tx.changes_one(
                f"UPDATE leases SET expires = ?{self._where('slug = ? AND owner = ? AND expires > ?')}",
                (now + seconds, *self._dialect.keyed(*named(slug, owner), now)),
            )

    def release_lease(self, slug: str, owner: str) -> bool:
        with self.transaction() as tx:
            return tx.changes_one(
                f"DELETE FROM leases{self._where('slug = ? AND owner = ?')}",
                self._dialect.keyed(*named(slug, owner)),
            )

    def lease(self, slug: str, now: float) -> Lease | None:
        rows = self._rows(
            f"SELECT slug, owner, expires FROM leases{self._where('slug = ? AND expires > ?')}", (slug, now)
        )
        return Lease(*rows[0]) if rows else None

    def leases(self, now: float) -> dict[str, Lease]:
        rows = self._rows(f"SELECT slug, owner, expires FROM leases{self._where('expires > ?')}", (now,))
        return {row[0]: Lease(*row) for row in rows}

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def named(*values: Any) -> tuple:
    """Names a row is found by (a slug, an account, a host, a lease's owner, a chat's URL and id,
    an event's kind, a meta key; the batch is bound so by its Dialect), bound as they are
    (redact.Verbatim): a name holding a run of a weak secret (the slug `password-tips`, the proxy
    password `password1`) masked would lose its row, and split the batch hosts share. They come
    from the config, the prompts' file names, the site and the code, never from an error's text."""
    return tuple(Verbatim(value) if isinstance(value, str) else value for value in values)


def kept(params: tuple) -> tuple:
    """A statement's bound values as the database keeps them: each through the one mask on
    everything kept (redact.mask_kept; a Verbatim text as the plain str it is)."""
    return tuple(mask_kept(value) for value in params)


def kept_rows(rows: list[tuple]) -> list[tuple]:
    """`kept` for many rows: one pass over all their text when none of it needs masking (status
    learning 10,000 prompts' checks), else row by row. Sound: a value that needs masking makes
    the joined text need it too (a run, a password, a token is found inside its value)."""
    texts = [
        value for row in rows for value in row if isinstance(value, str) and not isinstance(value, Verbatim)
    ]
    joined = "\0".join(texts)
    if mask_kept(joined) == joined:
        return [tuple(str(v) if isinstance(v, Verbatim) else v for v in row) for row in rows]
    return [kept(row) for row in rows]


class SQLTransaction:
    """The writes of one transaction, on the connection the store lent it. Every
    statement runs through `_run` or `_run_many`, which bind its values `kept`."""

    def __init__(self, conn: Any, dialect: Dialect, host: str = ""):
        self._conn, self._dialect, self._host = conn, dialect, host

    def _run(self, sql: str, params: tuple = ()) -> Any:
        return self._conn.execute(self._dialect.sql(sql), kept(params))

    def _run_many(self, sql: str, rows: list[tuple]) -> None:
        with contextlib.closing(self._conn.cursor()) as cursor:
            cursor.executemany(self._dialect.sql(sql), kept_rows(rows))

    def _append_row(self, sql: str, params: tuple) -> int:
        """Insert an event; its seq (the database's own way of telling it)."""
        raise NotImplementedError

    def _insert_unique(self, sql: str, params: tuple) -> bool:
        """Insert a row; False when a unique constraint refused it (the step still usable)."""
        raise NotImplementedError

    def changes_one(self, sql: str, params: tuple = ()) -> bool:
        """Run one statement; whether it changed exactly one row."""
        return self._run(sql, params).rowcount == 1

    def _where(self, condition: str) -> str:
        return self._dialect.where(condition)

    def append(self, event: Event) -> int:
        fields = dict(event.fields)
        if self._host:  # a shared batch: every event says which host wrote it
            fields.setdefault("host", self._host)
        seq = self._append_row(
            self._dialect.insert("events", "ts, slug, event, pid, account, fields"),
            self._dialect.keyed(
                event.ts, *named(event.slug, event.event), event.pid, *named(event.account), dumps(fields)
            ),
        )
        self._summarize(event)
        return seq

    def _summarize(self, event: Event) -> None:
        """The article's summary row, in the same transaction as its event."""
        batch, slug = self._dialect.values, Verbatim(event.slug)
        self._run(
            self._dialect.upsert("summaries", "slug, last_event", "slug", "last_event"),
            (*batch, slug, *named(event.event)),
        )
        if event.event in SENT_EVENTS:
            url = event.fields.get("chat_url")
            self._run(
                f"UPDATE summaries SET sent_ts = ?, chat_url = ?{self._where('slug = ?')}",
                (event.ts, *named(url if isinstance(url, str) else ""), *batch, slug),
            )
        if event.event in ENGINE_EVENTS:
            engine, turns = event.fields.get("engine"), event.fields.get("turns")
            if event.event != "done" or not isinstance(turns, int) or isinstance(turns, bool):
                turns = 0
            self._run(
                f"UPDATE summaries SET engine = ?, turns = ?{self._where('slug = ?')}",
                (engine if isinstance(engine, str) else "", turns, *batch, slug),
            )

    def put_prompt_checks(self, checks: list[PromptCheck]) -> None:
        self._run_many(
            self._dialect.replace("prompt_checks", "slug, stamp, problem", "slug"),
            [self._dialect.keyed(*named(check.slug), check.stamp, check.problem) for check in checks],
        )

    def article(self, slug: str) -> ArticleRecord | None:
        return read_article(self._conn, self._dialect, slug)

    def put_article(self, record: ArticleRecord) -> None:
        slug, *values = astuple(record)[:-2]  # all but errors and intent
        self._run(
            self._dialect.replace("articles", ARTICLE_COLUMNS, "slug"),
            self._dialect.keyed(*named(slug), *values, dumps([dict(e) for e in record.errors])),
        )

    def record_intent(self, slug: str, intent: Intent) -> None:
        inserted = self._insert_unique(
            self._dialect.insert("sends", f"{INTENT_COLUMNS}, chat_id"),
            self._dialect.keyed(
                *named(slug),
                intent.turn,
                *named(intent.account),
                intent.prompt_sha256,
                intent.time,
                intent.pid,
                *named(intent.owner, intent.chat_id),
            ),
        )
        if not inserted:
            raise AlreadySent(self._send(slug, intent.turn))

    def record_sent(self, slug: str, turn: int, chat_url: str, when: float) -> None:
        send = self._send(slug, turn)
        if send is None:
            raise StoreError(f"{slug}: turn {turn} has no recorded intent; record it before the click")
        if send.chat_url and send.chat_url != chat_url:
            raise AlreadySent(send)
        if not send.chat_url:
            self._run(
                f"UPDATE sends SET chat_url = ?, sent_at = ?{self._where('slug = ? AND turn = ?')}",
                (*named(chat_url), when, *self._dialect.keyed(*named(slug), turn)),
            )

    def name_chat(self, slug: str, turn: int, chat_id: str) -> None:
        found = self.changes_one(
            f"UPDATE sends SET chat_id = ?{self._where('slug = ? AND turn = ? AND ' + NO_URL)}",
            (*named(chat_id), *self._dialect.keyed(*named(slug), turn)),
        )
        if not found:
            raise StoreError(f"{slug}: turn {turn} has no open intent to name chat {chat_id} in; not sending")

    def withdraw_intent(self, slug: str, turn: int) -> bool:
        return self.changes_one(
            f"DELETE FROM sends{self._where('slug = ? AND turn = ? AND ' + NO_URL)}",
            self._dialect.keyed(*named(slug), turn),
        )

    def forget_sends(self, slug: str) -> int:
        return self._run(
            f"DELETE FROM sends{self._where('slug = ?')}", self._dialect.keyed(*named(slug))
        ).rowcount

    def block_quota(self, block: QuotaBlock) -> None:
        self._run(
            self._dialect.replace("quota_blocks", "account, until, since, reason", "account"),
            self._dialect.keyed(*named(block.account), block.until, block.since, block.reason),
        )

    def check_lease(self, slug: str, owner: str, now: float) -> None:
        row = self._run(
            f"SELECT 1 FROM leases{self._where('slug = ? AND owner = ? AND expires > ?')}",
            self._dialect.keyed(*named(slug, owner), now),
        ).fetchone()
        if row is None:
            raise LeaseLost(
                f"{slug}: the lease of {owner} expired or was taken over; stopping before any send"
            )

    def put_status_rows(self, rows: list[StatusRow], gone: list[str] = ()) -> None:
        for start in range(0, len(gone), CHUNK):
            chunk = list(gone[start : start + CHUNK])
            self._run(
                f"DELETE FROM status_rows{self._where(self._dialect.among('slug', len(chunk)))}",
                self._dialect.keyed(*self._dialect.bound([Verbatim(slug) for slug in chunk])),
            )
        self._run_many(
            self._dialect.replace("status_rows", STATUS_COLUMNS, "slug"),
            # Its keys are compared as written: bound as they are, like names (a masked key
            # would never match again); its shown fields are masked as every kept value is.
            [
                self._dialect.keyed(*named(*row[:5]), *row[5:15], *named(row.account), *row[16:])
                for row in rows
            ],
        )

    def put_finished(self, finished: Finished) -> bool:
        slug, engine, account, host, ts, document = astuple(finished)
        return self.changes_one(
            self._dialect.insert_new("finished", f"{FINISHED_COLUMNS}, document", "slug"),
            # The article as it is: one holding a key is refused before it is written.
            self._dialect.keyed(*named(slug, engine, account, host), ts, Verbatim(document)),
        )

    def serve(self, host: str, accounts: list[str], now: float) -> None:
        self._run_many(
            self._dialect.replace("served", "account, host, seen", "account, host"),
            [self._dialect.keyed(*named(account, host), now) for account in accounts],
        )

    def put_chat_deletion(self, deletion: ChatDeletion) -> None:
        rest = astuple(deletion)[3:]  # after chat_url, slug, account: times, tries, last_error
        self._run(
            self._dialect.replace("chat_deletions", DELETION_COLUMNS, "chat_url"),
            self._dialect.keyed(*named(deletion.chat_url, deletion.slug, deletion.account), *rest),
        )

    def claim_meta(self, key: str, value: str) -> bool:
        return self.changes_one(
            self._dialect.insert_new("meta", "key, value", "key"), self._dialect.keyed(*named(key), value)
        )

    def put_meta(self, key: str, value: str) -> None:
        self._run(self._dialect.replace("meta", "key, value", "key"), self._dialect.keyed(*named(key), value))

    def _send(self, slug: str, turn: int) -> Send | None:
        row = self._run(
            f"SELECT {SEND_COLUMNS} FROM sends{self._where('slug = ? AND turn = ?')}",
            self._dialect.keyed(*named(slug), turn),
        ).fetchone()
        return Send(*row) if row else None


# status decodes one row per article: the bare decoder, and no decoding of empty values, halve that.
_decode = json.JSONDecoder().decode


def event_of(row: tuple) -> Event:
    seq, ts, slug, event, pid, account, fields = row
    fields = {} if fields == "{}" else _decode(fields)
    return Event(slug=slug, event=event, ts=ts, pid=pid, account=account, fields=fields, seq=seq)


def article_of(row: tuple, intent: Intent | None) -> ArticleRecord:
    *values, errors = row
    return ArticleRecord(*values, errors=() if errors == "[]" else tuple(_decode(errors)), intent=intent)


def read_article(conn: Any, dialect: Dialect, slug: str) -> ArticleRecord | None:
    """One article's record with its open intent (a store's read, or inside a step)."""
    row = conn.execute(
        dialect.sql(f"SELECT {ARTICLE_COLUMNS} FROM articles{dialect.where('slug = ?')}"), dialect.keyed(slug)
    ).fetchone()
    intents = conn.execute(
        dialect.sql(f"SELECT {SEND_COLUMNS} FROM sends{dialect.where('slug = ? AND ' + NO_URL)}"),
        dialect.keyed(slug),
    ).fetchall()
    intent = open_intent(intents)
    if row is None:
        return ArticleRecord(slug, intent=intent) if intent else None
    return article_of(row, intent)


def open_intent(rows: list[tuple]) -> Intent | None:
    """The latest turn's intent among rows of sends without a URL."""
    return max((Send(*row) for row in rows), key=lambda s: s.turn).intent if rows else None
