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


def handle(step: Context, move: Ask) -> Outcome | Move:
    """Send the prompt from the account rotation chose (a place in the cycle's budget first);
    when that account refuses before it took anything (logged out, a bot check, its quota
    answered with no chat), the next one is offered it (Refused)."""
    if step.budget is not None and not step.budget.take():  # another thread took the last one
        return replace(move, budget_spent=True, decision=None)
    account = step.chosen
    if account is None:  # every account this run found unusable: its refusal stands
        raise step.skipped_error(step.only) or HardError("no chat account may send", code=Code.NO_ACCOUNT)
    step.account = account
    chat = step.chat(account)
    chat.prepare()  # a busy or missing browser stops us before the marker
    now = step.clock()
    probe = step.ws.chat_quota.probing(now, account)
    if probe is not None:  # after a bot-check hold one send goes alone: the rest wait for it
        step.engines.probed.add(account)
        step.say(f"{step.slug}: a probe send from account {account} after its bot-check hold")
    record_intent(step, 1, account, now)
    # What recovery needs: the chat the send goes into, named before the prompt leaves the
    # browser (name_chat), and what tells its chat from any other without it (adoptable_chat).
    marker = {"time": now, "pid": os.getpid(), "prompt_sha256": step.prompt.sha256, "account": account}
    write_marker(step.article.sending, marker)
    attempt = step.state.attempts + 1
    step.log("sending", engine="qwen", account=account, attempt=attempt, prompt_sha256=step.prompt.sha256)
    step.say(f"{step.slug}: sending the prompt to the chat (account {account})")
    started = time.monotonic()
    if step.lease is not None:
        step.lease.check()  # still ours just before the click (a host paused past its lease)
    step.crash("before_send")
    try:
        url = chat.send(step.prompt.turns[0], step.chat_choice(), on_chat_id=name_chat(step, marker))
    except EngineError as err:
        may_rotate = not step.only and several(step.ws.config)  # not when asked, nor after recovery
        took_nothing = err.nothing_sent or (isinstance(err, QuotaSpent) and may_rotate)
        if took_nothing:  # nothing reached the site: nothing to look for, nothing to count
            unsent(step, err)
        if took_nothing and err.code in ACCOUNT_REFUSALS and may_rotate:
            return Refused(account, err)
        if not took_nothing and err.unknown is not None:  # an answer nobody has seen: in doubt
            return in_doubt(step, account, err)
        raise
    step.crash("after_send")
    # The URL is the proof of the send: it goes to disk before anything else happens.
    files.atomic_write(step.article.url, url + "\n")
    files.remove(step.article.sending)
    with step.ws.store.step() as store:
        store.record_sent(step.slug, 1, url, step.clock())
    sent_chats.record(step.ws.config, account, url, step.article.folder, step.slug)
    step.chat_url = url
    step.state.sent_at = step.state.last_poll = step.clock()
    step.state.attempts, step.state.engine, step.state.progress = 0, "qwen", "sent"
    step.state.sent_sha256 = step.prompt.sha256
    step.save()
    step.log("sent", engine="qwen", account=account, chat_url=url, duration=since(started))
    if step.wait:
        return look(len(step.prompt.turns))
    return step.outcome(Status.QUEUED, f"{step.slug}: sent, the chat is {url} (account {account})", sent=True)
