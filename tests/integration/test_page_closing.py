"""Closing our pages never waits on Chromium for good (engines/qwen/closing.py).

Playwright's Page.close waits without a limit for Chromium to say the tab is gone; a close that
meets a navigation's commit can be taken and never answered. Found by the CI of stop 45: the
login window after a slider closed its page as the page left for the app, and hung for good.
Real Chromium over CDP (the shared test browser, as `browser.cdp_url` attaches) and the
simulator's sign-in page, made to navigate again every few milliseconds so that each close meets
a commit: before the fix, the first or second close hung; a page that was leaving once (the
login window's case) hung about one close in twenty."""

from __future__ import annotations

import threading

import pytest
import shared_browser
from browser_helpers import browser_config, page_tabs

from pipeline.engines.qwen.browser import BrowserSession
from pipeline.engines.qwen.closing import CLOSE_ASKS, CLOSE_WAIT_MS, close_page

pytestmark = pytest.mark.browser

RACES = 6
SIGN_IN = "/auth?action=signin"  # a light page of the simulator's


def test_closing_our_pages_as_they_navigate_never_hangs_and_leaves_none_open(sim, tmp_path):
    endpoint = shared_browser.cdp_url()
    done: list[int] = []
    failed: list[BaseException] = []

    def races() -> None:  # in its own thread (its own Playwright driver), so a hang can be seen
        try:
            for trial in range(RACES):
                session = BrowserSession(browser_config(tmp_path, cdp_url=endpoint))
                page = session.new_page()
                page.goto(sim.base_url + SIGN_IN, wait_until="domcontentloaded")
                page.evaluate(f"setInterval(() => {{ location.href = '{SIGN_IN}'; }}, 5)")
                page.wait_for_timeout(20)  # navigating
                session.close()  # the page is always somewhere in a navigation
                done.append(trial)
        except BaseException as err:  # noqa: BLE001 - reported by the test thread
            failed.append(err)

    worker = threading.Thread(target=races, daemon=True)
    worker.start()
    worker.join(timeout=RACES * (CLOSE_ASKS * CLOSE_WAIT_MS / 1000 + 10))
    assert not worker.is_alive(), f"a close hung after {len(done)} of {RACES} closes"
    assert not failed, failed
    assert len(done) == RACES
    assert [url for url in page_tabs(endpoint) if url.startswith(sim.base_url)] == []  # ours all closed


def test_a_page_that_asks_leave_this_page_is_closed_all_the_same(sim, tmp_path):
    # Closing runs the page's "before unload" handler (so a page never waits on a close nobody
    # answers); a page that asks "leave this page?" is answered yes. Chromium asks only once the
    # person has used the page: the test clicks it first.
    endpoint = shared_browser.cdp_url()
    with BrowserSession(browser_config(tmp_path, cdp_url=endpoint)) as session:
        page = session.new_page()
        page.goto(sim.base_url + SIGN_IN, wait_until="domcontentloaded")
        page.evaluate(
            "window.addEventListener('beforeunload', (e) => { e.preventDefault(); e.returnValue = ''; })"
        )
        page.mouse.click(5, 5)
        asked: list[str] = []
        page.on("dialog", lambda dialog: asked.append(dialog.type))
        address = page.url

        assert close_page(page) is True
        assert page.is_closed() and asked == ["beforeunload"]
    assert address not in page_tabs(endpoint)
