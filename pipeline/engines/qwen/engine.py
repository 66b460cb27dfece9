"""The chat.qwen.ai engine: a real browser, the site's own page and API, one page per call.

Sending is the only action that costs anything, so `send` refuses to type unless the page is
the app, logged in, and shows no bot check, firewall or quota screen. Looking at a chat
(`check`, `wait`) never types. An answer is complete only when the page says so (no stop
button, the copy button on the turn, no thinking) AND the site's JSON says the turn finished
AND the answer's markdown stays unchanged over `stable_reads` reads a second apart.

Multi-turn prompts use `read_turns` (every turn of a chat, the last one judged by that same
rule) and `send_turn` (the next message of a chat whose last answer is complete). Answers are
paired with their own user message through the JSON's parent links, and the page's signals
count only when they belong to the assistant turn after the last user message, so the answer
to turn N is never taken from turn N-1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pipeline.engines.base import (
    ACCOUNT_REFUSALS,
    Answer,
    ChatChoice,
    ChatTurns,
    Code,
    EmptyAnswer,
    EngineError,
    FoundChat,
    Generating,
    HardError,
    LockProfile,
    ProgressCallback,
    TransientError,
    TurnState,
)
from pipeline.engines.qwen.api import (
    ChatShapeError,
    ChatView,
    ListedChat,
    chat_id_from_url,
    chat_list_items,
    classify_api_error,
    missing_field,
    parse_chat,
)
from pipeline.engines.qwen.botcheck import BotChecks, gateway_error, left_chat, reply_refusal, unknown_page
from pipeline.engines.qwen.browser import BrowserSession
from pipeline.engines.qwen.choices import apply_choice
from pipeline.engines.qwen.history import History, whole
from pipeline.engines.qwen.hold import ChatIdCallback, CompletionHold
from pipeline.engines.qwen.login import read_login_state
from pipeline.engines.qwen.page import (
    ApiUnusable,
    DomState,
    SendReplies,
    detect_ui,
    fetch_api,
    fetch_json,
    present,
    read_dom_state,
    screen_failure,
)
from pipeline.engines.qwen.page_answers import PageAnswers
from pipeline.engines.qwen.refusals import after_refusal
from pipeline.engines.qwen.selectors import Selectors, merge_overrides
from pipeline.engines.qwen.steady import API_STABLE_SECONDS, Steadiness, finished_long_ago, site_time
from pipeline.engines.qwen.stream import PageTraffic, StreamRead
from pipeline.engines.unknown import UnknownAnswer, Where, seen, unknown
from pipeline.redact import first_line

if TYPE_CHECKING:  # the sections' types only: engines do not import the config
    from pipeline.config import Browser, Qwen

CHAT_LIST_PAGES = 3
POLL_SECONDS = 0.25  # while waiting for the app or the chat address
PAGE_SETTLE_SECONDS = 3  # a fresh page may show "busy" this long before drawing a done answer
WAIT_PAGE_SECONDS = 0.1  # a settled, steady answer: how often to look whether the page agrees yet
CONFIRMED_SECONDS = 60  # how long an answer seen complete and stable counts as such
REPLY_GRACE_SECONDS = 2  # a quota toast seen: how long its API reply (with the hours) may lag
PAGE_LOAD_SECONDS = 5  # how long a look waits for a chat's page to load the chat's JSON itself
PAGE_RELOAD_SECONDS = 0.5  # ... and, at a later look, for the page's next load of its own
STREAM_LOOK_SECONDS = 0.1  # how often a wait on the sending page looks whether its stream ended


@dataclass
class Observation:
    """One look at the chat: a candidate answer, or why there is none yet."""

    progress: str
    markdown: str | None = None
    title: str | None = None
    model: str | None = None
    extra: dict = field(default_factory=dict)
    catching_up: bool = False  # the site has (more of) the answer than the page shows yet
    unsure: bool = False  # no API to ask: the page may still be drawing a finished answer
    stalled: bool = False  # the page looks done but the API says the turn did not finish
    # The answer, when the site's stored status says it finished (whatever the page shows yet):
    # such reads count toward the stability reads, and may come API_STABLE_SECONDS apart.
    settled: str | None = None
    dom_text: str | None = None  # the page's answer text while it says busy
    vouched: bool = False  # complete by the page's own load and drawing: no stability reads needed


@dataclass
class TurnsSeen:
    """One look at a whole chat (multi-turn): its turns, and whether the last may be complete."""

    turns: list[TurnState]  # the last one with complete=False: the caller decides that
    progress: str
    title: str | None = None
    model: str | None = None
    candidate: str | None = None  # the last answer, when every signal says it is complete
    catching_up: bool = False  # the site finished the last answer; the page has not drawn it yet
    stalled: bool = False  # the page looks done but the API says the last turn did not finish

    def result(self, *, complete: bool) -> ChatTurns:
        turns = list(self.turns)
        if complete and turns:
            turns[-1] = TurnState(turns[-1].user, self.candidate or turns[-1].answer, complete=True)
        progress = "complete" if complete else self.progress
        return ChatTurns(turns, title=self.title, model=self.model, progress=progress)


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
        self.base_url = qwen.base_url.rstrip("/")
        self.page_timeout = float(qwen.page_timeout)
        self.answer_timeout = float(qwen.answer_timeout)
        self.stable_reads = max(1, qwen.stable_reads)
        self.read_interval = 1.0
        self.api_reads_per_second = float(qwen.api_reads_per_second)
        self.collect_from = qwen.collect
        self.selector_sets = merge_overrides(qwen.selectors)
        self.keep_login = keep_login
        if isinstance(browser, BrowserSession):
            self.session, self._owns_session = browser, False
        else:
            self.session = BrowserSession(
                browser, root=root, lock_profile=lock_profile, shared_browser=shared_browser, trace=trace
            )
            self._owns_session = True
        # chat id -> assistant turns on the page before we sent: our answer is the next one.
        self._turns_before: dict[str, int] = {}
        # chat id -> (turns, last answer, when): the last answer was seen complete and stable.
        self._confirmed: dict[str, tuple[int, str, float]] = {}
        self._live: _Live | None = None  # the page of the last send, still reading its stream
        # Unknown answers read past (an unknown phase): handed over once each (`noticed`).
        self._noticed: list[UnknownAnswer] = []
        self._noticed_before: set[UnknownAnswer] = set()

    # -- the ChatEngine protocol -------------------------------------------------------------

    @property
    def launches(self) -> int:
        """Browsers this engine launched (one given to it is its owner's to count)."""
        return self.session.launched if self._owns_session else 0

    def noticed(self) -> list[UnknownAnswer]:
        """The unknown answers read past since the last call (a phase or a role nobody has
        reported, in a stream or a chat's JSON), each once per engine: nothing failed for them."""
        found, self._noticed = self._noticed, []
        return found

    def _notice(self, where: str, what: str) -> None:
        found = UnknownAnswer(where, seen(what=what))
        if what and found not in self._noticed_before:
            self._noticed_before.add(found)
            self._noticed.append(found)

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
        submit = _Submit()
        hold = CompletionHold(on_chat_id)
        with submit, self._page(Where.NEW_CHAT, keep=True) as page:
            self._open(page, self.base_url + "/")
            selectors = self._ready_to_type(page)
            apply_choice(page, selectors, choice or ChatChoice())
            turns_before = read_dom_state(page, selectors).assistant_turns
            page.locator(selectors.composer).first.fill(text)
            PageTraffic.of(page).watch_streams()
            try:
                with hold.on(page), self._replies(page) as replies:
                    resend = self._clicker(page, selectors, submit)
                    chat_id = self._wait_for_chat_id(page, replies, resend, hold)
            except EngineError as err:
                if not hold.released:
                    err.nothing_sent = True  # no completion left the browser
                raise
            self._turns_before[chat_id] = turns_before
            # The page stays open, reading its stream: a `wait` that follows takes the answer
            # from there (the next call of any other kind closes it).
            self._keep_live(_Live(chat_id, page, selectors))
            return self.chat_url(chat_id)

    def user_messages(self, chat_url: str) -> list[str] | None:
        """The user messages of the chat, oldest first, as its page loads it; None when the site
        says there is no such chat. Raises when the chat cannot be read (None and [] both mean
        "never sent": they are never guessed)."""
        chat_id = self._chat_id(chat_url)
        body = None
        try:
            with self._page(Where.CHAT_JSON) as page:
                self._open(page, self.chat_url(chat_id))
                self._wait_for_app(page)
                self._check_login_api(page)
                body = self._chat_json(page, chat_id).body
                error = classify_api_error(body)
                if error is not None:
                    raise error
                view = parse_chat(body, chat_id)
                self._notice(Where.CHAT_JSON, view.unknown)
        except ApiUnusable as err:
            raise TransientError(f"cannot read the chat site's API: {err}", code=Code.API_ERROR) from None
        except ChatShapeError as err:
            raise missing_field(err, f"chat {chat_id}'s JSON", Where.CHAT_JSON, body) from None
        except HardError as err:
            if err.code == Code.CHAT_NOT_FOUND:  # the page or its JSON says so
                return None
            raise
        return [turn.user_text for turn in view.turns]

    def check(self, chat_url: str) -> Answer | Generating:
        """Look at the chat once (plus the stability reads): Answer, Generating, or raise."""
        chat_id = self._chat_id(chat_url)
        with self._page(Where.CHAT_JSON) as page:
            self._open(page, self.chat_url(chat_id))
            selectors = self._wait_for_app(page)
            return self._watch(page, selectors, chat_id, deadline=self._deadline(self.page_timeout))

    def collect(self, chat_urls: list[str]) -> Iterator[tuple[str, Answer | Generating]]:
        """Read many one-turn chats' JSON through one page of this engine's browser (see
        collect.py): (url, Answer / Generating) for each chat the JSON decides, as it is
        decided (the page stays open, reading, until the iteration ends or is closed); the
        rest are left out for `check` (their pages). `qwen.collect = "page"` leaves every chat out."""
        from pipeline.engines.qwen.collect import ChatCollector

        if self.collect_from != "api" or not chat_urls:
            return
        with self._page(Where.CHAT_JSON) as page:
            self._open(page, self.base_url + "/")
            selectors = self._wait_for_app(page)
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
                self._notice_page(page, Where.CHAT_JSON)
                yield decided

    def wait(self, chat_url: str, *, timeout: float, on_progress: ProgressCallback | None = None) -> Answer:
        """Stay on the chat page, re-reading it every second, until the answer is complete."""
        chat_id = self._chat_id(chat_url)
        deadline = self._deadline(timeout)
        live, self._live = self._live, None
        if live is not None and live.chat_id != chat_id:
            self._close_page(live.page)
            live = None
        if live is not None:
            with self._using(live.page, Where.STREAM) as page:
                answer = self._wait_for_stream(page, live, deadline, on_progress)
                if answer is not None:
                    return answer
        with self._page(Where.CHAT_JSON) as page:
            self._open(page, self.chat_url(chat_id))
            selectors = self._wait_for_app(page)
            result = self._watch(
                page, selectors, chat_id, deadline=deadline, on_progress=on_progress, patient=True
            )
            if isinstance(result, Answer):
                return result
        raise TransientError(f"timed out after {timeout:g} s waiting for the answer", code=Code.TIMEOUT)

    def _wait_for_stream(
        self, page: Any, live: _Live, deadline: float, on_progress: ProgressCallback | None
    ) -> Answer | None:
        """The answer as the page that sent it receives it: the completion's stream, taken the
        moment it ends with `finished` in the answer phase. None when the stream cannot tell (it
        broke, ended unfinished or empty, or the browser kept no body): the chat's own page,
        read as any later run reads it, decides then. Progress comes from the page's drawing."""
        said, said_at = None, float("-inf")
        while time.monotonic() < deadline:
            failure = screen_failure(page, self.selector_sets)
            if failure is not None:
                raise failure
            read = live.traffic.stream()
            if isinstance(read, StreamRead):
                if read.error:
                    raise TransientError(
                        f"the site reports an error in the answer: {read.error}", code=Code.ANSWER_ERROR
                    )
                if not read.finished:
                    cut = TransientError(
                        "the answer stopped before the site marked it finished (cut short)",
                        code=Code.CUT_SHORT,
                    )
                    # A stream that said something nobody has reported before it broke off.
                    raise unknown(cut, Where.STREAM, what=read.unknown) if read.unknown else cut
                self._notice(Where.STREAM, read.unknown)
                if not read.answer.strip():
                    return None  # an empty answer: the chat's page says what it means
                if read.model is None:
                    return None  # which model answered is for the chat's JSON to say
                extra = {"source": "stream", "chat_id": live.chat_id, "ui": live.selectors.name}
                return Answer(read.answer, self.name, model=read.model, extra=extra)
            if read is not None:  # Unreadable
                return None
            dom = read_dom_state(page, live.selectors)
            if not (dom.composer or dom.assistant_turns):
                return None  # the page is no longer the app (replaced): the chat's own page decides
            progress = dom.progress()
            if on_progress and progress != said and time.monotonic() - said_at >= self.read_interval:
                on_progress(progress)
                said, said_at = progress, time.monotonic()
            page.wait_for_timeout(STREAM_LOOK_SECONDS * 1000)
        return None

    def read_turns(self, chat_url: str) -> ChatTurns:
        """Every turn of the chat in order; the last is complete only when the page and the API
        agree and its answer stayed unchanged over `stable_reads` reads. Never sends anything."""
        chat_id = self._chat_id(chat_url)
        with self._page(Where.CHAT_JSON) as page:
            self._open(page, self.chat_url(chat_id))
            selectors = self._wait_for_app(page)
            return self._read_turns(page, selectors, chat_id)

    def send_turn(self, chat_url: str, text: str) -> None:
        """Send `text` as the next message of the chat, once its last answer is complete.

        Returns when the site's JSON shows `text` as the chat's last user message (the proof it
        arrived). Refuses (TransientError "busy_chat") while the last answer is not complete;
        nothing is typed unless the page is a logged-in, usable app.
        """
        chat_id = self._chat_id(chat_url)
        submit = _Submit()
        with submit, self._page(Where.CHAT_JSON) as page:
            self._open(page, self.chat_url(chat_id))
            selectors = self._wait_for_app(page)
            chat = self._read_turns(page, selectors, chat_id)
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
            selectors = self._ready_to_type(page)
            page.locator(selectors.composer).first.fill(text)
            PageTraffic.of(page).watch_streams()
            with self._replies(page) as replies:
                resend = self._clicker(page, selectors, submit, later_turn=True)
                self._wait_for_user_turn(page, chat_id, len(chat.turns) + 1, text, replies, resend)

    def find_chats(self, text: str = "", *, sha256: str = "") -> list[FoundChat]:
        """Every recent chat (CHAT_LIST_PAGES pages) whose first user message is `text` (or,
        with `sha256`, hashes to it: what was sent, when only its hash is kept), newest
        first, each with the time the site says it was made (the list's `created_at`, else the
        chat's own, else its first message's `timestamp`; None when the site says nothing).

        Titles are never the prompt, so only the first user message is compared. When the list
        cannot be read this raises rather than answering []: [] means "safe to send again".
        """
        wanted = _first_message_is(text, sha256)
        found: list[FoundChat] = []
        with self._page(Where.CHAT_LIST) as page:
            self._open(page, self.base_url + "/")
            self._wait_for_app(page)
            self._check_login_api(page)
            for number in range(1, CHAT_LIST_PAGES + 1):
                body = self._api(page, f"/api/v2/chats/?page={number}&exclude_project=true")
                try:
                    listed = chat_list_items(body)
                except ChatShapeError as err:
                    raise missing_field(
                        err, f"the chat list (page {number})", Where.CHAT_LIST, body
                    ) from None
                if not listed:
                    break
                for item, view in self._chats_starting_with(page, listed, wanted):
                    created = item.created if item.created is not None else view.created
                    found.append(FoundChat(self.chat_url(item.chat_id), created))
        return found

    def delete_chat(self, chat_url: str) -> bool:
        """Delete the chat from this engine's account as the site's own chat list does
        (docs/qwen-site.md: `DELETE /api/v2/chats/<id>`, made from a page of the site once it
        has made its own API calls, with their headers). Reads nothing of the chat. True when
        the site deleted it now, False when it no longer had it (already deleted)."""
        chat_id = self._chat_id(chat_url)
        with self._page(Where.DELETE) as page:
            self._open(page, self.base_url + "/")
            self._wait_for_app(page)
            path = f"/api/v2/chats/{chat_id}"
            try:
                body = fetch_api(page, path, timeout=self.page_timeout, method="DELETE")
            except ApiUnusable as err:
                raise TransientError(f"cannot delete the chat: {err}", code=Code.API_ERROR) from None
            except HardError as err:
                if err.code == Code.CHAT_NOT_FOUND:
                    return False
                raise
            data = body.get("data")
            if isinstance(data, dict) and data.get("status") is False:
                raise TransientError("the site did not delete the chat (status: false)", code=Code.API_ERROR)
            return True

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
        browser = replace(session.config, cdp_url=endpoint)

        def attach() -> QwenEngine:
            engine = QwenEngine(
                self.settings,
                BrowserSession(
                    browser, root=session.root, borrowed=True, shared_browser=session.shared_browser
                ),
                keep_login=self.keep_login,
            )
            engine._owns_session = True  # its own session: closing it closes only its pages
            return engine

        yield attach

    def close(self) -> None:
        self._close_live(reuse=not self._owns_session)  # the session closes with us: no use parking
        if self._owns_session:
            self.session.close()

    def __enter__(self) -> QwenEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- session checks (login, doctor) ----------------------------------------------------

    def check_login(self) -> None:
        """Raise the HardError/TransientError that would stop a send; return when all is well."""
        with self._page(Where.LOGIN_CHECK) as page:
            self._open(page, self.base_url + "/")
            self._ready_to_type(page)

    def chat_url(self, chat_id: str) -> str:
        return f"{self.base_url}/c/{chat_id}"

    # -- pages -------------------------------------------------------------------------------

    @contextmanager
    def _page(self, where: str, *, keep: bool = False) -> Iterator[Any]:
        """A fresh page for one call, closed at its end unless `keep` and the call succeeded;
        Playwright failures become TransientError. The page left open before (a send's) is
        closed first: one page of ours at a time. `where`: the step of the site the call is
        (engines/unknown.py), named on an unknown answer that does not name its own."""
        self._close_live()
        page = None
        with self._errors_as_engine_errors():
            page = self.session.new_page()
            page.set_default_timeout(self.page_timeout * 1000)
            PageTraffic.of(page)  # note the page's own requests from its first one
            BotChecks.of(page)  # and where it goes: a bot check is the page leaving the chat
            PageAnswers.of(page)  # and what the site answers its own requests (page_answers.py)
        with self._using(page, where, keep=keep) as used:
            yield used

    @contextmanager
    def _using(self, page: Any, where: str, *, keep: bool = False) -> Iterator[Any]:
        """Work on `page`: Playwright failures become TransientError; the page is closed at the
        end (parked for the next call when the work succeeded), unless `keep` and the work
        succeeded. Every unknown answer raised out of it says where it was met (`where`, unless it
        says so itself): the one place all of them pass."""
        kept = done = False
        told = ""  # the step whose unknown answer the error raised tells already
        try:
            with self._errors_as_engine_errors():
                yield page
            kept, done = keep, True
        except EngineError as err:
            if err.unknown is not None:
                err.unknown = err.unknown.at(where)
                told = err.unknown.where
            if err.code == Code.BOT_CHECK and err.screenshot is None:
                err.screenshot = _screenshot(page)  # the user sees what the site showed
            raise
        finally:
            self._notice_page(page, where, told=told)
            if not kept:
                self._close_page(page, reuse=done)  # a page that failed is never used again

    @staticmethod
    @contextmanager
    def _errors_as_engine_errors() -> Iterator[None]:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            yield
        except PlaywrightTimeout as err:
            raise TransientError(f"the chat page timed out: {_first_line(err)}", code=Code.TIMEOUT) from None
        except PlaywrightError as err:
            raise TransientError(f"browser or network error: {_first_line(err)}", code=Code.NETWORK) from None

    def _close_page(self, page: Any, *, reuse: bool = True) -> None:
        """Done with `page`: its watchers stopped; parked for the next call (browser.park) when
        `reuse`, else closed."""
        PageTraffic.stop(page)
        BotChecks.stop(page)
        self._notice_page(page)
        PageAnswers.stop(page)
        if reuse:
            self.session.park(page)
            return
        try:
            page.close()
        except Exception:
            pass  # the browser went away; nothing left to close

    def _notice_page(self, page: Any, where: str = "", *, told: str = "") -> None:
        """The unknown answers the site gave the page's requests (page_answers.py), as read past:
        the contract journals them after the call (`noticed`); but those of the step `told`,
        which the error the call raised tells already."""
        for found in PageAnswers.of(page).unknown():
            if found.at(where).where != told:
                self._notice(found.at(where).where, found.seen)

    def _keep_live(self, live: _Live) -> None:
        self._close_live()
        self._live = live

    def _close_live(self, *, reuse: bool = True) -> None:
        live, self._live = self._live, None
        if live is not None:
            self._close_page(live.page, reuse=reuse)

    def _open(self, page: Any, url: str) -> None:
        page.goto(url, wait_until="domcontentloaded", timeout=self.page_timeout * 1000)

    def _deadline(self, seconds: float) -> float:
        return time.monotonic() + seconds

    def _wait_for_app(self, page: Any) -> Selectors:
        """Wait until the page is the chat app (some selector set matches) or a failure screen."""
        deadline = self._deadline(self.page_timeout)
        while True:
            failure = screen_failure(page, self.selector_sets)
            if failure is not None:
                raise failure
            selectors = detect_ui(page, self.selector_sets)
            if selectors is not None:
                if self.keep_login is not None:
                    self.keep_login(page)
                return selectors
            if gateway_error(page):  # the site failing: transient at once, no page_timeout's wait
                raise unknown_page(page, "a gateway's error page")
            if time.monotonic() >= deadline:
                # Not the chat, and none of the pages the site is known to show instead: an
                # unknown page where the chat should be holds the account (botcheck.py).
                names = ", ".join(s.composer for s in self.selector_sets)
                raise unknown_page(page, f"no composer ({names}) after {self.page_timeout:g} s")
            page.wait_for_timeout(POLL_SECONDS * 1000)

    def _ready_to_type(self, page: Any) -> Selectors:
        """The selectors to type with, once the page is known to be a logged-in, usable app."""
        selectors = self._wait_for_app(page)
        if not present(page, [selectors.composer])[0]:
            raise TransientError("the page shows a chat but no composer to type in", code=Code.PAGE_CHANGED)
        self._check_login_api(page)
        failure = screen_failure(page, self.selector_sets)  # the app may have drawn a banner since
        if failure is not None:
            raise failure
        return selectors

    def _check_login_api(self, page: Any) -> None:
        blocker = read_login_state(page, timeout=self.page_timeout).send_blocker()
        if blocker is not None:
            raise blocker

    @staticmethod
    @contextmanager
    def _replies(page: Any) -> Iterator[SendReplies]:
        replies = SendReplies(page)
        try:
            yield replies
        finally:
            replies.close()

    def _sent_failure(self, page: Any, replies: SendReplies) -> EngineError | None:
        """Why the site refused what was just sent: its API reply first (it carries the quota's
        hours and outlives the toast), else the page's failure screen."""
        refused = replies.failure() or _plain_refusal(page) or reply_refusal(page)
        # A bot check is the page leaving the chat, whatever it draws (botcheck.py).
        failure = refused or screen_failure(page, self.selector_sets) or left_chat(page)
        if failure is not None and failure.code in ACCOUNT_REFUSALS:
            # The site answers the send itself with the bot check (FAIL_SYS_USER_VALIDATE), "not
            # logged in" or the day's limit (RateLimited) and takes nothing: no send, and none the
            # site counts against the day. Only that reply proves it; a slider, a login form or a
            # toast seen on the page without it may have come after the prompt was taken. The
            # page can draw the toast before Playwright reports the reply: give it a moment.
            until = self._deadline(REPLY_GRACE_SECONDS)
            while refused is None and time.monotonic() < until:
                page.wait_for_timeout(POLL_SECONDS * 1000)
                refused = replies.failure() or _plain_refusal(page) or reply_refusal(page)
            if refused is not None and refused.code in ACCOUNT_REFUSALS:
                refused.nothing_sent = True
                return refused
        return failure

    def _check_sent(
        self, page: Any, replies: SendReplies, resend: Callable[[EngineError | None], None], deadline: float
    ) -> float:
        """After a click, while waiting for its proof: raise why the site refused what was sent;
        after a refusal that took nothing ("in progress", ParallelLimited: refusals.py) click again
        and give the wait a fresh deadline. Returns the deadline to wait by."""
        failure = self._sent_failure(page, replies)
        if failure is not None:
            raise failure
        refusal = replies.refusal()
        if refusal is not None:
            resend(refusal)
            return self._deadline(self.page_timeout)
        return deadline

    def _clicker(
        self, page: Any, selectors: Selectors, submit: _Submit, *, later_turn: bool = False
    ) -> Callable[[EngineError | None], None]:
        """Clicks send now, and again each time it is called with the site's refusal that took
        nothing (refusals.py says which refusal means what): BUSY_CLICKS clicks in all."""
        clicks = 0

        def click(refusal: EngineError | None = None) -> None:
            nonlocal clicks
            if refusal is not None:
                pause = after_refusal(refusal, clicks, later_turn=later_turn)
                page.wait_for_timeout(pause * 1000)
            clicks += 1
            submit.click(page.locator(selectors.send_button).first)

        click()
        return click

    def _wait_for_chat_id(
        self,
        page: Any,
        replies: SendReplies,
        resend: Callable[[EngineError | None], None],
        hold: CompletionHold,
    ) -> str:
        deadline = self._deadline(self.page_timeout)
        while time.monotonic() < deadline:
            hold.check()
            chat_id = chat_id_from_url(page.url)
            if chat_id:
                return chat_id
            try:
                deadline = self._check_sent(page, replies, resend, deadline)
            except EngineError:
                # A completion held back while the check waited: the page's error is its
                # reaction to our abort, and why we aborted (nothing sent) is what counts.
                hold.check()
                raise
            page.wait_for_timeout(POLL_SECONDS * 1000)
        if detect_ui(page, self.selector_sets) is None:  # the page is no longer the app: what is it?
            raise unknown_page(
                page, f"the page left the app after the click, no chat address in {self.page_timeout:g} s"
            )
        raise TransientError(
            f"the prompt was sent but no chat address appeared within {self.page_timeout:g} s "
            "(the chat list is searched before any resend)",
            code=Code.NO_CHAT_URL,
        )

    def _api(self, page: Any, path: str) -> dict:
        try:
            return fetch_api(page, path, timeout=self.page_timeout)
        except ApiUnusable as err:
            raise TransientError(f"cannot read the chat site's API: {err}", code=Code.API_ERROR) from None

    def _chats_starting_with(
        self, page: Any, listed: list[ListedChat], wanted: Callable[[str], bool]
    ) -> Iterator[tuple[ListedChat, ChatView]]:
        paths = [f"/api/v2/chats/{item.chat_id}" for item in listed]
        bodies = fetch_json(page, paths, timeout=self.page_timeout)
        for item, body in zip(listed, bodies, strict=True):
            error = classify_api_error(body)
            if error is not None and error.code == Code.CHAT_NOT_FOUND:
                continue  # deleted between the list and the read
            if error is not None:
                raise error
            try:
                view = parse_chat(body, item.chat_id)
            except ChatShapeError as err:
                raise missing_field(err, f"chat {item.chat_id}'s JSON", Where.CHAT_LIST, body) from None
            first = view.first_user_text
            if first is not None and wanted(first):
                yield item, view

    def _wait_for_user_turn(
        self,
        page: Any,
        chat_id: str,
        number: int,
        text: str,
        replies: SendReplies,
        resend: Callable[[EngineError | None], None],
    ) -> None:
        """Wait for the proof that the site took `text` as user turn `number`: the completion's
        stream opening on the page (what the page itself receives), or, where the site answered
        without a stream, its JSON showing `text` as the chat's last user message."""
        deadline = self._deadline(self.page_timeout)
        traffic = PageTraffic.of(page)
        while True:
            deadline = self._check_sent(page, replies, resend, deadline)
            if traffic.stream_began():
                return
            if not traffic.answered_without_stream():
                view = None  # no word from the site yet: the stream, or its refusal, is coming
            else:
                try:
                    view = parse_chat(
                        fetch_api(page, f"/api/v2/chats/{chat_id}", timeout=self.page_timeout), chat_id
                    )
                except (ApiUnusable, ChatShapeError):
                    view = None  # look again: the page or the API may be between two states
            if view is not None and len(view.turns) == number and _same_text(view.turns[-1].user_text, text):
                return
            if time.monotonic() >= deadline:
                raise TransientError(
                    f"turn {number} was sent but the chat did not show it within {self.page_timeout:g} s "
                    "(the next run reads the chat before sending anything)",
                    code=Code.NO_TURN,
                )
            page.wait_for_timeout(POLL_SECONDS * 1000)

    @staticmethod
    def _chat_id(chat_url: str) -> str:
        chat_id = chat_id_from_url(chat_url)
        if not chat_id:
            raise HardError(f"not a chat URL (expected .../c/<id>): {chat_url}", code=Code.BAD_CHAT_URL)
        return chat_id

    # -- completion --------------------------------------------------------------------------

    def _watch(
        self,
        page: Any,
        selectors: Selectors,
        chat_id: str,
        *,
        deadline: float,
        on_progress: ProgressCallback | None = None,
        patient: bool = False,
    ) -> Answer | Generating:
        """Read the chat once a second until the answer is complete and stable.

        Impatient (check): a plain "still generating" read returns Generating at once; only the
        stability reads, a page still drawing an answer the site has finished, or a suspected
        stall keep it looking (bounded by `deadline`). Patient (wait): looks until `deadline`.
        """
        turns_before = self._turns_before.get(chat_id, 0)
        settle_until = time.monotonic() + PAGE_SETTLE_SECONDS
        reads, said, said_at, seen = Steadiness(self.stable_reads), None, float("-inf"), None
        behind_since = None  # since when the page has not drawn what the site has
        while True:
            before = seen.dom_text if seen is not None else None
            seen = self._observe(page, selectors, chat_id, turns_before, patient=patient, dom_before=before)
            behind_since = (behind_since or time.monotonic()) if seen.catching_up else None
            if behind_since is not None and time.monotonic() - behind_since > self.page_timeout:
                # A page the site replaced (an error page, a widget nobody has seen) never
                # catches up: a wait on it would never end. Looked at again with a fresh page;
                # an unknown answer, so a sent chat's is never handed to the router for it.
                changed = TransientError(
                    f"the page has not drawn the answer the site has for {self.page_timeout:g} s "
                    f"(qwen.page_timeout): {seen.progress}",
                    code=Code.PAGE_CHANGED,
                )
                raise unknown(changed, Where.CHAT_JSON, what=f"a page that never drew the answer: {page.url}")
            if seen.markdown is not None:
                if seen.vouched or reads.steady(seen.markdown):
                    return Answer(
                        seen.markdown, self.name, title=seen.title, model=seen.model, extra=seen.extra
                    )
            elif seen.settled is not None:
                reads.steady(seen.settled)  # stored as finished; complete once the page agrees
            else:
                reads.unfinished(stalled=seen.stalled)
                settling = seen.unsure and time.monotonic() < settle_until
                if not (patient or seen.catching_up or seen.stalled or settling):
                    return Generating(seen.progress)
            if on_progress and seen.progress != said and time.monotonic() - said_at >= self.read_interval:
                on_progress(seen.progress)  # a line a second at most, however often the page is read
                said, said_at = seen.progress, time.monotonic()
            if time.monotonic() >= deadline:
                return Generating(seen.progress)
            page.wait_for_timeout(self._pause(seen, reads) * 1000)

    def _pause(self, seen: Observation, reads: Steadiness) -> float:
        """Seconds to the next read. The stability rule (stable_reads reads a second apart) is
        for an answer nothing vouches for: a page that looks done, a JSON that says nothing of
        its completion. Once the site's stored status says finished, the reads only have to show
        that no chunk still lands, and API_STABLE_SECONDS apart does (see collect.py): three
        reads span half a second. So a waited-for answer is taken within about a second of its
        end where the site and the page agree, and after the full stability reads where not."""
        if seen.settled is not None and reads.same >= reads.needed:
            return WAIT_PAGE_SECONDS  # steady already: only the page's agreement is missing
        if seen.settled is not None or seen.dom_text is not None:
            return API_STABLE_SECONDS  # a settled answer, or a busy page read (local, no request)
        return self.read_interval

    def _observe(
        self,
        page: Any,
        selectors: Selectors,
        chat_id: str,
        turns_before: int,
        *,
        patient: bool,
        dom_before: str | None = None,
    ) -> Observation:
        """One look: the page, then (unless a patient watch sees the page busy with an answer
        still growing) the site's JSON. `dom_before` is the page's answer text at the last look."""
        failure = screen_failure(page, self.selector_sets)
        if failure is not None:
            raise failure
        dom = read_dom_state(page, selectors)
        busy = dom.busy_reason(selectors, turns_before)
        paused = bool(dom.answer_text) and dom.answer_text == dom_before  # the page stopped growing
        streaming = dom.stop_visible or not selectors.stop_button  # a page that can tell says so
        if busy is not None and patient and not paused and streaming:
            # The API read waits until the page says it is done, or its answer stopped growing.
            return Observation(busy, dom_text=dom.answer_text)
        try:
            read = self._chat_json(page, chat_id)
            view, loaded_by_page = parse_chat(read.body, chat_id), read.by_page
            self._notice(Where.CHAT_JSON, view.unknown)
        except (ApiUnusable, ChatShapeError) as err:
            field = err.field or "?" if isinstance(err, ChatShapeError) else ""
            return self._observe_dom_only(dom, selectors, busy, str(err), field)
        turn = view.turns[turns_before] if len(view.turns) > turns_before else None
        if turn is not None and turn.error:
            raise TransientError(
                f"the site reports an error in the answer: {turn.error}", code=Code.ANSWER_ERROR
            )
        stored = view.stored[turns_before] if len(view.stored) > turns_before else None
        settled = turn.answer if turn is not None and stored is True and turn.answer.strip() else None
        # Stored as finished with no text: what an account past its real limit gets
        # (docs/qwen-site.md). Never an article; once the page stops streaming, a failure.
        empty = turn is not None and stored is True and not turn.answer.strip()
        if empty and not dom.stop_visible:
            raise EmptyAnswer()
        if busy is not None:
            # A freshly opened page draws a finished answer a moment late: worth waiting for.
            site_has_more = bool(turn and turn.answer) and (
                turn.finished or dom.assistant_turns <= turns_before
            )
            return Observation(
                busy, catching_up=site_has_more or empty, settled=settled, dom_text=dom.answer_text
            )
        if turn is None or not turn.finished or not turn.answer.strip():
            # Only a UI that positively shows completion (a copy button) can contradict the API;
            # the older UI shows nothing, so there this is plain "still generating".
            return Observation(dom.progress(), stalled=bool(selectors.copy_button))
        extra = {"source": "api", "chat_id": chat_id, "ui": selectors.name}
        if loaded_by_page:
            extra["read"] = "page"
        return Observation(
            "finishing",
            turn.answer,
            title=view.real_title,
            model=view.model,
            extra=extra,
            settled=settled,
            # The page loaded this JSON itself, the site stored the answer as finished long before
            # (by its clock: the flag may come ahead of the last words), and the page drew that
            # turn complete: nothing more to read.
            vouched=loaded_by_page
            and settled is not None
            and finished_long_ago(view, site_time(read.date), stable_reads=self.stable_reads),
        )

    def _chat_json(self, page: Any, chat_id: str) -> History:
        """The chat's JSON, whole, and whether the page loaded it itself: the newest load of the
        page's own since the last look, else a read of ours with the page's headers. A load the
        site answered with a failure is raised as that failure (stale headers: our read
        instead). A load that holds only the history's last page is completed (history.py)."""
        traffic = PageTraffic.of(page)
        # A chat's page loads its JSON as it opens; a page that loads again on its own (while it
        # draws an answer) is given a moment for its next load before we read for ourselves.
        first = not traffic.has_loaded(chat_id)
        until = self._deadline(min(self.page_timeout, PAGE_LOAD_SECONDS if first else PAGE_RELOAD_SECONDS))
        while not traffic.has_fresh_load(chat_id) and time.monotonic() < until:
            page.wait_for_timeout(POLL_SECONDS * 200)
        loaded = traffic.chat_load(chat_id)
        if loaded is not None:
            error = classify_api_error(loaded)
            if error is None:
                date = traffic.load_date(chat_id)
                return whole(page, chat_id, loaded, True, timeout=self.page_timeout)._replace(date=date)
            if error.code != Code.STALE_HEADERS:
                raise error
        elif _all_finished(traffic.latest_load(chat_id), traffic.load_date(chat_id), self.stable_reads):
            # No new load, but the last one already holds every answer as finished long before
            # it was answered: a finished answer does not change, and it is what the page draws.
            # (A stored "finished" alone may come ahead of the last words: read again, ourselves.)
            date = traffic.load_date(chat_id)
            latest = traffic.latest_load(chat_id)
            return whole(page, chat_id, latest, True, timeout=self.page_timeout)._replace(date=date)
        body = fetch_api(page, f"/api/v2/chats/{chat_id}", timeout=self.page_timeout)
        return whole(page, chat_id, body, False, timeout=self.page_timeout)

    def _read_turns(self, page: Any, selectors: Selectors, chat_id: str) -> ChatTurns:
        """Look at the whole chat like `_watch` looks at one answer (impatient): a last turn that
        is plainly still generating is reported at once; one that looks complete is re-read until
        it stayed unchanged `stable_reads` times (bounded by page_timeout)."""
        deadline = self._deadline(self.page_timeout)
        reads = Steadiness(self.stable_reads)
        while True:
            seen = self._observe_turns(page, selectors, chat_id)
            if seen.candidate is not None:
                if reads.steady(seen.candidate) or self._seen_stable(chat_id, seen):
                    self._confirmed[chat_id] = (len(seen.turns), seen.candidate, time.monotonic())
                    return seen.result(complete=True)
            else:
                reads.unfinished(stalled=seen.stalled)
                if not (seen.catching_up or seen.stalled):
                    return seen.result(complete=False)
            if time.monotonic() >= deadline:
                return seen.result(complete=False)
            # A page catching up with a finished answer is looked at often; the stability and
            # stall reads keep their second apart.
            pause = POLL_SECONDS if seen.catching_up else self.read_interval
            page.wait_for_timeout(pause * 1000)

    def _seen_stable(self, chat_id: str, seen: TurnsSeen) -> bool:
        """This very answer already passed the stability reads a moment ago (read_turns, then
        send_turn in the same run): one more complete read is enough."""
        count, answer, when = self._confirmed.get(chat_id, (0, "", 0.0))
        fresh = time.monotonic() - when < CONFIRMED_SECONDS
        return fresh and count == len(seen.turns) and answer == seen.candidate

    def _observe_turns(self, page: Any, selectors: Selectors, chat_id: str) -> TurnsSeen:
        failure = screen_failure(page, self.selector_sets)
        if failure is not None:
            raise failure
        dom = read_dom_state(page, selectors)
        try:
            read = self._chat_json(page, chat_id)
            view = parse_chat(read.body, chat_id)
            self._notice(Where.CHAT_JSON, view.unknown)
        except (ApiUnusable, ChatShapeError) as err:
            # The page alone cannot pair answers with their messages safely: no guessing.
            raise TransientError(
                f"cannot read the chat's turns from the site's API: {err}", code=Code.API_ERROR
            ) from None
        return judge_turns(dom, view, selectors, hidden=(read.hidden, read.hidden_users))

    def _observe_dom_only(
        self, dom: DomState, selectors: Selectors, busy: str | None, why: str, field: str = ""
    ) -> Observation:
        """The site's JSON is unusable. The page's text is never the article (it is rendered and
        virtualised: docs/qwen-site.md, "Reading an answer"), so a page that shows a finished
        answer makes this a transient failure: a later look, or the router after
        qwen.max_attempts, writes the article."""
        if busy is not None:
            return Observation(busy, unsure=True)
        if not dom.answer_text.strip():
            return Observation(dom.progress(), stalled=bool(selectors.copy_button))
        error = TransientError(
            f"the page shows a finished answer but the site's JSON for it cannot be read ({why}); "
            "the page's text is never taken as the article",
            code=Code.API_ERROR,
        )
        # A JSON without a field it needs (`field`) is an answer nobody has reported.
        raise unknown(error, Where.CHAT_JSON, field=field) if field else error


class _Live(NamedTuple):
    """The page a send left open: its chat, and what it receives."""

    chat_id: str
    page: Any
    selectors: Selectors

    @property
    def traffic(self) -> PageTraffic:
        return PageTraffic.of(self.page)


class _Submit:
    """Marks the engine errors of one send that came before the send button was clicked: those
    provably sent nothing (`nothing_sent`). A click that fails may still have reached the site."""

    def __init__(self) -> None:
        self.clicked = False

    def click(self, button: Any) -> None:
        self.clicked = True
        button.click()

    def __enter__(self) -> _Submit:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, _tb: object) -> None:
        if isinstance(error, EngineError) and not self.clicked:
            error.nothing_sent = True


def judge_turns(
    dom: DomState, view: ChatView, selectors: Selectors, *, hidden: tuple[int, int] = (0, 0)
) -> TurnsSeen:
    """One read of a chat (the page's signals and the site's whole JSON) as turns.

    Earlier turns are complete when the JSON says they finished. The last one is a candidate
    only when the JSON says it finished without error AND the page shows exactly that many
    turns AND the page's last assistant turn (the one after the last user message) is idle:
    a copy button or an idle composer left over from the turn before never counts. A page that
    loaded only the history's last page draws `hidden` (answers, user messages) fewer (history.py).
    """
    turns = [
        TurnState(
            t.user_text,
            t.answer,
            complete=t.finished and not t.error and bool(t.answer.strip()),
            error=t.error,
        )
        for t in view.turns
    ]
    common = {"title": view.real_title, "model": view.model}
    if not turns:
        return TurnsSeen([], "waiting for the chat to show the message", **common)
    last = view.turns[-1]
    if last.error:
        raise TransientError(f"the site reports an error in the answer: {last.error}", code=Code.ANSWER_ERROR)
    turns[-1] = TurnState(last.user_text, last.answer, complete=False)
    answers, users = len(turns) - hidden[0], len(turns) - hidden[1]  # what the page draws
    busy = _last_turn_busy(dom, selectors, answers, users)
    site_done = last.finished and bool(last.answer.strip())
    if busy is None and site_done:
        return TurnsSeen(turns, "finishing", candidate=last.answer, **common)
    if site_done:
        return TurnsSeen(turns, "finishing", catching_up=True, **common)
    if last.answer:
        progress = f"writing: {len(last.answer):,} chars"
    elif busy == "thinking" or (busy is not None and dom.assistant_turns == answers and dom.thinking_visible):
        progress = "thinking"
    else:
        progress = busy if busy is not None else "waiting for the answer to start"
    # Only a UI that positively shows completion (a copy button) can contradict the API.
    return TurnsSeen(turns, progress, stalled=busy is None and bool(selectors.copy_button), **common)


def _last_turn_busy(dom: DomState, selectors: Selectors, count: int, users: int) -> str | None:
    """Why the page, drawing `count` answers and `users` user messages, does not (yet) show the
    last answer as complete, or None."""
    if dom.assistant_turns < count:
        return "waiting for the answer to start"  # what the page shows is an earlier turn's
    if dom.assistant_turns > count or (selectors.user_turn and dom.user_turns != users):
        return "the page and the site disagree on the turns"
    return dom.busy_reason(selectors, count - 1)


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _first_message_is(text: str, sha256: str) -> Callable[[str], bool]:
    """Whether a chat's first user message is `text` (whitespace aside) or hashes to `sha256`
    (the contract's Prompt.sha256 of the text sent)."""
    import hashlib

    wanted = _comparable(text) if text else None

    def matches(first: str) -> bool:
        if wanted is not None and _comparable(first) == wanted:
            return True
        return bool(sha256) and hashlib.sha256(first.strip().encode("utf-8")).hexdigest() == sha256

    return matches


def _comparable(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def _all_finished(body: dict | None, date: str | None, stable_reads: int) -> bool:
    """A successful chat JSON whose every answer the site stored as finished, long before its
    clock (`date`, the load's Date header) answered it (steady.finished_long_ago)."""
    if body is None or classify_api_error(body) is not None:
        return False
    try:
        view = parse_chat(body)
    except ChatShapeError:
        return False
    finished = bool(view.stored) and all(done is True for done in view.stored)
    return finished and finished_long_ago(view, site_time(date), stable_reads=stable_reads)


def _screenshot(page: Any) -> bytes | None:
    """The page as it looks now (PNG), or None when the browser cannot take it."""
    try:
        return page.screenshot(timeout=5000)
    except Exception:
        return None  # a page gone or hung: the hold is recorded all the same


def _first_line(err: BaseException) -> str:
    return first_line(err)


def _plain_refusal(page: Any) -> EngineError | None:
    """The hard refusal in a completion the site answered without a stream, as the page received
    it (kept over DevTools: a page that went on to a verification page no longer has its body)."""
    for body in PageTraffic.of(page).plain_replies():
        error = classify_api_error(body)
        if isinstance(error, HardError):
            return error
    return None
