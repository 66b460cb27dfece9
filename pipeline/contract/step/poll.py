"""Handler of Action.POLL: its chat is due a look, unless it was deleted (never opened again)."""

from __future__ import annotations

from .. import cleanup
from .context import Context
from .moves import Ask, Look, LookTurns, look


def handle(step: Context, move: Ask) -> Look | LookTurns:
    if cleanup.deleted_chat(step.ws.store, step.slug, step.chat_url):
        raise cleanup.deleted_error(step.chat_url, step.article.url)
    return look(len(step.prompt.turns))
