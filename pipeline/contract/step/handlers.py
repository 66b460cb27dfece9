"""Where each move of the step goes: the one table of the step's loop (Step.run).

A decision (Ask, filled by phases.decide) goes to the handler of its action; any other move
(moves.py) goes to the handler of its own kind. Every handler is the function `handle` of the
module named here, and every move's class names the same module in its docstring:

    Action.NOTHING      settled.py      done or dead-lettered: its files settle it
    Action.WAIT         wait.py         not now: why, and until when
    Action.RECOVER      recover.py      a marker without a URL: the send may have reached the site
    Action.POLL         poll.py         the sent chat is due a look
    Action.SEND         send.py         the first send, from the account rotation chose
    SEND_TURN           turn.py         Action.SEND of a later turn, in the article's own chat
    Action.FALL_BACK    fallback.py     the router writes the article
    Action.FAIL         fail.py         a hard failure with no engine left (also Action.NOTHING
                                        with a failure in hand)
    Action.DEAD_LETTER  fail.py         ... the qwen.max_attempts-th: SLUG.md.failed
    Refused             refused.py      the account refused the first send before taking it
    Search              search.py       an interrupted send that named no chat: find it
    Adopt               adopt.py        the interrupted send's chat, found
    NeverSent           never_sent.py   the interrupted send never reached the site
    InDoubt             doubt.py        whether it reached the site is not proven either way
    Look                look.py         look at a sent one-turn chat
    LookTurns           turns.py        look at a sent multi-turn chat
    Collect             collect.py      a complete answer: check it
    Reject              reject.py       a complete answer that is not an article
    Write               finish.py       an answer that passed its checks: write SLUG.md
    Busy                busy.py         the engine was busy before anything was done
    Transient           transient.py    a transient failure: back off, or fail hard
    Hard                hard.py         the chat failed hard: fall back, or fail
"""

from __future__ import annotations

from collections.abc import Callable

from ..phases import Action, Failure
from . import (
    adopt,
    busy,
    collect,
    doubt,
    fail,
    fallback,
    finish,
    hard,
    look,
    never_sent,
    poll,
    recover,
    refused,
    reject,
    search,
    send,
    settled,
    transient,
    turn,
    turns,
    wait,
)
from .context import Context, Outcome
from .moves import (
    Adopt,
    Ask,
    Busy,
    Collect,
    Hard,
    InDoubt,
    Look,
    LookTurns,
    Move,
    NeverSent,
    Refused,
    Reject,
    Search,
    Transient,
    Write,
)

Handler = Callable[[Context, Move], Outcome | Move]

SEND_TURN = "SEND_TURN"  # Action.SEND of a later turn, in the article's own chat

# The table above, as the loop reads it (tests/unit/test_step_handlers.py keeps the two alike).
HANDLERS: dict[object, Handler] = {
    Action.NOTHING: settled.handle,
    Action.WAIT: wait.handle,
    Action.RECOVER: recover.handle,
    Action.POLL: poll.handle,
    Action.SEND: send.handle,
    SEND_TURN: turn.handle,
    Action.FALL_BACK: fallback.handle,
    Action.FAIL: fail.handle,
    Action.DEAD_LETTER: fail.handle,
    Refused: refused.handle,
    Search: search.handle,
    Adopt: adopt.handle,
    NeverSent: never_sent.handle,
    InDoubt: doubt.handle,
    Look: look.handle,
    LookTurns: turns.handle,
    Collect: collect.handle,
    Reject: reject.handle,
    Write: finish.handle,
    Busy: busy.handle,
    Transient: transient.handle,
    Hard: hard.handle,
}


def handler_of(move: Move) -> Handler:
    """The handler `move` goes to (the table above)."""
    return HANDLERS[key_of(move)]


def key_of(move: Move) -> object:
    """The key of the handler `move` goes to: its decision's action, or its own kind."""
    if not isinstance(move, Ask):
        return type(move)
    action = move.decision.action
    if action is Action.NOTHING and move.failure is not Failure.NONE:
        return Action.FAIL  # a failure in hand ends failed (its files never settle it under the lock)
    if action is Action.SEND and move.next_turn:
        return SEND_TURN
    return action
