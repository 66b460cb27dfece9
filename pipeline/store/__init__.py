"""The store: qwenpipe's history and bookkeeping behind one small protocol (see protocol.py).

`open_store` is the one way in: it opens (and on first use creates and migrates) the SQLite
store of an `articles/.qwenpipe` folder, and imports what an older qwenpipe left there, once.
"""

from __future__ import annotations

from pathlib import Path

from . import legacy
from .protocol import Store
from .sqlite import SQLiteStore


def open_store(state_dir: Path) -> Store:
    store = SQLiteStore.open(state_dir)
    try:
        legacy.import_once(store, state_dir)
    except BaseException:
        store.close()
        raise
    return store
