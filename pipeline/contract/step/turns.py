"""Handler of a look at a sent multi-turn chat: the chat itself says how far it got; the next
turn is asked for (Ask with next_turn) only when the previous answer is complete and the next
turn is not in the chat yet. With --wait it looks again until qwen.answer_timeout."""

from __future__ import annotations

import time

from ...engines.base import Answer, Code, HardError, TransientError
from ..phases import Reason
from .context import Context, Outcome, Status, since
from .moves import Ask, Collect, LookTurns


def handle(step: Context, move: LookTurns) -> Outcome | Ask | Collect:
    chat = step.chat(step.sender())
    total = len(step.prompt.turns)
    deadline = move.deadline if move.deadline is not None else time.monotonic() + step.qwen.answer_timeout
    if move.after_turn:  # a turn was just sent: look again in a moment
        pause(step, deadline)
    while True:
        started = time.monotonic()
        view = chat.read_turns(step.chat_url)
        step.state.last_poll = step.clock()
        present = our_turns(step, view.turns)
        last = view.turns[present - 1]
        step.state.turn, step.state.turns = present, total
        if last.error:
            raise TransientError(f"turn {present} of {total}: {last.error}", code=Code.ANSWER_ERROR)
        if not last.complete:
            progress = f"turn {present} of {total}: {view.progress}"
            if not step.wait:
                step.state.attempts, step.state.progress = 0, progress
                step.save()
                step.log("poll", engine="qwen", progress=progress, turn=present, duration=since(started))
                return step.outcome(
                    Status.WORKING, f"{step.slug}: {progress} ({step.chat_url})", reason=Reason.GENERATING
                )
            step.say(f"{step.slug}: {progress}")
        elif present < total:
            return Ask(next_turn=present + 1, what=f"turn {present + 1}", deadline=deadline)
        else:
            wanted = view.turns[step.prompt.article_turn - 1]
            return Collect(Answer(wanted.answer, "qwen", title=view.title, model=view.model))
        pause(step, deadline)


def pause(step: Context, deadline: float) -> None:
    if time.monotonic() > deadline:
        raise TransientError(
            f"no complete answer after qwen.answer_timeout = {step.qwen.answer_timeout} s",
            code=Code.TIMEOUT,
        )
    time.sleep(1.0)


def our_turns(step: Context, turns: list) -> int:
    """How many of the prompt's turns the chat holds, checking they are ours and in order."""

    def same(a: str, b: str) -> bool:
        return " ".join(a.split()) == " ".join(b.split())

    if not turns:
        raise TransientError("the chat shows no messages yet", code=Code.EMPTY_CHAT)
    ours = step.prompt.turns
    if len(turns) > len(ours) or not all(same(t.user, p) for t, p in zip(turns, ours, strict=False)):
        raise HardError(
            f"the chat {step.chat_url} holds messages that are not this prompt's turns "
            f"(was {step.prompt.path} edited after sending?)",
            code=Code.PROMPT_MISMATCH,
        )
    return len(turns)
