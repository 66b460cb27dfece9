"""An account held back from sends by what the site showed it (a bot check, an empty answer):
shared by a refused first send and a hard failure."""

from __future__ import annotations

from ... import files
from ...engines.base import EngineError
from ..quota import HOLD_CODES, screenshot_path
from .context import Context, clock_words


def hold(step: Context, account: str, err: EngineError) -> bool:
    """Hold `account` back from sends when `err` is a bot check (qwen.bot_check_pause hours,
    or until `qwenpipe login --account NAME`) or an empty answer (until local midnight);
    the page the bot check showed is kept in `.qwenpipe/` (0600) for the user to see. The
    journal records it ("hold"). False for any other error (nothing held)."""
    if err.code not in HOLD_CODES:
        return False
    now = step.clock()
    pause = float(step.qwen.bot_check_pause)
    until = step.ws.chat_quota.hold(now, err.code, str(err), account, bot_check_pause=pause)
    shot = None
    if err.screenshot:
        shot = screenshot_path(step.ws.state_dir, account)
        files.atomic_write(shot, err.screenshot)  # PRIVATE: 0600
    held = step.ws.chat_quota.held(now, account)
    step.log(
        "hold",
        engine="qwen",
        account=account,
        kind=HOLD_CODES[err.code],
        until=clock_words(until),
        error=str(err),
        code=err.code,
        screenshot=str(shot) if shot else None,
    )
    step.say(f"{step.slug}: {held.words() if held else HOLD_CODES[err.code]}")
    if shot:
        step.say(f"{step.slug}: the page as it was is in {shot}")
    return True
