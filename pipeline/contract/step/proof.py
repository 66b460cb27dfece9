"""The rule recovery follows, pure: "never sent" needs positive proof (the chat exists and holds
no message of ours, or the site refused the send in words). Anything else (the chat not found, an
error, a page that is not the chat, a time-out, no chat that is provably this article's) is in
doubt: the send stays counted, the chat is looked at again with backoff, and only once the doubt
has lasted qwen.lost_chat_after is the send taken as lost (given back and sent again: counted
once in all). A site slow to show a new chat (read-after-write lag), or one that hides it, then
costs a wait, never a second send of a prompt it took. Its handler is doubt.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ...engines.base import ACCOUNT_REFUSALS, Code, EngineBusy, EngineError
from ..phases import backoff_delay

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
