"""Where a test's store lives, for every Store implementation: the shared suite runs on each.

A place is plain data (implementation name, location) so that a worker process can open the
same store: `open_place(place)`. The PostgreSQL store (issue 18) adds its entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pg_server import PostgresServer

from pipeline.store.postgres import PostgresStore
from pipeline.store.protocol import Store
from pipeline.store.sqlite import SQLiteStore

# A long busy timeout: on a loaded machine a writer may wait for the others, and these tests
# are about what is written, not how fast (test_sqlite_store.py tests the timeout itself).
OPENERS: dict[str, Callable[[str], Store]] = {
    "sqlite": lambda where: SQLiteStore.open(Path(where), busy_timeout=120),
    "postgres": lambda where: PostgresStore.open(where, busy_timeout=120, migrate=True),
}


@dataclass(frozen=True)
class Place:
    kind: str
    where: str  # a folder for SQLite; a database URL for a server


def open_place(place: Place) -> Store:
    return OPENERS[place.kind](place.where)


def new_place(kind: str, tmp_path: Path, server: PostgresServer | None = None) -> Place:
    """A fresh, empty store location of `kind` for one test (a database of its own on `server`)."""
    if kind == "sqlite":
        return Place(kind, str(tmp_path / "articles" / ".qwenpipe"))
    if kind == "postgres" and server is not None:
        return Place(kind, server.new_database())
    raise ValueError(f"no place for a {kind} store")
