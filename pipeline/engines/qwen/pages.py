"""The engine's pages, from opening to closing: one page of ours at a time, a fresh one for each
call (a send's left open while it reads its stream), parked for the next call when the work on
it succeeded, closed when it failed; waiting until a page is the chat app, and until it is one
that may be typed in (logged in, no bot check, firewall or quota screen: docs/qwen-site.md).
Playwright's failures become the engine's TransientError here, and every unknown answer
raised out of a page says where it was met."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from ...redact import first_line
from ..base import Code, EngineError, TransientError
from .botcheck import BotChecks, gateway_error, unknown_page
from .browser import BrowserSession
from .closing import close_page
from .context import POLL_SECONDS, EngineContext
from .login import read_login_state
from .page import detect_ui, present, screen_failure
from .page_answers import PageAnswers
from .selectors import Selectors
from .stream import PageTraffic


class Live(NamedTuple):
    """The page a send left open: its chat, and what it receives."""

    chat_id: str
    page: Any
    selectors: Selectors

    @property
    def traffic(self) -> PageTraffic:
        return PageTraffic.of(self.page)


class Pages:
    """The pages of one engine's browser session (`owns_session`: closed with the engine)."""

    def __init__(self, ctx: EngineContext, session: BrowserSession, *, owns_session: bool):
        self.ctx = ctx
        self.session = session
        self.owns_session = owns_session
        self.live: Live | None = None  # the page of the last send, still reading its stream

    @contextmanager
    def page(self, where: str, *, keep: bool = False) -> Iterator[Any]:
        """A fresh page for one call, closed at its end unless `keep` and the call succeeded;
        Playwright failures become TransientError. The page left open before (a send's) is
        closed first: one page of ours at a time. `where`: the step of the site the call is
        (engines/unknown.py), named on an unknown answer that does not name its own."""
        self.close_live()
        page = None
        with errors_as_engine_errors():
            page = self.session.new_page()
            page.set_default_timeout(self.ctx.page_timeout * 1000)
            PageTraffic.of(page)  # note the page's own requests from its first one
            BotChecks.of(page)  # and where it goes: a bot check is the page leaving the chat
            PageAnswers.of(page)  # and what the site answers its own requests (page_answers.py)
        with self.using(page, where, keep=keep) as used:
            yield used

    @contextmanager
    def using(self, page: Any, where: str, *, keep: bool = False) -> Iterator[Any]:
        """Work on `page`: Playwright failures become TransientError; the page is closed at the
        end (parked for the next call when the work succeeded), unless `keep` and the work
        succeeded. Every unknown answer raised out of it says where it was met (`where`, unless it
        says so itself): the one place all of them pass."""
        kept = done = False
        told = ""  # the step whose unknown answer the error raised tells already
        try:
            with errors_as_engine_errors():
                yield page
            kept, done = keep, True
        except EngineError as err:
            if err.unknown is not None:
                err.unknown = err.unknown.at(where)
                told = err.unknown.where
            if err.code == Code.BOT_CHECK and err.screenshot is None:
                err.screenshot = screenshot(page)  # the user sees what the site showed
            raise
        finally:
            self.notice_page(page, where, told=told)
            if not kept:
                self.close_page(page, reuse=done)  # a page that failed is never used again

    def close_page(self, page: Any, *, reuse: bool = True) -> None:
        """Done with `page`: its watchers stopped; parked for the next call (browser.park) when
        `reuse`, else closed."""
        PageTraffic.stop(page)
        BotChecks.stop(page)
        self.notice_page(page)
        PageAnswers.stop(page)
        if reuse:
            self.session.park(page)
            return
        close_page(page)

    def notice_page(self, page: Any, where: str = "", *, told: str = "") -> None:
        """The unknown answers the site gave the page's requests (page_answers.py), as read past:
        the contract journals them after the call (`noticed`); but those of the step `told`,
        which the error the call raised tells already."""
        for found in PageAnswers.of(page).unknown():
            if found.at(where).where != told:
                self.ctx.noticed.notice(found.at(where).where, found.seen)

    def keep_live(self, live: Live) -> None:
        self.close_live()
        self.live = live

    def take_live(self) -> Live | None:
        """The page a send left open, now the caller's (to use or close)."""
        live, self.live = self.live, None
        return live

    def close_live(self, *, reuse: bool = True) -> None:
        live, self.live = self.live, None
        if live is not None:
            self.close_page(live.page, reuse=reuse)

    def open(self, page: Any, url: str) -> None:
        page.goto(url, wait_until="domcontentloaded", timeout=self.ctx.page_timeout * 1000)

    def wait_for_app(self, page: Any) -> Selectors:
        """Wait until the page is the chat app (some selector set matches) or a failure screen."""
        ctx = self.ctx
        deadline = ctx.deadline(ctx.page_timeout)
        while True:
            failure = screen_failure(page, ctx.selector_sets)
            if failure is not None:
                raise failure
            selectors = detect_ui(page, ctx.selector_sets)
            if selectors is not None:
                if ctx.keep_login is not None:
                    ctx.keep_login(page)
                return selectors
            if gateway_error(page):  # the site failing: transient at once, no page_timeout's wait
                raise unknown_page(page, "a gateway's error page")
            if ctx.now() >= deadline:
                # Not the chat, and none of the pages the site is known to show instead: an
                # unknown page where the chat should be holds the account (botcheck.py).
                names = ", ".join(s.composer for s in ctx.selector_sets)
                raise unknown_page(page, f"no composer ({names}) after {ctx.page_timeout:g} s")
            page.wait_for_timeout(POLL_SECONDS * 1000)

    def ready_to_type(self, page: Any) -> Selectors:
        """The selectors to type with, once the page is known to be a logged-in, usable app."""
        selectors = self.wait_for_app(page)
        if not present(page, [selectors.composer])[0]:
            raise TransientError("the page shows a chat but no composer to type in", code=Code.PAGE_CHANGED)
        self.check_login_api(page)
        failure = screen_failure(page, self.ctx.selector_sets)  # the app may have drawn a banner since
        if failure is not None:
            raise failure
        return selectors

    def check_login_api(self, page: Any) -> None:
        blocker = read_login_state(page, timeout=self.ctx.page_timeout).send_blocker()
        if blocker is not None:
            raise blocker


@contextmanager
def errors_as_engine_errors() -> Iterator[None]:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        yield
    except PlaywrightTimeout as err:
        raise TransientError(f"the chat page timed out: {first_line(err)}", code=Code.TIMEOUT) from None
    except PlaywrightError as err:
        raise TransientError(f"browser or network error: {first_line(err)}", code=Code.NETWORK) from None


def screenshot(page: Any) -> bytes | None:
    """The page as it looks now (PNG), or None when the browser cannot take it."""
    try:
        return page.screenshot(timeout=5000)
    except Exception:
        return None  # a page gone or hung: the hold is recorded all the same
