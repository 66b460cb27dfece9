"""A cycle polls its sent chats side by side through the chat engine's shared session (fakes)."""

from __future__ import annotations

import threading

from cycle_project import cycle_project
from fakes import answer

from pipeline.batch.cycle import run_cycle

SLUGS = [f"article-{n}" for n in range(6)]


def setup(project, chat, router, extra=""):
    return cycle_project(project, chat, router, SLUGS, "max_sends_per_cycle = 0\n" + extra, sent=True)


def checked_urls(chat) -> list[str]:
    return [call[1] for call in chat.history if call[0] == "check"]


def test_a_cycle_polls_sent_chats_three_at_once_and_each_once(project, chat, router):
    ws, engines = setup(project, chat, router, "concurrency = 3")
    chat.check_together = threading.Barrier(3)  # a check returns only once three run at the same time
    chat.enqueue_check(*(answer() for _ in SLUGS))
    report = run_cycle(ws, engines())
    assert report.exit_code == 0 and report.counts["finished"] == len(SLUGS), report.summary()
    assert chat.most_checking == 3
    urls = checked_urls(chat)
    assert len(urls) == len(SLUGS) and len(set(urls)) == len(SLUGS), "an article was polled twice"
    assert len(chat.attached) == 3 and all(engine.closed for engine in chat.attached)
    assert all((project / "articles" / f"{slug}.md").exists() for slug in SLUGS)


def test_concurrency_one_polls_one_chat_at_a_time(project, chat, router):
    ws, engines = setup(project, chat, router, "concurrency = 1")
    chat.enqueue_check(*(answer() for _ in SLUGS))
    report = run_cycle(ws, engines())
    assert report.exit_code == 0 and chat.most_checking == 1 and chat.attached == []
    assert len(checked_urls(chat)) == len(set(checked_urls(chat))) == len(SLUGS)


def test_a_chat_that_cannot_share_its_session_polls_one_at_a_time(project, chat, router):
    from pipeline.engines.base import EngineBusy

    ws, engines = setup(project, chat, router, "concurrency = 3")
    chat.prepare_error = EngineBusy("the browser profile is in use by pid 123 (cycle)")
    said: list[str] = []
    chat.enqueue_check(*(answer() for _ in SLUGS))
    report = run_cycle(ws, engines(), say=said.append)
    assert any(line.startswith("cycle: polling one chat at a time (the browser profile") for line in said)
    assert chat.attached == [] and chat.most_checking == 1
    assert len(checked_urls(chat)) == len(set(checked_urls(chat))) == len(SLUGS)
    assert report.exit_code == 0, report.summary()
