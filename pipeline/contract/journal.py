"""The journal: one event per step, appended by every command, read by status, show and `log`.

The events live in the store (`articles/.qwenpipe/qwenpipe.db`), each one its own short
transaction: a writer killed mid-step leaves nothing of that step, never a torn line.
`journal.jsonl` is what versions before the store wrote; `read_lines` reads it once, for the
store's import (contract/upgrade.py), and nothing writes it any more.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import files
from ..crashpoints import crashpoint

if TYPE_CHECKING:
    from ..store.protocol import Store

OLD_JOURNAL = "journal.jsonl"  # in articles/.qwenpipe: the journal of versions before the store
NO_ARTICLE = "*"  # the slug of a run's own events (a cycle's start and end, what its collect met)


@dataclass
class Journal:
    """The workspace's journal: every step's event, appended to the store, read back in order.
    (A docstring of its own: `@dataclass` writes a missing one with inspect.signature, at import.)"""

    store: Store  # the workspace's store, where the events live

    def append(self, slug: str, event: str, **fields: object) -> dict:
        """Record one step. None-valued fields are left out to keep events short. `account`
        (a field): the chat account the step was about; a chat step names `default` without it."""
        with self.store.transaction() as tx:
            return self.append_in(tx, slug, event, **fields)

    def append_in(self, tx, slug: str, event: str, **fields: object) -> dict:
        """`append` as one write of the caller's store transaction: it commits with its other
        writes (one transaction, one fsync), or not at all."""
        from ..store.protocol import DEFAULT_ACCOUNT, Event

        kept = {k: v for k, v in fields.items() if v is not None}  # masked by the store's write
        account = kept.pop("account", None)
        record = Event(
            slug,
            event,
            round(time.time(), 3),
            pid=os.getpid(),
            account=str(account) if account else DEFAULT_ACCOUNT if kept.get("engine") == "qwen" else "",
            fields=kept,
        )
        record.seq = tx.append(record)
        crashpoint("mid_journal")  # chaos: killed inside the step, nothing of it is written
        return record.to_entry()

    def read(self, *, slug: str | None = None, after: int = 0) -> Iterator[dict]:
        """Entries (the journal-line form, with `seq`) after event `after`, oldest first."""
        for event in self.store.events(slug, after=after):
            yield {**event.to_entry(), "seq": event.seq}


def read_lines(path: Path) -> Iterator[dict]:
    """The entries of an old `journal.jsonl`, oldest first; torn or foreign lines are skipped."""
    try:
        handle = files.open_read(path)
    except FileNotFoundError:
        return
    with handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # a line left torn by a killed writer
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if is_entry(entry):
                yield entry


MAX_TS = 1e11  # the year 5138: anything later is a corrupt line, not a time


def is_entry(entry: object) -> bool:
    """A journal entry every reader can trust: a dict with a string slug and a real epoch `ts`.

    One corrupt line (ts = 1e20, NaN, "x") must not stop status, show or a cycle.
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("slug"), str):
        return False
    ts = entry.get("ts")
    return isinstance(ts, (int, float)) and not isinstance(ts, bool) and 0 <= ts < MAX_TS
