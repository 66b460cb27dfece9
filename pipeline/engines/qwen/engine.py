"""The chat.qwen.ai engine: a real browser, the site's own page and API, one page per call.

QwenEngine is the ChatEngine protocol (engines/base.py) over the pieces that do the work, each
about one idea and handed the engine's state explicitly (context.py: its settings, clock and
noticed unknown answers):

- pages.py: the page's lifecycle (one page of ours at a time, reused or closed, waiting for
  the app and for a page that may be typed in);
- sending.py: the click on send and its proof (the chat's address, the stream, the JSON), and
  whether an error provably sent nothing;
- observing.py: looking at one answer until it is complete (the page, the site's JSON, the
  stability reads, the sending page's stream);
- judging.py: a whole chat as turns (multi-turn prompts), the last judged by the same rule;
- chats.py: the account's chats (finding a prompt's chat, its messages, deleting one).

Sending is the only action that costs anything, so `send` refuses to type unless the page is
the app, logged in, and shows no bot check, firewall or quota screen (docs/qwen-site.md).
Looking at a chat (`check`, `wait`) never types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import (
    Answer,
    ChatChoice,
    ChatTurns,
    Code,
    EngineError,
    FoundChat,
    Generating,
    LockProfile,
    ProgressCallback,
    TransientError,
)
from ..unknown import UnknownAnswer, Where
from . import chats
from .browser import BrowserSession
from .choices import apply_choice
from .context import EngineContext, chat_id_of
from .hold import ChatIdCallback, CompletionHold
from .judging import TurnsReader
from .observing import Observer
from .page import read_dom_state
from .pages import Live, Pages
from .selectors import Selectors, merge_overrides
from .sending import Submit, clicker, replies_to_send, wait_for_chat_id, wait_for_user_turn
from .stream import PageTraffic

if TYPE_CHECKING:  # the sections' types only: engines do not import the config
    from ...config import Browser, Qwen


class QwenEngine:
    """ChatEngine for chat.qwen.ai (or the simulator) driven through Playwright's sync API."""

    name = "qwen"

    def __init__(
        self,
        qwen: Qwen,
        browser: Browser | BrowserSession,
        *,
        root: Path | None = None,
        lock_profile: LockProfile | None = None,
        keep_login: Callable[[Any], None] | None = None,
        shared_browser: bool = False,
        trace: Path | None = None,
    ):
        """`qwen` and `browser` are the config's sections; `browser` may be a session to use
        (then never closed here). `lock_profile` guards the profile a launched browser uses.
        `keep_login` is called with every page once it shows the chat app (it keeps the saved
        login fresh, and must not raise). `trace`: where a launched session keeps the Playwright
        trace of its run (trace.py). A bad [qwen.selectors] raises SelectorError (a ValueError
        naming the key)."""
        self.settings = qwen
        self.answer_timeout = float(qwen.answer_timeout)
        self.api_reads_per_second = float(qwen.api_reads_per_second)
        self.collect_from = qwen.collect
        self.ctx = EngineContext(
            name=self.name,
            base_url=qwen.base_url.rstrip("/"),
            page_timeout=float(qwen.page_timeout),
            stable_reads=max(1, qwen.stable_reads),
            selector_sets=merge_overrides(qwen.selectors),
            keep_login=keep_login,
        )
        if isinstance(browser, BrowserSession):
            session, owns = browser, False
        else:
            session = BrowserSession(
                browser, root=root, lock_profile=lock_profile, shared_browser=shared_browser, trace=trace
            )
            owns = True
        self.pages = Pages(self.ctx, session, owns_session=owns)
        self.observer = Observer(self.ctx)
        self.turns = TurnsReader(self.ctx)

    # The settings other code reads off the engine: one copy, in the context.
    base_url = property(lambda self: self.ctx.base_url)
    page_timeout = property(lambda self: self.ctx.page_timeout)
    stable_reads = property(lambda self: self.ctx.stable_reads)
    read_interval = property(lambda self: self.ctx.read_interval)
    selector_sets = property(lambda self: self.ctx.selector_sets)
    keep_login = property(lambda self: self.ctx.keep_login)
    session = property(lambda self: self.pages.session)

    # -- the ChatEngine protocol -------------------------------------------------------------

    @property
    def launches(self) -> int:
        """Browsers this engine launched (one given to it is its owner's to count)."""
        return self.session.launched if self.pages.owns_session else 0

    def noticed(self) -> list[UnknownAnswer]:
        """The unknown answers read past since the last call (a phase or a role nobody has
        reported, in a stream or a chat's JSON), each once per engine: nothing failed for them."""
        return self.ctx.noticed.take()

    def prepare(self) -> None:
        """Start the browser now: a busy profile (EngineBusy) or a missing browser (HardError)
        is reported before the contract writes its intent marker."""
        _ = self.session.context

    def send(
        self, text: str, choice: ChatChoice | None = None, *, on_chat_id: ChatIdCallback | None = None
    ) -> str:
        """Open a new chat, choose its model and modes, send `text`, return `{base_url}/c/<id>`
        once the address shows it. The page's completion request is held until
        `on_chat_id(chat_id)` returned (hold.py); an error raised before any was let go carries
        `nothing_sent` (the prompt never left the browser)."""
        pages, submit, hold = self.pages, Submit(), CompletionHold(on_chat_id)
        with submit, pages.page(Where.NEW_CHAT, keep=True) as page:
            pages.open(page, self.base_url + "/")
            selectors = pages.ready_to_type(page)
            apply_choice(page, selectors, choice or ChatChoice())
            turns_before = read_dom_state(page, selectors).assistant_turns
            page.locator(selectors.composer).first.fill(text)
            PageTraffic.of(page).watch_streams()
            try:
                with hold.on(page), replies_to_send(page) as replies:
                    resend = clicker(page, selectors, submit)
                    chat_id = wait_for_chat_id(self.ctx, page, replies, resend, hold)
            except EngineError as err:
                if not hold.released:
                    err.nothing_sent = True  # no completion left the browser
                raise
            self.observer.turns_before[chat_id] = turns_before
            # The page stays open, reading its stream: a `wait` that follows takes the answer
            # from there (the next call of any other kind closes it).
            pages.keep_live(Live(chat_id, page, selectors))
            return self.chat_url(chat_id)

    def user_messages(self, chat_url: str) -> list[str] | None:
        """The user messages of the chat, oldest first, as its page loads it; None when the site
        says there is no such chat. Raises when the chat cannot be read (None and [] both mean
        "never sent": they are never guessed)."""
        return chats.user_messages(self.ctx, self.pages, chat_url)

    def check(self, chat_url: str) -> Answer | Generating:
        """Look at the chat once (plus the stability reads): Answer, Generating, or raise."""
        chat_id = chat_id_of(chat_url)
        with self._chat_page(chat_id) as (page, selectors):
            return self.observer.watch(
                page, selectors, chat_id, deadline=self.ctx.deadline(self.page_timeout)
            )

    def collect(self, chat_urls: list[str]) -> Iterator[tuple[str, Answer | Generating]]:
        """Read many one-turn chats' JSON through one page of this engine's browser (see
        collect.py): (url, Answer / Generating) for each chat the JSON decides, as it is
        decided (the page stays open, reading, until the iteration ends or is closed); the
        rest are left out for `check` (their pages). `qwen.collect = "page"` leaves every chat out."""
        from .collect import ChatCollector

        if self.collect_from != "api" or not chat_urls:
            return
        with self.pages.page(Where.CHAT_JSON) as page:
            self.pages.open(page, self.base_url + "/")
            selectors = self.pages.wait_for_app(page)
            collector = ChatCollector(
                page,
                stable_reads=self.stable_reads,
                reads_per_second=self.api_reads_per_second,
                engine=self.name,
                extra={"ui": selectors.name},
                timeout=self.page_timeout,
            )
            for decided in collector.collect(chat_urls):
                # What the page met so far is handed over before the step of each chat runs (it
                # journals it): the page itself closes only after the last step.
                self.pages.notice_page(page, Where.CHAT_JSON)
                yield decided

    def wait(self, chat_url: str, *, timeout: float, on_progress: ProgressCallback | None = None) -> Answer:
        """Stay on the chat page, re-reading it every second, until the answer is complete: on
        the page that sent it, from its stream, when it is still open; else on the chat's page."""
        chat_id = chat_id_of(chat_url)
        deadline = self.ctx.deadline(timeout)
        live = self.pages.take_live()
        if live is not None and live.chat_id != chat_id:
            self.pages.close_page(live.page)
            live = None
        if live is not None:
            with self.pages.using(live.page, Where.STREAM) as page:
                answer = self.observer.wait_for_stream(page, live, deadline, on_progress)
                if answer is not None:
                    return answer
        with self._chat_page(chat_id) as (page, selectors):
            result = self.observer.watch(
                page, selectors, chat_id, deadline=deadline, on_progress=on_progress, patient=True
            )
            if isinstance(result, Answer):
                return result
        raise TransientError(f"timed out after {timeout:g} s waiting for the answer", code=Code.TIMEOUT)

    def read_turns(self, chat_url: str) -> ChatTurns:
        """Every turn of the chat in order; the last is complete only when the page and the API
        agree and its answer stayed unchanged over `stable_reads` reads. Never sends anything."""
        chat_id = chat_id_of(chat_url)
        with self._chat_page(chat_id) as (page, selectors):
            return self.turns.read(page, selectors, chat_id)

    def send_turn(self, chat_url: str, text: str) -> None:
        """Send `text` as the next message of the chat, once its last answer is complete.

        Returns when the site's JSON shows `text` as the chat's last user message (the proof it
        arrived). Refuses (TransientError "busy_chat") while the last answer is not complete;
        nothing is typed unless the page is a logged-in, usable app.
        """
        chat_id = chat_id_of(chat_url)
        submit = Submit()
        with submit, self._chat_page(chat_id) as (page, selectors):
            chat = self.turns.read(page, selectors, chat_id)
            if not chat.turns:
                raise TransientError(
                    f"the chat {chat_url} shows no messages yet: not sending", code=Code.EMPTY_CHAT
                )
            if not chat.turns[-1].complete:
                raise TransientError(
                    f"the chat's last answer (turn {len(chat.turns)}) is not complete "
                    f"({chat.progress}): not sending the next turn",
                    code=Code.BUSY_CHAT,
                )
            selectors = self.pages.ready_to_type(page)
            page.locator(selectors.composer).first.fill(text)
            PageTraffic.of(page).watch_streams()
            with replies_to_send(page) as replies:
                resend = clicker(page, selectors, submit, later_turn=True)
                wait_for_user_turn(self.ctx, page, chat_id, len(chat.turns) + 1, text, replies, resend)

    def find_chats(self, text: str = "", *, sha256: str = "") -> list[FoundChat]:
        """Every recent chat whose first user message is `text` (or, with `sha256`, hashes to
        it: what was sent, when only its hash is kept), newest first, with when the site says
        it was made (chats.py). Titles are never the prompt, so only the first user message is
        compared. When the list cannot be read this raises rather than answering []: [] means
        "safe to send again"."""
        return chats.find_chats(self.ctx, self.pages, text, sha256)

    def delete_chat(self, chat_url: str) -> bool:
        """Delete the chat from this engine's account as the site's own chat list does
        (docs/qwen-site.md: `DELETE /api/v2/chats/<id>`, made from a page of the site once it
        has made its own API calls, with their headers). Reads nothing of the chat. True when
        the site deleted it now, False when it no longer had it (already deleted)."""
        return chats.delete_chat(self.ctx, self.pages, chat_url)

    @contextmanager
    def shared_session(self) -> Iterator[Callable[[], QwenEngine]]:
        """Start this engine's browser now (this thread) and share it while the block runs.

        Yields a factory to call in another thread: a QwenEngine of that thread (its own
        Playwright driver) attached over CDP to this browser, opening its own pages and closing
        only those. When this browser goes away, those engines raise EngineBusy (the article
        waits for the next run), never a hard failure.
        """
        session = self.session
        if not session.started:
            session.expose_cdp = True  # a loopback DevTools port other threads attach to
        self.prepare()
        endpoint = session.cdp_endpoint()
        if not endpoint:
            raise EngineError(
                "the browser announced no DevTools port (DevToolsActivePort) in 5 s", code=Code.NO_DEVTOOLS
            )
        browser = session.config.replace(cdp_url=endpoint)

        def attach() -> QwenEngine:
            engine = QwenEngine(
                self.settings,
                BrowserSession(
                    browser, root=session.root, borrowed=True, shared_browser=session.shared_browser
                ),
                keep_login=self.keep_login,
            )
            engine.pages.owns_session = True  # its own session: closing it closes only its pages
            return engine

        yield attach

    def close(self) -> None:
        owns = self.pages.owns_session
        self.pages.close_live(reuse=not owns)  # the session closes with us: no use parking
        if owns:
            self.session.close()

    def __enter__(self) -> QwenEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- session checks (login, doctor) ----------------------------------------------------

    def check_login(self) -> None:
        """Raise the HardError/TransientError that would stop a send; return when all is well."""
        with self.pages.page(Where.LOGIN_CHECK) as page:
            self.pages.open(page, self.base_url + "/")
            self.pages.ready_to_type(page)

    def chat_url(self, chat_id: str) -> str:
        return self.ctx.chat_url(chat_id)

    @contextmanager
    def _chat_page(self, chat_id: str) -> Iterator[tuple[Any, Selectors]]:
        """A fresh page on the chat, once it shows the app: the page and its selectors."""
        with self.pages.page(Where.CHAT_JSON) as page:
            self.pages.open(page, self.chat_url(chat_id))
            yield page, self.pages.wait_for_app(page)
