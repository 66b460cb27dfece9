"""The rules of judging.py and sending.py, on fakes built from the real types (no browser).

Each test holds a line the engine's mutation run (bench/mutants.py, issue 40) found no test
holding: a page's signals and a chat's JSON judged as turns (judge_turns, last_turn_busy), the
reads of a whole chat (TurnsReader), and the send's proofs and refusals (sending.py). The clock
is the test's own (EngineContext.now), moved only by the fake page's pauses: every bound is
checked exactly, and a loop that forgets to pause or to stop fails on the fake's guard instead of
hanging. The pages are fakes that answer the engine's page scripts (page.py) with what a real
page would; the chat bodies are the simulator's own shapes (pipeline/simulator/shapes.py).
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict

import pytest
from fakes import page_state

from pipeline.engines.base import Code, EngineError, HardError, TransientError, TurnState
from pipeline.engines.qwen import page as page_module
from pipeline.engines.qwen.api import ChatView, Turn
from pipeline.engines.qwen.context import POLL_SECONDS, EngineContext
from pipeline.engines.qwen.hold import CompletionHold
from pipeline.engines.qwen.judging import (
    CONFIRMED_SECONDS,
    TurnsReader,
    TurnsSeen,
    judge_turns,
    last_turn_busy,
)
from pipeline.engines.qwen.page import FAILURE_TEXTS, SendReplies
from pipeline.engines.qwen.pages import errors_as_engine_errors
from pipeline.engines.qwen.refusals import BUSY_PAUSE_SECONDS
from pipeline.engines.qwen.selectors import CURRENT
from pipeline.engines.qwen.sending import (
    REPLY_GRACE_SECONDS,
    Submit,
    clicker,
    plain_refusal,
    replies_to_send,
    same_text,
    sent_failure,
    wait_for_chat_id,
    wait_for_user_turn,
)
from pipeline.engines.qwen.steady import STALL_READS
from pipeline.simulator.chats import BOT_BODY, IN_PROGRESS_BODY, QUOTA_BODY
from pipeline.simulator.shapes import chat_body

BASE = "http://127.0.0.1:9"
CHAT_ID = "0f8e2b6a-1c3d-4e5f-9a7b-123456789abc"
COMPLETION = f"{BASE}/api/v2/chat/completions?chat_id={CHAT_ID}"
LOOKS = 60  # more looks than any test needs: a loop that never stops fails here


class Clock:
    """The engine's clock in a test: it moves only when the page pauses."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


def context(clock: Clock, *, page_timeout: float = 1.0, stable_reads: int = 2) -> EngineContext:
    return EngineContext(
        name="qwen",
        base_url=BASE,
        page_timeout=page_timeout,
        stable_reads=stable_reads,
        selector_sets=(CURRENT,),
        now=clock.now,
    )


# -- a fake page: Playwright's events and the engine's page scripts, answered as a page would ---


class Response:
    def __init__(self, body: dict, headers: dict | None = None):
        self.body, self.headers = body, {"content-type": "application/json", **(headers or {})}

    def json(self) -> dict:
        return self.body


class Request:
    def __init__(self, method: str, url: str, body: dict):
        self.method, self.url, self.headers, self._response = method, url, {}, Response(body)

    def response(self) -> Response:
        return self._response


class Route:
    """The page's completion request, as a CompletionHold's route handler gets it."""

    def __init__(self) -> None:
        self.request = Request("POST", COMPLETION, {})
        self.request.post_data = "{}"
        self.ended = ""

    def abort(self) -> None:
        self.ended = "aborted"

    def continue_(self) -> None:
        self.ended = "continued"


class CDP:
    """A DevTools session of the page: its events are the test's to give."""

    def __init__(self) -> None:
        self.handlers: dict[str, list] = {}
        self.buffered: dict[str, bytes] = {}

    def on(self, event: str, handler) -> None:
        self.handlers.setdefault(event, []).append(handler)

    def send(self, method: str, params: dict | None = None) -> dict:
        if method == "Network.streamResourceContent":
            return {"bufferedData": base64.b64encode(self.buffered[params["requestId"]]).decode()}
        return {}

    def emit(self, event: str, data: dict) -> None:
        for handler in self.handlers.get(event, []):
            handler(data)


class Context:
    def __init__(self) -> None:
        self.cdp = CDP()

    def new_cdp_session(self, _page) -> CDP:
        return self.cdp


class Locator:
    def __init__(self, page: FakePage, selector: str):
        self.page, self.selector = page, selector

    @property
    def first(self) -> Locator:
        return self

    def click(self) -> None:
        self.page.events.append("click")


class FakePage:
    """A page of the app: `screen` is what the failure-screen script reads, `dom` the
    completion signals, `url` its address. `on_look` runs at each look (Playwright delivers
    events while the engine calls into the page); `on_pause` at each pause."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.url = f"{BASE}/"
        self.screen: dict = {}
        self.dom = page_state()
        self.listeners: dict[str, list] = {}
        self.events: list[str] = []  # "click", "wait S"
        self.looks: list[float] = []  # when the failure screen was read
        self.context = Context()
        self.on_look = lambda: None
        self.on_pause = lambda: None

    def on(self, event: str, handler) -> None:
        self.listeners.setdefault(event, []).append(handler)

    def remove_listener(self, event: str, handler) -> None:
        self.listeners[event].remove(handler)

    def emit(self, event: str, data) -> None:
        for handler in list(self.listeners.get(event, [])):
            handler(data)

    def wait_for_timeout(self, ms: float) -> None:
        self.clock.t += ms / 1000
        self.events.append(f"wait {ms / 1000:g}")
        self.on_pause()

    def locator(self, selector: str) -> Locator:
        return Locator(self, selector)

    def evaluate(self, script: str, arg=None):
        if script == page_module._SCREEN_JS:
            self.looks.append(self.clock.t)
            assert len(self.looks) <= LOOKS, "the page was looked at again and again: a loop that never stops"
            self.on_look()
            return {"url": self.url, "title": "", "text": "", **self.screen}
        if script == page_module._DOM_STATE_JS:
            return {k: v for k, v in asdict(self.dom).items() if k != "ui"}
        if script == page_module._PRESENT_JS:
            return [True for _ in arg]
        raise AssertionError(f"a page script the fake does not know: {script[:60]!r}")


class Replies(SendReplies):
    """SendReplies, counting its reads: a poll that never pauses fails here instead of spinning."""

    reads = 0

    def failure(self) -> EngineError | None:
        self.reads += 1
        assert self.reads <= LOOKS, "the send's replies were read again and again without a pause"
        return super().failure()


def reply(page: FakePage, body: dict) -> None:
    """The site's JSON reply to the page's completion request arrives."""
    page.emit("requestfinished", Request("POST", COMPLETION, body))


# -- the chat's JSON in the simulator's shape -------------------------------------------------


def message(mid: str, role: str, parent: str | None, text: str, *, finished: bool = True) -> dict:
    return {
        "id": mid,
        "role": role,
        "parent_id": parent,
        "timestamp": 1_790_000_000,
        "model": "qwen3-max",
        "content": text,
        "done": finished,
        "answer": text,
        "error": None,
        "thinking_enabled": False,
        "thinking": "",
        "thinking_done": True,
        "answer_started": True,
        "finished": finished,
    }


def body_of(*turns: tuple[str, str]) -> dict:
    """A chat's JSON (2026-08 shape) with these (message, answer) turns, each finished."""
    messages, parent = [], None
    for n, (text, answer) in enumerate(turns, 1):
        messages.append(message(f"u{n}", "user", parent, text))
        messages.append(message(f"a{n}", "assistant", f"u{n}", answer))
        parent = f"a{n}"
    view = {"id": CHAT_ID, "title": "Tea", "created_at": 1_790_000_000, "updated_at": 1_790_000_000}
    return chat_body({**view, "messages": messages}, "2026-08")


def page_loads(page: FakePage, body: dict) -> None:
    """The page loads the chat's JSON itself (what a chat's page does as it opens)."""
    from pipeline.engines.qwen.stream import PageTraffic

    PageTraffic.of(page)  # watching the page from its first request, as pages.py does
    page.emit("requestfinished", Request("GET", f"{BASE}/api/v2/chats/{CHAT_ID}", body))


# == judging.py ===============================================================================


def dom(assistant_turns: int, user_turns: int | None = None, **changes):
    """The page drawing `assistant_turns` answers (the last one done: a copy button, send idle)."""
    users = assistant_turns if user_turns is None else user_turns
    return page_state(assistant_turns=assistant_turns, user_turns=users, **changes)


def view(*turns: Turn) -> ChatView:
    return ChatView(chat_id=CHAT_ID, title="Tea Notes", turns=list(turns), model="qwen3-max")


OLD = Turn("one", "# Old\n\nThe first answer.", True, None)
NOT_STARTED = Turn("two", "", False, None)
FINISHED = Turn("two", "# New\n\nThe second answer.", True, None)


def test_a_chat_without_turns_yet_is_waiting_for_its_message():
    seen = judge_turns(dom(0), view(), CURRENT)
    assert seen.turns == [] and seen.candidate is None
    assert seen.progress == "waiting for the chat to show the message"


def test_the_last_turn_is_never_complete_by_the_json_alone():
    # Finished in the JSON, idle on the page: a candidate, but the turn itself stays incomplete
    # until the stability reads (TurnsReader.read) make it so.
    seen = judge_turns(dom(2), view(OLD, FINISHED), CURRENT)
    assert seen.candidate == FINISHED.answer
    assert [t.complete for t in seen.turns] == [True, False]


def test_a_thinking_panel_counts_only_on_the_last_turns_own_answer():
    # The page still draws only turn 1 (its thinking panel open): turn 2 has not started.
    seen = judge_turns(dom(1, 2, thinking_visible=True), view(OLD, NOT_STARTED), CURRENT)
    assert seen.progress == "waiting for the answer to start"
    # The page draws turn 2's answer, busy, with its thinking panel: thinking.
    busy = dom(2, stop_visible=True, thinking_visible=True, answer_text="x")
    assert judge_turns(busy, view(OLD, NOT_STARTED), CURRENT).progress == "thinking"
    # An idle page with a thinking panel (answer drawn, nothing to skip) is not busy thinking.
    idle = dom(2, thinking_visible=True, skip_visible=False, answer_present=True)
    seen = judge_turns(idle, view(OLD, NOT_STARTED), CURRENT)
    assert seen.progress == "waiting for the answer to start" and seen.stalled


def test_a_turn_not_started_says_why_the_page_is_busy():
    # The page draws a turn more than the site has: the page's reason, not a guess.
    seen = judge_turns(dom(3), view(OLD, NOT_STARTED), CURRENT)
    assert seen.progress == "the page and the site disagree on the turns"
    seen = judge_turns(dom(2), view(OLD, NOT_STARTED), CURRENT)  # the page idle: no reason of its own
    assert seen.progress == "waiting for the answer to start"


def test_a_page_that_has_not_drawn_the_last_turn_waits_for_it_to_start():
    # The JSON has turn 2; the page draws neither its message nor its answer yet.
    assert last_turn_busy(dom(1, 1), CURRENT, 2, 2) == "waiting for the answer to start"


def test_a_page_drawing_more_turns_than_the_site_has_disagrees():
    assert last_turn_busy(dom(3), CURRENT, 2, 2) == "the page and the site disagree on the turns"
    assert last_turn_busy(dom(2, 3), CURRENT, 2, 2) == "the page and the site disagree on the turns"
    assert last_turn_busy(dom(2), CURRENT, 2, 2) is None


# -- TurnsReader: the reads of a whole chat ---------------------------------------------------


TURNS = [TurnState("one", "# Old", complete=True), TurnState("two", "# New", complete=False)]
CANDIDATE = TurnsSeen(TURNS, "finishing", candidate="# New")
CATCHING_UP = TurnsSeen(TURNS, "finishing", catching_up=True)
STALLED = TurnsSeen(TURNS, "waiting for the answer to start", stalled=True)
WRITING = TurnsSeen(TURNS, "writing: 5 chars")


class ScriptedReader(TurnsReader):
    """A TurnsReader whose looks at the chat are `looks`, in order (the last one repeated)."""

    def __init__(self, ctx: EngineContext, *looks: TurnsSeen):
        super().__init__(ctx)
        self.looks, self.times = list(looks), []

    def script(self, *looks: TurnsSeen) -> ScriptedReader:
        self.looks, self.times = list(looks), []
        return self

    def observe(self, page, selectors, chat_id) -> TurnsSeen:
        self.times.append(self.ctx.now())
        assert len(self.times) <= LOOKS, "the chat was looked at again and again: a loop that never stops"
        return self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]


def test_a_turn_plainly_still_writing_is_reported_at_once():
    clock = Clock()
    reader = ScriptedReader(context(clock), WRITING)
    chat = reader.read(FakePage(clock), CURRENT, CHAT_ID)
    assert chat.progress == "writing: 5 chars" and not chat.turns[-1].complete
    assert reader.times == [0.0]


def test_a_page_catching_up_is_looked_at_every_poll_until_page_timeout_and_no_later():
    clock, page = Clock(), None
    page = FakePage(clock)
    reader = ScriptedReader(context(clock, page_timeout=1.0), CATCHING_UP)
    chat = reader.read(page, CURRENT, CHAT_ID)
    assert chat.progress == "finishing" and not chat.turns[-1].complete
    assert reader.times == [0.0, 0.25, 0.5, 0.75, 1.0]  # the look at the deadline is the last
    assert set(page.events) == {f"wait {POLL_SECONDS:g}"}


def test_a_turn_the_page_shows_done_but_the_site_never_finished_is_cut_short():
    clock = Clock()
    reader = ScriptedReader(context(clock, page_timeout=30), STALLED)
    with pytest.raises(TransientError) as cut:
        reader.read(FakePage(clock), CURRENT, CHAT_ID)
    assert cut.value.code == Code.CUT_SHORT and len(reader.times) == STALL_READS


def test_a_look_without_a_candidate_starts_the_stability_count_again():
    clock = Clock()
    reader = ScriptedReader(
        context(clock, page_timeout=30, stable_reads=2), CANDIDATE, CATCHING_UP, CANDIDATE
    )
    chat = reader.read(FakePage(clock), CURRENT, CHAT_ID)
    assert chat.turns[-1].complete and len(reader.times) == 4  # A, (none), A, A


def test_an_answer_just_confirmed_needs_one_more_look_not_the_stability_reads_again():
    # read_turns, then send_turn in the same run: the second read takes the same answer at once.
    clock = Clock()
    reader = ScriptedReader(context(clock, page_timeout=30, stable_reads=3), CANDIDATE)
    assert reader.read(FakePage(clock), CURRENT, CHAT_ID).turns[-1].complete
    assert len(reader.times) == 3
    assert reader.script(CANDIDATE).read(FakePage(clock), CURRENT, CHAT_ID).turns[-1].complete
    assert len(reader.times) == 1


def test_a_confirmation_counts_only_for_that_answer_of_that_many_turns_for_a_minute():
    clock = Clock()
    clock.t = 100.0
    reader = TurnsReader(context(clock))
    assert not reader.seen_stable(CHAT_ID, CANDIDATE)  # nothing confirmed yet
    reader.confirmed[CHAT_ID] = (len(TURNS), "# New", 100.0)
    assert reader.seen_stable(CHAT_ID, CANDIDATE)
    assert not reader.seen_stable(CHAT_ID, TurnsSeen(TURNS, "finishing", candidate="# Newer"))
    assert not reader.seen_stable(CHAT_ID, TurnsSeen(TURNS[:1], "finishing", candidate="# New"))
    clock.t = 100.0 + CONFIRMED_SECONDS - POLL_SECONDS
    assert reader.seen_stable(CHAT_ID, CANDIDATE)
    clock.t = 100.0 + CONFIRMED_SECONDS
    assert not reader.seen_stable(CHAT_ID, CANDIDATE)


# -- TurnsReader.observe: one look at the page and the chat's JSON ----------------------------


def test_a_look_at_a_page_showing_a_failure_screen_raises_it():
    clock = Clock()
    page = FakePage(clock)
    page.screen = {"login": True}
    page_loads(page, body_of(("one", "# Old")))
    with pytest.raises(HardError) as failed:
        TurnsReader(context(clock)).observe(page, CURRENT, CHAT_ID)
    assert failed.value.code == Code.LOGGED_OUT


def test_a_look_notices_what_the_chats_json_holds_that_nobody_reported():
    clock = Clock()
    page = FakePage(clock)
    body = body_of(("one", "# Old"))
    body["data"]["chat"]["messages"][-1]["content_list"].insert(0, {"phase": "fuzz_cite", "content": "x"})
    page_loads(page, body)
    ctx = context(clock)
    seen = TurnsReader(ctx).observe(page, CURRENT, CHAT_ID)
    assert seen.candidate == "# Old"
    noticed = ctx.noticed.take()
    assert [found.where for found in noticed] == ["chat_json"] and "fuzz_cite" in noticed[0].seen


def test_a_look_at_json_that_is_no_chat_is_a_transient_api_error_never_a_guess():
    clock = Clock()
    page = FakePage(clock)
    page_loads(page, {"success": True, "data": {"id": CHAT_ID, "conversation": {"turns": []}}})
    with pytest.raises(TransientError) as unread:
        TurnsReader(context(clock)).observe(page, CURRENT, CHAT_ID)
    assert unread.value.code == Code.API_ERROR and "no data.chat" in str(unread.value)


# == sending.py ===============================================================================


def test_a_click_that_fails_may_have_reached_the_site():
    # Playwright's click may fail after the click went out: never "nothing sent".
    from playwright.sync_api import Error as PlaywrightError

    class Button:
        def click(self) -> None:
            raise PlaywrightError("Target page, context or browser has been closed")

    with pytest.raises(TransientError) as failed, Submit() as submit, errors_as_engine_errors():
        submit.click(Button())
    assert not failed.value.nothing_sent


def test_a_send_watches_the_sites_replies_only_while_it_runs():
    page = FakePage(Clock())
    with replies_to_send(page):
        assert len(page.listeners["requestfinished"]) == 1
    assert page.listeners["requestfinished"] == []


def test_a_click_after_a_refusal_that_took_nothing_comes_after_its_pause():
    page = FakePage(Clock())
    resend = clicker(page, CURRENT, Submit())
    resend(TransientError("the site says the chat is busy", code=Code.CHAT_IN_PROGRESS))
    assert page.events == ["click", f"wait {BUSY_PAUSE_SECONDS:g}", "click"]


def test_a_quota_toast_waits_for_its_reply_which_proves_nothing_was_sent():
    clock = Clock()
    page = FakePage(clock)
    page.screen = {"text": FAILURE_TEXTS.quota}
    page.on_pause = lambda: reply(page, QUOTA_BODY) if len(page.events) == 2 else None
    failure = sent_failure(context(clock), page, Replies(page))
    assert failure.code == Code.QUOTA and failure.nothing_sent
    assert failure.retry_after == QUOTA_BODY["data"]["num"] * 3600  # the reply's hours, not the toast's


def test_a_quota_toast_without_its_reply_is_in_doubt_after_the_grace_and_no_later():
    clock = Clock()
    page = FakePage(clock)
    page.screen = {"text": FAILURE_TEXTS.quota}
    replies = Replies(page)
    failure = sent_failure(context(clock), page, replies)
    assert failure.code == Code.QUOTA and not failure.nothing_sent
    assert clock.t == REPLY_GRACE_SECONDS and set(page.events) == {f"wait {POLL_SECONDS:g}"}


def test_the_chat_address_is_waited_for_page_timeout_then_said_missing():
    clock = Clock()
    page = FakePage(clock)
    hold, ctx = CompletionHold(None), context(clock, page_timeout=1.0)
    with pytest.raises(TransientError) as missing:
        wait_for_chat_id(ctx, page, Replies(page), clicker(page, CURRENT, Submit()), hold)
    assert missing.value.code == Code.NO_CHAT_URL
    assert page.looks == [0.0, 0.25, 0.5, 0.75]  # none from the deadline on


class StoreDown(Exception):
    """The contract could not put the chat on record (its store failed)."""


def refusing_hold() -> CompletionHold:
    def on_chat_id(_chat_id: str) -> None:
        raise StoreDown("the store could not record the chat")

    return CompletionHold(on_chat_id)


def test_a_completion_the_hold_kept_back_is_never_a_send_even_where_the_page_shows_its_chat():
    clock = Clock()
    page = FakePage(clock)
    hold = refusing_hold()
    route = Route()
    hold._handle(route)  # the page's completion request: not on record, aborted
    assert route.ended == "aborted"
    page.url = f"{BASE}/c/{CHAT_ID}"
    with pytest.raises(StoreDown):
        wait_for_chat_id(context(clock), page, Replies(page), clicker(page, CURRENT, Submit()), hold)


def test_a_completion_kept_back_while_the_send_was_checked_is_raised_as_the_store_raised_it():
    # The page's request arrives (Playwright delivers it) while the engine reads the page; the
    # page then shows its error for our abort. Why we aborted is what counts.
    clock = Clock()
    page = FakePage(clock)
    hold = refusing_hold()

    def completion_held_back() -> None:
        if len(page.looks) == 1:
            hold._handle(Route())
            page.screen = {"text": FAILURE_TEXTS.error_banner}

    page.on_look = completion_held_back
    with pytest.raises(StoreDown):
        wait_for_chat_id(context(clock), page, Replies(page), clicker(page, CURRENT, Submit()), hold)


def test_a_follow_up_never_shown_is_waited_for_page_timeout_and_no_later():
    clock = Clock()
    page = FakePage(clock)
    replies, ctx = Replies(page), context(clock, page_timeout=1.0)
    with pytest.raises(TransientError) as unseen:
        wait_for_user_turn(ctx, page, CHAT_ID, 2, "two", replies, clicker(page, CURRENT, Submit()))
    assert unseen.value.code == Code.NO_TURN
    assert page.looks == [0.0, 0.25, 0.5, 0.75, 1.0]  # the look at the deadline is the last


def test_the_same_message_is_the_same_words_whatever_the_spacing():
    assert same_text("Write  about\ntea. ", "Write about tea.")
    assert not same_text("Write about tea.", "Write about coffee.")


def answered_without_stream(page: FakePage, body: dict) -> None:
    """The page's completion answered with JSON, its bytes kept as they arrived (stream.py)."""
    from pipeline.engines.qwen.stream import PageTraffic

    PageTraffic.of(page).watch_streams()
    cdp = page.context.cdp
    cdp.buffered["r1"] = json.dumps(body).encode()
    response = {"url": COMPLETION, "mimeType": "application/json", "headers": {}}
    cdp.emit("Network.responseReceived", {"requestId": "r1", "response": response})


def test_a_hard_refusal_in_a_completion_answered_without_a_stream_is_read_from_its_body():
    page = FakePage(Clock())
    answered_without_stream(page, BOT_BODY)
    refused = plain_refusal(page)
    assert isinstance(refused, HardError) and refused.code == Code.BOT_CHECK


def test_a_refusal_that_took_nothing_is_no_hard_refusal():
    page = FakePage(Clock())
    answered_without_stream(page, IN_PROGRESS_BODY)
    assert plain_refusal(page) is None
