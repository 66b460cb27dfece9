"""The store: qwenpipe's history and bookkeeping behind one small protocol (see protocol.py).

Two stores: SQLite (sqlite.py, the file `articles/.qwenpipe/qwenpipe.db`) and PostgreSQL
(postgres.py, a batch several hosts share). Who opens one and when is the workspace's business
(contract/workspace.py: one store a workspace, opened on first use, closed with it); the store
knows nothing of the contract above it. Nothing is imported with the package itself: a path
that needs no store (a no-op `generate`) pays neither sqlite3 nor psycopg.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .protocol import Store


class Initialized(NamedTuple):
    """What `qwenpipe store init` did: which store, where, and its schema version before/after."""

    kind: str  # "sqlite" or "postgresql"
    where: str
    before: int
    after: int


def initialize(url: str, open_sqlite: Callable[[], Store]) -> Initialized:
    """Create or migrate the configured store's schema: the PostgreSQL store at `url` ([store]
    url), else the SQLite file `open_sqlite` opens (it creates and migrates itself on every open)."""
    if url:
        from .postgres import PostgresStore, shown_url

        before, after = PostgresStore.init(url)
        return Initialized("postgresql", shown_url(url), before, after)
    from .schema import SCHEMA_VERSION

    where = str(getattr(open_sqlite(), "path", "the SQLite store"))
    return Initialized("sqlite", where, SCHEMA_VERSION, SCHEMA_VERSION)


POSTGRES_EXTRA = "pip install 'qwenpipe[postgres]'"


def require_driver() -> None:
    """ConfigError (exit 2) when [store] url is set and psycopg, the PostgreSQL driver, is not
    installed: the extra that brings it, named."""
    import importlib.util

    try:
        missing = importlib.util.find_spec("psycopg") is None
    except (ImportError, ValueError):
        missing = True
    if missing:
        from ..config import ConfigError

        raise ConfigError(
            "[store] url names a PostgreSQL store, but its driver (psycopg) is not installed: "
            f"run `{POSTGRES_EXTRA}` in qwenpipe's environment (or empty [store] url for SQLite)"
        )
