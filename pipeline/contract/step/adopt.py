"""Handler of the interrupted send's chat, found: it is this article's. Its URL goes to disk and
the store records the send; nothing is sent again."""

from __future__ import annotations

import os

from ... import files
from ...store.protocol import Intent
from .. import sent_chats
from .context import Context
from .moves import Adopt, Ask


def handle(step: Context, move: Adopt) -> Ask:
    url, marker = move.url, move.marker
    sent_sha = marker.get("prompt_sha256")
    sent_sha = sent_sha if isinstance(sent_sha, str) and sent_sha else step.prompt.sha256
    edited = sent_sha != step.prompt.sha256
    files.atomic_write(step.article.url, url + "\n")
    files.remove(step.article.sending)
    remember_send(step, url, marker, sent_sha)
    sent_chats.record(step.ws.config, step.account, url, step.article.folder, step.slug)
    step.state.sent_at = step.state.sent_at or step.clock()
    step.state.engine = "qwen"
    step.state.next_try = 0.0  # a doubt's next look (doubt.py) is no wait for the chat's poll
    step.state.sent_sha256 = sent_sha  # the text the chat got, whatever the file says now
    step.save()
    step.log(
        "recovered",
        engine="qwen",
        account=step.account,
        chat_url=url,
        **({"prompt_edited_after_send": True} if edited else {}),
    )
    step.say(f"{step.slug}: found the chat the interrupted send made: {url}; not sending again")
    if edited:
        step.say(
            f"{step.slug}: {step.prompt.path} changed after it was sent; the chat answers the "
            f"version sent. To send the new text instead: `qwenpipe replay {step.slug} --fresh`"
        )
    step.chat_url, step.recovered = url, True
    return Ask()


def remember_send(step: Context, url: str, marker: dict | None, sent_sha: str) -> None:
    """The store's record of the first send, with the chat the recovery found: an intent
    recorded by an older version (or none at all) gets the marker's account and time."""
    sends = [s for s in step.ws.store.sends(step.slug) if s.turn == 1]
    since = marker.get("time") if marker else None
    owner = step.lease.owner if step.lease is not None else ""
    with step.ws.store.step() as store:
        if not sends or sends[0].account != step.account or sends[0].chat_url not in ("", url):
            store.forget_sends(step.slug)
            when = float(since) if isinstance(since, (int, float)) else step.clock()
            intent = Intent(1, when, sent_sha, step.account, os.getpid(), owner)
            store.record_intent(step.slug, intent)
        store.record_sent(step.slug, 1, url, step.clock())
