"""One place wires the engines: which chat and router engines a config gets, and how they are
built (the chat's browser profile lock and its login refresh included).

The contract knows engines only by their protocol (engines/base.py) and is handed the factories
made here (`engines(config)`, a contract.workspace.Engines); tests hand it fakes instead. Engine
code is imported only when an engine is built: a cycle with nothing to do loads none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .config import Config, ConfigError
from .contract.workspace import Engines
from .engines.base import ChatEngine, DirectEngine
from .files import STATE_DIR


def qwen_engine(config: Config) -> ChatEngine:
    """The chat engine of the account `config` is for (accounts.account_config): with several
    accounts its browser is a context of the one browser they share (engines.qwen.browser)."""
    from .accounts import account_named, config_account, several
    from .console import say
    from .contract.quota import trace_path
    from .engines.qwen.engine import QwenEngine  # Playwright is imported only when a chat is needed
    from .engines.qwen.selectors import SelectorError
    from .setup.login import LoginRefresh
    from .setup.profile import lock_browser_profile

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


def engines(config: Config) -> Engines:
    """The engines of a run: none started until the contract asks for one. A run that may use
    the router key refuses a key file others may read now (exit 2), before anything is sent."""
    if config.router.enabled and config.router.api_key_file:
        from .config import read_router_key

        read_router_key(config.router)
    return Engines(config, chat_factory=CHAT_ENGINES["qwen"], router_factory=DIRECT_ENGINES["router"])
