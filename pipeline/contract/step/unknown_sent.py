"""What a first send whose answer nobody has seen leaves (contract/unknown.py): a helper of
send.py, not a handler."""

from __future__ import annotations

from ...engines.base import EngineError
from .context import Context
from .holds import hold
from .moves import InDoubt


def in_doubt(ctx: Context, account: str, err: EngineError) -> InDoubt:
    """The doubt an unknown answer (`err.unknown`) met after the prompt may have left the browser
    leaves the send in: never routed nor sent again at once (doubt.py looks again). A reply that
    left the chat (a foreign body, an unknown page: a bot check's kind) also holds the account,
    first (holds.py)."""
    hold(ctx, account, err)
    where = err.unknown.where if err.unknown and err.unknown.where else "the send"
    return InDoubt(account, f"the site answered the send ({where}) with something unknown: {err}")
