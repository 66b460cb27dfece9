"""Handler of an interrupted send that named no chat (see recover.named_chat_id): its chat is
found by the text that was sent (its hash in the marker, when the prompt was edited since) and
taken only when it is surely this article's (adoption.adoptable_chat). A list that cannot be read,
no chat that holds it, or none that is surely this article's proves nothing: InDoubt (doubt.py)."""

from __future__ import annotations

from ...engines.base import EngineError
from .. import sent_chats
from .adoption import adoptable_chat, chats_in_batch, chats_of_other_articles
from .context import Context
from .moves import Adopt, InDoubt, Search
from .proof import unreadable


def handle(ctx: Context, move: Search) -> Adopt | InDoubt:
    account, marker = move.account, move.marker
    ctx.say(
        f"{ctx.slug}: an earlier send was interrupted; looking for its chat in account {account}'s chat list"
    )
    sent_sha = marker.get("prompt_sha256")
    chat = ctx.chat(account)
    edited = isinstance(sent_sha, str) and sent_sha and sent_sha != ctx.prompt.sha256
    try:
        # what was sent (its hash), not the edited text
        found = chat.find_chats(sha256=sent_sha) if edited else chat.find_chats(ctx.prompt.turns[0])
    except EngineError as err:
        if not unreadable(err):
            raise
        return InDoubt(account, f"account {account}'s chat list cannot be read: {err}")
    sent_sha = sent_sha if edited else ctx.prompt.sha256
    if not found:  # a new chat the site does not list yet looks just like a send never made
        return InDoubt(account, f"no chat in account {account}'s list holds what was sent (yet)")
    others = sent_chats.others(ctx.ws.config, account, ctx.article.folder, ctx.slug)
    others.update(chats_of_other_articles(ctx.article))  # this workspace's own say it best
    if ctx.lease is not None:  # a shared batch: every host's sent chats are other articles' too
        others.update(chats_in_batch(ctx.ws.store, ctx.slug))
    url, why = adoptable_chat(found, marker, sent_sha, others, account)
    if url is None:
        return InDoubt(account, f"no chat is surely this article's: {why}")
    return Adopt(url, marker)
