"""Handler of a busy engine (EngineBusy, raised by prepare() before any marker or keystroke):
nothing to undo, the article waits."""

from __future__ import annotations

from ..phases import Reason
from .context import Context, Outcome, Status
from .moves import Busy


def handle(ctx: Context, move: Busy) -> Outcome:
    ctx.log("busy", engine="qwen", error=str(move.error))
    return ctx.outcome(Status.WORKING, f"{ctx.slug}: {move.error}", reason=Reason.LOCKED)
