"""Handler of the interrupted send's chat, found: it is this article's. Its URL goes to disk and
the store records the send; nothing is sent again."""

from __future__ import annotations

import os

from ... import files
from ...store.protocol import Intent
from .. import sent_chats
from .context import Context
from .moves import Adopt, Ask


def handle(ctx: Context, move: Adopt) -> Ask:
    url, marker = move.url, move.marker
    sent_sha = marker.get("prompt_sha256")
    sent_sha = sent_sha if isinstance(sent_sha, str) and sent_sha else ctx.prompt.sha256
    edited = sent_sha != ctx.prompt.sha256
    files.atomic_write(ctx.article.url, url + "\n")
    files.remove(ctx.article.sending)
    remember_send(ctx, url, marker, sent_sha)
    sent_chats.record(ctx.ws.config, ctx.account, url, ctx.article.folder, ctx.slug)
    ctx.state.sent_at = ctx.state.sent_at or ctx.clock()
    ctx.state.engine = "qwen"
    ctx.state.next_try = 0.0  # a doubt's next look (doubt.py) is no wait for the chat's poll
    ctx.state.sent_sha256 = sent_sha  # the text the chat got, whatever the file says now
    ctx.save()
    ctx.log(
        "recovered",
        engine="qwen",
        account=ctx.account,
        chat_url=url,
        **({"prompt_edited_after_send": True} if edited else {}),
    )
    ctx.say(f"{ctx.slug}: found the chat the interrupted send made: {url}; not sending again")
    if edited:
        ctx.say(
            f"{ctx.slug}: {ctx.prompt.path} changed after it was sent; the chat answers the "
            f"version sent. To send the new text instead: `qwenpipe replay {ctx.slug} --fresh`"
        )
    ctx.chat_url, ctx.recovered = url, True
    return Ask()


def remember_send(ctx: Context, url: str, marker: dict | None, sent_sha: str) -> None:
    """The store's record of the first send, with the chat the recovery found: an intent
    recorded by an older version (or none at all) gets the marker's account and time."""
    sends = [s for s in ctx.ws.store.sends(ctx.slug) if s.turn == 1]
    since = marker.get("time") if marker else None
    owner = ctx.lease.owner if ctx.lease is not None else ""
    with ctx.ws.store.transaction() as store:
        if not sends or sends[0].account != ctx.account or sends[0].chat_url not in ("", url):
            store.forget_sends(ctx.slug)
            when = float(since) if isinstance(since, (int, float)) else ctx.clock()
            intent = Intent(1, when, sent_sha, ctx.account, os.getpid(), owner)
            store.record_intent(ctx.slug, intent)
        store.record_sent(ctx.slug, 1, url, ctx.clock())
