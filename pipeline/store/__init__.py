"""The store: qwenpipe's history and bookkeeping behind one small protocol (see protocol.py).

`open_store` is the one way in: it opens (and on first use creates and migrates) the SQLite
store of an `articles/.qwenpipe` folder, and imports what an older qwenpipe left there, once.
Nothing is imported with the package itself: a path that needs no store (a no-op `generate`)
pays neither sqlite3 nor the legacy readers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .protocol import Store


class Initialized(NamedTuple):
    """What `qwenpipe store init` did: which store, where, and its schema version before/after."""

    kind: str  # "sqlite" or "postgresql"
    where: str
    before: int
    after: int


def initialize(url: str, state_dir: Path) -> Initialized:
    """Create or migrate the configured store's schema (store.url, else the SQLite file)."""
    if url:
        from .postgres import PostgresStore, shown_url

        before, after = PostgresStore.init(url)
        return Initialized("postgresql", shown_url(url), before, after)
    from .schema import SCHEMA_VERSION

    store = open_store(state_dir)  # the SQLite store creates and migrates itself on every open
    where = str(getattr(store, "path", state_dir))
    store.close()
    return Initialized("sqlite", where, SCHEMA_VERSION, SCHEMA_VERSION)


IMPORT_KEY = "legacy_import"  # the store's meta key that says the old files were imported


def open_store(state_dir: Path) -> Store:
    from .sqlite import SQLiteStore

    store = SQLiteStore.open(state_dir)
    try:
        if store.meta(IMPORT_KEY) is None:  # only then are the old files' readers loaded
            from . import legacy

            legacy.import_once(store, state_dir)
    except BaseException:
        store.close()
        raise
    return store


_OPEN: dict[str, Store] = {}
KEEP_OPEN = 8  # stores a process keeps open (a long-lived process may see many workspaces)
_SERVERS: dict[str, tuple[str, str]] = {}  # state_dir -> (store.url, host) of a shared batch


def use_server(state_dir: Path, url: str, host: str) -> None:
    """The batch of `state_dir` lives in the PostgreSQL store at `url` ([store] url), this
    host named `host`: `shared` opens that store for it instead of the SQLite file."""
    require_driver()
    key = str(state_dir)
    if _SERVERS.get(key) != (url, host):
        _SERVERS[key] = (url, host)
        stale = _OPEN.pop(key, None)
        if stale is not None:
            stale.close()


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


def shared(state_dir: Path) -> Store:
    """The process's one open store of `state_dir`, opened on first use (every reader and writer
    of a workspace shares it: one connection, one import check). Both stores are thread-safe."""
    key = str(state_dir)
    store = _OPEN.get(key)
    if store is None:
        server = _SERVERS.get(key)
        if server is not None:
            from .postgres import PostgresStore

            store = _OPEN[key] = PostgresStore.open(server[0], host=server[1])
        else:
            store = _OPEN[key] = open_store(Path(state_dir))
        while len(_OPEN) > KEEP_OPEN:
            _OPEN.pop(next(iter(_OPEN))).close()
    return store


def close_shared() -> None:
    """Close every store `shared` opened (before a workspace's database is moved or deleted)."""
    while _OPEN:
        _OPEN.popitem()[1].close()
