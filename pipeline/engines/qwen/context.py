"""What the chat engine's pieces share: its settings, its clock, and the unknown answers it
read past. Handed to sending, observing, judging and the pages explicitly, so that none of
them reaches into the engine (engine.py) that holds them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..base import Code, HardError
from ..unknown import UnknownAnswer, seen
from .api import chat_id_from_url
from .selectors import Selectors
from .steady import READ_SECONDS

POLL_SECONDS = 0.25  # while waiting for the app, the chat address, or a page's next load


@dataclass
class Noticed:
    """Unknown answers read past (an unknown phase or role, in a stream or a chat's JSON):
    nothing failed for them; each is handed over once per engine (`take`)."""

    found: list[UnknownAnswer] = field(default_factory=list)
    before: set[UnknownAnswer] = field(default_factory=set)

    def notice(self, where: str, what: str) -> None:
        found = UnknownAnswer(where, seen(what=what))
        if what and found not in self.before:
            self.before.add(found)
            self.found.append(found)

    def take(self) -> list[UnknownAnswer]:
        found, self.found = self.found, []
        return found


@dataclass
class EngineContext:
    """One engine's settings (the config's [qwen] section, read once), its clock and its
    noticed unknown answers."""

    name: str
    base_url: str
    page_timeout: float
    stable_reads: int
    selector_sets: tuple[Selectors, ...]
    keep_login: Callable[[Any], None] | None = None  # called with every page showing the app
    read_interval: float = READ_SECONDS  # seconds between the stability reads of an answer
    noticed: Noticed = field(default_factory=Noticed)
    now: Callable[[], float] = time.monotonic

    def deadline(self, seconds: float) -> float:
        return self.now() + seconds

    def chat_url(self, chat_id: str) -> str:
        return f"{self.base_url}/c/{chat_id}"


def chat_id_of(chat_url: str) -> str:
    """The chat id in a chat's address; a HardError naming the address when it has none."""
    chat_id = chat_id_from_url(chat_url)
    if not chat_id:
        raise HardError(f"not a chat URL (expected .../c/<id>): {chat_url}", code=Code.BAD_CHAT_URL)
    return chat_id
