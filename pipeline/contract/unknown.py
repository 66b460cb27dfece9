"""What the contract does with an answer of the site nobody has seen yet (engines/unknown.py;
docs/reliability.md, "The unknown").

Every call the contract makes of a chat engine goes through `JournalledChat`: an engine error
that carries an unknown answer is journalled there (`unknown_answer`: where, what was seen, the
account), once, before any handler decides what it means. What it means is decided by where it
was met: after the click it is in doubt (contract/step/send.py), before it the failure it was
raised as (transient with backoff; a page where the chat should be holds the account, as a bot
check does).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from ..engines.base import EngineError
from ..engines.unknown import UnknownAnswer
from .journal import Journal

UNKNOWN_EVENT = "unknown_answer"  # the journal's event (fixed: `doctor` and `report` read it)


def journal_unknown(journal: Journal, slug: str, account: str, err: BaseException) -> None:
    """Journal the unknown answer `err` carries (none: nothing), once however often it is seen
    on its way up, with the failure it was raised as."""
    found: UnknownAnswer | None = getattr(err, "unknown", None)
    if found is None or getattr(err, "journalled", False):
        return
    journal_noticed(journal, slug, account, found, code=getattr(err, "code", None), error=str(err))
    err.journalled = True  # type: ignore[attr-defined]


def journal_noticed(
    journal: Journal, slug: str, account: str, found: UnknownAnswer, **failed: object
) -> None:
    """Journal one unknown answer (`failed`: the error it was raised as; none when the engine
    read past it: ChatEngine.noticed). The store masks what it keeps; `seen` is masked and cut
    already."""
    where = found.where or "unknown"
    journal.append(
        slug, UNKNOWN_EVENT, engine="qwen", account=account or None, where=where, seen=found.seen, **failed
    )


class JournalledChat:
    """A chat engine whose every call journals the unknown answers it met: the one an error of it
    carries (`on_error`), then lets the error go on as it was raised; and, after each call, those
    it read past (`noticed`, handed to `on_noticed`)."""

    def __init__(
        self,
        engine: Any,
        on_error: Callable[[EngineError], None],
        on_noticed: Callable[[UnknownAnswer], None],
    ):
        self._engine = engine
        self._on_error, self._on_noticed = on_error, on_noticed

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._engine, name)
        if not callable(value) or name == "noticed":
            return value

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except EngineError as err:
                self._on_error(err)
                raise
            finally:
                for found in self._engine.noticed():
                    self._on_noticed(found)

        return call


DAY = 86400.0


class UnknownSeen(NamedTuple):
    """The unknown answers the journal holds since a time: how many per `where`, and the newest."""

    counts: dict[str, int]
    newest: dict | None  # its journal entry (ts, slug, account, where, seen)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def unknown_since(journal: Journal, since: float) -> UnknownSeen:
    """The `unknown_answer` events journalled since `since` (epoch seconds), per `where`."""
    counts: dict[str, int] = {}
    newest = None
    for event in journal.store.events(since=since):
        if event.event != UNKNOWN_EVENT:
            continue
        entry = event.to_entry()
        where = str(entry.get("where") or "unknown")
        counts[where] = counts.get(where, 0) + 1
        if newest is None or entry["ts"] >= newest["ts"]:
            newest = entry
    return UnknownSeen(dict(sorted(counts.items())), newest)
