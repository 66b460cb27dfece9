"""Handler of Action.WAIT: the WORKING outcome of an article that must wait, saying why and
until when."""

from __future__ import annotations

from ...times import clock as clock_words
from ..phases import CYCLE_LIMIT, DAILY_LIMIT, Reason
from ..quota import Hold, held_words
from .context import Context, Outcome, Status, wait_words
from .moves import Ask


def handle(ctx: Context, move: Ask) -> Outcome:
    decision, what, slug = move.decision, move.what, ctx.slug
    until, reason = decision.until, decision.reason
    if reason is Reason.BACKOFF:
        message = f"{slug}: retrying after {clock_words(until)} (last error: {ctx.state.last_error})"
    elif reason is Reason.SPACING:
        message = f"{slug}: generating; next look {wait_words(until - ctx.clock())}"
    elif reason in (Reason.ACCOUNT, Reason.ELSEWHERE, Reason.ORPHANED):
        message = f"{slug}: waits: {decision.why}"
    elif reason is Reason.QUOTA and Hold("", until, 0.0, decision.why).kind != "quota":
        message = f"{slug}: {what} waits: {held_words(until, decision.why)}; no fallback"
    elif reason is Reason.QUOTA:
        spent = f"spent until {clock_words(until)}; no fallback"
        message = f"{slug}: {what} waits for the chat's quota ({spent})"
    elif decision.why == DAILY_LIMIT:
        message = (
            f"{slug}: {what} waits: daily send limit reached ({ctx.qwen.max_sends_per_day}, {DAILY_LIMIT})"
        )
    else:
        message = (
            f"{slug}: {what} waits for the next cycle: this cycle's send limit is reached "
            f"({ctx.budget.limit if ctx.budget else 0}, {CYCLE_LIMIT})"
        )
    return ctx.outcome(Status.WORKING, message, reason=reason)
