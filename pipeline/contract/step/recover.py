"""Handler of Action.RECOVER: a marker without a URL, so the last send may have reached the site.
The chat it named before the prompt left the browser says: a message in it means sent (Adopt);
the chat read and holding none is the proof it was never sent (NeverSent); a chat that cannot be
read (not found, an error, a page that is not the chat, a time-out) proves nothing (InDoubt: a
site slow to show a new chat, or one that hides it). An intent that names no chat (killed
before it was recorded, or written by an older version): its chat is searched for by what was
sent (Search)."""

from __future__ import annotations

from ...engines.base import EngineError
from ..article import chat_url, read_marker
from .context import Context
from .moves import Adopt, Ask, InDoubt, NeverSent, Search
from .proof import unreadable


def handle(ctx: Context, move: Ask) -> Adopt | NeverSent | Search | InDoubt:
    account = ctx.sender()
    ctx.only = (account,)  # a send after this goes to that account, where the chat may be
    marker = read_marker(ctx.article.sending) or {}
    chat_id = named_chat_id(ctx, marker)
    ctx.log("recovering", engine="qwen", account=account)
    if not chat_id:
        return Search(account, marker)
    try:
        url = chat_url(ctx.qwen.base_url, chat_id, ctx.article.sending)
    except EngineError as err:  # a chat the site never named: nothing to open, nothing proven
        return InDoubt(account, str(err))
    ctx.say(f"{ctx.slug}: an earlier send was interrupted; opening the chat it named: {url}")
    try:
        messages = ctx.chat(account).user_messages(url)
    except EngineError as err:
        if not unreadable(err):
            raise
        return InDoubt(account, f"the chat it named ({url}) cannot be read: {err}")
    if messages is None:
        return InDoubt(account, f"the site says the chat it named ({url}) is not there")
    if not messages:
        return NeverSent(account, f"the chat it named ({url}) holds no message")
    return Adopt(url, marker)


def named_chat_id(ctx: Context, marker: dict) -> str:
    """The chat the interrupted send named, or "" when none is on record: killed before the
    click, or while the page's completion was held and the chat not yet recorded (a browser
    whose driver dies lets what it held go: that send may have reached the site), or an
    intent an older version wrote. The marker and the store's intent are written one after
    the other: either may have it."""
    named = marker.get("chat_id")
    if isinstance(named, str) and named:
        return named
    sends = [s for s in ctx.ws.store.sends(ctx.slug) if s.turn == 1 and not s.chat_url]
    return (sends[0].chat_id or "") if sends else ""
