"""QwenEngine.read_turns / send_turn in real headless Chromium against the simulator.

A multi-turn prompt is sent one message at a time in the same chat; the chat is the record. What
must hold: answers paired with their own message (never turn N-1's answer for turn N), a turn
reported complete only when the page and the API agree, and no message typed into a chat whose
last answer is still growing or whose session is unusable.
"""

from __future__ import annotations

import time
import uuid

import pytest
from fakes import page_state
from sim_project import finish_answer

from pipeline.engines.base import ChatTurns, HardError, QuotaSpent, TransientError
from pipeline.engines.qwen.api import ChatView, Turn, chat_id_from_url, parse_chat
from pipeline.engines.qwen.judging import judge_turns
from pipeline.engines.qwen.page import DomState
from pipeline.engines.qwen.selectors import CURRENT, LEGACY

browser = pytest.mark.browser

THINKING_SECONDS = 0.2
ANSWER_SECONDS = 0.8


SIMULATOR = {"answer_seconds": ANSWER_SECONDS, "thinking_seconds": THINKING_SECONDS, "url_delay": 0.1}


# `session` (one browser for the file) and `engine`: tests/integration/conftest.py.


def turn_texts(topic: str) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [
        f"Outline an article about {topic} ({tag}).",
        f"Now write the article about {topic} from that outline ({tag}).",
        f"Polish the {topic} article: shorter sentences ({tag}).",
    ]


def chat_ledger(sim, url: str) -> list[dict]:
    chat_id = chat_id_from_url(url)
    return [entry for entry in sim.ledger() if entry["chat_id"] == chat_id]


def read_until_complete(sim, engine, url: str, texts: list[str], seconds: float = 20) -> ChatTurns:
    """read_turns again and again (as cron would) until the last turn is complete, checking on
    every read that nothing stale or half-made is ever reported complete."""
    count = len(texts)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        chat = engine.read_turns(url)
        assert [t.user for t in chat.turns] == texts, "turns out of order or missing"
        for number, turn in enumerate(chat.turns, 1):
            expected = sim.expected_answer(texts[number - 1], turn=number)
            if turn.complete:
                assert turn.answer == expected, f"turn {number} complete with the wrong answer"
            else:
                assert number == count, f"earlier turn {number} not complete"
                assert expected.startswith(turn.answer), f"turn {number}: not a prefix of its own answer"
                assert chat.progress and chat.progress != "complete"
            if number > 1:
                before = sim.expected_answer(texts[number - 2], turn=number - 1)
                assert turn.answer != before, f"turn {number} shows turn {number - 1}'s answer"
        if chat.turns[-1].complete:
            assert chat.progress == "complete"
            return chat
        time.sleep(0.3)
    raise AssertionError(f"turn {count} never completed")


def first_turn_done(sim, engine, topic: str) -> tuple[list[str], str, ChatTurns]:
    """(the three turns' texts, the chat's url, the chat read): a new chat for `topic` whose first
    turn is sent and complete."""
    texts = turn_texts(topic)
    url = engine.send(texts[0])
    return texts, url, read_until_complete(sim, engine, url, texts[:1])


# -- the happy path --------------------------------------------------------------------------


@browser
@pytest.mark.parametrize("api_shape, ui", [("2026-08", "current"), ("2026-06", "legacy")])
def test_three_turns_in_one_chat(sim, engine, api_shape, ui):
    sim.set(api_shape=api_shape, ui=ui)
    texts, url, chat = first_turn_done(sim, engine, f"tea {api_shape} {ui}")
    for number in (2, 3):
        engine.send_turn(url, texts[number - 1])
        chat = read_until_complete(sim, engine, url, texts[:number])

    assert [t.answer for t in chat.turns] == [sim.expected_answer(t, turn=n) for n, t in enumerate(texts, 1)]
    assert all(t.complete and t.error is None for t in chat.turns)
    assert chat.title and chat.title != "New Chat" and chat.model
    ledger = chat_ledger(sim, url)
    assert [(e["turn"], e["prompt"], e["accepted"]) for e in ledger] == [
        (n, t, True) for n, t in enumerate(texts, 1)
    ]


# -- never a stale answer --------------------------------------------------------------------


@browser
@pytest.mark.parametrize("api_shape, ui", [("2026-06", "current"), ("2026-08", "legacy")])
def test_right_after_send_turn_the_new_turn_is_never_complete_with_the_old_answer(sim, engine, api_shape, ui):
    """The other two (shape, UI) pairs of the simulator, so that all four are covered."""
    sim.set(api_shape=api_shape, ui=ui)
    texts, url, chat = first_turn_done(sim, engine, f"coffee {api_shape} {ui}")
    first = chat.turns[0].answer

    sim.set(answer_seconds=600.0)  # read mid-way however slow the machine; ended below
    engine.send_turn(url, texts[1])
    right_after = engine.read_turns(url)
    assert len(right_after.turns) == 2 and right_after.turns[1].user == texts[1]
    assert not right_after.turns[1].complete
    assert right_after.turns[1].answer != first
    assert right_after.turns[0].complete and right_after.turns[0].answer == first

    finish_answer(sim, url)
    done = read_until_complete(sim, engine, url, texts[:2])
    assert done.turns[1].answer == sim.expected_answer(texts[1], turn=2) != first


# -- refusals: nothing typed -----------------------------------------------------------------


@browser
def test_send_turn_refused_while_the_previous_answer_is_still_growing(sim, engine):
    sim.set(answer_seconds=600.0)  # still being written at every look, however slow the machine
    texts = turn_texts("growing")
    url = engine.send(texts[0])
    with pytest.raises(TransientError) as refused:
        engine.send_turn(url, texts[1])
    assert refused.value.code == "busy_chat"
    assert [(e["turn"], e["prompt"]) for e in chat_ledger(sim, url)] == [(1, texts[0])]
    chat = engine.read_turns(url)
    assert len(chat.turns) == 1 and not chat.turns[0].complete
    assert chat.progress.startswith(("writing", "thinking"))


@browser
def test_send_turn_types_nothing_when_logged_out(sim, engine):
    texts, url, _chat = first_turn_done(sim, engine, "session")
    sim.set(scenario="logged_out")
    with pytest.raises(HardError) as failed:
        engine.send_turn(url, texts[1])
    assert failed.value.code == "logged_out"
    with pytest.raises(HardError) as reading:
        engine.read_turns(url)
    assert reading.value.code == "logged_out"
    assert [e["prompt"] for e in chat_ledger(sim, url)] == [texts[0]]


@browser
def test_quota_on_a_follow_up_and_an_answer_cut_short(sim, engine):
    texts, url, _chat = first_turn_done(sim, engine, "limits")
    with pytest.raises(QuotaSpent) as spent:
        engine.send_turn(url, texts[1] + " [sim:quota]")
    assert spent.value.retry_after == 5 * 3600  # from the API's reply, not the toast
    assert spent.value.nothing_sent  # the site's own reply refused it: no resend needs a search first
    assert [e["accepted"] for e in chat_ledger(sim, url)] == [True, False]
    assert len(engine.read_turns(url).turns) == 1  # the refused message is not a turn

    deadline = time.monotonic() + 15
    with pytest.raises(TransientError) as failed:  # the site's banner, or the turn's own error
        # The banner comes half-way through the answer: on a loaded machine that is before the
        # send's own wait for its proof ends, and the send says it (both are the site's error).
        engine.send_turn(url, texts[1] + " [sim:error_banner]")
        while time.monotonic() < deadline:
            assert not engine.read_turns(url).turns[-1].complete, "a cut-short answer read as complete"
            time.sleep(0.3)
    assert failed.value.code in ("error_banner", "answer_error")


@browser
def test_a_follow_up_the_site_refuses_as_parallel_limited_is_clicked_again_and_taken_once(sim, engine):
    # The refusal took nothing: clicked again after the pause, and taken once.
    texts, url, _chat = first_turn_done(sim, engine, "parallel")
    sim.set(parallel_limited_sends=1)
    engine.send_turn(url, texts[1])
    assert [(e["turn"], e["accepted"]) for e in chat_ledger(sim, url)] == [(1, True), (2, False), (2, True)]


@browser
def test_a_follow_up_whose_stream_comes_late_is_waited_for_and_taken_once(sim, engine):
    # The site answers the send 1 to 6 s late: no proof at the first look after the click, and
    # the wait for it runs to its deadline (page_timeout), not a look less.
    texts, url, _chat = first_turn_done(sim, engine, "late stream")
    sim.set(fault="completion:slow")
    engine.send_turn(url, texts[1])
    assert [(e["turn"], e["accepted"]) for e in chat_ledger(sim, url)] == [(1, True), (2, True)]


@browser
def test_a_follow_up_the_site_answers_without_a_stream_is_proved_by_the_chats_json(sim, engine):
    # No stream to open on the page: the proof the turn was taken is the chat's JSON showing it
    # as the last user message (its words as typed, whatever the spacing), and it is taken once.
    texts, url, _chat = first_turn_done(sim, engine, "no stream")
    sim.set(stream=False)
    engine.send_turn(url, texts[1])
    assert [(e["turn"], e["accepted"]) for e in chat_ledger(sim, url)] == [(1, True), (2, True)]
    assert [t.user for t in engine.read_turns(url).turns] == texts[:2]


@browser
def test_read_turns_of_a_chat_that_is_gone(sim, engine):
    texts = turn_texts("gone")
    url = engine.send(texts[0])
    sim.set(scenario="chat_not_found")
    with pytest.raises(HardError) as gone:
        engine.read_turns(url)
    assert gone.value.code == "chat_not_found"


# -- the decision itself, without a browser -----------------------------------------------------


def dom(assistant_turns: int, user_turns: int | None = None, *, copy: bool = True, **changes) -> DomState:
    values = {
        "send_disabled": True,
        "user_turns": assistant_turns if user_turns is None else user_turns,
        "assistant_turns": assistant_turns,
        "copy_button": copy,
        "answer_text": "old answer",
    }
    return page_state(**{**values, **changes})


def view(*turns: Turn) -> ChatView:
    return ChatView(chat_id="x", title="Tea Notes", turns=list(turns), model="qwen3-max")


OLD = Turn("one", "# Old\n\nThe first answer.", True, None)


def test_a_leftover_copy_button_of_the_previous_turn_does_not_complete_the_new_one():
    # Turn 2 just sent: the site has no answer for it yet; the page still shows turn 1, done.
    seen = judge_turns(dom(1, 2), view(OLD, Turn("two", "", False, None)), CURRENT)
    assert seen.candidate is None and not seen.catching_up and not seen.stalled
    result = seen.result(complete=False)
    assert [t.complete for t in result.turns] == [True, False]
    assert result.turns[1].answer == "" and result.progress == "waiting for the answer to start"


def test_a_finished_turn_the_page_has_not_drawn_yet_is_not_complete():
    finished = Turn("two", "# New\n\nThe second answer.", True, None)
    for ui, page in ((CURRENT, dom(1, 2)), (LEGACY, dom(1, copy=False, ui="legacy"))):
        seen = judge_turns(page, view(OLD, finished), ui)
        assert seen.candidate is None and seen.catching_up


def test_only_every_signal_together_makes_a_candidate():
    growing = Turn("two", "# New\n\nThe sec", False, None)
    finished = Turn("two", "# New\n\nThe second answer.", True, None)
    assert judge_turns(dom(2), view(OLD, finished), CURRENT).candidate == finished.answer
    assert judge_turns(dom(2, copy=False), view(OLD, finished), CURRENT).candidate is None
    assert judge_turns(dom(2, stop_visible=True), view(OLD, finished), CURRENT).candidate is None
    thinking = dom(2, thinking_visible=True, skip_visible=True)
    assert judge_turns(thinking, view(OLD, finished), CURRENT).candidate is None
    seen = judge_turns(dom(2, copy=False, stop_visible=True), view(OLD, growing), CURRENT)
    assert seen.candidate is None and seen.progress == f"writing: {len(growing.answer)} chars"
    with pytest.raises(TransientError, match="error"):
        judge_turns(dom(2), view(OLD, Turn("two", "# N", True, "Something went wrong")), CURRENT)


def test_answers_pair_with_their_own_message_by_parent_links_whatever_the_order():
    def msg(ident, role, parent, text, ts):
        base = {"id": ident, "role": role, "parentId": parent, "timestamp": ts}
        if role == "user":
            return {**base, "content": text}
        return {
            **base,
            "done": True,
            "content_list": [{"phase": "answer", "content": text, "status": "finished"}],
        }

    # All in the same second, listed newest first: only the parent links give the order.
    messages = [
        msg("u2", "user", "a1", "two", 100),
        msg("a1", "assistant", "u1", "answer one", 100),
        msg("u1", "user", None, "one", 100),
    ]
    for payload in (
        {"success": True, "data": {"chat": {"history": {"messages": {}}, "messages": messages}}},
        {
            "success": True,
            "data": {"chat": {"history": {"currentId": "u2", "messages": {m["id"]: m for m in messages}}}},
        },
    ):
        turns = parse_chat(payload).turns
        assert [(t.user_text, t.answer, t.finished) for t in turns] == [
            ("one", "answer one", True),
            ("two", "", False),
        ]


@browser
def test_a_follow_up_never_shown_is_no_turn_after_page_timeout_and_may_have_been_sent(sim, session):
    # The click went out but no proof ever comes (the completion answered with a bare success and
    # the chat never shows the turn): after page_timeout the send fails as "no turn", never as
    # "nothing sent" (the next run reads the chat before sending anything).
    from pipeline.config import Qwen
    from pipeline.engines.qwen.engine import QwenEngine
    from pipeline.engines.qwen.hold import COMPLETIONS_ROUTE

    quick = QwenEngine(Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=3), session)
    texts, url, _chat = first_turn_done(sim, quick, "never shown")

    def swallowed(route):
        route.fulfill(status=200, content_type="application/json", body='{"success": true, "data": {}}')

    session.context.route(COMPLETIONS_ROUTE, swallowed)
    try:
        with pytest.raises(TransientError) as caught:
            quick.send_turn(url, texts[1])
    finally:
        session.context.unroute(COMPLETIONS_ROUTE, swallowed)
    assert caught.value.code == "no_turn" and not caught.value.nothing_sent
