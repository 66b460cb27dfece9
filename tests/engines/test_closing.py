"""closing.close_page without a browser: a close Chromium ignores is asked again, a bounded
number of times; and every page of ours is closed through it (the browser test of the race
itself: tests/integration/test_page_closing.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.engines.qwen.closing import CLOSE_ASKS, close_page

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"


class PageThatIgnoresTheFirstClose:
    """What Chromium did in the race: the first close taken, the tab kept, no word ever."""

    def __init__(self, ignored: int) -> None:
        self.ignored, self.asks, self.closed, self.listeners = ignored, 0, False, []

    def is_closed(self) -> bool:
        return self.closed

    def on(self, event: str, listener) -> None:
        self.listeners.append(event)

    def close(self, *, run_before_unload: bool = False) -> None:
        assert run_before_unload  # never the close that waits for Chromium's word
        self.asks += 1
        self.closed = self.asks > self.ignored

    def wait_for_event(self, event: str, timeout: float) -> None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        if not self.closed:
            raise PlaywrightTimeout(f"Timeout {timeout}ms exceeded while waiting for event {event!r}")


@pytest.mark.parametrize("ignored", range(CLOSE_ASKS + 1))
def test_a_close_chromium_ignores_is_asked_again_and_gives_up_after_its_asks(ignored):
    page = PageThatIgnoresTheFirstClose(ignored)
    assert close_page(page) is (ignored < CLOSE_ASKS)
    assert page.asks == min(ignored + 1, CLOSE_ASKS)
    assert page.listeners == ["dialog"]  # a "leave this page?" question is answered: we leave


def test_a_page_already_closed_is_not_asked_again():
    page = PageThatIgnoresTheFirstClose(0)
    page.closed = True
    assert close_page(page) is True
    assert (page.asks, page.listeners) == (0, [])


class PageClosedWhileWaited(PageThatIgnoresTheFirstClose):
    """The tab went while the close was waited for, and Playwright said so with an error."""

    def wait_for_event(self, event: str, timeout: float) -> None:
        from playwright.sync_api import Error as PlaywrightError

        self.closed = True
        raise PlaywrightError("Target page, context or browser has been closed")


def test_a_page_that_closes_while_its_close_is_waited_for_is_asked_once():
    page = PageClosedWhileWaited(1)  # the first ask is not taken at once
    assert close_page(page) is True
    assert page.asks == 1


class PageOfAGoneDriver(PageThatIgnoresTheFirstClose):
    """The browser or Playwright's driver went away: every call fails, not as Playwright's error."""

    def __init__(self, closed_after: bool | None) -> None:
        super().__init__(0)
        self.closed_after = closed_after

    def on(self, event: str, listener) -> None:
        raise ConnectionError("the driver is gone")

    def is_closed(self) -> bool:
        if self.listeners == ["asked"]:
            if self.closed_after is None:
                raise ConnectionError("the driver is gone")
            return self.closed_after
        self.listeners.append("asked")
        return False


@pytest.mark.parametrize(("closed_after", "said"), [(True, True), (False, False), (None, True)])
def test_a_page_of_a_driver_that_went_away_never_raises_and_says_what_it_can(closed_after, said):
    # The page says closed: closed. It says open: not closed. It cannot say: its browser is gone,
    # and a page of a browser that went away is closed enough.
    assert close_page(PageOfAGoneDriver(closed_after)) is said


def test_every_page_of_ours_is_closed_through_close_page():
    # The kind: a Page.close anywhere else can wait for good. Every call of `.close(` whose
    # receiver names a page (page, spare, live.page, ...) is closing.py's one.
    found = []
    for path in PIPELINE.rglob("*.py"):
        if "simulator" in path.parts:
            continue  # the simulator's pages are its own, not a user's browser's
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "close"
                and any(word in ast.unparse(node.func.value).lower() for word in ("page", "spare", "tab"))
            ):
                found.append(f"{path.relative_to(PIPELINE)}: {ast.unparse(node)}")
    assert found == ["engines/qwen/closing.py: page.close(run_before_unload=True)"]
