"""One tab per engine: a call's page, done with, waits on about:blank for the next call instead of
being closed (a new tab costs a renderer of its own: docs/performance.md). Real headless
Chromium against the simulator; the module's one browser session (tests/integration/conftest.py)."""

from __future__ import annotations

import time
import uuid

import pytest

from pipeline.engines.base import Answer, HardError
from pipeline.engines.qwen.headers import watch

pytestmark = pytest.mark.browser

SIMULATOR = {"answer_seconds": 0.5, "thinking_seconds": 0.1, "url_delay": 0.2}


def prompt(topic: str) -> str:
    return f"Write a short article about {topic} {uuid.uuid4().hex[:8]}."


def answer_of(engine, url: str, seconds: float = 20) -> Answer:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = engine.check(url)
        if isinstance(result, Answer):
            return result
        time.sleep(0.3)
    raise AssertionError(f"no answer for {url} after {seconds} s")


@pytest.fixture
def opened(session):
    """The pages the module's browser context opens from now on."""
    pages: list = []

    def note(page) -> None:
        pages.append(page)

    session.context.on("page", note)
    yield pages
    session.context.remove_listener("page", note)


def test_every_call_of_an_engine_uses_one_tab_each_reading_its_own_chat(sim, engine, opened):
    texts = [prompt("owls"), prompt("tea")]
    urls = [engine.send(text) for text in texts]
    answers = [answer_of(engine, url) for url in urls]

    assert len(opened) <= 1  # one tab for two sends and their checks (none: one parked already)
    for text, url, answer in zip(texts, urls, answers, strict=True):
        assert [entry["prompt"] for entry in sim.sends()].count(text) == 1
        assert answer.extra["chat_id"] == url.rsplit("/", 1)[1]
        assert answer.markdown == sim.expected_answer(text)  # its own chat's, not the last page's
    waiting = [page for page in engine.session.context.pages if not page.is_closed()]
    assert [page.url for page in waiting] == ["about:blank"]  # the app stopped between two uses
    assert not watch(waiting[0]).learned  # its next use learns the headers from its own load


def test_a_page_whose_call_failed_is_closed_never_used_again(sim, engine, opened):
    engine.send(prompt("rivers"))  # a page parked for the next call
    parked = [page for page in engine.session.context.pages if not page.is_closed()]
    missing = f"{sim.base_url}/c/{uuid.uuid4()}"

    with pytest.raises(HardError):
        engine.check(missing)  # the site has no such chat

    assert all(page.is_closed() for page in parked)
    engine.send(prompt("lakes"))
    assert len(opened) == 1  # the next call had to open a new tab
