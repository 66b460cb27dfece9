"""parse_stream: the completion's SSE body as the page receives it, read without a browser."""

from __future__ import annotations

import json

from pipeline.engines.qwen.stream import parse_stream


def frames(*items) -> str:
    return "".join(f"data: {json.dumps(item)}\n\n" if not isinstance(item, str) else item for item in items)


def delta(content: str, phase: str, status: str = "typing") -> dict:
    return {"choices": [{"delta": {"content": content, "phase": phase, "status": status}}]}


def test_only_the_answer_phase_is_the_article_and_only_its_finished_ends_it():
    body = frames(
        {"response.created": {"chat_id": "c1", "model": "qwen3.7-plus"}},
        delta("I plan ", "thinking_summary"),
        delta("", "thinking_summary", "finished"),  # ends the thinking, not the answer
        ": keep-alive\n\n",
        "data: [DONE]\n\n",
        delta("# Tea\n", "answer"),
        delta("Brew it.", "answer"),
    )
    read = parse_stream(body)
    assert (read.answer, read.finished, read.error, read.model) == (
        "# Tea\nBrew it.",
        False,
        None,
        "qwen3.7-plus",
    )
    assert parse_stream(body + frames(delta("", "answer", "finished"))).finished


def test_an_error_frame_is_said_in_words():
    read = parse_stream(frames(delta("half", "answer"), {"error": {"code": "x", "details": "went wrong"}}))
    assert read.error == "went wrong" and not read.finished and read.answer == "half"
