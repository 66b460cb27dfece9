"""The PostgreSQL store's schema, versioned in `qwenpipe_schema`, and the migration to it.

The tables mirror the SQLite store's, each row also naming its batch: one database can hold
several batches, and the unique constraint that makes a second send impossible to record is
on (batch, slug, turn). Only `qwenpipe store init` migrates (several hosts must not race a
migration from their cron jobs); every other command refuses a database at another version,
naming that command.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageProblem
from .protocol import StoreError

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the first PostgreSQL store (the SQLite store's schema 2, with batches).
    """
    CREATE TABLE meta (
        batch TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (batch, key)
    );
    CREATE TABLE events (
        seq BIGSERIAL PRIMARY KEY,
        batch TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        slug TEXT NOT NULL,
        event TEXT NOT NULL,
        pid INTEGER NOT NULL DEFAULT 0,
        account TEXT NOT NULL DEFAULT '',
        fields TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX events_by_slug ON events (batch, slug, seq);
    CREATE INDEX events_by_kind ON events (batch, event, ts);
    CREATE TABLE articles (
        batch TEXT NOT NULL,
        slug TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        hard_failures INTEGER NOT NULL DEFAULT 0,
        next_try DOUBLE PRECISION NOT NULL DEFAULT 0,
        last_poll DOUBLE PRECISION NOT NULL DEFAULT 0,
        sent_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        engine TEXT NOT NULL DEFAULT '',
        last_error TEXT NOT NULL DEFAULT '',
        last_error_code TEXT NOT NULL DEFAULT '',
        progress TEXT NOT NULL DEFAULT '',
        turn INTEGER NOT NULL DEFAULT 0,
        turns INTEGER NOT NULL DEFAULT 1,
        sent_sha256 TEXT NOT NULL DEFAULT '',
        errors TEXT NOT NULL DEFAULT '[]',
        PRIMARY KEY (batch, slug)
    );
    CREATE TABLE sends (
        batch TEXT NOT NULL,
        slug TEXT NOT NULL,
        turn INTEGER NOT NULL,
        account TEXT NOT NULL,
        prompt_sha256 TEXT NOT NULL,
        intent_at DOUBLE PRECISION NOT NULL,
        pid INTEGER NOT NULL DEFAULT 0,
        owner TEXT NOT NULL DEFAULT '',
        sent_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        chat_url TEXT NOT NULL DEFAULT '',
        CONSTRAINT one_send_per_turn UNIQUE (batch, slug, turn)
    );
    CREATE TABLE quota_blocks (
        batch TEXT NOT NULL,
        account TEXT NOT NULL,
        until DOUBLE PRECISION NOT NULL,
        since DOUBLE PRECISION NOT NULL DEFAULT 0,
        reason TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (batch, account)
    );
    CREATE TABLE leases (
        batch TEXT NOT NULL, slug TEXT NOT NULL, owner TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (batch, slug)
    );
    CREATE TABLE summaries (
        batch TEXT NOT NULL,
        slug TEXT NOT NULL,
        last_event TEXT NOT NULL DEFAULT '',
        sent_ts DOUBLE PRECISION NOT NULL DEFAULT 0,
        chat_url TEXT NOT NULL DEFAULT '',
        engine TEXT NOT NULL DEFAULT '',
        turns INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (batch, slug)
    );
    CREATE TABLE prompt_checks (
        batch TEXT NOT NULL, slug TEXT NOT NULL, stamp TEXT NOT NULL, problem TEXT NOT NULL,
        PRIMARY KEY (batch, slug)
    );
    """,
    # 1 -> 2: finished articles (each host writes its SLUG.md from them) and served accounts.
    """
    CREATE TABLE finished (
        batch TEXT NOT NULL,
        slug TEXT NOT NULL,
        engine TEXT NOT NULL DEFAULT '',
        account TEXT NOT NULL DEFAULT '',
        host TEXT NOT NULL DEFAULT '',
        ts DOUBLE PRECISION NOT NULL DEFAULT 0,
        document TEXT NOT NULL,
        PRIMARY KEY (batch, slug)
    );
    CREATE TABLE served (
        batch TEXT NOT NULL, account TEXT NOT NULL, host TEXT NOT NULL, seen DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (batch, account, host)
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
INIT_COMMAND = "qwenpipe store init"
_LOCK = 7_152_025  # the advisory lock that serializes migrations across hosts


class SchemaMismatch(StoreError, UsageProblem):
    """The database is not at this qwenpipe's schema version: `qwenpipe store init` (or an
    upgrade of qwenpipe, when the database is newer) is the fix. A command cannot run as asked
    until then (exit 2)."""


def version(conn: Any) -> int:
    exists = conn.execute("SELECT to_regclass('qwenpipe_schema') IS NOT NULL").fetchone()[0]
    if not exists:
        return 0
    row = conn.execute("SELECT version FROM qwenpipe_schema").fetchone()
    return int(row[0]) if row else 0


def check(conn: Any, where: str) -> None:
    """Refuse a database at another version than this code's, naming the fix."""
    current = version(conn)
    if current == SCHEMA_VERSION:
        return
    if current > SCHEMA_VERSION:
        raise SchemaMismatch(
            f"{where}: schema version {current} is newer than this qwenpipe knows ({SCHEMA_VERSION}); "
            "upgrade qwenpipe on this host"
        )
    shown = "has no qwenpipe schema" if current == 0 else f"is at schema version {current}"
    raise SchemaMismatch(f"{where} {shown} (this qwenpipe needs {SCHEMA_VERSION}); run `{INIT_COMMAND}`")


def migrate(conn: Any, where: str) -> tuple[int, int]:
    """Bring the database to SCHEMA_VERSION in one transaction (idempotent; hosts racing here
    wait on one advisory lock). Returns (version before, version after)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS qwenpipe_schema (version INTEGER NOT NULL)")
        before = version(conn)
        if before > SCHEMA_VERSION:
            check(conn, where)
        for script in MIGRATIONS[before:]:
            conn.execute(script)
        conn.execute("DELETE FROM qwenpipe_schema")
        conn.execute("INSERT INTO qwenpipe_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
    return before, SCHEMA_VERSION
