"""The chat.qwen.ai engine: a real browser, the site's own page and API, one page per call.

Sending is the only action that costs anything, so `send` refuses to type unless the page is
the app, logged in, and shows no bot check, firewall or quota screen. Looking at a chat
(`check`, `wait`) never types. An answer is complete only when the page says so (no stop
button, the copy button on the turn, no thinking) AND the site's JSON says the turn finished
AND the answer's markdown stays unchanged over `stable_reads` reads a second apart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.browser import BrowserSession
from pipeline.engines.base import Answer, EngineError, Generating, HardError, ProgressCallback, TransientError
from pipeline.engines.qwen_api import (
    ChatShapeError,
    chat_id_from_url,
    chat_list_ids,
    classify_api_error,
    is_logged_in_status,
    parse_chat,
)
from pipeline.engines.qwen_page import (
    ApiUnusable,
    DomState,
    detect_ui,
    fetch_api,
    fetch_json,
    present,
    read_dom_state,
    screen_failure,
)
from pipeline.engines.qwen_selectors import SelectorError, Selectors, merge_overrides

CHAT_LIST_PAGES = 3
STALL_READS = 3  # reads of "page idle, API unfinished" before the answer counts as cut short
POLL_SECONDS = 0.25  # while waiting for the app or the chat address
PAGE_SETTLE_SECONDS = 3  # a fresh page may show "busy" this long before drawing a done answer


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


class QwenEngine:
    """ChatEngine for chat.qwen.ai (or the simulator) driven through Playwright's sync API."""

    name = "qwen"

    def __init__(self, qwen: dict, browser: dict | BrowserSession, *, root: Path | None = None):
        from pipeline.config import ConfigError

        self.base_url = str(qwen["base_url"]).rstrip("/")
        self.page_timeout = float(qwen.get("page_timeout", 30))
        self.answer_timeout = float(qwen.get("answer_timeout", 1800))
        self.stable_reads = max(1, int(qwen.get("stable_reads", 3)))
        self.read_interval = 1.0
        try:
            self.selector_sets = merge_overrides(qwen.get("selectors"))
        except SelectorError as err:
            raise ConfigError(str(err)) from None
        if isinstance(browser, BrowserSession):
            self.session, self._owns_session = browser, False
        else:
            self.session, self._owns_session = BrowserSession(browser, root=root), True
        # chat id -> assistant turns on the page before we sent: our answer is the next one.
        self._turns_before: dict[str, int] = {}

    # -- the ChatEngine protocol -------------------------------------------------------------

    def prepare(self) -> None:
        """Start the browser now: a busy profile (EngineBusy) or a missing browser (HardError)
        is reported before the contract writes its intent marker."""
        _ = self.session.context

    def send(self, text: str) -> str:
        """Open a new chat, send `text`, return `{base_url}/c/<id>` once the address shows it."""
        with self._page() as page:
            self._open(page, self.base_url + "/")
            selectors = self._ready_to_type(page)
            turns_before = read_dom_state(page, selectors).assistant_turns
            page.locator(selectors.composer).first.fill(text)
            page.locator(selectors.send_button).first.click()
            chat_id = self._wait_for_chat_id(page)
            self._turns_before[chat_id] = turns_before
            return self.chat_url(chat_id)

    def check(self, chat_url: str) -> Answer | Generating:
        """Look at the chat once (plus the stability reads): Answer, Generating, or raise."""
        chat_id = self._chat_id(chat_url)
        with self._page() as page:
            self._open(page, self.chat_url(chat_id))
            selectors = self._wait_for_app(page)
            return self._watch(page, selectors, chat_id, deadline=self._deadline(self.page_timeout))

    def wait(self, chat_url: str, *, timeout: float, on_progress: ProgressCallback | None = None) -> Answer:
        """Stay on the chat page, re-reading it every second, until the answer is complete."""
        chat_id = self._chat_id(chat_url)
        with self._page() as page:
            self._open(page, self.chat_url(chat_id))
            selectors = self._wait_for_app(page)
            result = self._watch(
                page,
                selectors,
                chat_id,
                deadline=self._deadline(timeout),
                on_progress=on_progress,
                patient=True,
            )
            if isinstance(result, Answer):
                return result
        raise TransientError(f"timed out after {timeout:g} s waiting for the answer", code="timeout")

    def find_chat(self, text: str) -> str | None:
        """The newest recent chat whose first user message is `text`, else None.

        Titles are never the prompt, so only the first user message is compared. When the list
        cannot be read this raises rather than answering None: None means "safe to send again".
        """
        wanted = _comparable(text)
        with self._page() as page:
            self._open(page, self.base_url + "/")
            self._wait_for_app(page)
            self._check_login_api(page)
            for number in range(1, CHAT_LIST_PAGES + 1):
                ids = chat_list_ids(self._api(page, f"/api/v2/chats/?page={number}&exclude_project=true"))
                if not ids:
                    break
                for chat_id in self._chats_starting_with(page, ids, wanted):
                    return self.chat_url(chat_id)
        return None

    def close(self) -> None:
        if self._owns_session:
            self.session.close()

    def __enter__(self) -> QwenEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- session checks (login, doctor) ----------------------------------------------------

    def check_login(self) -> None:
        """Raise the HardError/TransientError that would stop a send; return when all is well."""
        with self._page() as page:
            self._open(page, self.base_url + "/")
            self._ready_to_type(page)

    def session_ok(self) -> bool:
        try:
            self.check_login()
        except EngineError:
            return False
        return True

    def chat_url(self, chat_id: str) -> str:
        return f"{self.base_url}/c/{chat_id}"

    # -- pages -------------------------------------------------------------------------------

    @contextmanager
    def _page(self) -> Iterator[Any]:
        """A fresh page for one call, always closed; Playwright failures become TransientError."""
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        page = None
        try:
            page = self.session.new_page()
            page.set_default_timeout(self.page_timeout * 1000)
            yield page
        except PlaywrightTimeout as err:
            raise TransientError(f"the chat page timed out: {_first_line(err)}", code="timeout") from None
        except PlaywrightError as err:
            raise TransientError(f"browser or network error: {_first_line(err)}", code="network") from None
        finally:
            if page is not None:
                try:
                    page.close()
                except Exception:
                    pass  # the browser went away; nothing left to close

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
                return selectors
            if time.monotonic() >= deadline:
                names = ", ".join(s.composer for s in self.selector_sets)
                raise TransientError(
                    f"the chat page shows no composer ({names}) after {self.page_timeout:g} s; "
                    "if the site changed, run `qwenpipe doctor` and set [qwen.selectors]",
                    code="page_changed",
                )
            page.wait_for_timeout(POLL_SECONDS * 1000)

    def _ready_to_type(self, page: Any) -> Selectors:
        """The selectors to type with, once the page is known to be a logged-in, usable app."""
        selectors = self._wait_for_app(page)
        if not present(page, [selectors.composer])[0]:
            raise TransientError("the page shows a chat but no composer to type in", code="page_changed")
        self._check_login_api(page)
        failure = screen_failure(page, self.selector_sets)  # the app may have drawn a banner since
        if failure is not None:
            raise failure
        return selectors

    def _check_login_api(self, page: Any) -> None:
        try:
            (body,) = fetch_json(page, ["/api/v2/users/status"], timeout=self.page_timeout)
        except ApiUnusable:
            return  # the page's own signals (checked already) have to do
        if is_logged_in_status(body) is False:
            raise HardError("not logged in to the chat site: run `qwenpipe login`", code="logged_out")
        error = classify_api_error(body)
        if error is not None and error.code == "bot_check":
            raise error

    def _wait_for_chat_id(self, page: Any) -> str:
        deadline = self._deadline(self.page_timeout)
        while time.monotonic() < deadline:
            chat_id = chat_id_from_url(page.url)
            if chat_id:
                return chat_id
            failure = screen_failure(page, self.selector_sets)
            if failure is not None:
                raise failure
            page.wait_for_timeout(POLL_SECONDS * 1000)
        raise TransientError(
            f"the prompt was sent but no chat address appeared within {self.page_timeout:g} s "
            "(the chat list is searched before any resend)",
            code="no_chat_url",
        )

    def _api(self, page: Any, path: str) -> dict:
        try:
            return fetch_api(page, path, timeout=self.page_timeout)
        except ApiUnusable as err:
            raise TransientError(f"cannot read the chat site's API: {err}", code="api_error") from None

    def _chats_starting_with(self, page: Any, ids: list[str], wanted: str) -> Iterator[str]:
        bodies = fetch_json(page, [f"/api/v2/chats/{chat_id}" for chat_id in ids], timeout=self.page_timeout)
        for chat_id, body in zip(ids, bodies, strict=True):
            error = classify_api_error(body)
            if error is not None and error.code == "chat_not_found":
                continue  # deleted between the list and the read
            if error is not None:
                raise error
            try:
                first = parse_chat(body).first_user_text
            except ChatShapeError as err:
                raise TransientError(f"cannot read chat {chat_id}: {err}", code="api_error") from None
            if first is not None and _comparable(first) == wanted:
                yield chat_id

    @staticmethod
    def _chat_id(chat_url: str) -> str:
        chat_id = chat_id_from_url(chat_url)
        if not chat_id:
            raise HardError(f"not a chat URL (expected .../c/<id>): {chat_url}", code="bad_chat_url")
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
        previous, same, stalled, said = None, 0, 0, None
        while True:
            seen = self._observe(page, selectors, chat_id, turns_before, patient=patient)
            if seen.markdown is not None:
                same = same + 1 if seen.markdown == previous else 1
                previous = seen.markdown
                if same >= self.stable_reads:
                    return Answer(
                        seen.markdown, self.name, title=seen.title, model=seen.model, extra=seen.extra
                    )
            else:
                previous, same = None, 0
                stalled = stalled + 1 if seen.stalled else 0
                if stalled >= STALL_READS:
                    raise TransientError(
                        "the answer stopped before the site marked it finished (cut short)", code="cut_short"
                    )
                settling = seen.unsure and time.monotonic() < settle_until
                if not (patient or seen.catching_up or seen.stalled or settling):
                    return Generating(seen.progress)
            if on_progress and seen.progress != said:
                on_progress(seen.progress)
                said = seen.progress
            if time.monotonic() >= deadline:
                return Generating(seen.progress)
            page.wait_for_timeout(self.read_interval * 1000)

    def _observe(
        self, page: Any, selectors: Selectors, chat_id: str, turns_before: int, *, patient: bool
    ) -> Observation:
        failure = screen_failure(page, self.selector_sets)
        if failure is not None:
            raise failure
        dom = read_dom_state(page, selectors)
        busy = dom.busy_reason(selectors, turns_before)
        if busy is not None and patient:
            return Observation(busy)  # the API read waits until the page says it is done
        try:
            view = parse_chat(fetch_api(page, f"/api/v2/chats/{chat_id}", timeout=self.page_timeout))
        except (ApiUnusable, ChatShapeError) as err:
            return self._observe_dom_only(dom, selectors, busy, str(err))
        turn = view.turns[turns_before] if len(view.turns) > turns_before else None
        if turn is not None and turn.error:
            raise TransientError(
                f"the site reports an error in the answer: {turn.error}", code="answer_error"
            )
        if busy is not None:
            # A freshly opened page draws a finished answer a moment late: worth waiting for.
            site_has_more = bool(turn and turn.answer) and (
                turn.finished or dom.assistant_turns <= turns_before
            )
            return Observation(busy, catching_up=site_has_more)
        if turn is None or not turn.finished or not turn.answer.strip():
            # Only a UI that positively shows completion (a copy button) can contradict the API;
            # the older UI shows nothing, so there this is plain "still generating".
            return Observation(dom.progress(), stalled=bool(selectors.copy_button))
        extra = {"source": "api", "chat_id": chat_id, "ui": selectors.name}
        return Observation("finishing", turn.answer, title=view.real_title, model=view.model, extra=extra)

    def _observe_dom_only(
        self, dom: DomState, selectors: Selectors, busy: str | None, why: str
    ) -> Observation:
        """The site's JSON is unusable: take the page's text, and say so in the Answer."""
        if busy is not None:
            return Observation(busy, unsure=True)
        if not dom.answer_text.strip():
            return Observation(dom.progress(), stalled=bool(selectors.copy_button))
        return Observation("finishing", dom.answer_text, extra={"source": "dom", "api_problem": why})


def _comparable(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "message", "") or err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__
