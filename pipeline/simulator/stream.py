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


def delta(content: str, phase: str, status: str) -> bytes:
    return frame(
        {"choices": [{"delta": {"role": "assistant", "content": content, "phase": phase, "status": status}}]}
    )


def completion_stream(store, chat_id: str, reply: dict) -> Iterator[bytes]:
    """The frames of one accepted send, until its answer finishes, fails or is stopped.

    `reply` is what ChatStore.send answered (its ids)."""
    data = reply["data"]
    message_id = data["message_id"]
    first = store.message_progress(chat_id, message_id)
    model = first["model"] if first else None
    created = {"chat_id": chat_id, "parent_id": data["parent_id"], "response_id": message_id}
    yield frame({"response.created": {**created, "model": model}})
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
            out.append(delta(seen["thinking"][thought:], "thinking_summary", "typing"))
            thought = len(seen["thinking"])
        if seen["thinking_done"] and seen["thinking_enabled"] and not thinking_closed:
            out.append(delta("", "thinking_summary", "finished"))  # ends the thinking, not the answer
            thinking_closed = True
        if len(seen["answer"]) > answered:
            out.append(delta(seen["answer"][answered:], "answer", "typing"))
            answered = len(seen["answer"])
        if seen["error"]:
            out.append(frame({"error": seen["error"]}))
        elif seen["finished"]:
            out.append(delta("", "answer", "finished"))
        yield from out
        if seen["error"] or seen["finished"]:
            return
        if out:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= KEEP_ALIVE:
            yield b": keep-alive\n\n"
            quiet_since = time.monotonic()
        time.sleep(FRAME_PAUSE)
