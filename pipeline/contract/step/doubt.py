"""Handler of an interrupted send in doubt, and the rule it follows: "never sent" needs positive
proof (the chat exists and holds no message of ours, or the site refused the send in words).
Anything else (the chat not found, an error, a page that is not the chat, a time-out, no chat
that is provably this article's) is in doubt: the send stays counted, the chat is looked at
again with backoff, and only once the doubt has lasted qwen.lost_chat_after is the send taken
as lost: given back (counted once in all) and sent again. A site slow to show a new chat
(read-after-write lag), or one that hides it, then costs a wait, never a second send of a
prompt it took."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NamedTuple

from ... import files
from ...engines.base import ACCOUNT_REFUSALS, Code, EngineBusy, EngineError
from ..article import read_marker
from ..phases import Reason, backoff_delay
from .context import Context, Outcome, Status, wait_words
from .intents import give_back
from .moves import Ask, InDoubt

if TYPE_CHECKING:
    from ...config import Qwen


class Doubt(NamedTuple):
    """Where a doubt stands: `lost` once it has lasted `lost_after`; else the next look's delay."""

    since: float  # when the interrupted send was first found in doubt
    looks: int  # the looks that found it in doubt, this one included
    lost: bool
    delay: float  # until the next look (never past the moment it would be lost)


# What stops a look before it reaches the chat: the account cannot go on (logged out, a bot
# check, its quota) or our own browser cannot run. These stay the failures they are; they are no
# look at the chat, so they never bring a doubt closer to "lost".
NO_LOOK = ACCOUNT_REFUSALS | {Code.BROWSER_NOT_FOUND, Code.BROWSER_LAUNCH, Code.NO_DEVTOOLS}


def unreadable(err: EngineError) -> bool:
    """An engine error that says the chat (or the chat list) could not be read: not found, an
    error, a page that is not the chat, a time-out. It proves nothing about the send."""
    return not isinstance(err, EngineBusy) and err.code not in NO_LOOK


def weigh(marker: dict, now: float, qwen: Qwen) -> Doubt:
    """The doubt the marker records (`doubt_since`, `doubt_looks`), one look later: lost after
    qwen.lost_chat_after, else looked at again after the backoff of a transient failure. Pure.

    A `doubt_since` ahead of `now` (the clock moved back) starts the doubt again from `now`."""
    since = marker.get("doubt_since")
    if not isinstance(since, (int, float)) or isinstance(since, bool) or not 0 < since <= now:
        since = now
    looks = marker.get("doubt_looks")
    looks = (looks if isinstance(looks, int) and not isinstance(looks, bool) and looks > 0 else 0) + 1
    waited, lost_after = now - since, qwen.lost_chat_after
    if waited >= lost_after:
        return Doubt(since, looks, True, 0.0)
    return Doubt(since, looks, False, min(backoff_delay(qwen, looks), lost_after - waited))


def handle(step: Context, move: InDoubt) -> Outcome | Ask:
    marker = read_marker(step.article.sending) or {}
    now, lost_after = step.clock(), step.qwen.lost_chat_after
    doubt = weigh(marker, now, step.qwen)
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
        give_back(step, 1, move.account, "lost", ("recovery_lost", lost))
        step.state.next_try = 0.0
        step.save()
        step.say(
            f"{step.slug}: the interrupted send is still in doubt after {unreadable_for} s "
            f"(qwen.lost_chat_after = {lost_after:g}; {move.why}): taking it as lost, sending again"
        )
        step.chat_url, step.recovered = None, True
        return Ask()
    files.atomic_write(
        step.article.sending,
        json.dumps({**marker, "doubt_since": doubt.since, "doubt_looks": doubt.looks}) + "\n",
    )
    step.state.next_try = now + doubt.delay
    step.save()
    left = doubt.since + lost_after - now
    step.log(
        "recovery_in_doubt",
        engine="qwen",
        account=move.account,
        reason=move.why,
        looks=doubt.looks,
        in_doubt_for=unreadable_for,
    )
    message = (
        f"{step.slug}: the interrupted send is in doubt ({move.why}): it stays counted and is not "
        f"sent now; looked at again {wait_words(doubt.delay)}, sent again only if still in doubt "
        f"{wait_words(left)} (qwen.lost_chat_after)"
    )
    step.say(message)
    return step.outcome(Status.WORKING, message, reason=Reason.IN_DOUBT)
