"""Handler of Action.FAIL and Action.DEAD_LETTER: a hard failure with no engine left. It is
counted; the qwen.max_attempts-th in a row writes SLUG.md.failed (skipped until `replay`).
A failure of the chat's account (Reason.ACCOUNT: logged out, a bot check, its quota) is not
the article's: it fails this run uncounted, and is never dead-lettered for it; nor is a hard
failure met while its send is in doubt (Reason.IN_DOUBT: the next run looks for its chat)."""

from __future__ import annotations

from datetime import datetime

import tomli_w

from ... import files
from ...engines.base import EngineError
from ..phases import Action, Reason
from .context import Context, Outcome, Status
from .moves import Ask


def handle(ctx: Context, move: Ask) -> Outcome:
    err, decision = move.error, move.decision
    message = move.message or f"{err} (no fallback: {decision.why})"
    last = decision.action is Action.DEAD_LETTER
    if decision.reason in (Reason.ACCOUNT, Reason.IN_DOUBT):  # the account's, or a send in doubt
        ctx.save()  # the error is recorded; the article's count stays as it was
        return ctx.outcome(Status.FAILED, f"{ctx.slug}: {message}")
    ctx.state.hard_failures += 1
    ctx.state.attempts = 0
    limit = ctx.qwen.max_attempts
    ctx.save()
    if last:
        dead_letter(ctx, err, message)
        return ctx.outcome(
            Status.FAILED,
            f"{ctx.slug}: {message}; dead-lettered after "
            f"{ctx.state.hard_failures} hard failures "
            f"(`qwenpipe replay {ctx.slug}` to retry)",
        )
    return ctx.outcome(
        Status.FAILED, f"{ctx.slug}: {message} (hard failure {ctx.state.hard_failures} of {limit})"
    )


def dead_letter(ctx: Context, err: EngineError, message: str) -> None:
    def when(ts: float) -> datetime:
        return datetime.fromtimestamp(ts).astimezone().replace(microsecond=0)

    errors = ctx.state.errors
    record = {
        "reason": err.code,
        "engine": "router" if errors and errors[-1]["engine"] == "router" else "qwen",
        "attempts": ctx.state.hard_failures,
        "last_error": message,
        "time": when(ctx.clock()),
        "errors": [{k: (when(v) if k == "time" else v) for k, v in e.items()} for e in errors],
    }
    if ctx.chat_url:
        record["chat_url"] = ctx.chat_url
    files.atomic_write(ctx.article.failed, tomli_w.dumps(record))
    ctx.log("dead_letter", error=message, code=err.code)
