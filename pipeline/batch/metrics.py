"""Prometheus metrics (`[metrics] textfile`): written at the end of each cycle, atomically, in the
text format node_exporter's textfile collector reads (`--collector.textfile.directory`; the file
must end in `.prom`). A registry of our own, so nothing of the process's default one leaks in.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from .. import files

if TYPE_CHECKING:
    from .status import BatchStatus


def render(status: BatchStatus, *, exit_code: int, seconds: float, finished: float, pending: int) -> bytes:
    """The metrics of the batch `status` and of the cycle that just ended, in the text format."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry()

    def gauge(name: str, text: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, text, labels, registry=registry)

    articles = gauge("qwenpipe_articles", "Articles by state and engine", ("state", "engine"))
    by = Counter((row.state, row.engine or "") for row in status.rows)
    for state, count in status.totals.items():
        if count == 0:
            articles.labels(state, "").set(0)  # every state present, so a rule never sees a gap
    for (state, engine), count in by.items():
        articles.labels(state, engine).set(count)
    sends = gauge("qwenpipe_sends_today", "Prompts sent to the chat since local midnight", ("account",))
    held = gauge("qwenpipe_account_held", "1 while the account is held back from sends", ("account",))
    until = gauge(
        "qwenpipe_account_held_until_timestamp_seconds",
        "When the account's hold ends, by its kind (quota, bot check, answers came back empty)",
        ("account", "kind"),
    )
    for account in status.accounts:
        sends.labels(account.name).set(account.sends_today)
        held.labels(account.name).set(1 if account.hold is not None else 0)
        if account.hold is not None:
            until.labels(account.name, account.hold.kind).set(account.hold.until)
    dead = status.totals.get("dead", 0)
    gauge("qwenpipe_dead_letters", "Articles dead-lettered (SLUG.md.failed)").set(dead)
    gauge("qwenpipe_last_cycle_duration_seconds", "How long the last cycle ran").set(round(seconds, 3))
    gauge("qwenpipe_last_cycle_exit_code", "The last cycle's exit code (0, 42, 3, 1...)").set(exit_code)
    gauge("qwenpipe_last_cycle_timestamp_seconds", "When the last cycle finished").set(finished)
    gauge("qwenpipe_notifications_pending", "Notifications not delivered yet").set(pending)
    return generate_latest(registry)


def write(path: Path, data: bytes) -> None:
    """`data` to `path` atomically (node_exporter never reads half a file), readable by others
    as the umask allows (node_exporter runs as its own user). `path` as the config names it,
    unresolved: a symlink there (one made after the load's guard, config.check_paths) is refused
    by files.atomic_write (UnsafeFile), never followed out of the project."""
    files.atomic_write(path, data, mode=files.SHARED)
