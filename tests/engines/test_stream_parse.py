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


# -- late autumn 2026: two candidates in one stream, more phases, cumulative usage ----------------


def late(content: str, phase: str, status: str, response_id: str, tokens: int) -> dict:
    usage = {"input_tokens": 5, "output_tokens": tokens, "total_tokens": 5 + tokens}
    return {**delta(content, phase, status), "response_id": response_id, "usage": usage}


def created(response_id: str, index: int) -> dict:
    return {"response.created": {"response_id": response_id, "response_index": index, "model": "qwen3.8-max"}}


def test_two_interleaved_candidates_give_the_first_whole_never_a_mix():
    body = frames(
        created("r1", 0),
        created("r2", 1),
        late("", "web_search", "typing", "r1", 0),
        late("Searched 2 web pages.", "web_search", "finished", "r1", 0),
        late("[1] a result", "search_result", "finished", "r1", 0),
        {"response.updated": {"response_id": "r1", "phase": "answer", "status": "typing"}},
        late("Other ", "answer", "typing", "r2", 1),
        late("# Tea\n", "answer", "typing", "r1", 2),
        late("take.", "answer", "typing", "r2", 2),
        late("", "answer", "finished", "r2", 2),  # the other candidate ends first: not ours
    )
    read = parse_stream(body)
    assert (read.answer, read.finished, read.model) == ("# Tea\n", False, "qwen3.8-max")
    done = parse_stream(
        body + frames(late("Brew it.", "answer", "typing", "r1", 4), late("", "answer", "finished", "r1", 4))
    )
    assert (done.answer, done.finished) == ("# Tea\nBrew it.", True)


def test_the_candidate_of_response_index_0_is_kept_whatever_order_they_are_created_in():
    body = frames(
        created("r2", 1),
        created("r1", 0),
        late("other", "answer", "typing", "r2", 1),
        late("ours", "answer", "finished", "r1", 1),
    )
    assert (parse_stream(body).answer, parse_stream(body).finished) == ("ours", True)


def test_an_error_of_the_other_candidate_is_not_the_answers():
    body = frames(
        created("r1", 0),
        created("r2", 1),
        {"error": {"code": "x", "details": "the other broke"}, "response_id": "r2"},
        late("fine", "answer", "finished", "r1", 1),
    )
    read = parse_stream(body)
    assert (read.answer, read.finished, read.error) == ("fine", True, None)
