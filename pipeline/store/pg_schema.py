"""The PostgreSQL store's schema, versioned in `qwenpipe_schema`, and the migration to it.

The tables are the SQLite store's (tables.py), each row also naming its batch: one database
can hold several batches, and the unique constraint that makes a second send impossible to
record is on (batch, slug, turn). Only `qwenpipe store init` migrates (several hosts must not race a
migration from their cron jobs); every other command refuses a database at another version,
naming that command.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageProblem
from . import tables
from .protocol import StoreError

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the first PostgreSQL store (the SQLite store's schema 2, with batches).
    tables.script(tables.POSTGRES, *tables.FIRST, tables.SUMMARIES, tables.PROMPT_CHECKS),
    # 1 -> 2: finished articles (each host writes its SLUG.md from them) and served accounts.
    tables.script(tables.POSTGRES, *tables.SHARED),
    # 2 -> 3: the chats of finished articles to delete from the site, and those deleted.
    tables.script(tables.POSTGRES, *tables.DELETIONS),
    # 3 -> 4: an intent names its chat before the prompt leaves the browser.
    tables.SENDS_CHAT_ID,
    # 4 -> 5: what status shows of each article, and the counter that says when it is stale.
    tables.script(tables.POSTGRES, *tables.STATUS) + tables.status_triggers(tables.POSTGRES),
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
