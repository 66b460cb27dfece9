"""A cycle lets the chat engine collect its sent chats at once before any chat's page is opened
(fakes): what the collect decides goes through the contract; the rest are checked as before."""

from __future__ import annotations

from cycle_project import cycle_project
from fakes import answer
from project_files import add_prompt

from pipeline.batch.cycle import run_cycle
from pipeline.contract.article import ArticleState
from pipeline.engines.base import Generating, TransientError

SLUGS = [f"article-{n}" for n in range(4)]


def setup(project, chat, router, extra="concurrency = 1"):
    return cycle_project(project, chat, router, SLUGS, extra, sent=True)


def url_of(project, slug) -> str:
    return (project / "articles" / f"{slug}.md.url").read_text().strip()


def checked(chat) -> list[str]:
    return [call[1] for call in chat.history if call[0] == "check"]


def test_what_the_collect_decides_is_written_without_checking_those_chats(project, chat, router):
    ws, engines = setup(project, chat, router)
    collected = {url_of(project, slug): answer() for slug in SLUGS[:3]}
    chat.collected.update(collected)
    chat.enqueue_check(answer())
    report = run_cycle(ws, engines())
    assert report.exit_code == 0 and report.counts["finished"] == len(SLUGS), report.summary()
    assert sorted(chat.collect_calls[-1]) == sorted(url_of(project, s) for s in SLUGS)
    assert checked(chat) == [url_of(project, SLUGS[3])]  # only the chat the collect left out
    assert all((project / "articles" / f"{slug}.md").exists() for slug in SLUGS)


def test_a_chat_the_collect_says_is_generating_is_neither_checked_nor_written(project, chat, router):
    ws, engines = setup(project, chat, router)
    for slug in SLUGS:
        chat.collected[url_of(project, slug)] = Generating("writing: 120 chars")
    report = run_cycle(ws, engines())
    assert report.exit_code == 3 and report.counts["generating"] == len(SLUGS), report.summary()
    assert checked(chat) == []
    assert not any((project / "articles" / f"{slug}.md").exists() for slug in SLUGS)
    state = ArticleState.load(ws.store, ws.article(SLUGS[0]))
    assert state.progress == "writing: 120 chars"


def test_an_answer_that_did_not_grow_since_the_last_look_is_looked_at_on_its_page(project, chat, router):
    # The JSON may say "typing" for ever when the site stopped an answer: only the page shows that.
    ws, engines = setup(project, chat, router, "concurrency = 1\nstable_reads = 2")
    url = url_of(project, SLUGS[0])
    for _ in range(2):
        chat.collected[url] = Generating("writing: 120 chars")
        run_cycle(ws, engines())
    assert checked(chat).count(url) == 1  # the second look, not the first


def test_a_multi_turn_prompt_is_not_collected(project, chat, router):
    ws, engines = setup(project, chat, router)
    add_prompt(project, "talk", "Outline an article on tea.\n=== next turn ===\nWrite it.")
    chat.last_turn_complete.extend([False, False])
    run_cycle(ws, engines())  # sends it
    run_cycle(ws, engines())
    assert [call for call in chat.history if call == ("read_turns", url_of(project, "talk"))]
    assert all(url_of(project, "talk") not in urls for urls in chat.collect_calls)


def test_a_collect_that_fails_leaves_every_chat_to_its_page(project, chat, router):
    ws, engines = setup(project, chat, router)

    def broken(_urls):
        raise TransientError("the chat page timed out", code="timeout")

    chat.collect = broken
    said: list[str] = []
    run_cycle(ws, engines(), say=said.append)
    assert "cycle: looking at each chat's page (the chat page timed out)" in said
    assert sorted(checked(chat)) == sorted(url_of(project, slug) for slug in SLUGS)


def test_each_collected_article_is_written_while_the_collect_goes_on(project, chat, router):
    # The engine reads the other chats while the cycle writes one: nothing waits for the last read.
    ws, engines = setup(project, chat, router)
    urls = [url_of(project, slug) for slug in SLUGS]
    written_before_next: list[bool] = []

    def streaming(chat_urls):
        chat.collect_calls.append(list(chat_urls))
        for n, url in enumerate(urls):
            if n:
                written_before_next.append((project / "articles" / f"{SLUGS[n - 1]}.md").exists())
            yield url, answer()

    chat.collect = streaming
    report = run_cycle(ws, engines())
    assert report.counts["finished"] == len(SLUGS) and checked(chat) == []
    assert written_before_next == [True] * (len(SLUGS) - 1)


def test_a_collect_that_fails_midway_keeps_what_it_wrote_and_leaves_the_rest_to_their_pages(
    project, chat, router
):
    ws, engines = setup(project, chat, router)
    urls = [url_of(project, slug) for slug in SLUGS]

    def breaking(_chat_urls):
        yield urls[0], answer()
        raise TransientError("the chat page timed out", code="timeout")

    chat.collect = breaking
    chat.enqueue_check(*[Generating("thinking")] * 3)
    said: list[str] = []
    report = run_cycle(ws, engines(), say=said.append)
    assert "cycle: looking at each chat's page (the chat page timed out)" in said
    assert report.counts["finished"] == 1 and sorted(checked(chat)) == sorted(urls[1:])
