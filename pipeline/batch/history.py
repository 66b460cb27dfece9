"""The last fortnight of the batch as numbers (`status --history`): per local day, the articles
written by each engine, each account's sends against its limit, and the dead letters. Read from
the store's journal (one query of the events since the first day, one send count a day); the
chart that draws it is batch/chart.py, and `--json` gives the same numbers."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import date

from ..accounts import all_accounts
from ..contract.quota import day_start
from ..contract.workspace import Workspace

DAYS = 14  # a fortnight: two of each weekday, enough to see a habit and a change


@dataclass
class Day:
    day: date
    done: Counter = field(default_factory=Counter)  # articles written that day, by engine
    sends: Counter = field(default_factory=Counter)  # sends to the chat that day, by account
    dead: int = 0  # articles dead-lettered that day

    def to_json(self) -> dict:
        return {
            "day": self.day.isoformat(),
            "done": {"chat": self.done["qwen"], "router": self.done["router"]},
            "sends": dict(self.sends),
            "dead_letters": self.dead,
        }


@dataclass
class History:
    days: list[Day]  # oldest first, the last one today
    limits: dict[str, int | None]  # each account's max_sends_per_day (None: no limit), config order

    def to_json(self) -> dict:
        return {
            "days": [day.to_json() for day in self.days],
            "accounts": [{"name": name, "limit": limit} for name, limit in self.limits.items()],
        }


def collect_history(workspace: Workspace, now: float | None = None, days: int = DAYS) -> History:
    """The last `days` local days (today included) of `workspace`'s journal. An empty history
    where there is no store yet: a reader creates none."""
    now = time.time() if now is None else now
    starts = [day_start(now, back) for back in range(days - 1, -1, -1)]
    ends = [*starts[1:], float("inf")]
    found = [Day(date.fromtimestamp(start)) for start in starts]
    # One account of a setup without [accounts.*]: qwen.max_sends_per_day is its limit.
    total = 0 if workspace.config.accounts else int(workspace.config.qwen.max_sends_per_day)
    limits = {a.name: (a.max_sends_per_day or total or None) for a in all_accounts(workspace.config)}
    if not workspace.has_store:
        return History(found, limits)
    store = workspace.store
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        found[index].sends.update(store.send_counts(start, end).by_account)
    for event in store.events(since=starts[0]):
        if event.event not in ("done", "dead_letter"):
            continue
        index = _day_of(event.ts, starts)
        if index is None:
            continue
        if event.event == "done":
            found[index].done[str(event.fields.get("engine") or "?")] += 1
        else:
            found[index].dead += 1
    return History(found, limits)


def _day_of(ts: float, starts: list[float]) -> int | None:
    """The index of the day `ts` falls in (the last day whose start is not after it)."""
    index = None
    for i, start in enumerate(starts):
        if ts >= start:
            index = i
    return index
