"""The answers to the page's own requests that nobody has reported (issue 37; docs/reliability.md,
"The unknown").

The page asks the site for more than the engine reads itself: the chat list beside a chat, the
login check, a new chat, a chat's JSON as it opens. When the site answers one of those with
something no reference names (an unknown error code in its JSON shape, an HTML page, a redirect
to an unknown path) the page copes or not, and the engine may never read that answer itself:
it would go unjournalled. `PageAnswers` notes the page's responses to the site's API (never the
completion, which the send reads itself) as Playwright reports them, and tells the unknown ones
when asked (`unknown`, when the engine is done with the page): the engine hands them over as
answers it read past (`noticed`), and the contract journals them (`unknown_answer`) as it
journals every other. qwenpipe's own reads through the page count as well: a reader takes an
HTML page or a redirect for "no answer, look again", and the collector leaves a chat whose JSON
holds an unknown code to its page, neither raising anything that names it. What a call's error
raised already is not journalled twice (QwenEngine._using).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from ..unknown import UnknownAnswer, Where, seen
from .api import classify_api_error
from .page import refusal_in
from .stream import COMPLETIONS_PATH
from .watcher import PageWatcher

API_PATH = "/api/"
# The step of the site (engines/unknown.Where) each of the page's API requests is: (method, path).
STEPS = (
    ("POST", re.compile(r"^/api/v2/chats/new$"), Where.NEW_CHAT),
    ("GET", re.compile(r"^/api/v2/chats/?$"), Where.CHAT_LIST),
    ("GET", re.compile(r"^/api/v2/chats/[^/]+$"), Where.CHAT_JSON),
    ("DELETE", re.compile(r"^/api/v2/chats/[^/]+$"), Where.DELETE),
    ("GET", re.compile(r"^/api/v2/users/status$|^/api/v1/auths/?$"), Where.LOGIN_CHECK),
)
MAX_NOTED = 200  # responses kept per page: a page left open for hours keeps its newest


def step_of(method: str, path: str) -> str:
    """The Where of the page's request `method path`, or "" for one of no known step."""
    return next((where for m, pattern, where in STEPS if m == method and pattern.match(path)), "")


class PageAnswers(PageWatcher):
    """The page's own responses to the site's API, told apart (`unknown`) once the engine is done
    with the page. Playwright's events are only noted here (they run inside its event dispatch);
    the bodies are read when asked."""

    def __init__(self, page: Any):
        super().__init__(page)
        self._noted: list[Any] = []
        page.on("response", self._response)

    def _response(self, response: Any) -> None:
        try:
            request = response.request
            path = urlsplit(request.url).path
            if not path.startswith(API_PATH) or COMPLETIONS_PATH in path:
                return
            self._noted.append(response)
            del self._noted[:-MAX_NOTED]
        except Exception:
            pass  # a response of a page being closed: nothing to learn from it

    def unknown(self) -> list[UnknownAnswer]:
        """The unknown answers among the responses noted since the last call (each once)."""
        noted, self._noted = self._noted, []
        found = []
        for response in noted:
            try:
                answer = _unknown_answer(response)
            except Exception:
                continue  # the page or the browser went away: its body with it
            if answer is not None:
                found.append(answer)
        return found

    def close(self) -> None:
        try:
            self._page.remove_listener("response", self._response)
        except Exception:
            pass  # the page is already closed


def _unknown_answer(response: Any) -> UnknownAnswer | None:
    """The response as an unknown answer, or None when it is one the site is known to give: its
    JSON, a success or a failure whose words the engine knows (api.classify_api_error)."""
    request = response.request
    path = urlsplit(request.url).path
    where = step_of(request.method, path)
    status = response.status
    kind = (response.headers.get("content-type") or "").lower()
    if 300 <= status < 400:
        location = response.headers.get("location") or "?"
        return UnknownAnswer(where, seen(status=status, url=path, what=f"a redirect to {location}"))
    if status == 204:
        return None  # nothing said, nothing unknown
    body = response.body()
    if "json" not in kind:
        if refusal_in(body.decode("utf-8", errors="replace"), response.url) is not None:
            return None  # the firewall's page, a bot check: known, and the readers say so
        return UnknownAnswer(where, seen(status=status, content_type=kind, url=path, body=body))
    try:
        payload = json.loads(body)
    except ValueError:
        return UnknownAnswer(where, seen(status=status, content_type=kind, url=path, body=body))
    error = classify_api_error(payload)
    if error is None or error.unknown is None:
        return None
    return UnknownAnswer(where, seen(status=status, url=path, what=error.unknown.seen))
