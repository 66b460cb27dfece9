"""Handler of a look at a sent multi-turn chat: the chat itself says how far it got; the next
turn is asked for (Ask with next_turn) only when the previous answer is complete and the next
turn is not in the chat yet. With --wait it looks again until qwen.answer_timeout."""

from __future__ import annotations

import time

from ...engines.base import Answer, Code, HardError, TransientError
from ..phases import Reason
from .context import Context, Outcome, Status, since
from .moves import Ask, Collect, LookTurns


def handle(ctx: Context, move: LookTurns) -> Outcome | Ask | Collect:
    chat = ctx.chat(ctx.sender())
    total = len(ctx.prompt.turns)
    deadline = move.deadline if move.deadline is not None else time.monotonic() + ctx.qwen.answer_timeout
    if move.after_turn:  # a turn was just sent: look again in a moment
        pause(ctx, deadline)
    while True:
        started = time.monotonic()
        view = chat.read_turns(ctx.chat_url)
        ctx.state.last_poll = ctx.clock()
        present = our_turns(ctx, view.turns)
        last = view.turns[present - 1]
        ctx.state.turn, ctx.state.turns = present, total
        if last.error:
            raise TransientError(f"turn {present} of {total}: {last.error}", code=Code.ANSWER_ERROR)
        if not last.complete:
            progress = f"turn {present} of {total}: {view.progress}"
            if not ctx.wait:
                ctx.state.attempts, ctx.state.progress = 0, progress
                ctx.save()
                ctx.log("poll", engine="qwen", progress=progress, turn=present, duration=since(started))
                return ctx.outcome(
                    Status.WORKING, f"{ctx.slug}: {progress} ({ctx.chat_url})", reason=Reason.GENERATING
                )
            ctx.say(f"{ctx.slug}: {progress}")
        elif present < total:
            return Ask(next_turn=present + 1, what=f"turn {present + 1}", deadline=deadline)
        else:
            wanted = view.turns[ctx.prompt.article_turn - 1]
            return Collect(Answer(wanted.answer, "qwen", title=view.title, model=view.model))
        pause(ctx, deadline)


def pause(ctx: Context, deadline: float) -> None:
    if time.monotonic() > deadline:
        raise TransientError(
            f"no complete answer after qwen.answer_timeout = {ctx.qwen.answer_timeout} s",
            code=Code.TIMEOUT,
        )
    time.sleep(1.0)


def our_turns(ctx: Context, turns: list) -> int:
    """How many of the prompt's turns the chat holds, checking they are ours and in order."""

    def same(a: str, b: str) -> bool:
        return " ".join(a.split()) == " ".join(b.split())

    if not turns:
        raise TransientError("the chat shows no messages yet", code=Code.EMPTY_CHAT)
    ours = ctx.prompt.turns
    if len(turns) > len(ours) or not all(same(t.user, p) for t, p in zip(turns, ours, strict=False)):
        raise HardError(
            f"the chat {ctx.chat_url} holds messages that are not this prompt's turns "
            f"(was {ctx.prompt.path} edited after sending?)",
            code=Code.PROMPT_MISMATCH,
        )
    return len(turns)
