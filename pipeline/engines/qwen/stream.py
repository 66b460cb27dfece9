"""What the page itself receives (docs/qwen-site.md, "Reading an answer"): the completion's
event stream while the page that sent stays open, and the chat JSON a chat's page loads.

The site's frontend reads its answer from the stream of its own `POST /api/v2/chat/completions`
and loads `GET /api/v2/chats/<id>` when a chat's page opens. Taking those as the page receives
them asks the site for nothing the frontend would not ask. `PageTraffic` notes the page's own
requests as Playwright reports them (its event handlers only note; the bodies are read later,
outside the event dispatch), and hands over what they carried.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, NamedTuple

from ...redact import first_line
from .api import KNOWN_PHASES, KNOWN_STATUSES
from .headers import is_ours
from .watcher import PageWatcher

COMPLETIONS_PATH = "/api/v2/chat/completions"
CHAT_JSON_PATH = re.compile(r"/api/v2/chats/([a-f0-9-]{20,})(?:\?|$)")


class StreamRead(NamedTuple):
    """One completion's stream, read to its end."""

    answer: str  # the raw markdown of the "answer" phase
    finished: bool  # a `status: "finished"` in phase "answer" came
    error: str | None  # an error frame, in words
    model: str | None  # the model the site named, when a frame names one
    unknown: str = ""  # the first phase or answer status nobody has reported, as seen ("")


def parse_stream(text: str) -> StreamRead:
    """The frames of an SSE body (`data: {...}` lines), as one StreamRead. Frames that are not
    JSON (keep-alives, `[DONE]`) are skipped; a `finished` outside the answer phase ends only the
    thinking.

    One stream may interleave two candidate answers, each with its own `response_id`
    (docs/qwen-site.md, "Late autumn 2026: the answer"): the one kept is the candidate the chat
    stores and the page shows first (`response_index` 0, else the first created), and a frame of
    the other is never part of it, its `finished` included."""
    answer: list[str] = []
    finished, error, model, unknown = False, None, None, ""
    kept: str | None = None  # the response_id of the candidate read
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        try:
            data = json.loads(line[5:])
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        created = data.get("response.created")
        if isinstance(created, dict):
            if kept is None or created.get("response_index") == 0:
                kept = created.get("response_id") or kept
                model = created.get("model") or model
            continue
        if kept is not None and data.get("response_id") not in (None, kept):
            continue  # the other candidate's frame
        if data.get("error"):
            error = _words(data["error"])
        if isinstance(data.get("model"), str):
            model = data["model"]
        for choice in data.get("choices") or []:
            change = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(change, dict):
                continue
            unknown = unknown or _unknown_in(change)
            if change.get("phase") == "answer":  # the thinking phases are never the article
                content = change.get("content")
                answer.append(content if isinstance(content, str) else "")
                finished = finished or change.get("status") == "finished"
    return StreamRead("".join(answer), finished, error, model, unknown)


def _unknown_in(change: dict) -> str:
    """A frame's phase, or its answer's status, that nobody has reported, in words; else ""."""
    phase, status = change.get("phase"), change.get("status")
    if phase is not None and phase not in KNOWN_PHASES:
        return f"phase {str(phase)[:40]!r}"
    if phase == "answer" and status is not None and status not in KNOWN_STATUSES:
        return f"status {str(status)[:40]!r} in phase 'answer'"
    return ""


def _words(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("details") or error.get("message") or error.get("code") or error)
    return str(error)


class Unreadable(NamedTuple):
    """The page's stream cannot be had here (the browser does not hand it over)."""

    why: str


class PageTraffic(PageWatcher):
    """The page's own completion streams and chat loads (never qwenpipe's own reads).

    Chat loads come from Playwright's request events. A stream does not: a page that reads its
    response incrementally (as the frontend does) leaves the browser no body to hand over, and
    the request is even reported as aborted at its end. `watch_streams` therefore asks the
    browser over the DevTools protocol to stream the completion's bytes to us as they arrive
    (`Network.streamResourceContent`), exactly as the page receives them.
    """

    def __init__(self, page: Any):
        super().__init__(page)
        self._chat_loads: list[Any] = []  # finished GETs of a chat's JSON, oldest first
        self._loaded: set[str] = set()  # the chats the page has loaded at least once
        self._latest: dict[str, dict] = {}  # chat id -> its last load handed over
        self._dates: dict[str, str | None] = {}  # chat id -> that load's Date header (the site's clock)
        self._cdp: Any = None
        self._streams: dict[str, list[bytes]] = {}  # request id -> the bytes so far
        self._ended: dict[str, str | None] = {}  # request id -> None (finished) or why it failed
        self._order: list[str] = []  # stream request ids, oldest first
        self._no_streams: str | None = None  # why streams cannot be watched
        self._plain_replies = 0  # completions answered without a stream (JSON)
        self._plain: dict[str, list[bytes]] = {}  # request id -> the bytes of such an answer
        page.on("requestfinished", self._finished)

    def watch_streams(self) -> None:
        """From now on, keep the bytes of every completion stream the page receives."""
        if self._cdp is not None or self._no_streams is not None:
            return
        try:
            cdp = self._page.context.new_cdp_session(self._page)
            cdp.send("Network.enable")
        except Exception as err:  # not Chromium, or the page went away
            self._no_streams = f"the browser cannot hand over the page's stream ({first_line(err, 120)})"
            return
        cdp.on("Network.responseReceived", self._response)
        cdp.on("Network.dataReceived", self._data)
        cdp.on("Network.loadingFinished", lambda event: self._end(event, None))
        cdp.on("Network.loadingFailed", lambda event: self._end(event, event.get("errorText") or "failed"))
        self._cdp = cdp

    def _response(self, event: dict) -> None:
        response = event.get("response") or {}
        kind = str(response.get("mimeType") or "") + str(
            (response.get("headers") or {}).get("content-type", "")
        )
        if COMPLETIONS_PATH not in str(response.get("url", "")):
            return
        request_id = event["requestId"]
        if "event-stream" not in kind:
            # A refusal, or a site that answers the send without a stream. Its body is kept as it
            # arrives: a page that leaves for a verification page takes the body with it, and
            # only this reply proves that the site took nothing (docs/qwen-site.md).
            self._plain_replies += 1
            # Noted first: the call below lets other events through, its end among them.
            self._plain[request_id] = chunks = []
            try:
                buffered = self._cdp.send("Network.streamResourceContent", {"requestId": request_id})
            except Exception:  # already whole: taken when it is reported finished (_end)
                return
            if not chunks:
                chunks.append(base64.b64decode(buffered.get("bufferedData") or ""))
            return
        try:  # what arrived before this moment, then every chunk as a dataReceived event
            buffered = self._cdp.send("Network.streamResourceContent", {"requestId": request_id})
        except Exception as err:
            self._no_streams = f"the browser did not stream the page's completion ({first_line(err, 120)})"
            return
        self._streams[request_id] = [base64.b64decode(buffered.get("bufferedData") or "")]
        self._order.append(request_id)

    def _data(self, event: dict) -> None:
        request_id = event.get("requestId")
        chunks = self._streams.get(request_id, self._plain.get(request_id))
        if chunks is not None and event.get("data"):
            chunks.append(base64.b64decode(event["data"]))

    def _end(self, event: dict, why: str | None) -> None:
        request_id = event.get("requestId")
        if request_id in self._streams:
            self._ended[request_id] = why
        elif request_id in self._plain and not self._plain[request_id] and why is None:
            try:
                whole = self._cdp.send("Network.getResponseBody", {"requestId": request_id})
            except Exception:
                return  # the page has left and taken it along: Playwright's read may have it
            body = whole.get("body") or ""
            data = base64.b64decode(body) if whole.get("base64Encoded") else body.encode("utf-8")
            self._plain[request_id] = [data]

    def plain_replies(self) -> list[dict]:
        """The JSON bodies of the completions answered without a stream, oldest first, as far as
        they parse whole (what the page received, even after it left for another page: its
        request may then never be reported finished)."""
        bodies = []
        for chunks in self._plain.values():
            try:
                body = json.loads(b"".join(chunks).decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                continue
            if isinstance(body, dict):
                bodies.append(body)
        return bodies

    def plain_texts(self) -> list[str]:
        """The bodies of the completions answered without a stream, as text, whatever they are
        (JSON, a verification page): what botcheck.py reads a foreign reply from."""
        return [b"".join(chunks).decode("utf-8", errors="replace") for chunks in self._plain.values()]

    def _finished(self, request: Any) -> None:
        # Inside Playwright's event dispatch: note the request, read its body later.
        try:
            found = CHAT_JSON_PATH.search(request.url) if request.method == "GET" else None
            if found and not is_ours(request.headers):
                self._chat_loads.append(request)
                self._loaded.add(found.group(1))
        except Exception:
            pass  # a request of a page being closed

    def stream_began(self) -> bool:
        """Whether the site took a message: a completion stream of the page's has opened with
        its `response.created` frame."""
        return any(b"response.created" in b"".join(self._streams[r]) for r in self._order)

    def answered_without_stream(self) -> bool:
        """Whether a completion was answered with JSON (a refusal, or a site that does not
        stream) and no stream has opened."""
        return bool(self._plain_replies) and not self._order

    def stream(self) -> StreamRead | Unreadable | None:
        """The page's last completion stream once it finished its answer or ended, or None while
        it runs (or none has started). Unreadable when streams cannot be watched here."""
        if not self._order:
            if self._no_streams:
                return Unreadable(self._no_streams)
            if self._plain_replies:
                return Unreadable("the site answered the send without a stream")
            return None
        request_id = self._order[-1]
        read = parse_stream(b"".join(self._streams[request_id]).decode("utf-8", errors="replace"))
        if read.finished or read.error or request_id in self._ended:
            return read  # an end without `finished` is an answer cut short: the caller says so
        return None

    def has_loaded(self, chat_id: str) -> bool:
        """Whether the page has loaded this chat's JSON itself at least once."""
        return chat_id in self._loaded

    def has_fresh_load(self, chat_id: str) -> bool:
        """Whether a load of this chat's JSON by the page waits to be handed over."""
        return any(chat_id in request.url for request in self._chat_loads)

    def chat_load(self, chat_id: str) -> dict | None:
        """The newest chat JSON of `chat_id` the page loaded itself since the last call (then
        handed over once), or None."""
        while self._chat_loads:
            request = self._chat_loads.pop()
            match = CHAT_JSON_PATH.search(request.url)
            if not match or match.group(1) != chat_id:
                continue
            self._chat_loads.clear()  # older loads are older news
            try:
                response = request.response()
                if response is None or response.headers.get("x-actual-status-code") == "404":
                    return None
                body = response.json()
            except Exception:
                return None
            if not isinstance(body, dict):
                return None
            self._latest[chat_id] = body
            self._dates[chat_id] = response.headers.get("date")
            return body
        return None

    def latest_load(self, chat_id: str) -> dict | None:
        """The last chat JSON of `chat_id` handed over by chat_load (what the page drew last)."""
        return self._latest.get(chat_id)

    def load_date(self, chat_id: str) -> str | None:
        """The Date header of that last load: the site's clock when it answered (steady.site_time)."""
        return self._dates.get(chat_id)

    def close(self) -> None:
        try:
            self._page.remove_listener("requestfinished", self._finished)
        except Exception:
            pass
        if self._cdp is not None:
            try:
                self._cdp.detach()
            except Exception:
                pass  # the page is gone, and its session with it
            self._cdp = None
