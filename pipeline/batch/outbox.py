"""notify.json (under articles/.qwenpipe/, 0600): what the notifications (batch/alerts.py) told,
and the messages still owed to each URL, which `status` reports until a cycle delivers them."""

from __future__ import annotations

import json
from dataclasses import asdict, field
from pathlib import Path

from .. import files
from ..errors import SetupProblem
from ..records import record
from ..times import clock

STATE_FILE = "notify.json"  # under articles/.qwenpipe/
MAX_PENDING = 100  # messages kept for delivery; the oldest are dropped beyond (said in status)


@record
class Message:
    key: str  # what it tells of, e.g. "dead_letter:tea"
    title: str
    body: str
    since: float  # when it was first due
    owed: list[str]  # the URLs (by url_id) not told yet
    attempts: int = 0  # deliveries that failed
    error: str = ""  # the last one's words


@record
class Ledger:
    """notify.json: what was told, and what is still owed to which URL."""

    journal_seq: int | None = None  # the last journal event read (None: none yet)
    logged_out: bool = False  # told that the chat is logged out (until a cycle finds it logged in)
    router_down: bool = False  # told that the router fails (until it writes an article again)
    holds: dict[str, float] = field(default_factory=dict)  # account -> since of the bot check told
    summary_day: str = ""  # the local day whose summary was made
    pending: list[Message] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> Ledger:
        """The ledger at `path`; a fresh one when there is none or it cannot be read (a torn or
        hand-edited file must not stop the cycle: the worst is an event told twice)."""
        try:
            data = json.loads(files.read_bytes(path))
            ledger = cls(**{k: v for k, v in data.items() if k != "pending"})
            ledger.pending = [Message(**m) for m in data.get("pending", [])]
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError, TypeError, AttributeError, SetupProblem):
            return cls()
        return ledger

    def save(self, path: Path) -> None:
        files.atomic_write(path, json.dumps(asdict(self)))


def pending_warning(state_dir: Path) -> str | None:
    """`status`'s line for messages not delivered yet, or None."""
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    pending = Ledger.load(path).pending
    if not pending:
        return None
    oldest = min(m.since for m in pending)
    last = next((m.error for m in reversed(pending) if m.error), "")
    why = f": {last}" if last else ""
    return (
        f"{len(pending)} notification(s) not delivered yet (the oldest since {clock(oldest)}){why}; "
        "the next cycle tries again"
    )
