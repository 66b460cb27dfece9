"""The account's chats as the site's chat list and API show them, never typing: which recent
chats begin with a prompt (so a lost send is found before any resend), a chat's user messages,
and deleting a chat as the site's own list does (docs/qwen-site.md: `GET /api/v2/chats/`,
`GET` and `DELETE /api/v2/chats/<id>`, made from a page of the site with its own headers)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

from ..base import Code, FoundChat, HardError, TransientError
from ..unknown import Where
from .api import (
    ChatShapeError,
    ChatView,
    ListedChat,
    chat_list_items,
    classify_api_error,
    missing_field,
    parse_chat,
)
from .context import EngineContext, chat_id_of
from .observing import read_chat_json
from .page import ApiUnusable, fetch_api, fetch_json
from .pages import Pages

CHAT_LIST_PAGES = 3


def find_chats(ctx: EngineContext, pages: Pages, text: str = "", sha256: str = "") -> list[FoundChat]:
    """Every recent chat (CHAT_LIST_PAGES pages) whose first user message is `text` (or, with
    `sha256`, hashes to it), newest first, each with the time the site says it was made (the
    list's `created_at`, else the chat's own, else its first message's `timestamp`; None when the
    site says nothing). Raises when the list cannot be read: [] means "safe to send again"."""
    wanted = first_message_is(text, sha256)
    found: list[FoundChat] = []
    with pages.page(Where.CHAT_LIST) as page:
        pages.open(page, ctx.base_url + "/")
        pages.wait_for_app(page)
        pages.check_login_api(page)
        for number in range(1, CHAT_LIST_PAGES + 1):
            body = _api(ctx, page, f"/api/v2/chats/?page={number}&exclude_project=true")
            try:
                listed = chat_list_items(body)
            except ChatShapeError as err:
                raise missing_field(err, f"the chat list (page {number})", Where.CHAT_LIST, body) from None
            if not listed:
                break
            for item, view in _chats_starting_with(ctx, page, listed, wanted):
                created = item.created if item.created is not None else view.created
                found.append(FoundChat(ctx.chat_url(item.chat_id), created))
    return found


def user_messages(ctx: EngineContext, pages: Pages, chat_url: str) -> list[str] | None:
    """The user messages of the chat, oldest first, as its page loads it; None when the site
    says there is no such chat. Raises when the chat cannot be read."""
    chat_id = chat_id_of(chat_url)
    body = None
    try:
        with pages.page(Where.CHAT_JSON) as page:
            pages.open(page, ctx.chat_url(chat_id))
            pages.wait_for_app(page)
            pages.check_login_api(page)
            body = read_chat_json(ctx, page, chat_id).body
            error = classify_api_error(body)
            if error is not None:
                raise error
            view = parse_chat(body, chat_id)
            ctx.noticed.notice(Where.CHAT_JSON, view.unknown)
    except ApiUnusable as err:
        raise TransientError(f"cannot read the chat site's API: {err}", code=Code.API_ERROR) from None
    except ChatShapeError as err:
        raise missing_field(err, f"chat {chat_id}'s JSON", Where.CHAT_JSON, body) from None
    except HardError as err:
        if err.code == Code.CHAT_NOT_FOUND:  # the page or its JSON says so
            return None
        raise
    return [turn.user_text for turn in view.turns]


def delete_chat(ctx: EngineContext, pages: Pages, chat_url: str) -> bool:
    """Delete the chat; True when the site deleted it now, False when it no longer had it."""
    chat_id = chat_id_of(chat_url)
    with pages.page(Where.DELETE) as page:
        pages.open(page, ctx.base_url + "/")
        pages.wait_for_app(page)
        path = f"/api/v2/chats/{chat_id}"
        try:
            body = fetch_api(page, path, timeout=ctx.page_timeout, method="DELETE")
        except ApiUnusable as err:
            raise TransientError(f"cannot delete the chat: {err}", code=Code.API_ERROR) from None
        except HardError as err:
            if err.code == Code.CHAT_NOT_FOUND:
                return False
            raise
        data = body.get("data")
        if isinstance(data, dict) and data.get("status") is False:
            raise TransientError("the site did not delete the chat (status: false)", code=Code.API_ERROR)
        return True


def first_message_is(text: str, sha256: str) -> Callable[[str], bool]:
    """Whether a chat's first user message is `text` (whitespace aside) or hashes to `sha256`
    (the contract's Prompt.sha256 of the text sent)."""
    wanted = _comparable(text) if text else None

    def matches(first: str) -> bool:
        if wanted is not None and _comparable(first) == wanted:
            return True
        return bool(sha256) and hashlib.sha256(first.strip().encode("utf-8")).hexdigest() == sha256

    return matches


def _comparable(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def _api(ctx: EngineContext, page: Any, path: str) -> dict:
    try:
        return fetch_api(page, path, timeout=ctx.page_timeout)
    except ApiUnusable as err:
        raise TransientError(f"cannot read the chat site's API: {err}", code=Code.API_ERROR) from None


def _chats_starting_with(
    ctx: EngineContext, page: Any, listed: list[ListedChat], wanted: Callable[[str], bool]
) -> Iterator[tuple[ListedChat, ChatView]]:
    paths = [f"/api/v2/chats/{item.chat_id}" for item in listed]
    bodies = fetch_json(page, paths, timeout=ctx.page_timeout)
    for item, body in zip(listed, bodies, strict=True):
        error = classify_api_error(body)
        if error is not None and error.code == Code.CHAT_NOT_FOUND:
            continue  # deleted between the list and the read
        if error is not None:
            raise error
        try:
            view = parse_chat(body, item.chat_id)
        except ChatShapeError as err:
            raise missing_field(err, f"chat {item.chat_id}'s JSON", Where.CHAT_LIST, body) from None
        first = view.first_user_text
        if first is not None and wanted(first):
            yield item, view
