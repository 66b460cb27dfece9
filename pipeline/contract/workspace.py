"""Where things are (from the config) and the engines, created only when first needed (by the
factories handed in: pipeline/wiring.py's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..accounts import proxy_secrets
from ..config import Config
from ..redact import register, router_key
from ..store.protocol import DEFAULT_ACCOUNT
from .article import STATE_DIR, ArticleFiles
from .journal import Journal
from .quota import ChatQuota


@dataclass
class Workspace:
    config: Config

    def __post_init__(self) -> None:
        # Known before anything is read or written, so every sink masks the key, even in a
        # command that never talks to the router (status, show).
        router_key(self.config.router)
        for secret in proxy_secrets(self.config):  # the accounts' proxy passwords, likewise
            register(secret)
        if self.config.store.url:  # a batch several hosts share: its store is the server's
            from ..store import use_server

            use_server(self.state_dir, self.config.store.url, self.config.store.host)

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
    def journal(self) -> Journal:
        return Journal(self.state_dir / "journal.jsonl")

    @property
    def store(self):
        """The batch's store (articles/.qwenpipe/qwenpipe.db), opened on first use, once a process."""
        from ..store import shared

        return shared(self.state_dir)

    @property
    def has_store(self) -> bool:
        """Whether there is a store to read (a reader creates none): a shared batch's always."""
        return bool(self.config.store.url) or self.state_dir.exists()

    @property
    def chat_quota(self) -> ChatQuota:
        return ChatQuota(self.state_dir / "quota.json")

    @property
    def cycle_lock(self) -> Path:
        return self.state_dir / "cycle.lock"

    def article(self, slug: str) -> ArticleFiles:
        return ArticleFiles(slug, self.articles_dir)


if TYPE_CHECKING:  # the engines' protocol only: they are built by pipeline/wiring.py
    from ..engines.base import ChatEngine, DirectEngine, EngineError


@dataclass
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
        for engine in (*self._chats.values(), self._router):
            if engine is not None:
                engine.close()
        self._chats.clear()
        self._router = None

    def __enter__(self) -> Engines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
