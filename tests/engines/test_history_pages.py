"""history.is_page: a chat JSON that holds only the last page of the history (docs/qwen-site.md,
"Late autumn 2026"), in both shapes the simulator serves, told from a whole chat; and
history.hidden_before: what such a page never draws, however old the load and the read."""

from __future__ import annotations

import time

import pytest

from pipeline.engines.qwen.history import hidden_before, is_page
from pipeline.simulator import shapes


def view(turns: int) -> dict:
    messages, parent = [], None
    for n in range(turns):
        for role in ("user", "assistant"):
            mid = f"{role}-{n}"
            message = {"id": mid, "role": role, "parent_id": parent, "timestamp": time.time(), "model": "m"}
            if role == "user":
                message["content"] = f"turn {n}"
            else:
                message.update(
                    done=True,
                    answer="a",
                    thinking="",
                    thinking_enabled=False,
                    thinking_done=True,
                    answer_started=True,
                    finished=True,
                    error=None,
                )
            messages.append(message)
            parent = mid
    return {"id": "c" * 24, "title": "t", "created_at": 1, "updated_at": 1, "messages": messages}


@pytest.mark.parametrize("shape", ["2026-06", "2026-08"])
def test_the_last_page_of_a_long_chat_is_a_page_and_the_whole_chat_is_not(shape):
    whole = view(7)
    last_page = shapes.history_page(whole, {"direction": ["up"], "limit": ["10"]})

    assert not is_page(shapes.chat_body(whole, shape))
    assert is_page(shapes.chat_body(last_page, shape))
    # A chat shorter than a page is whole however it was asked for.
    short = shapes.history_page(view(3), {"direction": ["up"], "limit": ["10"]})
    assert not is_page(shapes.chat_body(short, shape))


def test_a_failure_or_no_chat_is_not_a_page():
    assert not is_page({"success": False, "data": {"code": "CHAT_NOT_FOUND"}})
    assert not is_page({"success": True, "data": {}})
    assert not is_page("not json")


def page_of(chat: dict, limit: int, shape: str) -> dict:
    return shapes.chat_body(shapes.history_page(chat, {"direction": ["up"], "limit": [str(limit)]}), shape)


@pytest.mark.parametrize("shape", ["2026-06", "2026-08"])
@pytest.mark.parametrize(
    ("turns_at_load", "turns_now", "limit", "expected"),
    [
        (6, 6, 10, (1, 1)),  # the page's load is current: one turn above it
        (6, 7, 10, (1, 1)),  # turn 7 streamed into the page since: it hides no more (the finding)
        (6, 9, 10, (1, 1)),  # three turns since
        (5, 7, 10, (0, 0)),  # the load was whole: the page draws every turn, old and new
        (5, 5, 3, (3, 4)),  # a page that starts with an answer: its message is one more hidden
        (5, 6, 3, (3, 4)),
        (2, 4, 10, (0, 0)),
    ],
)
def test_what_the_page_never_draws_is_what_its_last_load_left_above_it(
    shape, turns_at_load, turns_now, limit, expected
):
    whole_now = shapes.chat_body(view(turns_now), shape)
    drawn = page_of(view(turns_at_load), limit, shape)
    assert hidden_before(whole_now, drawn) == expected


def test_a_load_of_another_chat_or_a_failure_hides_nothing():
    whole_now = shapes.chat_body(view(7), "2026-08")
    other = view(7)
    for message in other["messages"]:
        message["id"], message["parent_id"] = (
            "x" + message["id"],
            message["parent_id"] and "x" + message["parent_id"],
        )
    assert hidden_before(whole_now, page_of(other, 10, "2026-08")) == (0, 0)
    assert hidden_before(whole_now, {"success": False, "data": {"code": "CHAT_NOT_FOUND"}}) == (0, 0)
