"""Handler of Action.FALL_BACK: the router writes the article (a multi-turn prompt replayed as
one conversation); its answer is collected as the chat's is (Collect). A router that fails too
fails the article (Ask, failure ALL)."""

from __future__ import annotations

import time

from ...engines.base import Answer, EngineError
from ..hosts import ORPHAN_NOTE
from ..phases import Failure, Reason
from ..quota import held_words
from .context import Context, since
from .moves import Ask, Collect


def handle(ctx: Context, move: Ask) -> Collect | Ask:
    decision, chat_error = move.decision, move.error  # the chat's hard failure, when it is one
    if chat_error is not None:
        reason = str(chat_error)
    elif decision.reason is Reason.ORPHANED:
        reason = f"{decision.why}: {ORPHAN_NOTE}"
    elif decision.reason is Reason.QUOTA:
        reason = held_words(decision.until, decision.why)
    else:
        reason = decision.why
    ctx.log("fallback", engine="router", reason=reason)
    ctx.say(f"{ctx.slug}: writing it through the router ({reason})")
    started = time.monotonic()
    try:
        answer = route(ctx)
        ctx.crash("after_router")
    except EngineError as err:
        ctx.state.record_error(ctx.clock(), "router", err.code, str(err))
        ctx.log("router_failed", engine="router", error=str(err), code=err.code, duration=since(started))
        first = f"chat: {chat_error}; " if chat_error else ""
        message = f"{first}{'' if str(err).startswith('router') else 'router: '}{err}"
        return Ask(failure=Failure.ALL, error=err, message=message)
    return Collect(answer)


def route(ctx: Context) -> Answer:
    """The article through the router; a multi-turn prompt is replayed as one conversation."""
    router = ctx.engines.router()
    if len(ctx.prompt.turns) == 1:
        return router.generate(ctx.prompt.text)
    history: list[tuple[str, str]] = []
    answers = []
    for turn in ctx.prompt.turns:
        answer = router.generate(turn, history=tuple(history))
        history.append((turn, answer.markdown))
        answers.append(answer)
    return answers[ctx.prompt.article_turn - 1]
