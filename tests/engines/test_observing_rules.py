"""Observing's rules (engines/qwen/observing.py) on hand-made pages and real chat JSON: when a
look takes an answer, waits, gives up or fails; no browser.

The page's reads (its failure screen, its completion signals, the chat's JSON, its traffic) are
replaced by what a test scripts, built from the real types (DomState, History, StreamRead, the
site's JSON shapes); the clock is the test's, and a page's wait moves it on, so every timing rule
is driven exactly (no sleeping, no timing assertion). Each test holds a line the engine's
mutation run (bench/mutants.py) found held by no test (issue 40, item 5).
"""

from __future__ import annotations

from email.utils import formatdate
from types import SimpleNamespace

import pytest
from fakes import page_state
from test_qwen_api import CHAT_ID, assistant, link, shape_2026_08, user

from pipeline.engines.base import Answer, Code, EmptyAnswer, Generating, HardError, QuotaSpent, TransientError
from pipeline.engines.qwen import observing
from pipeline.engines.qwen.context import EngineContext
from pipeline.engines.qwen.history import History
from pipeline.engines.qwen.observing import (
    PAGE_LOAD_SECONDS,
    PAGE_RELOAD_SECONDS,
    PAGE_SETTLE_SECONDS,
    STREAM_LOOK_SECONDS,
    Observation,
    Observer,
    all_finished,
    read_chat_json,
    stored_as_streamed,
)
from pipeline.engines.qwen.page import ApiUnusable
from pipeline.engines.qwen.selectors import CURRENT, LEGACY
from pipeline.engines.qwen.stream import StreamRead, Unreadable
from pipeline.engines.unknown import Where

SENT = 1_790_000_000  # the site's clock when the prompt was sent (epoch seconds)
TEA = "# Tea\n\nHot water over leaves."


# -- the test's clock and page ------------------------------------------------------------------


class Clock:
    """The engine's clock, in whole milliseconds (sums of waits stay exact)."""

    def __init__(self) -> None:
        self.ms = 1_000_000_000

    def now(self) -> float:
        return self.ms / 1000


class Page:
    """What observing asks of a page itself: its address and its waits (which move the clock)."""

    url = f"http://127.0.0.1:9/c/{CHAT_ID}"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def wait_for_timeout(self, ms: float) -> None:
        self.waits.append(ms)
        self.clock.ms += round(ms)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def page(clock) -> Page:
    return Page(clock)


@pytest.fixture
def ctx(clock) -> EngineContext:
    return EngineContext(
        name="qwen",
        base_url="http://127.0.0.1:9",
        page_timeout=8.0,
        stable_reads=3,
        selector_sets=(CURRENT,),
        now=clock.now,
    )


def chat(answer: str | None = TEA, *, status: str = "finished", error: str | None = None) -> dict:
    """A one-turn chat's JSON as the site stores it (the 2026-08 shape), answered 5 s after the send."""
    messages = [
        user("u1", None, "Write about tea", SENT),
        assistant("a1", "u1", answer, SENT + 5, status=status, error=error),
    ]
    return shape_2026_08(link(messages))


def site_date(seconds_after_send: float) -> str:
    """An HTTP Date header: the site's clock this long after the send."""
    return formatdate(SENT + seconds_after_send, usegmt=True)


# -- watch: the loop over looks -------------------------------------------------------------------


class ScriptedLooks(Observer):
    """An observer whose looks are scripted: `watch`'s own rules, and nothing else, decide."""

    def __init__(self, ctx: EngineContext, *looks: Observation) -> None:
        super().__init__(ctx)
        self.looks = list(looks)
        self.looked = 0

    def observe(self, page, selectors, chat_id, turns_before, *, patient, dom_before=None):
        assert self.looks, f"watch looked again after the {self.looked} looks the test scripted"
        self.looked += 1
        return self.looks.pop(0)


def far(ctx: EngineContext) -> float:
    """A deadline no test reaches: the watch's own rules end it."""
    return ctx.deadline(3600)


def test_a_check_of_an_answer_still_generating_says_so_after_one_look(ctx, page):
    watcher = ScriptedLooks(ctx, Observation("writing: 40 chars"))
    seen = watcher.watch(page, CURRENT, CHAT_ID, deadline=far(ctx))
    assert seen == Generating("writing: 40 chars") and watcher.looked == 1 and page.waits == []


def test_a_watch_whose_deadline_has_come_returns_after_its_look(ctx, page):
    watcher = ScriptedLooks(ctx, Observation("writing: 40 chars"))
    seen = watcher.watch(page, CURRENT, CHAT_ID, deadline=ctx.now(), patient=True)
    assert seen == Generating("writing: 40 chars") and watcher.looked == 1


def catching_up(n: int) -> list[Observation]:
    return [Observation(f"writing: {i} chars", catching_up=True) for i in range(n)]


def test_a_page_that_never_draws_what_the_site_has_is_given_up_after_page_timeout(ctx, page):
    # Looks a second apart: behind at 0 .. 9 s, more than page_timeout (8 s) at the tenth.
    watcher = ScriptedLooks(ctx, *catching_up(10))
    with pytest.raises(TransientError) as raised:
        watcher.watch(page, CURRENT, CHAT_ID, deadline=far(ctx), patient=True)
    assert raised.value.code == Code.PAGE_CHANGED and "qwen.page_timeout" in str(raised.value)
    assert raised.value.unknown.where == Where.CHAT_JSON and page.url in raised.value.unknown.seen
    assert watcher.looked == 10


def test_a_page_behind_for_exactly_page_timeout_is_still_waited_for(ctx, page):
    done = Observation("finishing", TEA, vouched=True)
    watcher = ScriptedLooks(ctx, *catching_up(9), done)  # behind at 0 .. 8 s, drawn at 9 s
    assert watcher.watch(page, CURRENT, CHAT_ID, deadline=far(ctx)) == Answer(TEA, "qwen", extra={})


def test_progress_is_said_once_a_read_interval_at_most_and_then_at_once(ctx, page):
    said: list[str] = []
    looks = [Observation(f"writing: {n} chars") for n in (10, 20, 30)]
    watcher = ScriptedLooks(ctx, *looks)
    deadline = ctx.deadline(2 * ctx.read_interval)
    watcher.watch(page, CURRENT, CHAT_ID, deadline=deadline, on_progress=said.append, patient=True)
    assert said == ["writing: 10 chars", "writing: 20 chars", "writing: 30 chars"]
    assert page.waits == [ctx.read_interval * 1000] * 2  # the looks are a read interval apart


def test_a_page_that_may_still_draw_is_looked_at_only_until_it_had_time_to_settle(ctx, page):
    # No API to ask: a fresh page is given PAGE_SETTLE_SECONDS; at that moment a check says
    # "generating" (looks a second apart: at 0, 1, 2 and 3 s).
    unsure = [Observation("generating", unsure=True) for _ in range(PAGE_SETTLE_SECONDS + 1)]
    watcher = ScriptedLooks(ctx, *unsure)
    assert watcher.watch(page, CURRENT, CHAT_ID, deadline=far(ctx)) == Generating("generating")
    assert watcher.looked == PAGE_SETTLE_SECONDS + 1


def test_reads_of_an_answer_stored_finished_count_while_the_page_catches_up(ctx, page):
    behind = Observation("writing: 5 chars", catching_up=True, settled=TEA, dom_text="# Te")
    drawn = Observation("finishing", TEA, settled=TEA)
    watcher = ScriptedLooks(ctx, behind, behind, drawn)  # stable_reads 3: the third read is steady
    assert watcher.watch(page, CURRENT, CHAT_ID, deadline=far(ctx)).markdown == TEA
    assert watcher.looked == 3


def test_a_page_that_looks_done_while_the_site_never_finishes_is_cut_short(ctx, page):
    stalled = [Observation("generating", stalled=True) for _ in range(3)]  # steady.STALL_READS
    watcher = ScriptedLooks(ctx, *stalled)
    with pytest.raises(TransientError) as raised:
        watcher.watch(page, CURRENT, CHAT_ID, deadline=far(ctx))
    assert raised.value.code == Code.CUT_SHORT and watcher.looked == 3


# -- observe: one look ----------------------------------------------------------------------------


class Site:
    """What one look reads: the page's failure screen, its completion signals, the chat's JSON."""

    def __init__(self) -> None:
        self.failure: Exception | None = None
        self.dom = page_state(answer_text=TEA)
        self.body = chat()
        self.by_page = False
        self.date: str | None = None
        self.json_reads = 0

    def read_chat_json(self, ctx, page, chat_id) -> History:
        self.json_reads += 1
        return History(self.body, self.by_page, date=self.date)


@pytest.fixture
def site(monkeypatch) -> Site:
    site = Site()
    monkeypatch.setattr(observing, "screen_failure", lambda page, selector_sets: site.failure)
    monkeypatch.setattr(observing, "read_dom_state", lambda page, selectors: site.dom)
    monkeypatch.setattr(observing, "read_chat_json", site.read_chat_json)
    return site


def look(ctx, page, *, selectors=CURRENT, turns_before=0, patient=False, dom_before=None) -> Observation:
    return Observer(ctx).observe(
        page, selectors, CHAT_ID, turns_before, patient=patient, dom_before=dom_before
    )


def test_a_look_at_a_failure_screen_raises_it(ctx, page, site):
    site.failure = HardError("not logged in to the chat site", code=Code.LOGGED_OUT)
    with pytest.raises(HardError) as raised:
        look(ctx, page)
    assert raised.value is site.failure and site.json_reads == 0


def test_a_patient_look_leaves_the_json_unread_while_the_page_still_grows_its_answer(ctx, page, site):
    site.dom = page_state(stop_visible=True, answer_text="# Tea\n\nHot")
    growing = look(ctx, page, patient=True, dom_before="# Tea")
    assert growing.markdown is None and growing.dom_text == "# Tea\n\nHot" and site.json_reads == 0
    # The same text as the look before: the page stopped growing, so the site is asked.
    look(ctx, page, patient=True, dom_before="# Tea\n\nHot")
    assert site.json_reads == 1


def test_a_patient_look_at_a_done_page_that_cannot_show_streaming_reads_the_json(ctx, page, site):
    # The older UI has no stop button: a page it draws done is read from the site at once.
    site.dom = page_state(ui="legacy", copy_button=False, answer_text=TEA)
    seen = look(ctx, page, selectors=LEGACY, patient=True)
    assert seen.markdown == TEA and site.json_reads == 1


def test_an_error_the_site_stores_in_the_answer_fails_the_look(ctx, page, site):
    site.body = chat(error="The model is overloaded")
    with pytest.raises(TransientError) as raised:
        look(ctx, page)
    assert raised.value.code == Code.ANSWER_ERROR and "overloaded" in str(raised.value)


def test_a_look_before_the_site_holds_the_next_turn_waits_for_it(ctx, page, site):
    # A second message sent (turns_before 1) that the chat's JSON does not hold yet.
    site.dom = page_state(assistant_turns=1, answer_text=TEA)
    seen = look(ctx, page, turns_before=1)
    assert seen.progress == "waiting for the answer to start"
    assert (seen.markdown, seen.settled, seen.catching_up) == (None, None, False)


def test_a_busy_page_of_an_answer_the_site_stored_finished_is_catching_up(ctx, page, site):
    site.dom = page_state(stop_visible=True, answer_text="# Tea")
    seen = look(ctx, page)
    assert seen.markdown is None and seen.settled == TEA and seen.catching_up


def test_an_answer_the_site_still_writes_is_not_settled(ctx, page, site):
    site.dom = page_state(stop_visible=True, answer_text="# Tea")
    site.body = chat("# Tea\n\nHot", status="typing")
    seen = look(ctx, page)
    assert seen.settled is None and not seen.catching_up  # the page draws what the site has


def test_a_page_that_shows_no_answer_yet_is_behind_an_answer_the_site_writes(ctx, page, site):
    site.dom = page_state(assistant_turns=0, answer_text="", copy_button=False)
    site.body = chat("# Tea\n\nHot", status="typing")
    seen = look(ctx, page)
    assert seen.catching_up and seen.settled is None


def test_an_answer_stored_finished_empty_is_the_sites_empty_answer_once_the_page_stops(ctx, page, site):
    site.body = chat("")
    with pytest.raises(EmptyAnswer):
        look(ctx, page)
    site.dom = page_state(stop_visible=True, answer_text="")
    assert look(ctx, page).catching_up  # still streaming: looked at again


def test_an_answer_the_page_loaded_itself_long_after_it_finished_is_vouched_for(ctx, page, site):
    site.by_page, site.date = True, site_date(60)
    seen = look(ctx, page)
    assert seen.markdown == TEA and seen.vouched
    assert seen.extra == {"source": "api", "chat_id": CHAT_ID, "ui": "current", "read": "page"}


def test_an_answer_read_by_us_is_not_vouched_for_by_the_page(ctx, page, site):
    site.date = site_date(60)
    seen = look(ctx, page)
    assert seen.markdown == TEA and not seen.vouched
    assert seen.extra == {"source": "api", "chat_id": CHAT_ID, "ui": "current"}


def test_a_look_notes_what_nobody_has_reported_in_the_chats_json(ctx, page, site):
    parts = site.body["data"]["chat"]["messages"][1]["content_list"]
    parts.insert(0, {"phase": "dreaming", "content": "...", "status": "finished"})
    assert look(ctx, page).markdown == TEA  # read past: nothing fails for it
    [noticed] = ctx.noticed.take()
    assert noticed.where == Where.CHAT_JSON and "dreaming" in noticed.seen


# -- read_chat_json: the page's own load, or a read of ours -------------------------------------


class Traffic:
    """The page's own loads of the chat's JSON (stream.PageTraffic's part that reading uses)."""

    def __init__(self, *loads: dict, latest: dict | None = None, date: str | None = None, loaded=True):
        self.loads = list(loads)
        self.latest, self.date, self.loaded = latest, date, loaded
        self.asked = 0

    def has_loaded(self, chat_id: str) -> bool:
        return self.loaded

    def has_fresh_load(self, chat_id: str) -> bool:
        self.asked += 1
        assert self.asked < 1000, "asked for the page's load 1000 times without a wait"
        return bool(self.loads)

    def chat_load(self, chat_id: str) -> dict | None:
        if not self.loads:
            return None
        self.latest, self.loads = self.loads[-1], []
        return self.latest

    def latest_load(self, chat_id: str) -> dict | None:
        return self.latest

    def load_date(self, chat_id: str) -> str | None:
        return self.date


class OurReads:
    """The reads of ours (page.fetch_api), answered with `body` or by raising it."""

    def __init__(self, body):
        self.body, self.paths = body, []

    def __call__(self, page, path, *, timeout=30, method="GET"):
        self.paths.append(path)
        if isinstance(self.body, Exception):
            raise self.body
        return self.body


@pytest.fixture
def reads(monkeypatch):
    """(traffic, our reads): set `traffic` to the page's loads; our reads answer a whole chat."""
    state = SimpleNamespace(traffic=Traffic(), ours=OurReads(chat("# Ours")))
    monkeypatch.setattr(observing, "PageTraffic", SimpleNamespace(of=lambda page: state.traffic))
    monkeypatch.setattr(observing, "fetch_api", lambda *a, **kw: state.ours(*a, **kw))
    return state


STALE = {"success": False, "data": {"code": "Bad_Request", "details": "bad request"}}
SPENT = {"success": False, "data": {"code": "RateLimited", "details": "limit", "num": 4}}


def test_a_load_the_page_made_itself_is_read_without_a_read_of_ours(ctx, page, reads):
    reads.traffic = Traffic(chat(), date=site_date(9))
    got = read_chat_json(ctx, page, CHAT_ID)
    assert got.body == chat() and got.by_page and got.date == site_date(9) and reads.ours.paths == []


def test_a_load_the_site_refused_as_stale_is_read_again_by_us(ctx, page, reads):
    reads.traffic = Traffic(STALE)
    got = read_chat_json(ctx, page, CHAT_ID)
    assert got.body == chat("# Ours") and not got.by_page
    assert reads.ours.paths == [f"/api/v2/chats/{CHAT_ID}"]


def test_a_load_the_site_answered_with_another_failure_is_that_failure(ctx, page, reads):
    reads.traffic = Traffic(SPENT)
    with pytest.raises(QuotaSpent):
        read_chat_json(ctx, page, CHAT_ID)
    assert reads.ours.paths == []


def test_no_new_load_but_the_last_one_finished_long_before_is_what_the_page_draws(ctx, page, reads):
    reads.traffic = Traffic(latest=chat(), date=site_date(60))
    got = read_chat_json(ctx, page, CHAT_ID)
    assert got.body == chat() and got.by_page and got.date == site_date(60)
    assert reads.ours.paths == []


def test_no_new_load_and_the_last_one_another_chats_is_read_again_by_us(ctx, page, reads):
    # Fuzz seed 2800 trial 140: the page's load answered with another chat's JSON (finished long
    # ago), then the page replaced: each look took that load again, never read, never ended.
    other = chat()
    other["data"]["id"] = "another-chat"
    reads.traffic = Traffic(latest=other, date=site_date(60))
    got = read_chat_json(ctx, page, CHAT_ID)
    assert got.body == chat("# Ours") and not got.by_page and len(reads.ours.paths) == 1
    assert not all_finished(other, site_date(60), stable_reads=3, chat_id=CHAT_ID)
    assert all_finished(other, site_date(60), stable_reads=3)  # a load of its own chat: still finished


def test_no_new_load_and_the_last_one_still_writing_is_read_again_by_us(ctx, page, reads):
    reads.traffic = Traffic(latest=chat("# Te", status="typing"), date=site_date(60))
    got = read_chat_json(ctx, page, CHAT_ID)
    assert got.body == chat("# Ours") and not got.by_page and len(reads.ours.paths) == 1


@pytest.mark.parametrize(
    ("loaded", "waited"), [(False, PAGE_LOAD_SECONDS), (True, PAGE_RELOAD_SECONDS)], ids=["first", "later"]
)
def test_a_look_gives_the_page_its_moment_to_load_the_chat_then_reads_itself(
    ctx, page, reads, loaded, waited
):
    reads.traffic = Traffic(loaded=loaded)
    read_chat_json(ctx, page, CHAT_ID)
    assert sum(page.waits) == waited * 1000 and len(reads.ours.paths) == 1


# -- all_finished: a page's last load that needs no read of ours ------------------------------------


def test_a_load_counts_as_all_finished_only_when_every_answer_was_stored_finished_long_before():
    assert all_finished(chat(), site_date(60), stable_reads=3)
    assert not all_finished(chat(), site_date(6), stable_reads=3)  # finished 1 s before: read again
    assert not all_finished(chat("# Te", status="typing"), site_date(60), stable_reads=3)
    assert not all_finished(None, site_date(60), stable_reads=3)
    assert not all_finished(SPENT, site_date(60), stable_reads=3)


def test_a_load_the_site_answered_as_a_failure_is_never_all_finished_whatever_it_holds():
    # The failure decides, not whether the rest happens to read as a chat.
    refused = {"success": False, "data": {**chat()["data"], "code": "RateLimited", "num": 4}}
    assert not all_finished(refused, site_date(60), stable_reads=3)


def test_an_answer_that_stores_no_status_is_never_all_finished():
    # Without a stored status only the page's signals and the stability reads can tell.
    unstated = chat()
    del unstated["data"]["chat"]["messages"][1]["content_list"][-1]["status"]
    assert not all_finished(unstated, site_date(60), stable_reads=3)


# -- wait_for_stream: the sending page's own stream -------------------------------------------------


class Streams:
    """The page's completion stream as it is asked for, look by look (None: still running)."""

    def __init__(self, *reads) -> None:
        self.reads = list(reads)
        self.asked = 0

    def stream(self):
        self.asked += 1
        return self.reads.pop(0) if self.reads else None


class StreamPage:
    """What a wait on the sending page reads: its screen, its drawing, our one read of the chat."""

    def __init__(self, monkeypatch, *reads) -> None:
        self.failure: Exception | None = None
        self.doms = [page_state(stop_visible=True, answer_text="")]
        self.traffic = Streams(*reads)
        self.ours = OurReads(chat())
        monkeypatch.setattr(observing, "screen_failure", lambda page, selector_sets: self.failure)
        monkeypatch.setattr(observing, "read_dom_state", lambda page, selectors: self.dom())
        monkeypatch.setattr(observing, "fetch_api", lambda *a, **kw: self.ours(*a, **kw))

    def dom(self):
        return self.doms.pop(0) if len(self.doms) > 1 else self.doms[0]


def live(page) -> SimpleNamespace:
    """The page a send left open (pages.Live), its traffic the test's."""
    return SimpleNamespace(chat_id=CHAT_ID, page=page, selectors=CURRENT, traffic=page.traffic)


def finished(answer: str = TEA, *, model: str | None = "qwen3-max", unknown: str = "") -> StreamRead:
    return StreamRead(answer, True, None, model, unknown)


def wait_stream(ctx, page, stream_page, *, seconds=60.0, on_progress=None):
    page.traffic = stream_page.traffic
    return Observer(ctx).wait_for_stream(page, live(page), ctx.deadline(seconds), on_progress)


def test_a_finished_stream_the_site_stores_word_for_word_is_the_answer(ctx, page, monkeypatch):
    stream_page = StreamPage(monkeypatch, finished(TEA.replace("\n\n", "\n\n ")))  # spaces aside
    got = wait_stream(ctx, page, stream_page)
    assert got == Answer(
        TEA.replace("\n\n", "\n\n "),
        "qwen",
        model="qwen3-max",
        extra={"source": "stream", "chat_id": CHAT_ID, "ui": "current"},
    )
    assert stream_page.ours.paths == [f"/api/v2/chats/{CHAT_ID}"]


@pytest.mark.parametrize(
    "stored",
    [chat(TEA + " Hot water over leaves."), chat(TEA, status="typing"), ApiUnusable("not JSON")],
    ids=["other-words", "not-finished", "unreadable"],
)
def test_a_stream_the_site_does_not_store_as_streamed_leaves_it_to_the_chats_page(
    ctx, page, monkeypatch, stored
):
    # A frame sent twice writes its words twice in the stream: the stored answer decides.
    stream_page = StreamPage(monkeypatch, finished())
    stream_page.ours = OurReads(stored)
    assert wait_stream(ctx, page, stream_page) is None


def test_stored_as_streamed_compares_the_last_turn_as_the_site_stores_it(page, monkeypatch):
    ours = OurReads(chat())
    monkeypatch.setattr(observing, "fetch_api", ours)
    assert stored_as_streamed(page, CHAT_ID, TEA, 8.0)
    assert not stored_as_streamed(page, CHAT_ID, TEA + " twice", 8.0)
    ours.body = chat(TEA, status="typing")
    assert not stored_as_streamed(page, CHAT_ID, TEA, 8.0)


@pytest.mark.parametrize("read", [finished(""), finished(model=None)], ids=["empty", "no-model"])
def test_a_stream_that_cannot_say_all_is_left_to_the_chats_page_unread(ctx, page, monkeypatch, read):
    stream_page = StreamPage(monkeypatch, read)
    assert wait_stream(ctx, page, stream_page) is None
    assert stream_page.ours.paths == []  # not even asked: the chat's page reads it anyway


def test_an_error_in_the_stream_fails_the_wait(ctx, page, monkeypatch):
    stream_page = StreamPage(monkeypatch, StreamRead("", False, "The model is overloaded", None))
    with pytest.raises(TransientError) as raised:
        wait_stream(ctx, page, stream_page)
    assert raised.value.code == Code.ANSWER_ERROR and "overloaded" in str(raised.value)


def test_a_stream_that_ends_unfinished_is_cut_short_and_says_what_it_met(ctx, page, monkeypatch):
    with pytest.raises(TransientError) as raised:
        wait_stream(ctx, page, StreamPage(monkeypatch, StreamRead("# Tea", False, None, None)))
    assert raised.value.code == Code.CUT_SHORT and getattr(raised.value, "unknown", None) is None
    odd = StreamRead("# Tea", False, None, None, "phase 'dreaming'")
    with pytest.raises(TransientError) as raised:
        wait_stream(ctx, page, StreamPage(monkeypatch, odd))
    assert raised.value.code == Code.CUT_SHORT
    assert raised.value.unknown.where == Where.STREAM and "dreaming" in raised.value.unknown.seen


def test_a_finished_stream_notes_what_nobody_has_reported(ctx, page, monkeypatch):
    wait_stream(ctx, page, StreamPage(monkeypatch, finished(unknown="phase 'dreaming'")))
    [noticed] = ctx.noticed.take()
    assert noticed.where == Where.STREAM and "dreaming" in noticed.seen


def test_a_stream_the_browser_cannot_hand_over_ends_the_wait_at_once(ctx, page, monkeypatch):
    stream_page = StreamPage(monkeypatch, Unreadable("no DevTools here"))
    assert wait_stream(ctx, page, stream_page) is None
    assert page.waits == [] and stream_page.traffic.asked == 1


def test_a_page_no_longer_the_app_ends_the_wait_at_once(ctx, page, monkeypatch):
    stream_page = StreamPage(monkeypatch)
    stream_page.doms = [page_state(composer=False, assistant_turns=0, answer_text="")]
    assert wait_stream(ctx, page, stream_page) is None
    assert page.waits == [] and stream_page.traffic.asked == 1


def test_a_failure_screen_on_the_sending_page_is_raised(ctx, page, monkeypatch):
    stream_page = StreamPage(monkeypatch, finished())
    stream_page.failure = HardError("the site asks for a human verification", code=Code.BOT_CHECK)
    with pytest.raises(HardError) as raised:
        wait_stream(ctx, page, stream_page)
    assert raised.value is stream_page.failure and stream_page.traffic.asked == 0


def test_a_wait_whose_deadline_has_come_does_not_look(ctx, page, monkeypatch):
    stream_page = StreamPage(monkeypatch, finished())
    assert wait_stream(ctx, page, stream_page, seconds=0) is None
    assert stream_page.traffic.asked == 0


def test_a_wait_on_a_running_stream_looks_often_and_says_progress_once_a_read_interval(
    ctx, page, monkeypatch
):
    looks = round(ctx.read_interval / STREAM_LOOK_SECONDS)  # 10 looks span one read interval
    stream_page = StreamPage(monkeypatch, *[None] * (looks + 1), finished())
    stream_page.doms = [page_state(stop_visible=True, answer_text="x" * n) for n in range(1, looks + 3)]
    said: list[str] = []
    assert wait_stream(ctx, page, stream_page, on_progress=said.append) is not None
    assert page.waits == [STREAM_LOOK_SECONDS * 1000] * (looks + 1)
    assert said == ["writing: 1 chars", f"writing: {looks + 1} chars"]
