"""What the contract knows of an engine: two small protocols and two kinds of failure.

A *chat* engine (qwen) is asynchronous: `send` starts a conversation and returns its URL,
`check` looks at it later. A *direct* engine (router) answers in one call. Both raise
`TransientError` (retry later) or `HardError` (change strategy) and nothing else for
expected failures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the section's type only: engines do not import the config
    from pipeline.config import Qwen


class EngineError(Exception):
    """An expected engine failure. `code` is short and stable (journal, status); str() is for people."""

    code: str = "error"
    # Set by the engine when it failed before anything was submitted (nothing typed, send never
    # clicked): provably no send, so it costs no quota and leaves no intent marker behind.
    nothing_sent: bool = False
    # What the page looked like when the engine met this failure (a PNG), when it is one the
    # user has to see for themselves (a bot check): the contract keeps it in `.qwenpipe/`.
    screenshot: bytes | None = None

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        if code:
            self.code = code


class TransientError(EngineError):
    """Retry later: network error, timeout, WAF page, generic error banner, answer cut short."""

    code = "transient"


class HardError(EngineError):
    """Change strategy: logged out, bot check, quota spent, chat not found, router gave up."""

    code = "hard"


class EngineBusy(EngineError):
    """Another process holds what the engine needs (the browser profile): nothing was done, nothing
    was typed. Not a failure of the article: try again later, without counting an attempt."""

    code = "busy"


class QuotaSpent(HardError):
    """The chat's daily quota is spent; `retry_after` seconds until it resets, when known."""

    code = "quota"

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message, code="quota")
        self.retry_after = retry_after


class EmptyAnswer(HardError):
    """The site finished an answer with no text in it: accounts past their real daily limit get
    these instead of RateLimited (docs/qwen-site.md). The account's limit, not the prompt's fault."""

    code = "empty_answer"

    def __init__(self, message: str = "the chat finished its answer with no text in it"):
        super().__init__(message, code="empty_answer")


@dataclass(frozen=True)
class ChatChoice:
    """How a new chat is to answer, chosen on the site before the first send (qwen.model,
    qwen.thinking, qwen.web_search; a prompt's front matter `[qwen]` overrides them)."""

    model: str = ""  # as the site's model picker names it ("Qwen3.7-Max"); "" = the site's default
    thinking: str = "auto"  # "auto": the site decides (Auto in its thinking select; a toggle stays)
    web_search: bool = False

    @classmethod
    def of(cls, qwen: Qwen) -> ChatChoice:
        """From a [qwen] section (its keys model, thinking, web_search)."""
        return cls(model=qwen.model.strip(), thinking=qwen.thinking, web_search=qwen.web_search)


def same_model(wanted: str, named: str | None) -> bool:
    """Whether a model named as the picker shows it ("Qwen3.7-Max") and as the chat's JSON names
    it ("qwen3.7-max") are the same: case, spaces and underscores aside."""

    def plain(name: str) -> str:
        return "-".join(name.replace("_", " ").lower().split())

    return bool(named) and plain(wanted) == plain(named)


@dataclass(frozen=True)
class Answer:
    """A complete answer: the raw markdown of the article and what is known about it."""

    markdown: str
    engine: str
    title: str | None = None
    model: str | None = None
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Generating:
    """The chat is still producing the answer; `progress` is a short human phrase."""

    progress: str = "generating"


@dataclass(frozen=True)
class TurnState:
    """One user message of a chat and the assistant's answer to it (raw markdown so far)."""

    user: str
    answer: str
    complete: bool  # the page and the API agree the answer is finished (and it stayed unchanged)
    error: str | None = None


@dataclass(frozen=True)
class ChatTurns:
    """A whole chat, turns in conversation order (multi-turn prompts read this)."""

    turns: list[TurnState]
    title: str | None = None
    model: str | None = None
    progress: str = "generating"  # a short phrase about the last turn while it is not complete


@dataclass(frozen=True)
class FoundChat:
    """A chat of the account whose first user message is the text looked for."""

    url: str
    created: float | None  # epoch seconds by the site's clock; None when the site does not say


ProgressCallback = Callable[[str], None]

# Given by whoever builds an engine: takes the browser profile folder before a browser is
# launched on it and returns the function that gives it back; raises EngineBusy, naming the
# holder, when another process has it.
LockProfile = Callable[[Path], Callable[[], None]]


class ChatEngine(Protocol):
    """An asynchronous chat: send once, look many times."""

    name: str

    @property
    def launches(self) -> int:
        """Browsers this engine launched so far (attaching to a running one is none): a cycle
        reports how many it started."""

    def prepare(self) -> None:
        """Start what sending needs (the browser) so that EngineBusy / HardError come before any
        intent marker is written or anything typed."""

    def send(
        self, text: str, choice: ChatChoice | None = None, *, on_chat_id: Callable[[str], None] | None = None
    ) -> str:
        """Open a new chat, choose its model and modes (`choice`), send `text`, return the chat
        URL once the site shows it (None: the site's defaults). `on_chat_id(chat_id)` is called
        with the chat the prompt goes into before the prompt leaves (if it raises, nothing is
        sent and that error is raised).

        Raises TransientError / HardError (a model the site does not offer is a HardError,
        before anything is sent). Never sends when the session is not usable; an error raised
        before the prompt was submitted carries `nothing_sent = True`.
        """

    def check(self, chat_url: str) -> Answer | Generating:
        """Open `chat_url` and report: a complete Answer, or Generating. Never sends anything."""

    def collect(self, chat_urls: list[str]) -> Iterable[tuple[str, Answer | Generating]]:
        """Look at many sent one-turn chats at once, reading only (a cycle calls it before its
        polls): (url, a complete Answer or Generating) for each chat this way can decide, by
        the same standard as `check`, each as soon as it is decided (the engine may go on
        reading while the caller handles one). A chat left out is one only `check` can tell."""

    def find_chats(self, text: str = "", *, sha256: str = "") -> list[FoundChat]:
        """Every recent chat of the account whose first user message is `text` (or hashes to
        `sha256`), newest first.

        Raises rather than answering [] when the list cannot be read: [] means "never sent"."""

    def user_messages(self, chat_url: str) -> list[str] | None:
        """The user messages of the chat, oldest first; None when the site says it does not
        exist. Raises when the chat cannot be read. Never sends anything."""

    def wait(self, chat_url: str, *, timeout: float, on_progress: ProgressCallback | None = None) -> Answer:
        """Stay on the chat until the answer is complete (by hand: `generate --wait`)."""

    def read_turns(self, chat_url: str) -> ChatTurns:
        """Open `chat_url` and report every turn; the last one's `complete` uses the page's signals."""

    def send_turn(self, chat_url: str, text: str) -> None:
        """Send `text` as the next message of an existing chat whose last answer is complete
        (errors before the submit carry `nothing_sent = True`, as for `send`)."""

    def delete_chat(self, chat_url: str) -> bool:
        """Delete the chat from the site (it must be this engine's account's), reading nothing
        of it: True when deleted now, False when the site no longer had it. Raises
        TransientError / HardError (logged out, a bot check...) as the other calls do."""

    def shared_session(self) -> AbstractContextManager[Callable[[], ChatEngine]]:
        """Share what this engine runs on (the browser) with other threads while the block runs.

        Entering starts it in the calling thread (raising like `prepare`, or EngineError when it
        cannot be shared) and yields a factory: called in another thread, it returns a ChatEngine
        for that thread, working beside this one, which that thread closes. A cycle polls
        several chats at once this way."""

    def close(self) -> None:
        """Release the browser if this engine started it."""


class DirectEngine(Protocol):
    """A synchronous engine: one call, one answer (the router)."""

    name: str

    def generate(self, text: str, history: Sequence[tuple[str, str]] = ()) -> Answer:
        """Return a complete Answer for `text` (after the (user, assistant) `history`) or raise
        TransientError / HardError."""

    def close(self) -> None: ...
