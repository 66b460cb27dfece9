"""A chat's whole history when the page loaded only its last page (docs/qwen-site.md, "Late
autumn 2026: the history in pages").

The late-autumn page loads a chat with `GET /api/v2/chats/<id>?direction=up&limit=10` (over
XHR): the last ten messages, the oldest of them still linking to a parent the load does not
hold. Judged as it stands, a chat of more than five turns looks like a chat that starts in the
middle, which is not the prompt's turns. So before anything is judged, a load that is such a
page is completed: the whole chat is read with the page's own learned headers (a read like the
page's, page.fetch_api). The page itself draws only the turns its load held; `hidden` says how
many earlier turns it left out, so the page's turn counts are compared with the right number.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .api import classify_api_error, parse_chat
from .page import ApiUnusable, fetch_api


class History(NamedTuple):
    """A chat's JSON, whole, and how the page came by what it draws."""

    body: dict  # the whole chat (the page's own load when that was whole)
    by_page: bool  # the page loaded the chat itself (its last turn at least)
    # The answers and the user messages the page's load left out: it draws only the ones after.
    # They differ by one when the page starts with an answer whose message is on the page before.
    hidden: int = 0
    hidden_users: int = 0
    date: str | None = None  # the Date header of the page's load (by_page): the site's clock then


def is_page(body: Any) -> bool:
    """Whether a successful chat JSON holds only part of the history: its oldest message links
    to a parent the JSON does not hold (a whole chat starts with a message without a parent)."""
    if not isinstance(body, dict) or classify_api_error(body) is not None:
        return False
    messages = _messages(body)
    ids = {m.get("id") for m in messages}
    return any(m.get("parentId") and m.get("parentId") not in ids for m in messages)


def _messages(body: dict) -> list[dict]:
    """The message objects of a chat JSON in either shape (api.py reads them in order)."""
    chat = (body.get("data") or {}).get("chat") if isinstance(body.get("data"), dict) else None
    if not isinstance(chat, dict):
        return []
    listed = chat.get("messages")
    if isinstance(listed, list) and listed:
        return [m for m in listed if isinstance(m, dict)]
    history = chat.get("history") if isinstance(chat.get("history"), dict) else {}
    keyed = history.get("messages") if isinstance(history.get("messages"), dict) else {}
    return [{"id": key, **m} for key, m in keyed.items() if isinstance(m, dict)]


def whole(
    page: Any, chat_id: str, body: dict, by_page: bool, *, timeout: float, drawn: dict | None = None
) -> History:
    """The chat whole: `body` itself when it is, else the whole chat read now (ApiUnusable, or
    the engine error the site answered, when it cannot be had: never judged from a page).
    `drawn`: the page's last load of the chat, when `body` is a read of ours (what the page
    draws is still that load and the turns it drew since)."""
    if not is_page(body):
        answers, users = hidden_before(body, drawn) if drawn is not None else (0, 0)
        return History(body, by_page, answers, users)
    full = fetch_api(page, f"/api/v2/chats/{chat_id}", timeout=timeout)
    if is_page(full):
        raise ApiUnusable("the whole chat read holds only part of its history (a page)")
    parse_chat(full, chat_id)  # ChatShapeError when it is no chat we can read: the caller says so
    return History(full, by_page, *hidden_before(full, body))


def hidden_before(full: dict, drawn: dict) -> tuple[int, int]:
    """(answers, user messages) of the whole chat `full` that the page's load `drawn` left out:
    the ancestors of its oldest message. Counted along the parents, not as the difference of
    the two counts: the page draws the turns sent after its load too (a later turn streamed
    into it), so a read of ours made since holds more messages than the load without the page
    hiding more (the paged history's turn 6 of 7 read as never drawn until the deadline)."""
    if not is_page(drawn):
        return 0, 0
    loaded = _messages(drawn)
    held = {m.get("id") for m in loaded}
    parents = {m.get("id"): m for m in _messages(full)}
    ancestor = next((m["parentId"] for m in loaded if m.get("parentId") and m["parentId"] not in held), None)
    counts = {"assistant": 0, "user": 0}
    seen: set = set()
    while ancestor in parents and ancestor not in seen:  # a loop in the links ends the walk
        seen.add(ancestor)
        message = parents[ancestor]
        if message.get("role") in counts:
            counts[message.get("role")] += 1
        ancestor = message.get("parentId")
    return counts["assistant"], counts["user"]
