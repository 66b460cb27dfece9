"""The completion's answer as the site streams it (docs/qwen-site.md, "Reading an answer").

`POST /api/v2/chat/completions` that the site takes answers `text/event-stream`: a first frame
`{"response.created": {...}}`, then `{"choices": [{"delta": {"content", "phase", "status"}}]}`
frames as the answer grows (thinking first, then the answer), and `status: "finished"` in phase
`answer` at its end. The frames are read from the same timeline as the chat's JSON (chats.py),
so a page that streams and a page that reloads see the same answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

FRAME_PAUSE = 0.05  # seconds between two looks at the timeline
KEEP_ALIVE = 5.0  # a comment line this often while nothing new arrives


def frame(data: dict) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def delta(content: str, phase: str, status: str, **late) -> bytes:
    """One `choices` frame; `late`: what the late-autumn stream adds to it (its candidate's
    `response_id`, the cumulative `usage`)."""
    change = {"role": "assistant", "content": content, "phase": phase, "status": status}
    return frame({"choices": [{"delta": change}], **late})


class LateShape:
    """What the late-autumn-2026 stream adds (docs/qwen-site.md, "Late autumn 2026: the answer"):
    `usage` in every frame, cumulative; `response.updated` frames; `web_search` and
    `search_result` phases before the answer; and, with two candidates, a second answer with its
    own `response_id` whose frames are interleaved with the first's (it is shorter, so it
    finishes first). The chat keeps the first candidate; the second is the stream's alone."""

    def __init__(self, message_id: str, late: bool, candidates: int):
        self.late, self.ids = late, [message_id]
        if candidates > 1:
            self.ids.append(f"{message_id}-2")
        self.tokens = 0
        self.searched = False
        self.other_sent = 0
        self.other_done = False

    def tag(self, index: int = 0) -> dict:
        """The late fields of a frame of candidate `index` (none in the older stream)."""
        if not self.late and len(self.ids) == 1:
            return {}
        usage = {"input_tokens": 12, "output_tokens": self.tokens, "total_tokens": 12 + self.tokens}
        return {"response_id": self.ids[index], "usage": usage}

    def created(self, created: dict) -> list[bytes]:
        out = []
        for index, response_id in enumerate(self.ids):
            extra = {"response_index": index} if self.late or index else {}
            out.append(frame({"response.created": {**created, "response_id": response_id, **extra}}))
        return out

    def before_answer(self) -> list[bytes]:
        """The search phases, once, as the answer is about to start (late stream only)."""
        if not self.late or self.searched:
            return []
        self.searched = True
        return [
            delta("", "web_search", "typing", **self.tag()),
            delta("Searched 2 web pages.", "web_search", "finished", **self.tag()),
            delta("[1] example.org: a page the search found", "search_result", "finished", **self.tag()),
            frame({"response.updated": {"response_id": self.ids[0], "phase": "answer", "status": "typing"}}),
        ]

    def grew(self, chunk: str, answer_so_far: str) -> list[bytes]:
        """After candidate 1 grew by `chunk`: its usage, and the second candidate's next piece."""
        self.tokens += len(chunk.split())
        if len(self.ids) == 1 or self.other_done:
            return []
        other = "Another take. " + answer_so_far[: len(answer_so_far) // 2]
        out = []
        if len(other) > self.other_sent:
            out.append(delta(other[self.other_sent :], "answer", "typing", **self.tag(1)))
            self.other_sent = len(other)
        return out

    def other_finished(self) -> list[bytes]:
        if len(self.ids) == 1 or self.other_done:
            return []
        self.other_done = True
        return [delta("", "answer", "finished", **self.tag(1))]


def completion_stream(store, chat_id: str, reply: dict) -> Iterator[bytes]:
    """The frames of one accepted send, until its answer finishes, fails or is stopped.

    `reply` is what ChatStore.send answered (its ids)."""
    data = reply["data"]
    message_id = data["message_id"]
    first = store.message_progress(chat_id, message_id)
    model = first["model"] if first else None
    settings = store.snapshot()
    shape = LateShape(message_id, settings.late_stream, settings.candidates)
    created = {"chat_id": chat_id, "parent_id": data["parent_id"], "response_id": message_id}
    yield from shape.created({**created, "model": model})
    thought = answered = 0
    thinking_closed = False
    quiet_since = time.monotonic()
    while True:
        seen = store.message_progress(chat_id, message_id)
        if seen is None:  # the chat went away under the stream
            yield frame({"error": {"code": "CHAT_NOT_FOUND", "details": "the chat is gone"}})
            return
        out = []
        if len(seen["thinking"]) > thought:
            out.append(delta(seen["thinking"][thought:], "thinking_summary", "typing", **shape.tag()))
            thought = len(seen["thinking"])
        if seen["thinking_done"] and seen["thinking_enabled"] and not thinking_closed:
            # ends the thinking, not the answer
            out.append(delta("", "thinking_summary", "finished", **shape.tag()))
            thinking_closed = True
        if seen["answer_started"]:
            out += shape.before_answer()
        if len(seen["answer"]) > answered:
            chunk = seen["answer"][answered:]
            out += shape.grew(chunk, seen["answer"])  # the other candidate's piece comes first
            out.append(delta(chunk, "answer", "typing", **shape.tag()))
            answered = len(seen["answer"])
        if seen["error"]:
            out.append(frame({"error": seen["error"]}))
        elif seen["finished"]:
            out += shape.other_finished()
            out.append(delta("", "answer", "finished", **shape.tag()))
        yield from out
        if seen["error"] or seen["finished"]:
            return
        if out:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= KEEP_ALIVE:
            yield b": keep-alive\n\n"
            quiet_since = time.monotonic()
        time.sleep(FRAME_PAUSE)
