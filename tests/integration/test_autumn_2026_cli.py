"""The site as it answers since autumn 2026 (docs/qwen-site.md): only calls that carry the
frontend's own headers are answered. Real Chromium against the simulator in its strict mode."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe

from pipeline.engines.base import Answer

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


def test_generate_wait_speaks_only_with_the_frontends_headers(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    text = prompt(project, "strict", text_of("strict headers"))
    refused_before = len(sim.header_refusals())

    done = qwenpipe("generate", "strict", "--wait", cwd=project)

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
