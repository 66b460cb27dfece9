"""What a refusal of a send that took nothing means for the next click (docs/qwen-site.md,
"Late autumn 2026: the answer").

The site refuses a send without taking it in three words: "The chat is in progress!" (older,
Bad_Request), `CHAT_IN_PROGRESS` and `ParallelLimited`. None of them is a send: clicking again is
not a second send. What each asks for:
- "in progress" on a new chat's send: the site was still busy; click again after a pause.
- `CHAT_IN_PROGRESS` on a later turn: the chat's last turn is still being answered, whatever the
  page showed. Nothing is clicked again: the turn waits until that answer is complete (the
  contract reads the chat again before it sends the turn).
- `ParallelLimited`: the account has too many answers in the making; click again after a pause
  that doubles each time.
After BUSY_CLICKS clicks the send is a transient failure that took nothing.
"""

from __future__ import annotations

from ..base import Code, EngineError, TransientError

BUSY_PAUSE_SECONDS = 3  # the wait before clicking send again after a refusal
BUSY_CLICKS = 3  # clicks that may be refused before the send counts as a transient failure


def after_refusal(refusal: EngineError, clicks: int, *, later_turn: bool) -> float:
    """Seconds to wait before clicking again after `refusal` (`clicks` made so far), or the
    TransientError (nothing sent) that ends the send."""
    if later_turn and refusal.code == Code.CHAT_IN_PROGRESS:
        raise _took_nothing(
            f"the site says the chat's last answer is still being made ({refusal}); the turn was "
            "not taken and is sent once that answer is complete",
            Code.BUSY_CHAT,
        )
    limited = refusal.code == Code.BUSY
    if clicks >= BUSY_CLICKS:
        what = "has too many answers in the making" if limited else "says the chat is in progress"
        raise _took_nothing(
            f"the site still {what} after {clicks} tries; trying again later ({refusal})",
            refusal.code if limited else Code.CHAT_IN_PROGRESS,
        )
    return BUSY_PAUSE_SECONDS * (2 ** (clicks - 1) if limited else 1)


def _took_nothing(message: str, code: str) -> TransientError:
    error = TransientError(message, code=code)
    error.nothing_sent = True  # every click was refused: the site took nothing
    return error
