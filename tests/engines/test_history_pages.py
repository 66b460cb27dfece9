"""history.is_page: a chat JSON that holds only the last page of the history (docs/qwen-site.md,
"Late autumn 2026"), in both shapes the simulator serves, told from a whole chat."""

from __future__ import annotations

import time

import pytest

from pipeline.engines.qwen.history import is_page
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
