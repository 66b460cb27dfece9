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
