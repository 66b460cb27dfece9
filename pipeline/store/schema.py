"""The SQLite store's schema, versioned with `PRAGMA user_version`, and the migration to it.

Each entry of MIGRATIONS takes the database from version N to N + 1; `migrate` applies the
missing ones in one transaction, so a database is at one version or the next, never between.
A database from a newer qwenpipe is refused (its schema may mean what this code cannot know).
"""

from __future__ import annotations

import sqlite3

from . import tables
from .protocol import ENGINE_EVENTS, SENT_EVENTS, StoreError


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{name}'" for name in names)


MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the first store.
    tables.script(tables.SQLITE, *tables.FIRST),
    # 1 -> 2: one summary row per article (kept by every append), remembered prompt checks.
    tables.script(tables.SQLITE, tables.SUMMARIES)
    + f"""
    INSERT INTO summaries (slug, last_event)
        SELECT slug, event FROM events WHERE seq IN (SELECT max(seq) FROM events GROUP BY slug);
    UPDATE summaries SET (sent_ts, chat_url) = (
        SELECT ts, coalesce(json_extract(fields, '$.chat_url'), '') FROM events
        WHERE events.slug = summaries.slug AND event IN ({_listed(SENT_EVENTS)}) ORDER BY seq DESC LIMIT 1
    ) WHERE slug IN (SELECT slug FROM events WHERE event IN ({_listed(SENT_EVENTS)}));
    UPDATE summaries SET (engine, turns) = (
        SELECT coalesce(json_extract(fields, '$.engine'), ''),
            CASE WHEN event = 'done' AND json_type(fields, '$.turns') = 'integer'
                THEN json_extract(fields, '$.turns') ELSE 0 END
        FROM events
        WHERE events.slug = summaries.slug AND event IN ({_listed(ENGINE_EVENTS)}) ORDER BY seq DESC LIMIT 1
    ) WHERE slug IN (SELECT slug FROM events WHERE event IN ({_listed(ENGINE_EVENTS)}));
    """
    + tables.script(tables.SQLITE, tables.PROMPT_CHECKS),
    # 2 -> 3: finished articles and served accounts (what several hosts share; see protocol.py).
    tables.script(tables.SQLITE, *tables.SHARED),
    # 3 -> 4: the chats of finished articles to delete from the site, and those deleted.
    tables.script(tables.SQLITE, *tables.DELETIONS),
    # 4 -> 5: an intent names its chat before the prompt leaves the browser.
    tables.SENDS_CHAT_ID,
    # 5 -> 6: what status shows of each article, and the counter that says when it is stale.
    tables.script(tables.SQLITE, *tables.STATUS) + tables.status_triggers(tables.SQLITE),
)
SCHEMA_VERSION = len(MIGRATIONS)


def version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, where: object) -> int:
    """Bring the database to SCHEMA_VERSION (a no-op when it is there); returns the version."""
    if version(conn) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = version(conn)  # another process may have migrated while we waited
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{where}: schema version {current} is newer than this qwenpipe knows "
                f"({SCHEMA_VERSION}); upgrade qwenpipe"
            )
        for script in MIGRATIONS[current:]:
            for statement in statements(script):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION


def statements(script: str) -> list[str]:
    """The statements of a script, one by one: `executescript` would commit the migration's
    transaction first. Split where SQLite says a statement is complete (a trigger's body holds
    semicolons of its own)."""
    found, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            found.append(current.strip())
            current = ""
    return found + ([current.strip()] if current.strip() else [])
