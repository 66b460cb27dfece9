"""A cycle sends up to `qwen.send_concurrency` prompts at once, each through the contract (its
lock, its intent marker before the click, the cycle's budget), never one twice (fakes)."""

from __future__ import annotations

import threading
import time

from cycle_project import cycle_project

from pipeline.batch.cycle import run_cycle

SLUGS = [f"article-{n}" for n in range(6)]


def setup(project, chat, router, extra=""):
    return cycle_project(project, chat, router, SLUGS, extra)


def sent_texts(chat) -> list[str]:
    return [text for kind, text in chat.history if kind == "send"]


def test_a_cycle_sends_three_prompts_at_once_and_each_once(project, chat, router):
    ws, engines = setup(project, chat, router, "send_concurrency = 3")
    chat.send_together = threading.Barrier(3)  # a send returns only once three run at the same time
    markers: list[bool] = []
    send = chat.send

    def send_after_its_marker(text, choice=None, *, on_chat_id=None):
        slug = text.removeprefix("Write about ").rstrip(".")
        markers.append((project / "articles" / f"{slug}.md.sending").exists())
        return send(text, choice, on_chat_id=on_chat_id)

    chat.send = send_after_its_marker
    report = run_cycle(ws, engines())
    assert sorted(report.sent) == SLUGS and report.exit_code == 42, report.summary()
    assert chat.most_sending == 3
    assert sorted(sent_texts(chat)) == sorted(f"Write about {slug}." for slug in SLUGS)
    assert markers == [True] * len(SLUGS)  # every intent marker was on disk before its click
    assert not list((project / "articles").glob("*.md.sending"))
    urls = {(project / "articles" / f"{slug}.md.url").read_text() for slug in SLUGS}
    assert len(urls) == len(SLUGS)
    assert len(chat.attached) == 3 and all(engine.closed for engine in chat.attached)


def test_send_concurrency_one_sends_one_prompt_at_a_time(project, chat, router):
    ws, engines = setup(project, chat, router)  # the default
    report = run_cycle(ws, engines())
    assert sorted(report.sent) == SLUGS
    assert chat.most_sending == 1 and chat.attached == []


def test_sends_side_by_side_keep_the_cycle_send_limit(project, chat, router):
    ws, engines = setup(project, chat, router, "send_concurrency = 3\nmax_sends_per_cycle = 4")
    report = run_cycle(ws, engines())
    assert len(report.sent) == 4 and len(sent_texts(chat)) == 4, report.summary()
    assert report.counts["throttled"] == 2


def test_no_browser_is_shared_for_sends_while_the_chat_quota_is_spent(project, chat, router):
    ws, engines = setup(project, chat, router, "send_concurrency = 3")
    ws.chat_quota.block(time.time(), 3600, "the daily chat quota is spent")
    report = run_cycle(ws, engines())
    assert report.counts["finished"] == len(SLUGS)  # the router wrote them
    assert sent_texts(chat) == [] and chat.attached == []
