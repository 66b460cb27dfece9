"""The page's completion request is held until its chat is on record (pipeline/engines/qwen/hold.py),
with real Chromium against the simulator: the browser itself sends it afterwards, and a chat
that cannot be recorded means nothing was sent."""

from __future__ import annotations

import uuid

import pytest

from pipeline.engines.base import HardError

pytestmark = pytest.mark.browser


def ledger_of(sim, text: str) -> list[dict]:
    return [entry for entry in sim.ledger() if entry["prompt"] == text]


def test_the_chat_is_named_before_the_site_gets_the_prompt_and_the_page_still_reads_its_stream(sim, engine):
    text = f"Write about tea held at the door {uuid.uuid4().hex[:8]}."
    named = []

    def on_chat_id(chat_id):
        named.append((chat_id, len(ledger_of(sim, text))))

    url = engine.send(text, on_chat_id=on_chat_id)
    assert named == [(url.rsplit("/", 1)[1], 0)], "the prompt reached the site before its chat was named"
    assert len(ledger_of(sim, text)) == 1
    answer = engine.wait(url, timeout=20)
    assert answer.markdown.strip() == sim.expected_answer(text).strip()
    assert answer.extra.get("source") == "stream"  # the page's own stream, read through the hold
    assert engine.user_messages(url) == [text]
    assert sim.header_refusals() == []


def test_a_chat_that_cannot_be_recorded_is_never_sent(sim, engine):
    text = f"Write about tea never recorded {uuid.uuid4().hex[:8]}."

    def on_chat_id(_chat_id):
        raise HardError("the store is gone", code="store")

    with pytest.raises(HardError) as raised:
        engine.send(text, on_chat_id=on_chat_id)
    assert raised.value.nothing_sent is True
    assert ledger_of(sim, text) == [], "the completion left the browser"


def test_an_empty_chat_and_a_missing_one_read_as_never_sent(sim, engine):
    chat_id = sim.store.new_chat()
    base = sim.base_url.rstrip("/")
    assert engine.user_messages(f"{base}/c/{chat_id}") == []
    assert engine.user_messages(f"{base}/c/{uuid.uuid4()}") is None
