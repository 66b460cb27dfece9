"""The values a handler hands back to the step's loop when the step goes on: what to do next.

A handler ends the step with an Outcome, or returns one of these; it never calls another handler.
`Ask` has the article decided again (phases.decide, from its files as they are now); the others
go straight to the handler of what was just learned. Each class names its handler's module in its
docstring; handlers.py is the table the loop reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...engines.base import Answer, Code, EngineError, HardError
from ..checks import Verdict
from ..phases import Decision, Failure


@dataclass(frozen=True)
class Ask:
    """Decide the article again; the loop fills `decision` and hands the move to its action's handler.

    Handler: by its action (handlers.py).
    """

    next_turn: int = 0  # a multi-turn chat's last answer is complete: may this turn be sent?
    failure: Failure = Failure.NONE  # a hard failure is being handled: fall back, or fail
    budget_spent: bool = False  # the cycle's budget had no send left for this one
    what: str = "the prompt"  # what waits, as a waiting message names it
    error: EngineError | None = None  # the failure being handled
    message: str = ""  # how the failure is told (fail); "" = from the error and the decision
    deadline: float | None = None  # a multi-turn `--wait`: when its look gives up (turns)
    decision: Decision | None = None


@dataclass(frozen=True)
class Look:
    """Look at the sent one-turn chat now (it was just sent, or the decision said it is due).

    Handler: look.py.
    """


@dataclass(frozen=True)
class LookTurns:
    """Look at the sent multi-turn chat; `after_turn`: a turn was just sent (wait a moment first).

    Handler: turns.py.
    """

    deadline: float | None = None
    after_turn: bool = False


def look(turns: int, deadline: float | None = None, after_turn: bool = False) -> Look | LookTurns:
    return LookTurns(deadline, after_turn) if turns > 1 else Look()


@dataclass(frozen=True)
class Refused:
    """`account` refused the first send before taking anything: offer it to the next account.

    Handler: refused.py.
    """

    account: str
    error: EngineError


@dataclass(frozen=True)
class Search:
    """An interrupted send named no chat: look for it by what was sent.

    Handler: search.py.
    """

    account: str
    marker: dict


@dataclass(frozen=True)
class Adopt:
    """The interrupted send's chat is found: it is this article's.

    Handler: adopt.py.
    """

    url: str
    marker: dict


@dataclass(frozen=True)
class NeverSent:
    """The interrupted send never reached the site: give it back, then send.

    Handler: never_sent.py.
    """

    account: str
    why: str


@dataclass(frozen=True)
class InDoubt:
    """Whether the interrupted send reached the site is not proven either way (its chat cannot be
    read, or no chat is provably its own): counted, looked at again, sent again only once it has
    stayed so for qwen.lost_chat_after (doubt.handle).

    Handler: doubt.py.
    """

    account: str
    why: str


@dataclass(frozen=True)
class Collect:
    """A complete answer (the chat's or the router's): check it before it becomes the article.

    Handler: collect.py.
    """

    answer: Answer


@dataclass(frozen=True)
class Write:
    """An answer that passed its checks (`markdown` cleaned), rendered: write SLUG.md.

    Handler: finish.py.
    """

    answer: Answer
    document: str
    strip_title: bool
    edited: bool  # a one-turn prompt changed since the chat got it: the article says so


@dataclass(frozen=True)
class Reject:
    """A complete answer that is not an article.

    Handler: reject.py.
    """

    answer: Answer
    verdict: Verdict


@dataclass(frozen=True)
class Busy:
    """The engine was busy before anything was done (EngineBusy).

    Handler: busy.py.
    """

    error: EngineError


@dataclass(frozen=True)
class Transient:
    """A transient failure: back off, or fail hard after qwen.max_attempts of them.

    Handler: transient.py.
    """

    error: EngineError


@dataclass(frozen=True)
class Hard:
    """The chat failed hard: record it, then fall back or fail.

    Handler: hard.py.
    """

    error: EngineError


def too_many_attempts(attempts: int, limit: int, last: object) -> Hard:
    """The article failed qwen.max_attempts (`limit`) times in a row: the chat fails hard and the
    router takes it. Only once no send of it can be on the site unseen (transient.py)."""
    return Hard(
        HardError(
            f"{attempts} transient failures in a row (qwen.max_attempts = {limit}); last: {last}",
            code=Code.TOO_MANY_ATTEMPTS,
        )
    )


Move = (
    Ask
    | Look
    | LookTurns
    | Refused
    | Search
    | Adopt
    | NeverSent
    | InDoubt
    | Collect
    | Write
    | Reject
    | Busy
    | Transient
    | Hard
)
