"""The site as public clients described it at the end of September 2026 (docs/qwen-site.md, "Late
autumn 2026"): real Chromium against the simulator in each of its late-autumn shapes."""

from __future__ import annotations

import time
import uuid

import pytest
from sim_project import journal, make_project, prompt, read_article, wait_stored_finished
from tests_cli_helpers import qwenpipe, qwenpipe_in_process

from pipeline.engines.base import Code, TransientError
from pipeline.engines.qwen.api import chat_id_from_url

pytestmark = pytest.mark.browser

SEPARATOR = "\n=== next turn ===\n"
PAGE = 10  # the messages the late-autumn page loads: five turns
# Answers complete as soon as they are sent: every run finds the last one done.
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.1, "history_limit": PAGE}


def turns_prompt(project, slug: str, count: int) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    texts = [f"Step {n} of the article about paged chats ({tag})." for n in range(1, count + 1)]
    prompt(project, slug, SEPARATOR.join(texts))
    return texts


def chat_turns(sim, project, slug: str) -> list[tuple[int, str]]:
    """(turn, prompt) of every message that reached the article's chat, accepted or not."""
    chat_id = chat_id_of(project, slug)
    return [(e["turn"], e["prompt"]) for e in sim.ledger() if e["chat_id"] == chat_id]


def chat_id_of(project, slug: str) -> str:
    return chat_id_from_url((project / "articles" / f"{slug}.md.url").read_text().strip())


def _wait_for(condition, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.1)


# -- the history in pages ---------------------------------------------------------------------------


# Ten messages a page, as the site (the finding: seven turns); three: a page that starts with an
# answer whose message it lacks, the chat longer than three such pages.
@pytest.mark.parametrize(("count", "limit"), [(7, PAGE), (5, 3)])
def test_a_long_prompt_on_the_page_that_loads_the_last_page_only(sim, tmp_path, count, limit):
    sim.set(history_limit=limit)
    # A run that never sees the last turn complete fails in bounded time, not after ten minutes.
    project = make_project(tmp_path, sim, router=False, extra="answer_timeout = 120")
    texts = turns_prompt(project, "long", count)
    pages_before = sim.requests().get("chat_json", 0)

    done = qwenpipe_in_process("generate", "long", "--wait", cwd=project)

    assert done.returncode == 0, done.stderr
    assert chat_turns(sim, project, "long") == list(enumerate(texts, 1))  # each turn once
    _, body = read_article(project / "articles" / "long.md")
    assert body == sim.expected_answer(texts[-1], turn=count).strip()
    assert sim.requests()["chat_json"] > pages_before


def test_a_run_killed_after_sending_a_turn_past_the_page_resumes_without_sending_it_again(sim, tmp_path):
    sim.set(history_limit=4)  # two turns a page: turn 4 is past the first page the page loads
    project = make_project(tmp_path, sim, router=False)
    texts = turns_prompt(project, "crash", 4)
    while (
        len([e for e in sim.sends() if e["prompt"] in texts]) < 3
    ):  # runs as cron makes them: a turn sent, or its answer still drawn
        assert qwenpipe_in_process("generate", "crash", cwd=project).returncode in (3, 42)
    _wait_for(lambda: sim.store.chat_view(chat_id_of(project, "crash"))["messages"][-1]["finished"])

    killed = qwenpipe("generate", "crash", cwd=project, env={"QWENPIPE_CRASH_AT": "after_send"})

    assert killed.returncode == -9, killed.stderr
    assert chat_turns(sim, project, "crash") == list(enumerate(texts, 1))
    # The killed run's send may have reached the site a moment ago: its answer is stored as
    # finished a little after its last words, and a rerun that reads it before says 3.
    wait_stored_finished(sim, chat_id_of(project, "crash"))  # turn 4's, the last answer
    rerun = qwenpipe_in_process("generate", "crash", cwd=project)
    assert rerun.returncode == 0, rerun.stderr
    assert chat_turns(sim, project, "crash") == list(enumerate(texts, 1)), "turn 4 sent again"
    _, body = read_article(project / "articles" / "crash.md")
    assert body == sim.expected_answer(texts[-1], turn=4).strip()
    sent = [e.get("turn") for e in journal(project) if e["event"] == "sent"]
    assert sent == [None, 2, 3], sent  # the killed run never logged its send of turn 4


def test_a_later_check_takes_the_chat_the_page_loaded_over_xhr(sim, engine):
    # Over a second: the site stamps in whole seconds, and an answer stamped in its send's second
    # has no stamp after the send (steady.finished_long_ago: then the stability reads decide).
    sim.set(answer_seconds=1.2)
    text = f"Write about XHR loads ({uuid.uuid4().hex[:6]})."
    url = engine.send(text)
    engine.wait(url, timeout=30)
    # Looked at a minute later by the site's clock: stored finished long before the page's load
    # (steady.finished_long_ago), so the load vouches for the answer alone.
    sim.set(clock_offset=60.0)

    answer = engine.check(url)

    # The page's own load (XHR, ?direction=up&limit=10) was seen and taken: no read of ours.
    assert answer.markdown == sim.expected_answer(text)
    assert answer.extra.get("read") == "page", answer.extra


# -- the answer: two candidates, a search first; the "Qwen Studio" page -------------------------------


def test_the_studio_page_gives_the_first_of_two_candidates_whole_and_each_turn_once(sim, engine, session):
    sim.set(ui="studio-2026-09", late_stream=True, candidates=2, answer_seconds=0.6, thinking_seconds=0.2)
    tag = uuid.uuid4().hex[:6]
    texts = [f"Write about tea studios ({tag}).", f"Now shorten it ({tag})."]

    url = engine.send(texts[0])
    answer = engine.wait(url, timeout=30)

    # The stream interleaved a second candidate and a web search: the article is the first, whole.
    assert answer.extra["source"] == "stream"
    assert answer.markdown == sim.expected_answer(texts[0])
    engine.send_turn(url, texts[1])
    _wait_for(lambda: engine.read_turns(url).turns[-1].complete)
    chat = engine.read_turns(url)
    assert [t.user for t in chat.turns] == texts
    assert [t.answer for t in chat.turns] == [sim.expected_answer(t, turn=n) for n, t in enumerate(texts, 1)]
    # The page is the Studio one: its wrappers make a broad [class*=chat-message] count a turn up
    # to three times, and its tool cards say "thinking" in their class.
    page = session.context.new_page()
    try:
        page.goto(url)
        page.wait_for_selector(".qwen-chat-thinking-tool-status-card-wraper")
        assert page.title() == "Qwen Studio"
        assert page.get_attribute("textarea", "placeholder") == "Ask Qwen"
        assert page.locator("[class*=chat-message]").count() >= 3 * 2 * len(texts)
        assert page.locator("[data-role]").count() == 0
        assert page.locator(".qwen-chat-message-pager").first.inner_text() == "1/2"
    finally:
        page.close()


# -- the late refusals -------------------------------------------------------------------------------


def test_parallel_limited_before_the_send_is_waited_out_and_the_prompt_sent_once(sim, engine):
    sim.set(parallel_limited_sends=1, answer_seconds=0.3)
    text = f"Write about parallel limits ({uuid.uuid4().hex[:6]})."

    url = engine.send(text)

    assert [e["accepted"] for e in sim.ledger() if e["prompt"] == text] == [False, True]
    assert engine.wait(url, timeout=30).markdown == sim.expected_answer(text)


def test_chat_in_progress_for_a_later_turn_waits_and_sends_nothing_more(sim, engine):
    sim.set(answer_seconds=0.3)
    tag = uuid.uuid4().hex[:6]
    texts = [f"Write about busy chats ({tag}).", f"Now shorten it ({tag})."]
    url = engine.send(texts[0])
    engine.wait(url, timeout=30)
    sim.set(late_errors=True, in_progress_sends=1)  # the site: the last turn is still being answered

    with pytest.raises(TransientError) as refused:
        engine.send_turn(url, texts[1])

    assert refused.value.code == Code.BUSY_CHAT and refused.value.nothing_sent
    assert [e["accepted"] for e in sim.ledger() if e["prompt"] == texts[1]] == [False]  # no click again
    engine.send_turn(url, texts[1])  # the next run, the answer complete: sent, once
    assert [e["accepted"] for e in sim.ledger() if e["prompt"] == texts[1]] == [False, True]


def test_generate_wait_waits_out_chat_in_progress_on_a_later_turn_and_sends_it_once(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    texts = turns_prompt(project, "busy", 2)
    assert qwenpipe_in_process("generate", "busy", cwd=project).returncode == 42  # turn 1
    _wait_for(lambda: sim.store.chat_view(chat_id_of(project, "busy"))["messages"][-1]["finished"])
    sim.set(late_errors=True, in_progress_sends=1)  # the site: turn 1 is still being answered

    done = qwenpipe_in_process("generate", "busy", "--wait", cwd=project)

    assert done.returncode == 0, done.stderr
    assert [e["accepted"] for e in sim.ledger() if e["prompt"] == texts[1]] == [False, True]
    assert not [e for e in journal(project) if e["event"] == "transient"]  # no attempt counted
    _, body = read_article(project / "articles" / "busy.md")
    assert body == sim.expected_answer(texts[1], turn=2).strip()
