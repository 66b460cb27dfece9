"""What the contract knows of an engine: two small protocols and two kinds of failure.

A *chat* engine (qwen) is asynchronous: `send` starts a conversation and returns its URL,
`check` looks at it later. A *direct* engine (router) answers in one call. Both raise
`TransientError` (retry later) or `HardError` (change strategy) and nothing else for
expected failures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..records import record
from .unknown import UnknownAnswer

if TYPE_CHECKING:  # the section's type only: engines do not import the config
    from ..config import Qwen


class Code(StrEnum):
    """Every engine error's `code`: short and stable, stored as these very strings (the journal,
    the store's last_error_code, status). Compare an error's code with these, never a literal."""

    # the kinds, when nothing more precise is said
    ERROR = "error"
    TRANSIENT = "transient"
    HARD = "hard"
    BUSY = "busy"
    # the account: it cannot take a prompt now (contract/quota.py holds it back for a while)
    LOGGED_OUT = "logged_out"
    BOT_CHECK = "bot_check"
    QUOTA = "quota"
    EMPTY_ANSWER = "empty_answer"
    # the site, the page and the browser
    WAF = "waf"
    ERROR_BANNER = "error_banner"
    API_ERROR = "api_error"
    STALE_HEADERS = "stale_headers"
    NETWORK = "network"
    TIMEOUT = "timeout"
    PAGE_CHANGED = "page_changed"
    NO_DEVTOOLS = "no_devtools"
    BROWSER_NOT_FOUND = "browser_not_found"
    BROWSER_LAUNCH = "browser_launch"
    # a chat and its answer
    CHAT_NOT_FOUND = "chat_not_found"
    CHAT_IN_PROGRESS = "chat_in_progress"
    CHAT_DELETED = "chat_deleted"
    BAD_CHAT_URL = "bad_chat_url"
    NO_CHAT_URL = "no_chat_url"
    UNNAMED_CHAT = "unnamed_chat"
    EMPTY_CHAT = "empty_chat"
    BUSY_CHAT = "busy_chat"
    NO_TURN = "no_turn"
    CUT_SHORT = "cut_short"
    ANSWER_ERROR = "answer_error"
    PROMPT_MISMATCH = "prompt_mismatch"
    # the chat's model and modes (qwen.model, qwen.thinking, qwen.web_search)
    MODEL_NOT_OFFERED = "model_not_offered"
    MODEL_NOT_CHOSEN = "model_not_chosen"
    MODEL_UNKNOWN = "model_unknown"
    WRONG_MODEL = "wrong_model"
    NO_MODEL_PICKER = "no_model_picker"
    THINKING_NOT_OFFERED = "thinking_not_offered"
    THINKING_NOT_SET = "thinking_not_set"
    NO_THINKING_TOGGLE = "no_thinking_toggle"
    NO_WEB_SEARCH = "no_web_search"
    WEB_SEARCH_NOT_SET = "web_search_not_set"
    # the router
    ROUTER_AUTH = "router_auth"
    ROUTER_MODEL = "router_model"
    ROUTER_NOT_FOUND = "router_not_found"
    ROUTER_QUOTA = "router_quota"
    ROUTER_FAILED = "router_failed"
    ROUTER_BAD_REQUEST = "router_bad_request"
    ROUTER_REJECTED = "router_rejected"
    ROUTER_BAD_RESPONSE = "router_bad_response"
    ROUTER_CUT_SHORT = "router_cut_short"
    ROUTER_CONTENT_FILTER = "router_content_filter"
    ROUTER_EMPTY = "router_empty"
    # the contract's own
    NO_ACCOUNT = "no_account"
    TOO_MANY_ATTEMPTS = "too_many_attempts"
    IN_DOUBT = "in_doubt"  # an interrupted send neither found nor proven unsent (contract/step/proof.py)
    # the site's answers nobody has seen yet (engines/unknown.py)
    MISSING_FIELD = "missing_field"  # an answer without a field the engine needs


# What an account meets before it takes a prompt: refused so, the prompt went nowhere, and another
# account may take it instead.
ACCOUNT_REFUSALS = frozenset({Code.LOGGED_OUT, Code.BOT_CHECK, Code.QUOTA})


class EngineError(Exception):
    """An expected engine failure. `code` is short and stable (journal, status): a Code, or the
    contract's "rejected_<check>" for an answer its checks refused; str() is for people."""

    code: str = Code.ERROR
    # Set by the engine when it failed before anything was submitted (nothing typed, send never
    # clicked): provably no send, so it costs no quota and leaves no intent marker behind.
    nothing_sent: bool = False
    # What the page looked like when the engine met this failure (a PNG), when it is one the
    # user has to see for themselves (a bot check): the contract keeps it in `.qwenpipe/`.
    screenshot: bytes | None = None
    # Set when what the site answered is none of the answers the engine knows (engines/unknown.py):
    # where it was met and what was seen; the contract journals it (`unknown_answer`).
    unknown: UnknownAnswer | None = None

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        if code:
            self.code = code


class TransientError(EngineError):
    """Retry later: network error, timeout, WAF page, generic error banner, answer cut short."""

    code = Code.TRANSIENT


class HardError(EngineError):
    """Change strategy: logged out, bot check, quota spent, chat not found, router gave up."""

    code = Code.HARD


class EngineBusy(EngineError):
    """Another process holds what the engine needs (the browser profile): nothing was done, nothing
    was typed. Not a failure of the article: try again later, without counting an attempt."""

    code = Code.BUSY


class QuotaSpent(HardError):
    """The chat's daily quota is spent; `retry_after` seconds until it resets, when known."""

    code = Code.QUOTA

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message, code=Code.QUOTA)
        self.retry_after = retry_after


class EmptyAnswer(HardError):
    """The site finished an answer with no text in it: accounts past their real daily limit get
    these instead of RateLimited (docs/qwen-site.md). The account's limit, not the prompt's fault."""

    code = Code.EMPTY_ANSWER

    def __init__(self, message: str = "the chat finished its answer with no text in it"):
        super().__init__(message, code=Code.EMPTY_ANSWER)


@record(frozen=True)
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


@record(frozen=True)
class Answer:
    """A complete answer: the raw markdown of the article and what is known about it."""

    markdown: str
    engine: str
    title: str | None = None
    model: str | None = None
    extra: dict = field(default_factory=dict)


@record(frozen=True)
class Generating:
    """The chat is still producing the answer; `progress` is a short human phrase."""

    progress: str = "generating"


@record(frozen=True)
class TurnState:
    """One user message of a chat and the assistant's answer to it (raw markdown so far)."""

    user: str
    answer: str
    complete: bool  # the page and the API agree the answer is finished (and it stayed unchanged)
    error: str | None = None


@record(frozen=True)
class ChatTurns:
    """A whole chat, turns in conversation order (multi-turn prompts read this)."""

    turns: list[TurnState]
    title: str | None = None
    model: str | None = None
    progress: str = "generating"  # a short phrase about the last turn while it is not complete


@record(frozen=True)
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

    def noticed(self) -> list[UnknownAnswer]:
        """The answers nobody has reported that the engine read past since the last call (a phase
        or a role it does not know: nothing failed for them), each once: the contract journals
        them (contract/unknown.py). An unknown answer that fails a call rides on its error."""

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
