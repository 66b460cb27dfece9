"""Handler of Action.NOTHING: the article is done, or dead-lettered (its files settle it)."""

from __future__ import annotations

import tomllib

from ..phases import Phase
from .context import Context, Outcome, Status
from .moves import Ask


def handle(ctx: Context, move: Ask) -> Outcome:
    if move.decision.phase is Phase.DONE:  # finished by another process while we waited for nothing
        return ctx.outcome(Status.DONE, f"{ctx.article.md} is already done")
    return ctx.outcome(
        Status.FAILED,
        f"{ctx.slug} is dead-lettered ({dead_letter_reason(ctx)}); "
        f"run `qwenpipe replay {ctx.slug}` to try again",
    )


def dead_letter_reason(ctx: Context) -> str:
    try:
        data = tomllib.loads(ctx.article.failed.read_text(encoding="utf-8"))
        return str(data.get("last_error") or data.get("reason") or "see the .failed file")
    except (OSError, ValueError):
        return f"see {ctx.article.failed}"
