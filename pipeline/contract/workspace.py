"""Where things are (from the config), the store, and the engines, created only when first needed
(by the factories handed in: pipeline/wiring.py's). The contract knows stores only by their
protocol (store/protocol.py): which store a config gets is the wiring's business."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import files
from ..config import Config
from ..known_secrets import register_all
from ..records import record
from ..store.protocol import DEFAULT_ACCOUNT
from .article import STATE_DIR, ArticleFiles
from .journal import OLD_JOURNAL, Journal
from .quota import ChatQuota

if TYPE_CHECKING:
    from ..store.protocol import Store


@dataclass(frozen=True)
class Stores:
    """How a workspace opens its stores (pipeline/wiring.py's STORES; tests may hand others).

    `batch`: the batch's store for a config, created and migrated as needed (the PostgreSQL
    store of [store] url, else the SQLite file in articles/.qwenpipe);
    `this_host`: this host's own SQLite store in a state folder (articles/.qwenpipe), when there
    is one, opened as it is (None when there is none): what a host sent before its batch was
    shared."""

    batch: Callable[[Config], Store]
    this_host: Callable[[Path], Store | None]


class Workspace:
    """One batch's places (from the config) and its store.

    The store is opened once, on first use (by `stores.batch`), and shared by every reader and
    writer of the workspace, its threads included: one connection. The workspace owns it:
    `close()` (or leaving `with Workspace(...)`) closes it. `store`: a store to use instead (one
    the caller made, e.g. `SQLiteStore(IN_MEMORY)`); the workspace closes it too. A workspace is
    made by pipeline/wiring.py's `workspace(config)`, which hands it the stores."""

    def __init__(self, config: Config, stores: Stores | None = None, *, store: Store | None = None):
        if stores is None and store is None:
            raise TypeError("a Workspace needs its stores or a store: make it with pipeline.wiring.workspace")
        self.config = config
        self.stores = stores
        self._store = store
        self._opening = threading.Lock()
        # Known before anything is read or written, so every sink masks them, even in a
        # command that never talks to the router (status, show).
        register_all(config)

    def __repr__(self) -> str:
        return f"Workspace({self.config.describe()})"

    @property
    def prompts_dir(self) -> Path:
        return self.config.prompts_dir

    @property
    def articles_dir(self) -> Path:
        return self.config.articles_dir

    @property
    def state_dir(self) -> Path:
        return self.articles_dir / STATE_DIR

    @property
    def store(self) -> Store:
        """The batch's store, opened on first use (see the class)."""
        store = self._store
        if store is None:
            with self._opening:  # a cycle's threads may ask at once: one store all the same
                if self._store is None:
                    self._store = self._open_store()
                store = self._store
        return store

    def _open_store(self) -> Store:
        if self.stores is None:
            raise TypeError(f"{self!r} was handed one store, closed since: it has no other to open")
        return self.stores.batch(self.config)

    def this_host_store(self) -> Store | None:
        """This host's own SQLite store, when there is one (Stores.this_host); the caller closes it."""
        return self.stores.this_host(self.state_dir) if self.stores is not None else None

    def close(self) -> None:
        """Close the store, if it was opened (a later use opens it again)."""
        with self._opening:
            store, self._store = self._store, None
        if store is not None:
            store.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def has_store(self) -> bool:
        """Whether there is a store to read (a reader creates none): a shared batch's always."""
        return self._store is not None or bool(self.config.store.url) or self.state_dir.exists()

    @property
    def journal(self) -> Journal:
        return Journal(self.store)

    def check_journal(self) -> None:
        """UnsafeFile when the store's folder (or the old journal it imports) is a symlink, a
        FIFO or a folder: asked before a step that must log, so that nothing is marked or sent
        that could not be logged."""
        files.check_folder(self.state_dir)
        files.is_regular(self.state_dir / OLD_JOURNAL)

    @property
    def chat_quota(self) -> ChatQuota:
        return ChatQuota(self.store)

    @property
    def cycle_lock(self) -> Path:
        return self.state_dir / "cycle.lock"

    def article(self, slug: str) -> ArticleFiles:
        return ArticleFiles(slug, self.articles_dir)


if TYPE_CHECKING:  # the engines' protocol only: they are built by pipeline/wiring.py
    from ..engines.base import ChatEngine, DirectEngine, EngineError
    from ..engines.unknown import UnknownAnswer


@record
class Engines:
    """Lazy engines: no browser starts, and no HTTP client opens, until one is asked for.

    One chat engine per account (`chat(name)`), each made by `chat_factory` from the config as
    that account sees it (accounts.account_config); the router by `router_factory`: both handed
    in (pipeline/wiring.py's for a run, fakes in tests). `unavailable`: the accounts this run
    found unable to send (logged out, a bot check), with why: rotation skips them until the
    next run."""

    config: Config
    chat_factory: Callable[[Config], ChatEngine]
    router_factory: Callable[[Config], DirectEngine]
    unavailable: dict[str, EngineError] = field(default_factory=dict)
    # Accounts whose probe send after a bot-check hold this run made: their other sends wait
    # for the next run (contract/quota.py, `probing`).
    probed: set[str] = field(default_factory=set)
    # What a chat engine met that no call of it took: the unknown answers its pages received
    # after their step was done with them (a chat list a send's page loads once its answer is
    # drawn, fuzz seed 2700 trial 40), read as the engine closes its pages. Handed here with the
    # account at `close`, the one place every chat engine of a run closes (wiring.py journals
    # them as the run's own); None: nobody asked.
    on_noticed: Callable[[str, UnknownAnswer], None] | None = None
    _chats: dict[str, ChatEngine] = field(default_factory=dict, init=False)
    _router: DirectEngine | None = field(default=None, init=False)

    def chat(self, account: str = DEFAULT_ACCOUNT) -> ChatEngine:
        """The chat engine of `account` (the one account `default` of a setup without tables)."""
        engine = self._chats.get(account)
        if engine is None:
            from ..accounts import account_config, account_named

            config = account_config(self.config, account_named(self.config, account))
            engine = self._chats[account] = self.chat_factory(config)
        return engine

    def router(self) -> DirectEngine:
        if self._router is None:
            self._router = self.router_factory(self.config)
        return self._router

    @property
    def chat_started(self) -> bool:
        return bool(self._chats)

    @property
    def browser_launches(self) -> int:
        """Browsers the chat engines made here launched so far (attaching to one is none)."""
        return sum(engine.launches for engine in self._chats.values())

    def close(self) -> None:
        """Close every engine, each account's leftovers journalled, then raise the first error:
        one browser that fails to close leaves no other account open or unjournalled."""
        chats, self._chats = self._chats, {}
        router, self._router = self._router, None
        first: BaseException | None = None
        for account, engine in chats.items():
            try:
                engine.close()
            except BaseException as error:  # re-raised below, once the rest are closed
                first = first or error
            for found in engine.noticed() if self.on_noticed is not None else ():
                self.on_noticed(account, found)
        if router is not None:
            try:
                router.close()
            except BaseException as error:
                first = first or error
        if first is not None:
            raise first

    def __enter__(self) -> Engines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
