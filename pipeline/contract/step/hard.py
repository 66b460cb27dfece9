"""Handler of the chat's hard failure: recorded (a spent quota blocks its account, a bot check
holds it), then the article is decided with the failure: the router takes it, or it fails.

An account's own trouble (logged out, a bot check, its quota: ACCOUNT_REFUSALS) is never the
article's: it is not counted against its attempts and never dead-letters it. A chat in flight
waits for its account; an unsent prompt goes to the router (a prompt the account refused
before taking it was offered to the next account already: refused.py)."""

from __future__ import annotations

from ...engines.base import ACCOUNT_REFUSALS, Code, QuotaSpent
from ...store.protocol import DEFAULT_ACCOUNT
from ...times import clock as clock_words
from ..phases import Failure, Reason
from .context import Context, Outcome, Status, wait_words
from .holds import hold
from .moves import Ask, Hard


def handle(ctx: Context, move: Hard) -> Ask | Outcome:
    err, now = move.error, ctx.clock()
    if not_shown_yet(ctx, err, now):
        return look_again(ctx, err, now)
    account = ctx.account or DEFAULT_ACCOUNT
    waits = ""
    if err.code in ACCOUNT_REFUSALS and ctx.chat_url:  # status shows it as the article's last error
        fix = f": run `qwenpipe login --account {account}`" if err.code == Code.LOGGED_OUT else ""
        waits = f"{err}; its chat waits for account {account}{fix} (not counted against the article)"
    ctx.chat_error = err.code
    ctx.state.record_error(now, "qwen", err.code, waits or str(err))
    ctx.log("hard", engine="qwen", account=ctx.account or None, error=str(err), code=err.code)
    ctx.say(f"{ctx.slug}: the chat failed hard: {err}")
    if isinstance(err, QuotaSpent):
        until = ctx.ws.chat_quota.block(now, err.retry_after, str(err), account=account)
        ctx.log("quota", engine="qwen", account=account, until=clock_words(until), error=str(err))
        ctx.say(
            f"the chat's daily quota is spent: no sends from account {account} until {clock_words(until)}"
        )
    hold(ctx, account, err)
    if err.code not in ACCOUNT_REFUSALS:
        return Ask(failure=Failure.CHAT, error=err)
    return Ask(failure=Failure.ACCOUNT, error=err, message=waits)


def look_again(ctx: Context, err, now: float) -> Outcome:
    """A sent chat the site does not show yet is waited for, not failed: the look is no attempt
    (qwen.max_attempts counts failures of ours; a site slow to show a chat is bounded by
    qwen.lost_chat_after instead), and the next look comes after half the time the chat has been
    unreadable (at least poll_interval), never past the moment it would be taken as lost."""
    sent = ctx.state.sent_at
    left = sent + ctx.qwen.lost_chat_after - now
    delay = min(max(ctx.qwen.poll_interval, (now - sent) / 2), left)
    message = (
        f"{err}; it was sent {now - sent:.0f} s ago and a new chat may not read yet: looked at "
        f"again {wait_words(delay)}, for {left:.0f} s more (qwen.lost_chat_after)"
    )
    ctx.state.record_error(now, "qwen", Code.CHAT_NOT_FOUND, message)
    ctx.state.next_try = now + delay
    ctx.save()
    ctx.log(
        "not_shown_yet",
        engine="qwen",
        account=ctx.account or None,
        error=str(err),
        sent_ago=round(now - sent),
    )
    return ctx.outcome(Status.WORKING, f"{ctx.slug}: {message}", reason=Reason.BACKOFF)


def not_shown_yet(ctx: Context, err, now: float) -> bool:
    """The site says it has no such chat, though the article sent into it less than
    qwen.lost_chat_after ago: a new chat may not read yet (the site's read-after-write lag), so
    "not found" proves nothing until then and is looked at again; never the router's at once."""
    sent = ctx.state.sent_at
    return (
        err.code == Code.CHAT_NOT_FOUND
        and bool(ctx.chat_url)
        and 0 < sent <= now < sent + ctx.qwen.lost_chat_after
    )
