"""Handler of a refused first send: the account refused the prompt before taking it. It is
skipped (its quota block is recorded; a login or bot check is skipped for the rest of this run,
a hold by every run) and the send is decided again, without it."""

from __future__ import annotations

from ...engines.base import QuotaSpent
from ...times import clock as clock_words
from .context import Context
from .holds import hold
from .moves import Ask, Refused


def handle(ctx: Context, move: Refused) -> Ask:
    account, err = move.account, move.error
    if isinstance(err, QuotaSpent):
        until = ctx.ws.chat_quota.block(ctx.clock(), err.retry_after, str(err), account=account)
        ctx.log("quota", engine="qwen", account=account, until=clock_words(until), error=str(err))
    elif not hold(ctx, account, err):  # a held account is left alone by every run, not just this one
        ctx.engines.unavailable[account] = err
    ctx.say(f"{ctx.slug}: account {account} cannot send ({err}); offering it to the next account")
    ctx.account = ""
    return Ask()
