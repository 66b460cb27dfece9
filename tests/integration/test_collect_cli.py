"""A cycle collects finished chats through the site's JSON, from one page, without opening theirs
(`qwenpipe cycle` in real Chromium against the simulator, which counts page loads and JSON reads).
A chat the site stored finished long ago, by its own clock, costs one read. Where the JSON cannot
tell, the chat's own page decides, as it always has. One simulator."""

from __future__ import annotations

import time

import pytest
import shared_browser
from browser_helpers import browser_config
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

from pipeline.config import Qwen
from pipeline.engines.base import Answer
from pipeline.engines.qwen.browser import BrowserSession
from pipeline.engines.qwen.engine import QwenEngine
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
    "clock_offset": 0.0,
    "finish_early": 0.0,
    "slow_reads": {},
}
# The sends are stamped this long before the site's now once the test puts its clock back: chats a
# cron cycle comes back to long after their answers finished (no waiting in the test).
LONG_AGO = -120.0
AHEAD = 600.0


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


def finish_answers(site, project) -> None:
    """Let the project's answers end, and return once the site has stored each as finished. They
    end while the site's clock is AHEAD, which is then put back: stamped in its future, they are
    never "finished long ago", so these tests count the stability reads however slow the machine."""
    site.set(clock_offset=AHEAD)
    site.set(hold_answers=False)
    finish_answers_of(site, [url.read_text() for url in (project / "articles").glob("*.md.url")])
    site.set(clock_offset=0.0)


def finish_answers_of(site, idents) -> None:
    """Wait until the answers of these chats (ids or URLs) are stored as finished."""
    idents = [ident.strip().rsplit("/", 1)[-1] for ident in idents]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        views = [site.store.chat_view(ident) for ident in idents]
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
    finish_answers(site, project)
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
    finish_answers(site, project)
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

    finish_answers(site, project)
    done = qwenpipe_in_process("cycle", cwd=project)
    assert done.returncode == 0, done.stderr
    assert_written(project, site, texts)


def reads_of(site, before: dict, chat_url: str) -> int:
    ident = chat_url.strip().rsplit("/", 1)[1]
    return site.chat_reads().get(ident, 0) - before.get(ident, 0)


def test_chats_finished_long_ago_are_read_once_each_and_an_answer_still_written_is_not_taken(site, tmp_path):
    site.set(clock_offset=LONG_AGO)
    project, texts = sent(site, tmp_path, 3, "mint")
    streaming = prompt(project, "mint-slow", "Write about mint that grows slowly. [sim:slow]")
    site.set(answer_seconds=2.0)  # [sim:slow]: 200 s, still being written whatever the machine's load
    assert qwenpipe_in_process("cycle", cwd=project).returncode == 42
    urls = {slug: (project / "articles" / f"{slug}.md.url").read_text() for slug in [*texts, "mint-slow"]}
    site.set(hold_answers=False)
    finish_answers_of(site, [urls[slug] for slug in texts])
    site.set(clock_offset=0.0)  # the site's now: every send two minutes old, one answer still growing
    before, reads_before = site.requests(), site.chat_reads()

    result = qwenpipe_in_process("cycle", cwd=project)

    assert result.returncode == 3, result.stderr  # the slow answer is still being written
    assert_written(project, site, texts)
    assert {slug: reads_of(site, reads_before, url) for slug, url in urls.items()} == dict.fromkeys(urls, 1)
    assert looked(site, before)["chat_page"] == 0
    assert not (project / "articles" / "mint-slow.md").exists(), streaming


def test_text_that_moves_under_a_finished_status_is_not_taken_from_one_read(site, tmp_path):
    # The site stores "finished" ahead of the answer's last words (finish_early): its JSON says
    # finished while the text still grows, and it stamps the chat as it stores them. All three
    # chats were sent two minutes before the site's now. The collector (real Chromium, one page)
    # takes the two finished long ago at their first read and leaves the moving one to its page
    # after its stability reads.
    site.set(clock_offset=LONG_AGO, answer_seconds=1.2)  # ends a whole second after its send
    old = [site.store.new_chat() for _ in range(2)]
    for n, ident in enumerate(old):
        site.store.send(ident, f"Write about sage number {n}.", None, gate=None)
    finish_answers_of(site, old)
    qwen = Qwen(base_url=site.base_url, stable_reads=2, page_timeout=15)
    browser = browser_config(tmp_path, cdp_url=shared_browser.cdp_url())
    with BrowserSession(browser) as session, QwenEngine(qwen, session) as engine:
        engine.prepare()  # attached before the moving answer starts: it moves all through the reads
        # 123 words in 20 s: a word or more between any two reads a quarter of a second apart.
        site.set(finish_early=600.0, answer_seconds=20.0)
        moving = site.store.new_chat()
        site.store.send(moving, "Write about sage that grows slowly.", None, gate=None)
        urls = [f"{site.base_url}/c/{ident}" for ident in [*old, moving]]
        finish_answers_of(site, urls[2:])  # its JSON says finished from its first words on
        site.set(clock_offset=0.0)
        reads_before = site.chat_reads()
        found = dict(engine.collect(urls))

    assert set(found) == set(urls[:2]) and all(isinstance(a, Answer) for a in found.values()), found
    assert [reads_of(site, reads_before, url) for url in urls[:2]] == [1, 1]
    assert reads_of(site, reads_before, urls[2]) > 1  # read again, and again: its text moved


def test_a_read_the_site_answers_late_is_never_matched_with_a_read_made_just_after(site, tmp_path):
    # The collector plans a chat's reads a quarter of a second apart, but what counts is when the
    # site read the chat. Here the site holds the first read 0.24 s before reading the chat (a busy
    # server), so a second read started on plan would read it 0.01 s later: the same words of an
    # answer still being written, under a status that says finished. The page starts a chat's next
    # read a quarter of a second after its last one was answered, so the two never match.
    qwen = Qwen(base_url=site.base_url, stable_reads=2, page_timeout=15)
    browser = browser_config(tmp_path, cdp_url=shared_browser.cdp_url())
    with BrowserSession(browser) as session, QwenEngine(qwen, session) as engine:
        engine.prepare()
        site.set(finish_early=600.0, answer_seconds=20.0)  # 123 words in 20 s, "finished" at once
        moving = site.store.new_chat()
        site.store.send(moving, "Write about sage that grows slowly.", None, gate=None)
        finish_answers_of(site, [moving])
        site.set(slow_reads={moving: 0.24})
        url = f"{site.base_url}/c/{moving}"
        reads_before = site.chat_reads()
        found = dict(engine.collect([url]))

    assert found == {}, found  # never taken: left to its page
    assert reads_of(site, reads_before, url) > 2
