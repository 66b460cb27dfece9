"""Handler of Action.SEND for a later turn of a multi-turn prompt, in the article's own chat."""

from __future__ import annotations

import time
from dataclasses import replace

from ...engines.base import Code, EngineError
from ...store.protocol import AlreadySent
from ...times import clock as clock_words
from ..phases import Reason
from .context import Context, Outcome, Status, since
from .intents import record_intent, unsent
from .moves import Ask, LookTurns


def handle(ctx: Context, move: Ask) -> Outcome | Ask | LookTurns:
    """Send turn `move.next_turn` (a place in the cycle's budget first); then, with --wait,
    look at the chat again."""
    number, total = move.next_turn, len(ctx.prompt.turns)
    if ctx.budget is not None and not move.budget_spent and not ctx.budget.take():
        return replace(move, budget_spent=True, decision=None)
    try:
        record_intent(ctx, number, ctx.account, ctx.clock())
    except AlreadySent as sent:  # recorded sent, and the chat does not show it yet
        return ctx.outcome(
            Status.WORKING,
            f"{ctx.slug}: turn {number} of {total} was sent at {clock_words(sent.send.intent_at)}; "
            "the chat does not show it yet",
            reason=Reason.GENERATING,
        )
    ctx.log("sending", engine="qwen", account=ctx.account, turn=number, chat_url=ctx.chat_url)
    ctx.say(f"{ctx.slug}: sending turn {number} of {total}")
    started = time.monotonic()
    if ctx.lease is not None:
        ctx.lease.check()
    try:
        ctx.chat(ctx.account).send_turn(ctx.chat_url, ctx.prompt.turns[number - 1])
    except EngineError as err:
        if err.nothing_sent:
            unsent(ctx, err, turn=number)
        if err.nothing_sent and err.code == Code.BUSY_CHAT:
            # The site says the turn before is still being answered (engines/qwen/refusals.py):
            # not a failed attempt; wait for that answer as any look does, then ask again.
            if ctx.wait:
                return LookTurns(move.deadline, after_turn=True)
            ctx.log("poll", engine="qwen", progress=str(err), turn=number - 1)
            return ctx.outcome(
                Status.WORKING,
                f"{ctx.slug}: turn {number - 1} of {total} is still being answered; "
                f"turn {number} waits for it",
                reason=Reason.GENERATING,
            )
        raise
    ctx.crash("after_send")
    with ctx.ws.store.transaction() as store:
        store.record_sent(ctx.slug, number, ctx.chat_url, ctx.clock())
    ctx.state.turn, ctx.state.progress, ctx.state.last_poll = (
        number,
        f"turn {number} of {total}: sent",
        0.0,
    )
    ctx.save()
    ctx.log(
        "sent",
        engine="qwen",
        account=ctx.account,
        turn=number,
        chat_url=ctx.chat_url,
        duration=since(started),
    )
    if not ctx.wait:
        return ctx.outcome(Status.QUEUED, f"{ctx.slug}: sent turn {number} of {total}", sent=True)
    return LookTurns(move.deadline, after_turn=True)
