"""Closing one of our pages without ever waiting on Chromium for good.

Playwright's `Page.close` waits, with no time limit, until Chromium says the tab is gone. A
close that meets the moment a navigation commits can be taken and then never answered: the
tab stays, and `close` waits for ever (seen in about one close in twenty on a page that was
just leaving for the app, over CDP: the login window after a slider, a poll thread attached
to the cycle's browser; docs/reliability.md, "Twentieth session"). So every page of ours is
closed here: Chromium is asked without waiting (`run_before_unload`), given a moment to close
the tab, and asked again; a second ask, once the navigation is over, is always taken.
"""

from __future__ import annotations

from typing import Any

CLOSE_ASKS = 4
CLOSE_WAIT_MS = 1000  # how long one ask is given before the next


def close_page(page: Any) -> bool:
    """Close `page` within CLOSE_ASKS x CLOSE_WAIT_MS; whether it is closed. Never raises: a
    page of a browser that went away is closed enough."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        if page.is_closed():
            return True
        # Asked before unloading, the page may put a "leave this page?" question: we are leaving.
        page.on("dialog", _leave)
        for _ask in range(CLOSE_ASKS):
            page.close(run_before_unload=True)
            try:
                if not page.is_closed():
                    page.wait_for_event("close", timeout=CLOSE_WAIT_MS)
                return True
            except PlaywrightError:
                if page.is_closed():
                    return True
    except Exception:
        pass  # the browser or its driver is gone: nothing left to close
    return _closed(page)


def _leave(dialog: Any) -> None:
    try:
        dialog.accept()
    except Exception:
        pass  # the page went away with its question


def _closed(page: Any) -> bool:
    try:
        return bool(page.is_closed())
    except Exception:
        return True
