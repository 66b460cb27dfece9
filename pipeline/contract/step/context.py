"""What every handler of a step shares: the article, its engines and record, what the step has
learned so far, and the step's outcome."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from ...accounts import all_accounts
from ...engines.base import ChatChoice, EngineError
from ...store.protocol import Send
from ..article import ArticleFiles, ArticleState
from ..hosts import ArticleLease
from ..phases import Reason
from ..prompts import Prompt
from ..quota import SendBudget
from ..rotation import sender_of
from ..unknown import JournalledChat, journal_noticed, journal_unknown
from ..workspace import Engines, Workspace


class Status(Enum):
    """The outcome of one step (what `generate` exits with), not the article's phase: phases.decide
    says where the article is and what the step does; the step ends DONE (phase done), QUEUED
    (it sent), WORKING (it waits: generating, sending, backoff, quota... Outcome.reason says
    which) or FAILED (a hard failure with no engine left, or phase dead)."""

    DONE = "done"
    QUEUED = "queued"  # sent just now
    WORKING = "working"  # still generating, backing off, throttled, or locked elsewhere
    FAILED = "failed"  # hard failure and no fallback (or the fallback failed too)


@dataclass(frozen=True)
class Outcome:
    status: Status
    slug: str
    message: str
    engine: str | None = None
    chat_url: str | None = None
    sent: bool = False  # a prompt went to the chat in this step
    reason: Reason = Reason.NONE  # why WORKING (a StrEnum: its values are the words status shows)
    chat_error: str = ""  # the code of the chat's hard failure in this step (e.g. logged_out), if any
    account: str = ""  # the chat account the article's chat is (or was just sent) on


@dataclass(eq=False)
class Context:
    """One step of one article, with its lock held: what it works with and what it learned."""

    ws: Workspace
    article: ArticleFiles
    prompt: Prompt
    engines: Engines
    wait: bool
    choice: str  # the engine asked for: auto, qwen or router
    say: Callable[[str], None]
    clock: Callable[[], float]
    crash: Callable[[str], None]  # the crash points (pipeline/crashpoints.py) the step passes
    budget: SendBudget | None = None
    lease: ArticleLease | None = None  # a shared batch: this host's lease (checked before a send)
    state: ArticleState | None = None
    chat_url: str | None = None
    chat_error: str = ""
    recovered: bool = False  # the intent marker was answered in this step
    recovering: bool = False  # this step looks for the chat of an interrupted send (in doubt)
    # The accounts a first send may go to: the one asked for (--account), or the one an
    # interrupted send went to (its chat may exist there after all); () = rotation's choice.
    only: tuple[str, ...] = ()
    chosen: str | None = None  # the account rotation chose for the send being decided
    account: str = ""  # the account the article's chat is on, once known
    first_send: Send | None = None  # its first send in the store, once read (sender())

    def __post_init__(self) -> None:
        if self.state is None:
            self.state = ArticleState.load(self.ws.store, self.article)

    @property
    def slug(self) -> str:
        return self.prompt.slug

    @property
    def qwen(self):
        return self.ws.config.qwen

    def save(self) -> None:
        self.state.save(self.ws.store, self.slug)

    def log(self, event: str, **fields: object) -> None:
        self.ws.journal.append(self.slug, event, **self.named(fields))

    def chat(self, account: str) -> JournalledChat:
        """The chat engine of `account`, as every handler calls it: an unknown answer one of its
        errors carries is journalled on its way up (contract/unknown.py)."""
        journal = self.ws.journal
        return JournalledChat(
            self.engines.chat(account),
            lambda err: journal_unknown(journal, self.slug, account, err),
            lambda found: journal_noticed(journal, self.slug, account, found),
        )

    def named(self, fields: dict) -> dict:
        """An event's fields with the chat account it was about: a chat step (engine "qwen") that
        does not name one is the article's sender's, never the journal's `default` guess."""
        if fields.get("engine") == "qwen" and not fields.get("account"):
            fields["account"] = self.sender()
        return fields

    def outcome(
        self,
        status: Status,
        message: str,
        *,
        engine: str | None = None,
        sent: bool = False,
        reason: Reason = Reason.NONE,
    ) -> Outcome:
        return Outcome(
            status,
            self.slug,
            message,
            engine=engine,
            chat_url=self.chat_url,
            sent=sent,
            reason=reason,
            chat_error=self.chat_error,
            account=self.account,
        )

    def sender(self) -> str:
        """The account that took (or was about to take) the article's prompt (rotation.sender_of)."""
        if not self.account:
            first = [s for s in self.ws.store.sends(self.slug) if s.turn == 1]
            self.first_send = first[0] if first else None
            self.account = sender_of(self.article, self.first_send)
        return self.account

    def skipped_error(self, names: tuple[str, ...]) -> EngineError | None:
        """The refusal of an account this run skipped, when every account of `names` (() = all)
        is skipped or off and one was skipped: sending then fails as that account did."""
        accounts = [a.name for a in all_accounts(self.ws.config) if not names or a.name in names]
        skipped = [self.engines.unavailable[a] for a in accounts if a in self.engines.unavailable]
        return skipped[0] if skipped else None

    def chat_choice(self) -> ChatChoice:
        """The model and modes the chat is to answer with: config.toml's [qwen], then the prompt's."""
        return ChatChoice.of(self.qwen.replace(**self.prompt.qwen))


def since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def wait_words(seconds: float) -> str:
    """A wait as a message says it: "in 45 s" (never "in 0 s": under a second is "in 1 s"), or
    "at once" when there is none."""
    return "at once" if seconds <= 0 else f"in {max(1, round(seconds))} s"
