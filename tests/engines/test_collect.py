"""The JSON-first collector's pacing and decisions, on a fake page and a fake clock (no browser)."""

from __future__ import annotations

import json
from email.utils import formatdate

import pytest

from pipeline.engines.base import Answer, Generating
from pipeline.engines.qwen.collect import API_STABLE_SECONDS, UNSTEADY_READS, ChatCollector, Pacer
from pipeline.engines.qwen.steady import settled_after

BASE = "https://chat.qwen.ai"
ARTICLE = "# Tea\n\nTea is a drink made from leaves.\n"


class Clock:
    """Time that moves only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


def chat_id(n: int) -> str:
    return f"{n:08d}-0000-4000-8000-000000000000"


def url(n: int) -> str:
    return f"{BASE}/c/{chat_id(n)}"


def body(
    answer: str | None = ARTICLE,
    *,
    status: str | None = "finished",
    done: bool | None = True,
    updated_at: int | None = None,
) -> dict:
    """A 2026-08 chat: one prompt and its answer with the stored status given (None: absent),
    sent at 2_000_000_000 by the site's clock and last changed at `updated_at` (None: not said)."""
    reply = {
        "id": "a1",
        "role": "assistant",
        "parentId": "u1",
        "timestamp": 2_000_000_001,
        "model": "qwen3.7-plus",
    }
    if done is not None:
        reply["done"] = done
    if answer is not None:
        part = {"phase": "answer", "content": answer}
        if status is not None:
            part["status"] = status
        reply["content_list"] = [part]
    messages = [
        {"id": "u1", "role": "user", "parentId": None, "timestamp": 2_000_000_000, "content": "Tea?"},
        reply,
    ]
    data = {"title": "Tea", "chat": {"messages": messages}}
    if updated_at is not None:
        data["updated_at"] = updated_at
    return {"success": True, "data": data}


class FakeRequest:
    def __init__(self, url: str, headers: dict):
        self.url, self.headers = url, headers


class FakePage:
    """Answers the collector's in-page fetches from a script: chat id -> bodies, one a read (the
    last repeats); logs (time, chat id) of every read. A batch of reads starts at once (the page
    reads it from its start on) and is handed over when asked for, the clock then past its reads."""

    def __init__(self, clock: Clock, script: dict[str, list]):
        self.clock, self.script = clock, script
        self.log: list[tuple[float, str]] = []
        self.batches: dict[str, tuple[list, float]] = {}
        self.most_under_way = 0
        self.under_way_at_handover: list[int] = []  # batches started, not handed over, at each
        self.headers_sent: list[dict] = []

    def on(self, event: str, handler) -> None:
        """The page's own first API call, as it loads: the headers its reads learn."""
        if event == "request":
            handler(FakeRequest(f"{BASE}/api/v2/chats/?page=1", {"source": "web", "version": "9.9.9"}))

    def evaluate(self, _script: str, arg):
        if isinstance(arg, str):  # hand over what a batch read
            self.under_way_at_handover.append(len(self.batches))
            results, last = self.batches.pop(arg)
            self.clock.now = max(self.clock.now, last)  # the caller waited for its last read
            return results
        results, when = [], self.clock()
        self.headers_sent += arg["headers"]
        for i, path in enumerate(arg["paths"]):
            ident = path.rsplit("/", 1)[1]
            when = self.clock() + (arg["delay"] + i * arg["gap"]) / 1000  # the page spaces them
            self.log.append((when, ident))
            bodies = self.script[ident]
            results.append(bodies.pop(0) if len(bodies) > 1 else bodies[0])
        self.batches[arg["key"]] = (results, when)
        self.most_under_way = max(self.most_under_way, len(self.batches))
        return arg["key"]


class collector:  # noqa: N801 (reads as the function it stands for)
    """A collector on the fake page and clock, its results as a dict (`collect`)."""

    def __init__(self, page: FakePage, clock: Clock, *, per_second: float = 10, stable_reads: int = 3):
        self.of = ChatCollector(page, stable_reads=stable_reads, reads_per_second=per_second, clock=clock)

    def collect(self, urls: list[str]) -> dict:
        return dict(self.of.collect(urls))


def ok(b: dict) -> dict:
    return {"json_text": json.dumps(b)}


def test_reads_are_paced_at_most_api_reads_per_second():
    clock = Clock()
    page = FakePage(clock, {chat_id(n): [ok(body())] for n in range(20)})
    results = collector(page, clock, per_second=10).collect([url(n) for n in range(20)])
    assert all(isinstance(r, Answer) and r.markdown == ARTICLE for r in results.values())
    assert len(results) == 20 and len(page.log) == 20 * 3  # every chat: stable_reads reads
    times = [t for t, _ in page.log]
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) == pytest.approx(0.1)
    # Idle only at the end, where too few chats are left to fill the pace between their reads.
    assert times[-1] - times[0] <= 0.1 * (len(times) - 1) + API_STABLE_SECONDS


def test_pacer_books_reads_later_only_when_they_come_faster_than_the_pace():
    clock = Clock()
    pacer = Pacer(4, clock=clock)
    assert pacer.reserve(2) == 100.0  # two reads: at 100.0 and 100.25
    clock.now += 1.0  # the caller took longer than those slots itself
    assert pacer.reserve(1) == 101.0
    assert pacer.reserve(1) == 101.25  # the page waits for it
    assert pacer.reserve(1, not_before=103.0) == 103.0  # a chat's own spacing may ask for later


@pytest.mark.parametrize("rate", [0, -1, float("nan")])
def test_a_pacer_without_a_positive_rate_is_refused_naming_it(rate):
    # The config allows 1 to 1000; a caller that passed 0 would divide by it, and a negative or
    # NaN rate would book every read at once: the burst the pacer is there to prevent.
    with pytest.raises(ValueError, match="more than 0") as refused:
        Pacer(rate)
    assert repr(rate) in str(refused.value)


def test_the_collector_counts_every_read_it_starts():
    clock = Clock()
    page = FakePage(clock, {chat_id(n): [ok(body())] for n in range(5)})
    of = ChatCollector(page, stable_reads=3, reads_per_second=10, clock=clock)
    assert len(dict(of.collect([url(n) for n in range(5)]))) == 5
    assert of.reads == len(page.log) == 15


def test_two_reads_of_one_chat_are_at_least_api_stable_seconds_apart():
    clock = Clock()
    page = FakePage(clock, {chat_id(1): [ok(body())]})
    results = collector(page, clock, per_second=1000).collect([url(1)])
    assert isinstance(results[url(1)], Answer)
    times = [t for t, _ in page.log]
    assert [round(b - a, 6) for a, b in zip(times, times[1:], strict=False)] == [API_STABLE_SECONDS] * 2


def test_a_finished_status_counts_only_with_the_text_unchanged_over_stable_reads():
    clock = Clock()
    growing = [ok(body("# Tea\n\nTea")), ok(body(ARTICLE)), ok(body(ARTICLE)), ok(body(ARTICLE))]
    page = FakePage(clock, {chat_id(1): growing})
    results = collector(page, clock).collect([url(1)])
    assert results[url(1)].markdown == ARTICLE
    assert len(page.log) == 4  # the changed read started the count again


def test_finished_text_that_keeps_changing_is_left_to_the_page():
    clock = Clock()
    page = FakePage(clock, {chat_id(1): [ok(body("word " * n)) for n in range(1, 20)]})
    assert collector(page, clock).collect([url(1)]) == {}
    assert len(page.log) == 3 + UNSTEADY_READS


@pytest.mark.parametrize(
    "stored",
    [
        pytest.param({"status": "typing", "done": False}, id="typing"),
        pytest.param({"status": "finished", "done": False}, id="done-false"),
    ],
)
def test_an_unfinished_status_is_generating_after_one_read(stored):
    clock = Clock()
    page = FakePage(clock, {chat_id(1): [ok(body("# Tea\n\nTea is", **stored))]})
    assert collector(page, clock).collect([url(1)]) == {url(1): Generating("writing: 13 chars")}
    assert len(page.log) == 1


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(ok(body(status=None, done=None)), id="no-stored-status"),
        pytest.param(ok({"success": False, "data": {"code": "Internal_Error"}}), id="error-body"),
        pytest.param(ok({"success": False, "data": {"code": "CHAT_NOT_FOUND"}}), id="chat-not-found"),
        pytest.param(ok({"success": True, "data": {"conversation": {}}}), id="unknown-shape"),
        pytest.param(ok(body("   ")), id="finished-but-empty"),
        pytest.param({"error": "TypeError: Failed to fetch"}, id="fetch-failed"),
        # The site says the read failed, with a code nobody knows, yet the chat is in the body:
        # what a failed read carries is never the answer.
        pytest.param(
            ok({"success": False, "data": {**body()["data"], "code": "Some_New_Code", "details": "x"}}),
            id="failed-read-carrying-a-chat",
        ),
    ],
)
def test_what_the_json_cannot_decide_is_left_to_the_page(reply):
    clock = Clock()
    page = FakePage(clock, {chat_id(1): [reply], chat_id(2): [ok(body())]})
    results = collector(page, clock).collect([url(1), url(2)])
    assert list(results) == [url(2)]  # the other chat is still collected
    assert [ident for _, ident in page.log].count(chat_id(1)) == 1


def test_a_chat_that_shows_no_message_yet_is_generating():
    clock = Clock()
    empty = {"success": True, "data": {"title": "New Chat", "chat": {"messages": []}}}
    page = FakePage(clock, {chat_id(1): [ok(empty)]})
    assert collector(page, clock).collect([url(1)]) == {
        url(1): Generating("waiting for the chat to show the message")
    }


def test_a_firewall_page_met_in_the_first_batch_decides_nothing_read_after_it_and_reads_no_more():
    # Two batches are read at once (three chats each). The firewall answers chat 2: the chat read
    # before it is decided; the rest, the second batch's finished answers included, go to their
    # pages, and no read starts after the refusal was seen (more reads are what a firewall counts).
    clock = Clock()
    waf = {"text": "<html><meta name='aliyun_waf_aa'></html>", "status": 200}
    page = FakePage(clock, {chat_id(n): [ok(body())] for n in range(1, 7)})
    page.script[chat_id(1)] = [ok(body("# Tea", status="typing"))]
    page.script[chat_id(2)] = [waf]
    results = collector(page, clock).collect([url(n) for n in range(1, 7)])
    assert results == {url(1): Generating("writing: 5 chars")}
    assert [ident for _, ident in page.log] == [chat_id(n) for n in range(1, 7)]


def test_a_firewall_page_on_a_read_leaves_that_chat_and_the_rest_to_their_pages():
    clock = Clock()
    waf = {"text": "<html><meta name='aliyun_waf_aa'></html>", "status": 200}
    page = FakePage(clock, {chat_id(1): [ok(body("# Tea", status="typing"))], chat_id(2): [waf]})
    page.script[chat_id(3)] = [ok(body())]
    results = collector(page, clock).collect([url(1), url(2), url(3)])
    assert results == {url(1): Generating("writing: 5 chars")}  # read before the refusal
    assert [ident for _, ident in page.log] == [chat_id(1), chat_id(2), chat_id(3)]  # one round


def test_an_answer_from_the_json_says_where_it_came_from():
    clock = Clock()
    page = FakePage(clock, {chat_id(1): [ok(body())]})
    answer = collector(page, clock, stable_reads=1).collect([url(1)])[url(1)]
    assert (answer.title, answer.model, answer.extra["source"]) == ("Tea", "qwen3.7-plus", "api")


def test_the_next_reads_are_under_way_while_the_caller_handles_a_decided_chat():
    # A cycle writes each collected article while the page reads the next chats: the writing
    # hides behind the reads' pacing instead of coming after all of them.
    clock = Clock()
    page = FakePage(clock, {chat_id(n): [ok(body())] for n in range(12)})
    reads = ChatCollector(page, stable_reads=3, reads_per_second=10, clock=clock).collect(
        [url(n) for n in range(12)]
    )
    first, _answer = next(reads)
    assert first == url(0) and len(page.batches) >= 1  # the next batch is being read meanwhile
    assert page.under_way_at_handover[0] == 2  # and it was already under way as the first was handed over
    rest = dict(reads)
    assert len(rest) == 11 and page.most_under_way == 2  # never more than two batches ahead
    times = [t for t, _ in page.log]
    assert times[-1] - times[0] == pytest.approx(0.1 * (len(times) - 1))  # no idle slot either


def test_every_read_carries_the_pages_own_headers_with_a_request_id_of_its_own():
    clock = Clock()
    page = FakePage(clock, {chat_id(n): [ok(body())] for n in (1, 2, 3)})
    collector(page, clock, per_second=1000).collect([url(1), url(2), url(3)])
    assert page.headers_sent and all(
        h["version"] == "9.9.9" and h["source"] == "web" for h in page.headers_sent
    )
    ids = [h["x-request-id"] for h in page.headers_sent]
    assert len(set(ids)) == len(ids)


def read_at(b: dict, site_now: float) -> dict:
    """A read's outcome with the Date header the site answered it with."""
    return {**ok(b), "date": formatdate(site_now, usegmt=True)}


def test_chats_the_site_stored_finished_long_ago_are_read_once_each_and_side_by_side():
    clock = Clock()
    old = body(updated_at=2_000_000_030)  # finished half a minute after the send
    site_now = 2_000_000_030 + settled_after(3)
    page = FakePage(clock, {chat_id(n): [read_at(old, site_now)] for n in range(20)})
    results = collector(page, clock, per_second=10).collect([url(n) for n in range(20)])
    assert all(isinstance(r, Answer) and r.markdown == ARTICLE for r in results.values())
    assert sorted(ident for _, ident in page.log) == sorted(chat_id(n) for n in range(20))  # once each
    times = [t for t, _ in page.log]
    assert times[-1] - times[0] == pytest.approx(0.1 * 19)  # at the pace, no slot left idle


@pytest.mark.parametrize(
    ("updated_at", "date"),
    [
        pytest.param(2_000_000_030, 2_000_000_031, id="changed-a-second-ago"),
        pytest.param(2_000_000_030, None, id="no-date-header"),
        pytest.param(2_000_000_030, 2_000_000_034, id="changed-four-seconds-ago"),
        pytest.param(2_000_000_900, 2_000_000_600, id="stamped-in-the-future"),
    ],
)
def test_a_finished_answer_not_known_to_be_old_still_needs_the_stability_reads(updated_at, date):
    clock = Clock()
    read = ok(body(updated_at=updated_at)) if date is None else read_at(body(updated_at=updated_at), date)
    page = FakePage(clock, {chat_id(1): [read]})
    assert isinstance(collector(page, clock).collect([url(1)])[url(1)], Answer)
    assert len(page.log) == 3  # stable_reads reads, as ever


def test_text_that_moves_under_a_finished_status_is_never_taken_from_one_read():
    # The site says "finished", but stamps the chat as it stores each new word: its text moves.
    clock = Clock()
    moving = [
        read_at(body("word " * n, updated_at=2_000_000_100 + n), 2_000_000_100 + n) for n in range(1, 20)
    ]
    page = FakePage(clock, {chat_id(1): moving})
    assert collector(page, clock).collect([url(1)]) == {}  # left to its page
    assert len(page.log) == 3 + UNSTEADY_READS
