"""A cycle collects finished chats through the site's JSON, from one page, without opening theirs
(`qwenpipe cycle` in real Chromium against the simulator, which counts page loads and JSON reads).
Where the JSON cannot tell, the chat's own page decides, as it always has. One simulator."""

from __future__ import annotations

import time

import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

from pipeline.simulator import Simulator

pytestmark = pytest.mark.browser

RESET = {
    "answer_seconds": 0.2,
    "thinking_seconds": 0.1,
    "url_delay": 0.1,
    "hold_answers": False,
    "stream_status": False,
    "bad_chat_reads": 0,
    "bad_chat_read": "error",
    "ui": "current",
}


@pytest.fixture(scope="module")
def sim():
    with Simulator(port=0, answer_seconds=0.2, thinking_seconds=0.1, url_delay=0.1).start() as server:
        yield server


@pytest.fixture
def site(sim):
    sim.set(**RESET)
    yield sim
    sim.set(**RESET)


def sent(site, tmp_path, count: int, topic: str, extra: str = "concurrency = 1"):
    """A project whose `count` prompts one cycle sent, answers held short of their end."""
    site.set(hold_answers=True)
    project = make_project(tmp_path, site, router=False, extra=extra, stable_reads=2)  # the JSON reads twice
    with open(project / "config.toml", "a", encoding="utf-8") as config:
        config.write("\n[article]\nmin_words = 0\n")
    texts = {
        f"{topic}-{n}": prompt(project, f"{topic}-{n}", f"Write about {topic} number {n}.")
        for n in range(count)
    }
    result = qwenpipe_in_process("cycle", cwd=project)
    assert result.returncode == 42, result.stderr
    return project, texts


def finish_answers(site) -> None:
    """Let every answer end, and return once the site has stored each as finished."""
    site.set(hold_answers=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        views = [site.store.chat_view(ident) for ident in site.chat_ids()]
        if all(m["finished"] for v in views if v for m in v["messages"] if m["role"] == "assistant"):
            return
        time.sleep(0.05)
    raise AssertionError("the simulator's answers did not finish")


def looked(site, before: dict) -> dict:
    after = site.requests()
    return {kind: after.get(kind, 0) - before.get(kind, 0) for kind in ("chat_page", "chat_json")}


def assert_written(project, site, texts) -> None:
    for slug, text in texts.items():
        assert read_article(project / "articles" / f"{slug}.md")[1] == site.expected_answer(text).strip()


def test_a_cycle_collects_finished_chats_through_the_json_without_opening_their_pages(site, tmp_path):
    project, texts = sent(site, tmp_path, 4, "tea")
    finish_answers(site)
    before = site.requests()

    result = qwenpipe_in_process("cycle", cwd=project)

    assert result.returncode == 0, result.stderr
    assert_written(project, site, texts)
    seen = looked(site, before)
    assert seen["chat_page"] == 0, seen
    assert seen["chat_json"] == 4 * 2, seen  # stable_reads = 2 reads of each chat, nothing more


@pytest.mark.parametrize("bad", ["error", "shape"])
def test_a_chat_whose_json_cannot_be_read_is_looked_at_on_its_page(site, tmp_path, bad):
    project, texts = sent(site, tmp_path, 2, f"coffee-{bad}")
    finish_answers(site)
    site.set(bad_chat_reads=1, bad_chat_read=bad)  # the cycle's first JSON read
    before = site.requests()

    result = qwenpipe_in_process("cycle", cwd=project)

    assert result.returncode == 0, result.stderr
    assert_written(project, site, texts)
    assert looked(site, before)["chat_page"] == 1  # that chat's page, and only that one


def test_a_finished_thinking_phase_never_collects_an_unfinished_answer(site, tmp_path):
    # The JSON holds only the stream's last phase and status: "thinking_summary" / "finished"
    # while the answer is still written (held one word short); the legacy page shows no buttons.
    site.set(ui="legacy", stream_status=True)
    project, texts = sent(site, tmp_path, 2, "cocoa")
    working = qwenpipe_in_process("cycle", cwd=project)
    assert working.returncode == 3, working.stderr
    assert not list((project / "articles").glob("cocoa-*.md"))

    finish_answers(site)
    done = qwenpipe_in_process("cycle", cwd=project)
    assert done.returncode == 0, done.stderr
    assert_written(project, site, texts)
