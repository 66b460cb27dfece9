"""The page's own completion request, held until the chat it names is on record.

A prompt leaves the browser only in the page's `POST /api/v2/chat/completions?chat_id=...`
(docs/qwen-site.md, "Sending"). A Playwright route holds that request while the caller records
the chat id (the contract writes it into the intent marker and the store); then the browser
itself sends it (`route.continue_()`, never a request of ours). When the id cannot be recorded,
the request is aborted: nothing was sent. So a crash at any moment leaves either no completion
sent, or a record naming the one chat it went into: recovery opens that chat instead of
guessing from the chat list.

The handler runs inside Playwright's event dispatch: the callback may write files and the
store, but must not call Playwright.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlparse

from ..base import Code, EngineError, HardError, TransientError
from ..unknown import Where, unknown
from .api import CHAT_ID_RE

COMPLETIONS_ROUTE = "**/api/v2/chat/completions*"

ChatIdCallback = Callable[[str], None]


def named_chat(url: str, body: str | None) -> str:
    """The chat id a completion request names: its query's `chat_id`, else its body's; ""."""
    found = parse_qs(urlparse(url).query).get("chat_id", [""])[0]
    if found:
        return found
    try:
        data = json.loads(body or "{}")
    except ValueError:
        return ""
    value = data.get("chat_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


class CompletionHold:
    """Holds each completion request of one page until `on_chat_id(chat_id)` returned.

    `released`: the chat ids whose request went on to the site (once one has, the prompt may
    have been sent). `refused`: why a request was aborted (nothing sent), raised by `check` as it
    was raised (a store's error stays the store's; an EngineError is marked `nothing_sent`)."""

    def __init__(self, on_chat_id: ChatIdCallback | None):
        self.on_chat_id = on_chat_id
        self.released: list[str] = []
        self.refused: Exception | None = None

    @contextmanager
    def on(self, page: Any) -> Iterator[CompletionHold]:
        """Hold the page's completion requests while the block runs."""
        page.route(COMPLETIONS_ROUTE, self._handle)
        try:
            yield self
        finally:
            try:
                page.unroute(COMPLETIONS_ROUTE, self._handle)
            except Exception:
                pass  # the page is gone, and its routes with it

    def _handle(self, route: Any) -> None:
        request = route.request
        if self.refused is not None:  # one refusal stops every later try of this send
            route.abort()
            return
        if request.method != "POST":
            route.continue_()
            return
        try:
            chat_id = named_chat(request.url, request.post_data)
            if not chat_id:
                raise HardError(
                    "the page's completion request names no chat (the site changed how it sends); "
                    "it was not let go: a crash after it could not be told from no send",
                    code=Code.UNNAMED_CHAT,
                )
            if not CHAT_ID_RE.fullmatch(chat_id):
                # The page made its chat from an answer nobody has seen (a new chat without its
                # id): a chat of that name could never be found again. Not let go: no send.
                raise unknown(
                    TransientError(
                        f"the page's completion request names no chat id it could have had from "
                        f"the site ({chat_id[:40]!r}): the new chat's answer was not one we know",
                        code=Code.MISSING_FIELD,
                    ),
                    Where.NEW_CHAT,
                    what=f"the completion named chat {chat_id[:40]!r}",
                )
            if self.on_chat_id is not None:
                self.on_chat_id(chat_id)
        except Exception as err:  # not on record: the request never leaves the browser
            if isinstance(err, EngineError):
                err.nothing_sent = True
            self.refused = err
            route.abort()
            return
        self.released.append(chat_id)
        route.continue_()

    def check(self) -> None:
        """Raise why a completion was held back (nothing sent), if one was."""
        if self.refused is not None:
            raise self.refused
