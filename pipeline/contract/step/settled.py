"""Handler of Action.NOTHING: the article is done, or dead-lettered (its files settle it)."""

from __future__ import annotations

import tomllib

from ..phases import Phase
from .context import Context, Outcome, Status
from .moves import Ask


def handle(step: Context, move: Ask) -> Outcome:
    if move.decision.phase is Phase.DONE:  # finished by another process while we waited for nothing
        return step.outcome(Status.DONE, f"{step.article.md} is already done")
    return step.outcome(
        Status.FAILED,
        f"{step.slug} is dead-lettered ({dead_letter_reason(step)}); "
        f"run `qwenpipe replay {step.slug}` to try again",
    )


def dead_letter_reason(step: Context) -> str:
    try:
        data = tomllib.loads(step.article.failed.read_text(encoding="utf-8"))
        return str(data.get("last_error") or data.get("reason") or "see the .failed file")
    except (OSError, ValueError):
        return f"see {step.article.failed}"
