"""Handler of a busy engine (EngineBusy, raised by prepare() before any marker or keystroke):
nothing to undo, the article waits."""

from __future__ import annotations

from ..phases import Reason
from .context import Context, Outcome, Status
from .moves import Busy


def handle(step: Context, move: Busy) -> Outcome:
    step.log("busy", engine="qwen", error=str(move.error))
    return step.outcome(Status.WORKING, f"{step.slug}: {move.error}", reason=Reason.LOCKED)
