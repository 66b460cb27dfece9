"""Handler of Action.SEND for a later turn of a multi-turn prompt, in the article's own chat."""

from __future__ import annotations

import time
from dataclasses import replace

from ...engines.base import Code, EngineError
from ...store.protocol import AlreadySent
from ..phases import Reason
from .context import Context, Outcome, Status, clock_words, since
from .intents import record_intent, unsent
from .moves import Ask, LookTurns


def handle(step: Context, move: Ask) -> Outcome | Ask | LookTurns:
    """Send turn `move.next_turn` (a place in the cycle's budget first); then, with --wait,
    look at the chat again."""
    number, total = move.next_turn, len(step.prompt.turns)
    if step.budget is not None and not move.budget_spent and not step.budget.take():
        return replace(move, budget_spent=True, decision=None)
    try:
        record_intent(step, number, step.account, step.clock())
    except AlreadySent as sent:  # recorded sent, and the chat does not show it yet
        return step.outcome(
            Status.WORKING,
            f"{step.slug}: turn {number} of {total} was sent at {clock_words(sent.send.intent_at)}; "
            "the chat does not show it yet",
            reason=Reason.GENERATING,
        )
    step.log("sending", engine="qwen", account=step.account, turn=number, chat_url=step.chat_url)
    step.say(f"{step.slug}: sending turn {number} of {total}")
    started = time.monotonic()
    if step.lease is not None:
        step.lease.check()
    try:
        step.chat(step.account).send_turn(step.chat_url, step.prompt.turns[number - 1])
    except EngineError as err:
        if err.nothing_sent:
            unsent(step, err, turn=number)
        if err.nothing_sent and err.code == Code.BUSY_CHAT:
            # The site says the turn before is still being answered (engines/qwen/refusals.py):
            # not a failed attempt; wait for that answer as any look does, then ask again.
            if step.wait:
                return LookTurns(move.deadline, after_turn=True)
            step.log("poll", engine="qwen", progress=str(err), turn=number - 1)
            return step.outcome(
                Status.WORKING,
                f"{step.slug}: turn {number - 1} of {total} is still being answered; "
                f"turn {number} waits for it",
                reason=Reason.GENERATING,
            )
        raise
    step.crash("after_send")
    with step.ws.store.step() as store:
        store.record_sent(step.slug, number, step.chat_url, step.clock())
    step.state.turn, step.state.progress, step.state.last_poll = (
        number,
        f"turn {number} of {total}: sent",
        0.0,
    )
    step.save()
    step.log(
        "sent",
        engine="qwen",
        account=step.account,
        turn=number,
        chat_url=step.chat_url,
        duration=since(started),
    )
    if not step.wait:
        return step.outcome(Status.QUEUED, f"{step.slug}: sent turn {number} of {total}", sent=True)
    return LookTurns(move.deadline, after_turn=True)
