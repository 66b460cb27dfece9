"""Handler of an interrupted send in doubt (proof.py says when it is): counted, looked at again
with backoff, or, once the doubt has lasted qwen.lost_chat_after, given back and sent again (the
router's instead when its failures already reached qwen.max_attempts)."""

from __future__ import annotations

from ...engines.base import Code
from ..article import read_marker, write_marker
from ..phases import Reason
from .context import Context, Outcome, Status, wait_words
from .intents import give_back
from .moves import Ask, Hard, InDoubt, too_many_attempts
from .proof import weigh


def handle(ctx: Context, move: InDoubt) -> Outcome | Ask | Hard:
    """A send in doubt (the marker says sending, no chat URL known): taken as lost and sent again
    when the site has shown nothing for `lost_chat_after` (or handed on when its attempts are
    spent), else looked for again later."""
    marker = read_marker(ctx.article.sending) or {}
    now, lost_after = ctx.clock(), ctx.qwen.lost_chat_after
    doubt = weigh(marker, now, ctx.qwen)
    unreadable_for = round(now - doubt.since)
    if doubt.lost:
        # Taken as never sent: given back (an `unsent` step, the daily count drops it) and sent
        # again, so the prompt is counted once, as the site most likely took it once.
        lost = {
            "engine": "qwen",
            "account": move.account,
            "reason": move.why,
            "looks": doubt.looks,
            "in_doubt_for": unreadable_for,
        }
        give_back(ctx, 1, move.account, "lost", ("recovery_lost", lost))
        ctx.state.next_try = 0.0
        ctx.save()
        ctx.say(
            f"{ctx.slug}: the interrupted send is still in doubt after {unreadable_for} s "
            f"(qwen.lost_chat_after = {lost_after:g}; {move.why}): taking it as lost, sending again"
        )
        ctx.chat_url, ctx.recovered = None, True
        if ctx.state.attempts >= ctx.qwen.max_attempts and ctx.state.last_error:
            return too_many_attempts(
                ctx.state.attempts, ctx.qwen.max_attempts, ctx.state.last_error
            )  # not sent a further time
        return Ask()
    write_marker(ctx.article.sending, {**marker, "doubt_since": doubt.since, "doubt_looks": doubt.looks})
    left = doubt.since + lost_after - now
    message = (
        f"{ctx.slug}: the interrupted send is in doubt ({move.why}): it stays counted and is not "
        f"sent now; looked at again {wait_words(doubt.delay)}, sent again only if still in doubt "
        f"{wait_words(left)} (qwen.lost_chat_after)"
    )
    ctx.state.next_try = now + doubt.delay
    ctx.state.last_error, ctx.state.last_error_code = message, Code.IN_DOUBT  # what status shows
    ctx.save()
    ctx.log(
        "recovery_in_doubt",
        engine="qwen",
        account=move.account,
        reason=move.why,
        looks=doubt.looks,
        in_doubt_for=unreadable_for,
    )
    ctx.say(message)
    return ctx.outcome(Status.WORKING, message, reason=Reason.IN_DOUBT)
