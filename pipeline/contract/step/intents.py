"""The record of a send about to happen (the store's intent, and the chat it names), and of one
that never happened: shared by the first send, a later turn's send and the recovery of an
interrupted send."""

from __future__ import annotations

import os
from collections.abc import Callable

from ... import files
from ...engines.base import EngineError
from ...store.protocol import Intent
from .. import sent_chats
from ..article import chat_url, write_marker
from .context import Context


def record_intent(ctx: Context, turn: int, account: str, now: float) -> None:
    """Record in the store that `turn` is about to be sent from `account`, before the click:
    the store refuses a second send of a turn (AlreadySent). In a shared batch the lease is
    checked in the same transaction, so a host that lost it records nothing and sends nothing."""
    owner = ctx.lease.owner if ctx.lease is not None else ""
    with ctx.ws.store.transaction() as store:
        if ctx.lease is not None:
            ctx.lease.check(store)
        if turn == 1 and ctx.lease is None:
            store.forget_sends(ctx.slug)  # an earlier send whose files were deleted, or in doubt
        else:  # only an intent that never got its URL (in doubt: the chat said it never arrived)
            store.withdraw_intent(ctx.slug, turn)
        chat_id = "" if turn == 1 else None  # a first send names its chat (send.name_chat)
        intent = Intent(turn, now, ctx.prompt.sha256, account, os.getpid(), owner, chat_id)
        store.record_intent(ctx.slug, intent)


def unsent(ctx: Context, err: EngineError, turn: int = 1) -> None:
    """The send just announced ("sending") failed before anything was submitted: it is no
    send. The journal says so (the daily count drops it) and the cycle's budget gets it back."""
    give_back(ctx, turn, ctx.account, err.code)
    if ctx.budget is not None:
        ctx.budget.give_back()


def give_back(ctx: Context, turn: int, account: str, code: str, *before: tuple[str, dict]) -> None:
    """A send announced but never taken by the site: its intent goes and an `unsent` step is
    written (after the `before` events) in ONE store transaction, so a kill cannot leave a send
    counted against the day that the site never took; the intent marker goes after it (a
    kill between leaves a marker whose recovery finds nothing and says `unsent` again)."""
    with ctx.ws.store.transaction() as store:
        store.withdraw_intent(ctx.slug, turn)
        for event, fields in before:
            ctx.ws.journal.append_in(store, ctx.slug, event, **fields)
        extra = {"turn": turn} if turn > 1 else {}
        ctx.ws.journal.append_in(
            store, ctx.slug, "unsent", engine="qwen", account=account or None, code=code, **extra
        )
    if turn == 1:
        files.remove(ctx.article.sending)


def name_chat(ctx: Context, marker: dict) -> Callable[[str], None]:
    """What the engine calls with the chat id the page's completion names, before it lets the
    request go: the id goes into the intent marker (atomically, fsynced) and the store's
    intent (with the lease checked, in a shared batch). If this raises, nothing is sent."""

    def named(chat_id: str) -> None:
        url = chat_url(ctx.qwen.base_url, chat_id, ctx.article.sending)  # a chat id we can open later
        write_marker(ctx.article.sending, {**marker, "chat_id": chat_id})
        # The account's other workspaces learn it is this article's chat (sent_chats.py).
        sent_chats.record(ctx.ws.config, marker["account"], url, ctx.article.folder, ctx.slug)
        with ctx.ws.store.transaction() as store:
            if ctx.lease is not None:
                ctx.lease.check(store)
            store.name_chat(ctx.slug, 1, chat_id)
        ctx.crash("after_naming")

    return named
