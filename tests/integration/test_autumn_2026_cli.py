"""The site as it answers since autumn 2026 (docs/qwen-site.md): only calls that carry the
frontend's own headers are answered. Real Chromium against the simulator in its strict mode."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sim_project import journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

from pipeline.engines.base import Answer, TransientError
from pipeline.engines.qwen.headers import is_ours

pytestmark = pytest.mark.browser

SIMULATOR = {"answer_seconds": 0.6, "thinking_seconds": 0.2, "url_delay": 0.1}  # conftest.py `sim`


def text_of(topic: str) -> str:
    return f"Write a short article about {topic} {uuid.uuid4().hex[:8]}."


def release_once_the_page_reads(sim, before: int) -> threading.Thread:
    """A frontend release the moment a chat page (loaded with the old build) has read its chat
    once, then the held answer is let go: whatever the machine's speed, the page that waits
    carries a build the site no longer takes."""

    def run() -> None:
        deadline = time.monotonic() + 30
        while sim.requests().get("chat_json", 0) <= before and time.monotonic() < deadline:
            time.sleep(0.02)
        sim.release_frontend()
        sim.set(hold_answers=False)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@contextmanager
def reads_of_ours(session) -> Iterator[list[str]]:
    """The URLs of the API calls qwenpipe makes itself (not the page's own) while the block runs."""
    ours: list[str] = []

    def count(route):
        if is_ours(route.request.headers):
            ours.append(route.request.url)
        route.continue_()

    session.context.route("**/api/**", count)
    try:
        yield ours
    finally:
        session.context.unroute("**/api/**", count)


def test_generate_wait_speaks_only_with_the_frontends_headers(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    text = prompt(project, "strict", text_of("strict headers"))
    refused_before = len(sim.header_refusals())

    done = qwenpipe_in_process("generate", "strict", "--wait", cwd=project)

    assert done.returncode == 0, done.stderr
    _, body = read_article(project / "articles" / "strict.md")
    assert body == sim.expected_answer(text).strip()
    # The login check, the chat's JSON and the page's own calls: none refused as not the frontend's.
    assert sim.header_refusals()[refused_before:] == []
    assert [e["accepted"] for e in sim.ledger() if e["prompt"] == text] == [True]


def test_a_frontend_release_mid_wait_is_relearned_from_the_reloaded_page(sim, engine):
    sim.set(hold_answers=True)
    text = text_of("a frontend release")
    url = engine.send(text)
    # A later run: the chat's own page, loaded with the build of the moment, then a release.
    assert not isinstance(engine.check(url), Answer)
    refused_before = len(sim.header_refusals())
    pages_before = sim.requests().get("chat_page", 0)
    release = release_once_the_page_reads(sim, sim.requests().get("chat_json", 0))

    answer = engine.wait(url, timeout=30)

    release.join(5)
    assert isinstance(answer, Answer)
    assert answer.markdown == sim.expected_answer(text).strip()
    refused = sim.header_refusals()[refused_before:]
    # The old build was refused (the page's own poll, or our read), then the reloaded page's
    # build was learned and the read answered.
    assert refused and all("is not the frontend's build" in why for _, _, why in refused)
    assert len([e for e in sim.sends() if e["prompt"] == text]) == 1
    assert sim.requests()["chat_page"] >= pages_before + 2  # the chat's page, then its reload


def test_no_build_number_is_written_in_the_engine():
    from pathlib import Path

    import pipeline

    root = Path(pipeline.__file__).parent / "engines"
    engine_code = "\n".join(p.read_text(encoding="utf-8") for p in root.rglob("*.py"))
    for build in ("0.2.63", "0.2.66", "0.2.68", "2.5.31", "2.5.36"):  # builds public clients saw
        assert build not in engine_code


# -- item 2: the answer as the page receives it ------------------------------------------------------


def test_wait_after_a_send_takes_the_answer_from_the_pages_own_stream(sim, engine):
    text = text_of("the stream")
    chat_reads_before = sim.requests().get("chat_json", 0)
    pages_before = sim.requests().get("chat_page", 0)

    url = engine.send(text)
    answer = engine.wait(url, timeout=30)

    assert isinstance(answer, Answer)
    assert answer.extra["source"] == "stream"
    assert answer.markdown == sim.expected_answer(text)
    assert answer.model == "qwen3.7-plus"
    # One read of the chat's JSON confirmed the stream's words (a frame sent twice or out of
    # order: observing.stored_as_streamed), and no chat page was opened.
    assert sim.requests().get("chat_json", 0) == chat_reads_before + 1
    assert sim.requests().get("chat_page", 0) == pages_before


def test_a_later_check_takes_the_chat_json_the_page_loads_itself(sim, engine, session):
    sim.set(answer_seconds=1.2)  # finished in a later second than its send: stamped after it
    text = text_of("the page's own load")
    url = engine.send(text)
    engine.wait(url, timeout=30)
    # Looked at a minute later by the site's clock: stored finished long before the page's load
    # (steady.finished_long_ago), so the load vouches for the answer alone.
    sim.set(clock_offset=60.0)
    with reads_of_ours(session) as ours:
        answer = engine.check(url)

    assert isinstance(answer, Answer)
    assert answer.markdown == sim.expected_answer(text)
    assert answer.extra["read"] == "page" and answer.model == "qwen3.7-plus"
    assert ours == []  # no read of qwenpipe's own: the page's load was all it took


def test_a_stream_cut_short_is_a_transient_failure_at_once(sim, engine):
    text = text_of("a cut") + " [sim:error_banner]"
    url = engine.send(text)

    with pytest.raises(TransientError) as failed:
        engine.wait(url, timeout=30)

    # The stream's error frame, or the page's banner drawn from it: transient, at once.
    assert failed.value.code in ("answer_error", "error_banner")
    assert len([e for e in sim.sends() if e["prompt"] == text]) == 1


# -- item 8: generate --wait waits ----------------------------------------------------------------


def test_generate_wait_keeps_going_through_transient_failures(sim, tmp_path):
    # The site answers the send without a stream, and its chat JSON says "try again later" to
    # the next two reads: each is a transient failure, and --wait tries again after its backoff
    # (poll_interval = 0 here) instead of exiting 3 at the first one.
    sim.set(stream=False, bad_chat_reads=2)
    project = make_project(tmp_path, sim, router=False)  # max_attempts = 3
    text = prompt(project, "patient", text_of("patience"))

    done = qwenpipe_in_process("generate", "patient", "--wait", cwd=project)

    assert done.returncode == 0, done.stderr
    assert "--wait tries again" in done.stderr
    _, body = read_article(project / "articles" / "patient.md")
    assert body == sim.expected_answer(text).strip()
    events = [e["event"] for e in journal(project)]
    assert events.count("transient") >= 1 and events[-1] == "done"
    assert len([e for e in sim.sends() if e["prompt"] == text]) == 1


def test_a_next_turn_is_proved_sent_by_the_pages_own_stream(sim, engine, session):
    sim.set(answer_seconds=1.2)  # finished in a later second than its send: stamped after it
    url = engine.send(text_of("two turns"))
    engine.wait(url, timeout=30)
    # Looked at a minute later by the site's clock: stored finished long before the page's load
    # (steady.finished_long_ago), so the load vouches for the answer alone.
    sim.set(clock_offset=60.0)
    with reads_of_ours(session) as ours:
        engine.send_turn(url, "Now say it in three lines.")

    assert [e["turn"] for e in sim.sends() if e["chat_id"] == url.rsplit("/", 1)[1]] == [1, 2]
    # The chat's turns come from the page's own load, the proof from its stream; the one call
    # of ours is the login check before typing (the page's own headers, item 1).
    assert [u.split("/api/", 1)[1] for u in ours] == ["v2/users/status"]
