"""Handler of Action.POLL: its chat is due a look, unless it was deleted (never opened again)."""

from __future__ import annotations

from .. import cleanup
from .context import Context
from .moves import Ask, Look, LookTurns, look


def handle(ctx: Context, move: Ask) -> Look | LookTurns:
    if cleanup.deleted_chat(ctx.ws.store, ctx.slug, ctx.chat_url):
        raise cleanup.deleted_error(ctx.chat_url, ctx.article.url)
    return look(len(ctx.prompt.turns))
