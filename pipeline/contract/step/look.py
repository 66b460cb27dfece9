"""Handler of a look at a sent one-turn chat, from the account that sent it: its answer (Collect),
or how far it got."""

from __future__ import annotations

import time

from ...engines.base import Answer, Generating
from ..phases import Reason
from .context import Context, Outcome, Status, since
from .moves import Collect, Look


def handle(ctx: Context, move: Look) -> Outcome | Collect:
    started = time.monotonic()
    chat = ctx.chat(ctx.sender())
    if ctx.wait:
        result = chat.wait(
            ctx.chat_url,
            timeout=ctx.qwen.answer_timeout,
            on_progress=lambda p: ctx.say(f"{ctx.slug}: {p}"),
        )
    else:
        result = chat.check(ctx.chat_url)
    ctx.state.last_poll = ctx.clock()
    if isinstance(result, Answer):
        return Collect(result)
    assert isinstance(result, Generating)
    ctx.state.attempts, ctx.state.progress = 0, result.progress
    ctx.save()
    ctx.log("poll", engine="qwen", account=ctx.account, progress=result.progress, duration=since(started))
    return ctx.outcome(
        Status.WORKING, f"{ctx.slug}: {result.progress} ({ctx.chat_url})", reason=Reason.GENERATING
    )
