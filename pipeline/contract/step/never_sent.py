"""Handler of an interrupted send that never reached the site: its marker and intent go, the
send is given back (an `unsent` step: the daily count drops it), and the article is decided
again (it is sent; or, when its failures already reached qwen.max_attempts, the chat fails hard
and the router takes it: the proof came, nothing of it is on the site)."""

from __future__ import annotations

from .context import Context
from .intents import give_back
from .moves import Ask, Hard, NeverSent, too_many_attempts


def handle(ctx: Context, move: NeverSent) -> Ask | Hard:
    not_found = {"engine": "qwen", "account": move.account, "reason": move.why}
    give_back(ctx, 1, move.account, "never_sent", ("recovery_not_found", not_found))
    ctx.say(f"{ctx.slug}: the interrupted send never reached the site ({move.why}): sending it")
    ctx.chat_url, ctx.recovered = None, True
    if ctx.state.attempts >= ctx.qwen.max_attempts and ctx.state.last_error:
        return too_many_attempts(ctx.state.attempts, ctx.qwen.max_attempts, ctx.state.last_error)
    return Ask()
