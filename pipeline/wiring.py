"""One place wires the store and the engines: which store and which chat and router engines a
config gets, and how they are built (the chat's browser profile lock and its login refresh
included).

The contract knows stores and engines only by their protocols (store/protocol.py,
engines/base.py) and is handed the factories made here (`workspace(config)` with STORES, a
contract.workspace.Stores; `engines(config)`, a contract.workspace.Engines); tests hand it
others instead. Store and engine code is imported only when one is opened or built: a cycle
with nothing to do loads no engine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import files
from .config import Config, ConfigError
from .contract.workspace import Engines, Stores, Workspace
from .engines.base import ChatEngine, DirectEngine
from .files import STATE_DIR
from .store.protocol import IMPORT_KEY

if TYPE_CHECKING:
    from .engines.unknown import UnknownAnswer
    from .store.protocol import Store
    from .store.sqlite import SQLiteStore


def batch_store(config: Config) -> Store:
    """The batch's store: the PostgreSQL store of [store] url, as this host (a batch several
    hosts share), else the SQLite file in articles/.qwenpipe (open_sqlite)."""
    if config.store.url:
        from .store.postgres import PostgresStore

        return PostgresStore.open(config.store.url, host=config.store.host)
    return open_sqlite(config.articles_dir / files.STATE_DIR)


def open_sqlite(state_dir: Path) -> SQLiteStore:
    """The SQLite store of `state_dir` (articles/.qwenpipe), created and migrated on first use,
    with what an older qwenpipe left there imported, once (contract/upgrade.py)."""
    from .store.sqlite import SQLiteStore

    store = SQLiteStore.open(state_dir)
    try:
        if store.meta(IMPORT_KEY) is None:  # imported once: the upgrade's module only then
            from .contract.upgrade import import_once

            import_once(store, state_dir)
    except BaseException:
        store.close()
        raise
    return store


def this_host_store(state_dir: Path) -> Store | None:
    """This host's own SQLite store in `state_dir`, as it is (none created, nothing migrated or
    imported), or None when it has none: what it sent before its batch was shared."""
    from .store.dbfile import DB_NAME

    database = state_dir / DB_NAME
    if not database.is_file():
        return None
    from .store.sqlite import SQLiteStore

    return SQLiteStore(database)


STORES = Stores(batch=batch_store, this_host=this_host_store)


def workspace(config: Config, store: Store | None = None) -> Workspace:
    """The workspace of a config, its store opened on first use (STORES), or `store` (one the
    caller made). A batch several hosts share needs psycopg: without it, exit 2 now."""
    if config.store.url and store is None:
        from .store import require_driver

        require_driver()
    return Workspace(config, STORES, store=store)


def qwen_engine(config: Config) -> ChatEngine:
    """The chat engine of the account `config` is for (accounts.account_config): with several
    accounts its browser is a context of the one browser they share (engines.qwen.browser)."""
    from .accounts import account_named, config_account, several
    from .console import say
    from .contract.quota import trace_path
    from .engines.qwen.engine import QwenEngine  # Playwright is imported only when a chat is needed
    from .engines.qwen.selectors import SelectorError
    from .signin.profile import lock_browser_profile
    from .signin.refresh import LoginRefresh

    account = account_named(config, config_account(config))
    trace = trace_path(config.articles_dir / STATE_DIR, account.name) if config.browser.trace else None
    try:
        return QwenEngine(
            config.qwen,
            config.browser,
            root=config.root,
            lock_profile=lock_browser_profile,
            keep_login=LoginRefresh(config, say=say, account=account),
            shared_browser=several(config),
            trace=trace,
        )
    except SelectorError as err:
        raise ConfigError(str(err)) from None


def router_engine(config: Config) -> DirectEngine:
    """The router ([router]): an OpenAI-compatible API, one call per answer."""
    from .engines.router import RouterEngine

    return RouterEngine(config.router)


def router_health(config: Config) -> dict[str, Any]:
    """What `doctor` shows of the router (RouterEngine.health: reachable, model listed, key
    set), asked of the router as a run builds it. Never raises."""
    router = DIRECT_ENGINES["router"](config)
    try:
        return router.health()  # type: ignore[attr-defined]  # the router's, not the protocol's
    finally:
        router.close()


# The registry: `generate --engine NAME` names one of these, or "auto" (the contract: the chat,
# then the router when the chat cannot).
CHAT_ENGINES: dict[str, Callable[[Config], ChatEngine]] = {"qwen": qwen_engine}
DIRECT_ENGINES: dict[str, Callable[[Config], DirectEngine]] = {"router": router_engine}
ENGINE_CHOICES = ("auto", *CHAT_ENGINES, *DIRECT_ENGINES)


def engines(config: Config, workspace: Workspace | None = None) -> Engines:
    """The engines of a run: none started until the contract asks for one. A run that may use
    the router key refuses a key file others may read now (exit 2), before anything is sent.
    With the run's `workspace`, what the chat engines met that no call took is journalled as
    the run's own (`unknown_answer` under journal.NO_ARTICLE) when they close."""
    if config.router.enabled and config.router.api_key_file:
        from .config import read_router_key

        read_router_key(config.router)
    return Engines(
        config,
        chat_factory=CHAT_ENGINES["qwen"],
        router_factory=DIRECT_ENGINES["router"],
        on_noticed=None if workspace is None else _journalled(workspace),
    )


def _journalled(workspace: Workspace) -> Callable[[str, UnknownAnswer], None]:
    from .contract.journal import NO_ARTICLE
    from .contract.unknown import journal_noticed

    def journal(account: str, found: UnknownAnswer) -> None:
        journal_noticed(workspace.journal, NO_ARTICLE, account, found)

    return journal
