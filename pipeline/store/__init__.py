"""The store: qwenpipe's history and bookkeeping behind one small protocol (see protocol.py).

`open_store` is the one way in: it opens (and on first use creates and migrates) the SQLite
store of an `articles/.qwenpipe` folder, and imports what an older qwenpipe left there, once.
Nothing is imported with the package itself: a path that needs no store (a no-op `generate`)
pays neither sqlite3 nor the legacy readers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .protocol import Store


def open_store(state_dir: Path) -> Store:
    from . import legacy
    from .sqlite import SQLiteStore

    store = SQLiteStore.open(state_dir)
    try:
        legacy.import_once(store, state_dir)
    except BaseException:
        store.close()
        raise
    return store
