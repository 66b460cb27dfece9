"""The headers of the page's own API calls, learned from its traffic (docs/qwen-site.md, "The
frontend's own headers").

Since mid-2026 the site answers only API calls that carry what its frontend sends: its build
number as `version` (it changes with every release and is published nowhere), `bx-v`,
`source`, `timezone`, the Bearer token, and a fresh `x-request-id` per call. So nothing here
is written from knowledge of the site: every page qwenpipe opens has a `HeaderBook` that
watches the page's own requests to `/api/` and keeps the latest one's headers, minus what is
per call or belongs to the browser. A read of qwenpipe's own carries exactly those, with a
request id of its own; when the page has made no API call yet, there is nothing to copy and
no read is made.
"""

from __future__ import annotations

import time
import uuid
import weakref
from typing import Any
from urllib.parse import urlsplit

# Set per call (the request id, the anti-bot script's per-request tokens, the body's length) or
# by the browser itself (a page cannot set these: fetch drops them).
PER_CALL = frozenset({"x-request-id", "bx-ua", "bx-umidtoken", "content-length"})
BROWSER_OWN = frozenset(
    {
        "accept-encoding",
        "accept-language",
        "connection",
        "cookie",
        "host",
        "origin",
        "referer",
        "user-agent",
        "priority",
    }
)
LEARN_PAUSE_MS = 50
# The header the frontend's build travels in: when a page's learned set lacks it, the page is
# not the frontend (an error page, the sign-in page) and its calls teach nothing.
BUILD_HEADER = "version"

_BOOKS: weakref.WeakKeyDictionary[Any, HeaderBook] = weakref.WeakKeyDictionary()
_OURS: set[str] = set()  # the request ids of every read of our own, in every page


def is_ours(request_headers: dict[str, str]) -> bool:
    """Whether a request (by its headers) is a read qwenpipe made itself, not the page's own."""
    return {k.lower(): v for k, v in request_headers.items()}.get("x-request-id") in _OURS


class NoHeaders(Exception):
    """The page made no API call to learn the frontend's headers from."""


class HeaderBook:
    """What one page's own API calls carried (the newest call wins)."""

    def __init__(self, page: Any):
        self._headers: dict[str, str] = {}
        self.learned_from: str | None = None  # the path of the call the headers come from
        self.calls_seen = 0
        page.on("request", self._seen)

    def _seen(self, request: Any) -> None:
        # Runs inside Playwright's event dispatch: plain data only, never a call back into it.
        try:
            if "/api/" not in urlsplit(request.url).path:
                return
            headers = {k.lower(): v for k, v in request.headers.items()}
        except Exception:
            return  # a request of a page being closed
        if headers.get("x-request-id") in _OURS:
            return  # our own read: nothing to learn from it
        kept = {k: v for k, v in headers.items() if k not in PER_CALL and k not in BROWSER_OWN}
        kept = {k: v for k, v in kept.items() if not k.startswith("sec-") and not k.startswith(":")}
        if BUILD_HEADER not in kept and BUILD_HEADER in self._headers:
            return  # a call of another kind (the sign-in form): the frontend's set stays
        self._headers = kept
        self.learned_from = urlsplit(request.url).path
        self.calls_seen += 1

    @property
    def learned(self) -> bool:
        return bool(self._headers)

    def for_call(self) -> dict[str, str]:
        """The learned headers with a fresh request id, remembered as ours. NoHeaders when the
        page has made no API call yet."""
        if not self._headers:
            raise NoHeaders("the page has made no API call of its own to learn its headers from")
        request_id = str(uuid.uuid4())
        _OURS.add(request_id)
        return {**self._headers, "x-request-id": request_id}

    def forget(self) -> None:
        """Drop what was learned (the site refused it as stale): the next page load teaches anew."""
        self._headers = {}
        self.learned_from = None


def watch(page: Any) -> HeaderBook:
    """The HeaderBook of `page`, started now if it had none (it learns only from the calls the
    page makes from then on: start it before the page loads)."""
    book = _BOOKS.get(page)
    if book is None:
        book = _BOOKS[page] = HeaderBook(page)
    return book


def headers_for_call(page: Any, wait: float = 0.0) -> dict[str, str]:
    """The headers for one read of our own from `page`, waiting up to `wait` seconds for the
    page's first API call when it has made none yet. Raises NoHeaders when it has not."""
    book = watch(page)
    deadline = time.monotonic() + wait
    while not book.learned and time.monotonic() < deadline:
        page.wait_for_timeout(LEARN_PAUSE_MS)  # Playwright delivers the page's events meanwhile
    return book.for_call()


def headers_for_calls(page: Any, count: int, wait: float = 0.0) -> list[dict[str, str]]:
    """`count` header sets (one request id each), as headers_for_call."""
    first = headers_for_call(page, wait)
    book = watch(page)
    return [first, *(book.for_call() for _ in range(count - 1))]
