"""Handler of Action.SEND for a first send: the prompt goes from the account rotation chose,
with its intent on disk and in the store before the click and its URL on disk right after."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from ... import files
from ...accounts import several
from ...engines.base import ACCOUNT_REFUSALS, Code, EngineError, HardError, QuotaSpent
from .. import sent_chats
from ..article import write_marker
from .context import Context, Outcome, Status, since
from .intents import name_chat, record_intent, unsent
from .moves import Ask, Move, Refused, look
from .unknown_sent import in_doubt


def handle(ctx: Context, move: Ask) -> Outcome | Move:
    """Send the prompt from the account rotation chose (a place in the cycle's budget first);
    when that account refuses before it took anything (logged out, a bot check, its quota
    answered with no chat), the next one is offered it (Refused)."""
    if ctx.budget is not None and not ctx.budget.take():  # another thread took the last one
        return replace(move, budget_spent=True, decision=None)
    account = ctx.chosen
    if account is None:  # every account this run found unusable: its refusal stands
        raise ctx.skipped_error(ctx.only) or HardError("no chat account may send", code=Code.NO_ACCOUNT)
    ctx.account = account
    chat = ctx.chat(account)
    chat.prepare()  # a busy or missing browser stops us before the marker
    now = ctx.clock()
    probe = ctx.ws.chat_quota.probing(now, account)
    if probe is not None:  # after a bot-check hold one send goes alone: the rest wait for it
        ctx.engines.probed.add(account)
        ctx.say(f"{ctx.slug}: a probe send from account {account} after its bot-check hold")
    record_intent(ctx, 1, account, now)
    # What recovery needs: the chat the send goes into, named before the prompt leaves the
    # browser (name_chat), and what tells its chat from any other without it (adoptable_chat).
    marker = {"time": now, "pid": os.getpid(), "prompt_sha256": ctx.prompt.sha256, "account": account}
    write_marker(ctx.article.sending, marker)
    attempt = ctx.state.attempts + 1
    ctx.log("sending", engine="qwen", account=account, attempt=attempt, prompt_sha256=ctx.prompt.sha256)
    ctx.say(f"{ctx.slug}: sending the prompt to the chat (account {account})")
    started = time.monotonic()
    if ctx.lease is not None:
        ctx.lease.check()  # still ours just before the click (a host paused past its lease)
    ctx.crash("before_send")
    try:
        url = chat.send(ctx.prompt.turns[0], ctx.chat_choice(), on_chat_id=name_chat(ctx, marker))
    except EngineError as err:
        may_rotate = not ctx.only and several(ctx.ws.config)  # not when asked, nor after recovery
        took_nothing = err.nothing_sent or (isinstance(err, QuotaSpent) and may_rotate)
        if took_nothing:  # nothing reached the site: nothing to look for, nothing to count
            unsent(ctx, err)
        if took_nothing and err.code in ACCOUNT_REFUSALS and may_rotate:
            return Refused(account, err)
        if not took_nothing and err.unknown is not None:  # an answer nobody has seen: in doubt
            return in_doubt(ctx, account, err)
        raise
    ctx.crash("after_send")
    # The URL is the proof of the send: it goes to disk before anything else happens.
    files.atomic_write(ctx.article.url, url + "\n")
    files.remove(ctx.article.sending)
    with ctx.ws.store.transaction() as store:
        store.record_sent(ctx.slug, 1, url, ctx.clock())
    sent_chats.record(ctx.ws.config, account, url, ctx.article.folder, ctx.slug)
    ctx.chat_url = url
    ctx.state.sent_at = ctx.state.last_poll = ctx.clock()
    ctx.state.attempts, ctx.state.engine, ctx.state.progress = 0, "qwen", "sent"
    ctx.state.sent_sha256 = ctx.prompt.sha256
    ctx.save()
    ctx.log("sent", engine="qwen", account=account, chat_url=url, duration=since(started))
    if ctx.wait:
        return look(len(ctx.prompt.turns))
    return ctx.outcome(Status.QUEUED, f"{ctx.slug}: sent, the chat is {url} (account {account})", sent=True)
