"""Handler of a transient failure: the article backs off (phases.backoff_delay), or fails hard
(Hard) after qwen.max_attempts of them in a row; but never while its last send may have reached
the site (its intent marker is there): that send is looked for first (recovery), and only a
proof that it was never sent, or its loss after qwen.lost_chat_after, lets the router take the
article (too_many_attempts)."""

from __future__ import annotations

from ..phases import Reason, backoff_delay
from .context import Context, Outcome, Status, wait_words
from .moves import Hard, Transient, too_many_attempts


def handle(ctx: Context, move: Transient) -> Outcome | Hard:
    err, now = move.error, ctx.clock()
    ctx.state.attempts += 1
    ctx.state.record_error(now, "qwen", err.code, str(err))
    ctx.log("transient", engine="qwen", attempt=ctx.state.attempts, error=str(err), code=err.code)
    limit = ctx.qwen.max_attempts
    # An answer nobody has seen, met looking at a sent chat: the chat may well hold the answer,
    # so it is looked at again (backing off), never handed to the router (that pays twice).
    waits = err.unknown is not None and bool(ctx.chat_url)
    if ctx.state.attempts >= limit and not waits and not ctx.article.sending.exists():
        return too_many_attempts(ctx.state.attempts, ctx.qwen.max_attempts, err)
    delay = backoff_delay(ctx.qwen, ctx.state.attempts)
    ctx.state.next_try = now + delay
    ctx.save()
    return ctx.outcome(
        Status.WORKING,
        f"{ctx.slug}: {err} (attempt {ctx.state.attempts} of {limit}; next try {wait_words(delay)})",
        reason=Reason.BACKOFF,
    )
