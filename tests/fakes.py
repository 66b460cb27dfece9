"""A scripted chat engine and router for contract tests: read like llm's MockModel."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from pipeline.engines.base import Answer, ChatChoice, ChatTurns, FoundChat, Generating, TurnState

if TYPE_CHECKING:
    from pipeline.engines.base import EngineError
    from pipeline.engines.qwen.page import DomState


def took_nothing(error: EngineError) -> EngineError:
    """`error` as the engine raises it when the site provably took nothing: met before the click,
    or the site's refusal in words (nothing_sent). A send's error without it may have reached the
    site: its send is in doubt, never the router's at once."""
    error.nothing_sent = True
    return error


@dataclass
class FakeChat:
    """`enqueue_check(...)` scripts what `check` returns or raises, in order; `history` records calls."""

    name: str = "qwen"
    base_url: str = "https://chat.qwen.ai"
    launches: int = 0  # no browser
    history: list[tuple] = field(default_factory=list)
    checks: deque = field(default_factory=deque)
    send_error: Exception | None = None
    known_chats: dict[str, str] = field(default_factory=dict)  # prompt -> url of its last send
    clock: Callable[[], float] = time.time  # the site's clock: when send() made each chat
    created: dict[str, float | None] = field(default_factory=dict)  # chat url -> creation time
    crash_after_send: BaseException | None = None
    closed: bool = False
    sends: int = 0
    choices: list[ChatChoice | None] = field(default_factory=list)  # what each send asked for
    messages: dict[str, list[str]] = field(default_factory=dict)  # chat url -> user messages received
    last_turn_complete: deque = field(default_factory=deque)  # scripted; empty = complete
    crash_after_send_turn: BaseException | None = None
    send_turn_error: Exception | None = None  # raised before the turn reaches the chat
    # shared_session: each poll thread gets an AttachedChat over this same script.
    attached: list[AttachedChat] = field(default_factory=list)
    check_together: threading.Barrier | None = None  # each check waits here for the others
    checking: int = 0  # checks running right now (from any thread)
    most_checking: int = 0  # the most that ever ran at once
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def turn_answer(self, number: int) -> str:
        return f"# Answer {number}\n\nThe answer to turn {number}. {FILLER}"

    def read_turns(self, chat_url: str) -> ChatTurns:
        self.history.append(("read_turns", chat_url))
        users = self.messages.get(chat_url, [])
        complete = self.last_turn_complete.popleft() if self.last_turn_complete else True
        turns = [
            TurnState(
                text,
                self.turn_answer(i) if (i < len(users) or complete) else "# Answer",
                complete=i < len(users) or complete,
            )
            for i, text in enumerate(users, 1)
        ]
        return ChatTurns(turns, title="Chat", progress="writing")

    def send_turn(self, chat_url: str, text: str) -> None:
        self.history.append(("send_turn", text))
        if self.send_turn_error:
            raise self.send_turn_error
        self.messages.setdefault(chat_url, []).append(text)
        if self.crash_after_send_turn:
            raise self.crash_after_send_turn

    # collect: chat url -> the Answer / Generating it reports (a chat not here is left to check)
    collected: dict = field(default_factory=dict)
    collect_calls: list[list[str]] = field(default_factory=list)

    def collect(self, chat_urls: list[str]) -> Iterator[tuple[str, object]]:
        self.collect_calls.append(list(chat_urls))
        return iter([(url, self.collected.pop(url)) for url in chat_urls if url in self.collected])

    def enqueue_check(self, *results) -> FakeChat:
        self.checks.extend(results)
        return self

    prepare_error: Exception | None = None

    def prepare(self) -> None:
        if self.prepare_error:
            raise self.prepare_error

    # Unknown answers the engine read past (ChatEngine.noticed): a test puts them here.
    noticed_unknown: list = field(default_factory=list)

    def noticed(self) -> list:
        found, self.noticed_unknown[:] = list(self.noticed_unknown), []
        return found

    send_together: threading.Barrier | None = None  # each send waits here for the others
    sending: int = 0  # sends running right now (from any thread)
    most_sending: int = 0  # the most that ever ran at once

    def _run_with_others(self, running: str, together: threading.Barrier | None) -> None:
        """Count this call among the calls of its kind running at once (the attribute `running`,
        "sending" or "checking", and the most ever, "most_" + running) while it waits at
        `together`, if set, for the others of a side-by-side test."""
        with self._guard:  # poll and send threads share this script
            setattr(self, running, getattr(self, running) + 1)
            setattr(self, f"most_{running}", max(getattr(self, f"most_{running}"), getattr(self, running)))
        try:
            if together is not None:
                together.wait(timeout=10)  # broken (a failure) if the others never come
        finally:
            with self._guard:
                setattr(self, running, getattr(self, running) - 1)

    # A send names its chat (on_chat_id) before the prompt leaves: `crash_after_naming` is raised
    # right after (the chat exists, empty); `send_error_after_naming` likewise, as the engine's
    # error (nothing sent: the site refused it).
    crash_after_naming: BaseException | None = None
    send_error_after_naming: Exception | None = None

    def send(self, text: str, choice: ChatChoice | None = None, *, on_chat_id=None) -> str:
        with self._guard:  # poll and send threads share this script
            self.history.append(("send", text))
            self.choices.append(choice)
            if self.send_error:
                raise self.send_error
            self.sends += 1
            url = f"{self.base_url}/c/{self.sends:08d}-0000-4000-8000-000000000000"
            self.messages[url] = []
            self.created[url] = self.clock()
        if on_chat_id is not None:
            on_chat_id(url.rsplit("/", 1)[1])
        if self.crash_after_naming:
            raise self.crash_after_naming
        if self.send_error_after_naming:
            raise self.send_error_after_naming
        with self._guard:
            self.known_chats[text] = url
            self.messages[url] = [text]
        self._run_with_others("sending", self.send_together)
        if self.crash_after_send:
            raise self.crash_after_send
        return url

    def check(self, chat_url: str):
        with self._guard:
            self.history.append(("check", chat_url))
            result = self.checks.popleft() if self.checks else Generating("writing")
        self._run_with_others("checking", self.check_together)
        if isinstance(result, BaseException):
            raise result
        return result

    @contextmanager
    def shared_session(self) -> Iterator[Callable[[], AttachedChat]]:
        self.prepare()
        yield self._attach

    def _attach(self) -> AttachedChat:
        with self._guard:
            self.attached.append(AttachedChat(self))
            return self.attached[-1]

    def wait(self, chat_url: str, *, timeout: float, on_progress=None):
        """The queued checks in order until an Answer (or an error) comes; the test fails, at
        once and by name, when the queue runs out first (a real wait would hang until `timeout`)."""
        self.history.append(("wait", chat_url))
        while True:
            if not self.checks:
                pytest.fail(
                    f"FakeChat.wait({chat_url}): no Answer queued; "
                    "script one with enqueue_check(Answer(...)) or an error to raise",
                    pytrace=False,
                )
            result = self.check(chat_url)
            if isinstance(result, Answer):
                return result
            if on_progress:
                on_progress(result.progress)

    # Reads that fail (user_messages / find_chats raise them first, one a read, in order), and
    # chats that read as not there (a site slow to show a new chat, or one that hides it).
    read_errors: deque = field(default_factory=deque)
    list_errors: deque = field(default_factory=deque)
    unseen: set = field(default_factory=set)

    def find_chats(self, text: str = "", *, sha256: str = "") -> list[FoundChat]:
        """Every chat whose first message is `text` (or hashes to `sha256`), newest first (the
        account's chat list)."""
        import hashlib

        self.history.append(("find_chats", text or sha256))
        if self.list_errors:
            raise self.list_errors.popleft()

        def wanted(first: str) -> bool:
            return first == text or hashlib.sha256(first.encode()).hexdigest() == sha256

        return [
            FoundChat(url, self.created.get(url))
            for url, users in reversed(self.messages.items())
            if users and wanted(users[0]) and url not in self.unseen
        ]

    # delete_chat: the chats deleted, in order; errors to raise first, one per delete, in order
    deleted: list[str] = field(default_factory=list)
    delete_errors: deque = field(default_factory=deque)

    def delete_chat(self, chat_url: str) -> bool:
        with self._guard:
            self.history.append(("delete_chat", chat_url))
            if self.delete_errors:
                raise self.delete_errors.popleft()
            if chat_url in self.deleted or chat_url not in self.messages:
                return False  # the site no longer has it
            self.deleted.append(chat_url)
            return True

    def user_messages(self, chat_url: str) -> list[str] | None:
        """The chat's user messages; None for a chat the site never made (or deleted)."""
        self.history.append(("user_messages", chat_url))
        if self.read_errors:
            raise self.read_errors.popleft()
        users = None if chat_url in self.unseen else self.messages.get(chat_url)
        return None if users is None else list(users)

    def close(self) -> None:
        self.closed = True


class AttachedChat:
    """What a poll thread gets from `FakeChat.shared_session`: the same scripted chat (its history,
    its queued checks), closed on its own like the qwen engine's attached pages."""

    def __init__(self, chat: FakeChat):
        self.chat = chat
        self.closed = False

    def __getattr__(self, name: str):
        return getattr(self.chat, name)

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeRouter:
    name: str = "router"
    results: deque = field(default_factory=deque)
    history: list[str] = field(default_factory=list)
    conversations: list[list] = field(default_factory=list)  # the history passed with each call

    def enqueue(self, *results) -> FakeRouter:
        self.results.extend(results)
        return self

    def generate(self, text: str, history=()) -> Answer:
        self.history.append(text)
        self.conversations.append(list(history))
        result = self.results.popleft() if self.results else Answer(ROUTED, "router", model="test/model")
        if isinstance(result, BaseException):
            raise result
        return result

    def close(self) -> None:
        pass


FILLER = " ".join(["This sentence is here so that the article passes the default minimum length."] * 6)
ARTICLE = f"# A Title\n\nBody text here. {FILLER}\n\n- one\n- two\n"
ROUTED = f"# Routed\n\nFrom the router. {FILLER}\n"


def answer(markdown: str = ARTICLE) -> Answer:
    return Answer(markdown=markdown, engine="qwen", title="Generated Title")


def page_state(**changes) -> DomState:
    """The completion signals of a page (pipeline.engines.qwen.page) that shows one finished
    answer in the current UI, with `changes`."""
    from pipeline.engines.qwen.page import DomState

    values = dict(
        ui="current",
        composer=True,
        composer_text="",
        send_present=True,
        send_disabled=False,
        stop_visible=False,
        user_turns=1,
        assistant_turns=1,
        copy_button=True,
        thinking_visible=False,
        skip_visible=False,
        answer_present=True,
        answer_text="Title\none",
    )
    return DomState(**{**values, **changes})


class Crash(BaseException):
    """The process dies here (as QWENPIPE_CRASH_AT's SIGKILL would)."""


@contextmanager
def crash_at(point: str) -> Iterator[None]:
    """The contract's crash point `point` raises Crash while the block runs."""
    from unittest import mock

    import pipeline.contract.step

    def crashpoint(name: str) -> None:
        if name == point:
            raise Crash(name)

    with mock.patch.object(pipeline.contract.step, "crashpoint", crashpoint):
        yield
