"""An answer of the site that qwenpipe has never seen (docs/reliability.md, "The unknown").

The site changes before any public client reports it. What the engine meets that it cannot
place (an error code, a phase or a status it does not know, a page that is not the chat, a body
of another type, a field it needs that is missing) is named here once: where it was met (the
step of the site, `Where`) and what was seen (`seen`, masked and cut to a line a user can send
in). The engine attaches it to the error it raises (`EngineError.unknown`); the contract
journals it (`unknown_answer`) at the one place every failure of a step passes through, and
decides by where it was met: before the click it is transient, after the click it is in doubt,
a page where the chat should be holds the account.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from ..records import record
from ..redact import mask, mask_tokens

SEEN_CHARS = 300  # what is kept of one unknown answer: enough to tell it, short enough to read
FIRST_BYTES = 160  # what is kept of its body

E = TypeVar("E")  # an EngineError (engines/base.py imports this module, not the other way)


class Where(StrEnum):
    """The step of the site an answer came from: the journal's `where` (fixed names: `report`
    and the simulator's fuzz mode rely on them)."""

    NEW_CHAT = "new_chat"  # the page a new chat is sent from
    COMPLETION = "completion"  # the reply to the page's completion request (the send)
    STREAM = "stream"  # the completion's event stream
    CHAT_JSON = "chat_json"  # a chat's page and its JSON
    CHAT_LIST = "chat_list"  # the account's chat list
    LOGIN_CHECK = "login_check"  # the login check (`/api/v2/users/status`, the page's login)
    DELETE = "delete"  # a chat's deletion


@record(frozen=True)
class UnknownAnswer:
    """An answer of the site nobody has reported yet: where it came from, and what it was."""

    where: str  # a Where; "" until the engine's call that met it says (engines/qwen/pages.py, Pages.using)
    seen: str  # masked, at most SEEN_CHARS

    def at(self, where: str) -> UnknownAnswer:
        """This answer met at `where`, unless it already says where."""
        return self if self.where else UnknownAnswer(where, self.seen)


def seen(
    *,
    status: int | None = None,
    content_type: str | None = None,
    body: str | bytes | None = None,
    code: str | None = None,
    phase: str | None = None,
    field: str | None = None,
    url: str | None = None,
    what: str | None = None,
) -> str:
    """What was seen of an unknown answer, in one masked line: the HTTP status, the content type,
    the unknown code / phase / field (or `what`, in words), the address, and the first bytes of
    the body."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    parts = [
        f"HTTP {status}" if status is not None else "",
        f"content-type {content_type}" if content_type is not None else "",
        f"code {code!r}" if code is not None else "",
        f"phase {phase!r}" if phase is not None else "",
        f"field {field}" if field is not None else "",
        what or "",
        f"at {url}" if url else "",
        f"body {' '.join(body.split())[:FIRST_BYTES]!r}" if body is not None else "",
    ]
    return cut(", ".join(p for p in parts if p))


def cut(text: str) -> str:
    """`text` masked (registered secrets, login tokens), then cut to SEEN_CHARS: a piece of a
    secret is still the secret, so masking comes first."""
    text = mask_tokens(mask(text))
    return text if len(text) <= SEEN_CHARS else text[: SEEN_CHARS - 1] + "…"


def unknown(error: E, where: str = "", **what: object) -> E:
    """`error` (an EngineError) marked as the site's unknown answer met at `where`, with what
    was seen (the keywords of `seen`). Returns the error, to be raised."""
    error.unknown = UnknownAnswer(where, seen(**what))  # type: ignore[attr-defined]
    return error
