"""Handler of the chat's hard failure: recorded (a spent quota blocks its account, a bot check
holds it), then the article is decided with the failure: the router takes it, or it fails. A
logged-out account's chat in flight waits for that account: it fails without a fallback."""

from __future__ import annotations

from ...engines.base import Code, QuotaSpent
from ...store.protocol import DEFAULT_ACCOUNT
from ..phases import Failure
from .context import Context, clock_words
from .holds import hold
from .moves import Ask, Hard


def handle(step: Context, move: Hard) -> Ask:
    err, now = move.error, step.clock()
    step.chat_error = err.code
    step.state.record_error(now, "qwen", err.code, str(err))
    step.log("hard", engine="qwen", account=step.account or None, error=str(err), code=err.code)
    step.say(f"{step.slug}: the chat failed hard: {err}")
    account = step.account or DEFAULT_ACCOUNT
    if isinstance(err, QuotaSpent):
        until = step.ws.chat_quota.block(now, err.retry_after, str(err), account=account)
        step.log("quota", engine="qwen", account=account, until=clock_words(until), error=str(err))
        step.say(
            f"the chat's daily quota is spent: no sends from account {account} until {clock_words(until)}"
        )
    hold(step, account, err)
    if err.code == Code.LOGGED_OUT and step.chat_url:  # a chat in flight waits for its own account
        waits = f"{err}; its chat waits for account {account}: run `qwenpipe login --account {account}`"
        return Ask(failure=Failure.ALL, error=err, message=waits)
    return Ask(failure=Failure.CHAT, error=err)
