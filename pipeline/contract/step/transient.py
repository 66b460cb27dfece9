"""Handler of a transient failure: the article backs off (phases.backoff_delay), or fails hard
(Hard) after qwen.max_attempts of them in a row; but never while its last send may have reached
the site (its intent marker is there): that send is looked for first (recovery), and only a
proof that it was never sent, or its loss after qwen.lost_chat_after, lets the router take the
article (too_many_attempts)."""

from __future__ import annotations

from ..phases import Reason, backoff_delay
from .context import Context, Outcome, Status, wait_words
from .moves import Hard, Transient, too_many_attempts


def handle(step: Context, move: Transient) -> Outcome | Hard:
    err, now = move.error, step.clock()
    step.state.attempts += 1
    step.state.record_error(now, "qwen", err.code, str(err))
    step.log("transient", engine="qwen", attempt=step.state.attempts, error=str(err), code=err.code)
    limit = step.qwen.max_attempts
    # An answer nobody has seen, met looking at a sent chat: the chat may well hold the answer,
    # so it is looked at again (backing off), never handed to the router (that pays twice).
    waits = err.unknown is not None and bool(step.chat_url)
    if step.state.attempts >= limit and not waits and not step.article.sending.exists():
        return too_many_attempts(step.state.attempts, step.qwen.max_attempts, err)
    delay = backoff_delay(step.qwen, step.state.attempts)
    step.state.next_try = now + delay
    step.save()
    return step.outcome(
        Status.WORKING,
        f"{step.slug}: {err} (attempt {step.state.attempts} of {limit}; next try {wait_words(delay)})",
        reason=Reason.BACKOFF,
    )
