"""The store's tables, defined once: each database's CREATE statements are made from them.
(Named tuples, not frozen dataclasses: every command imports these, and Python 3.11 compiles
each dataclass's methods from source at import.)

A table is written as SQLite has it, for one batch. The PostgreSQL store keeps several batches
in one database: there every table also has a `batch` column that leads its key (and its
indexes and unique constraints), REAL is DOUBLE PRECISION, and the event counter is BIGSERIAL.
The migrations (schema.py, pg_schema.py) say which tables each schema version adds.
"""

from __future__ import annotations

import re
from typing import NamedTuple

SQLITE, POSTGRES = "sqlite", "postgresql"
BATCH = "batch TEXT NOT NULL"


class Table(NamedTuple):
    name: str
    columns: tuple[str, ...]  # "name TYPE constraints", key columns without NOT NULL
    key: tuple[str, ...] = ()  # the primary key's columns (a batch's own key on a server)
    counter: str = ""  # a column numbering the rows in insert order, before all others
    unique: tuple[str, str] = ("", "")  # a named unique constraint: (name, its columns)

    def create(self, dialect: str) -> str:
        server = dialect == POSTGRES
        lines = []
        if self.counter:
            kind = "BIGSERIAL" if server else "INTEGER"
            lines.append(f"{self.counter} {kind} PRIMARY KEY{'' if server else ' AUTOINCREMENT'}")
        if server:
            lines.append(BATCH)
        single = len(self.key) == 1 and not server  # SQLite's key, declared on its column
        for column in self.columns:
            if column.split()[0] in self.key:
                column += " PRIMARY KEY" if single else " NOT NULL"
            lines.append(_typed(column, dialect))
        if self.key and not single:
            lines.append(f"PRIMARY KEY ({_batched(', '.join(self.key), dialect)})")
        name, columns = self.unique
        if name:
            lines.append(f"CONSTRAINT {name} UNIQUE ({_batched(columns, dialect)})")
        body = ",\n    ".join(lines)
        return f"CREATE TABLE {self.name} (\n    {body}\n);"


class Index(NamedTuple):
    name: str
    table: str
    columns: str

    def create(self, dialect: str) -> str:
        return f"CREATE INDEX {self.name} ON {self.table} ({_batched(self.columns, dialect)});"


def _typed(column: str, dialect: str) -> str:
    return re.sub(r"\bREAL\b", "DOUBLE PRECISION", column) if dialect == POSTGRES else column


def _batched(columns: str, dialect: str) -> str:
    return f"batch, {columns}" if dialect == POSTGRES else columns


def script(dialect: str, *tables: Table | Index) -> str:
    """The CREATE statements of `tables`, one script."""
    return "\n".join(table.create(dialect) for table in tables) + "\n"


META = Table("meta", ("key TEXT", "value TEXT NOT NULL"), key=("key",))
EVENTS = Table(
    "events",
    (
        "ts REAL NOT NULL",
        "slug TEXT NOT NULL",
        "event TEXT NOT NULL",
        "pid INTEGER NOT NULL DEFAULT 0",
        "account TEXT NOT NULL DEFAULT ''",
        "fields TEXT NOT NULL DEFAULT '{}'",
    ),
    counter="seq",
)
EVENTS_BY_SLUG = Index("events_by_slug", "events", "slug, seq")
EVENTS_BY_KIND = Index("events_by_kind", "events", "event, ts")
ARTICLES = Table(
    "articles",
    (
        "slug TEXT",
        "attempts INTEGER NOT NULL DEFAULT 0",
        "hard_failures INTEGER NOT NULL DEFAULT 0",
        "next_try REAL NOT NULL DEFAULT 0",
        "last_poll REAL NOT NULL DEFAULT 0",
        "sent_at REAL NOT NULL DEFAULT 0",
        "engine TEXT NOT NULL DEFAULT ''",
        "last_error TEXT NOT NULL DEFAULT ''",
        "last_error_code TEXT NOT NULL DEFAULT ''",
        "progress TEXT NOT NULL DEFAULT ''",
        "turn INTEGER NOT NULL DEFAULT 0",
        "turns INTEGER NOT NULL DEFAULT 1",
        "sent_sha256 TEXT NOT NULL DEFAULT ''",
        "errors TEXT NOT NULL DEFAULT '[]'",
    ),
    key=("slug",),
)
SENDS = Table(
    "sends",
    (
        "slug TEXT NOT NULL",
        "turn INTEGER NOT NULL",
        "account TEXT NOT NULL",
        "prompt_sha256 TEXT NOT NULL",
        "intent_at REAL NOT NULL",
        "pid INTEGER NOT NULL DEFAULT 0",
        "owner TEXT NOT NULL DEFAULT ''",
        "sent_at REAL NOT NULL DEFAULT 0",
        "chat_url TEXT NOT NULL DEFAULT ''",
    ),
    unique=("one_send_per_turn", "slug, turn"),  # the last guard against a second send
)
# An intent names the chat its send goes into (NULL: recorded by a version that did not).
SENDS_CHAT_ID = "ALTER TABLE sends ADD COLUMN chat_id TEXT;\n"
QUOTA_BLOCKS = Table(
    "quota_blocks",
    (
        "account TEXT",
        "until REAL NOT NULL",
        "since REAL NOT NULL DEFAULT 0",
        "reason TEXT NOT NULL DEFAULT ''",
    ),
    key=("account",),
)
LEASES = Table("leases", ("slug TEXT", "owner TEXT NOT NULL", "expires REAL NOT NULL"), key=("slug",))
SUMMARIES = Table(
    "summaries",
    (
        "slug TEXT",
        "last_event TEXT NOT NULL DEFAULT ''",
        "sent_ts REAL NOT NULL DEFAULT 0",
        "chat_url TEXT NOT NULL DEFAULT ''",
        "engine TEXT NOT NULL DEFAULT ''",
        "turns INTEGER NOT NULL DEFAULT 0",
    ),
    key=("slug",),
)
PROMPT_CHECKS = Table(
    "prompt_checks", ("slug TEXT", "stamp TEXT NOT NULL", "problem TEXT NOT NULL"), key=("slug",)
)
FINISHED = Table(
    "finished",
    (
        "slug TEXT",
        "engine TEXT NOT NULL DEFAULT ''",
        "account TEXT NOT NULL DEFAULT ''",
        "host TEXT NOT NULL DEFAULT ''",
        "ts REAL NOT NULL DEFAULT 0",
        "document TEXT NOT NULL",
    ),
    key=("slug",),
)
SERVED = Table("served", ("account TEXT", "host TEXT", "seen REAL NOT NULL"), key=("account", "host"))
CHAT_DELETIONS = Table(
    "chat_deletions",
    (
        "chat_url TEXT",
        "slug TEXT NOT NULL",
        "account TEXT NOT NULL DEFAULT ''",
        "since REAL NOT NULL DEFAULT 0",
        "deleted_at REAL NOT NULL DEFAULT 0",
        "tries INTEGER NOT NULL DEFAULT 0",
        "last_error TEXT NOT NULL DEFAULT ''",
    ),
    key=("chat_url",),
)
CHAT_DELETIONS_BY_SLUG = Index("chat_deletions_by_slug", "chat_deletions", "slug")

# What `status` shows of each article, kept between runs (batch/status_cache.py): valid while
# the article's files (`files`), the limits it was judged by (`limits`), the workspace's settings
# (`context`) and its store rows (`change`: status_changes.n when it was built) are as they were,
# and the time is before `until`.
STATUS_ROWS = Table(
    "status_rows",
    (
        "slug TEXT",
        "change INTEGER NOT NULL",
        "context TEXT NOT NULL",
        "files TEXT NOT NULL",
        "limits TEXT NOT NULL",
        "until REAL NOT NULL",
        "state TEXT NOT NULL",
        "engine TEXT",
        "attempts INTEGER NOT NULL DEFAULT 0",
        "hard_failures INTEGER NOT NULL DEFAULT 0",
        "next_try REAL",
        "last_error TEXT",
        "chat_url TEXT",
        "turn INTEGER",
        "turns INTEGER",
        "account TEXT",
        "sent_at REAL",
        "since REAL NOT NULL DEFAULT 0",
    ),
    key=("slug",),
)
# A counter per article, raised by the store itself (triggers) on every write of the rows a
# status row is made from (articles, summaries, sends): no writer can forget it.
STATUS_CHANGES = Table("status_changes", ("slug TEXT", "n INTEGER NOT NULL"), key=("slug",))
STATUS_SOURCES = ("articles", "summaries", "sends")
STATUS = (STATUS_ROWS, STATUS_CHANGES)

FIRST = (META, EVENTS, EVENTS_BY_SLUG, EVENTS_BY_KIND, ARTICLES, SENDS, QUOTA_BLOCKS, LEASES)
SHARED = (FINISHED, SERVED)  # what several hosts share (see protocol.py)
DELETIONS = (CHAT_DELETIONS, CHAT_DELETIONS_BY_SLUG)  # finished articles' chats to delete (qwen.delete_chats)


def status_triggers(dialect: str) -> str:
    """The triggers that raise an article's status_changes.n on every insert, update and delete
    of its rows in STATUS_SOURCES (both its old and its new slug)."""
    if dialect == POSTGRES:
        bump = (
            "INSERT INTO status_changes (batch, slug, n) VALUES ({row}.batch, {row}.slug, 1) "
            "ON CONFLICT (batch, slug) DO UPDATE SET n = status_changes.n + 1;"
        )
        body = (
            "CREATE FUNCTION qwenpipe_status_change() RETURNS trigger AS $$\nBEGIN\n"
            f"    IF TG_OP <> 'INSERT' THEN {bump.format(row='OLD')} END IF;\n"
            f"    IF TG_OP <> 'DELETE' THEN {bump.format(row='NEW')} END IF;\n"
            "    RETURN NULL;\nEND;\n$$ LANGUAGE plpgsql;\n"
        )
        return body + "".join(
            f"CREATE TRIGGER {table}_status AFTER INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION qwenpipe_status_change();\n"
            for table in STATUS_SOURCES
        )
    bump = (
        "INSERT INTO status_changes (slug, n) VALUES ({row}.slug, 1) "
        "ON CONFLICT (slug) DO UPDATE SET n = n + 1;"
    )
    rows = {"INSERT": ("NEW",), "UPDATE": ("OLD", "NEW"), "DELETE": ("OLD",)}
    return "".join(
        f"CREATE TRIGGER {table}_{op.lower()}_status AFTER {op} ON {table} BEGIN "
        + " ".join(bump.format(row=row) for row in which)
        + " END;\n"
        for table in STATUS_SOURCES
        for op, which in rows.items()
    )
