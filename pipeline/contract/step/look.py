"""Handler of a look at a sent one-turn chat, from the account that sent it: its answer (Collect),
or how far it got."""

from __future__ import annotations

import time

from ...engines.base import Answer, Generating
from ..phases import Reason
from .context import Context, Outcome, Status, since
from .moves import Collect, Look


def handle(step: Context, move: Look) -> Outcome | Collect:
    started = time.monotonic()
    chat = step.chat(step.sender())
    if step.wait:
        result = chat.wait(
            step.chat_url,
            timeout=step.qwen.answer_timeout,
            on_progress=lambda p: step.say(f"{step.slug}: {p}"),
        )
    else:
        result = chat.check(step.chat_url)
    step.state.last_poll = step.clock()
    if isinstance(result, Answer):
        return Collect(result)
    assert isinstance(result, Generating)
    step.state.attempts, step.state.progress = 0, result.progress
    step.save()
    step.log("poll", engine="qwen", account=step.account, progress=result.progress, duration=since(started))
    return step.outcome(
        Status.WORKING, f"{step.slug}: {result.progress} ({step.chat_url})", reason=Reason.GENERATING
    )
