"""An account held back from sends by what the site showed it (a bot check, an empty answer):
shared by a refused first send and a hard failure."""

from __future__ import annotations

from ... import files
from ...engines.base import EngineError
from ...errors import SetupProblem
from ...times import clock as clock_words
from ..quota import HOLD_CODES, screenshot_path
from .context import Context


def hold(ctx: Context, account: str, err: EngineError) -> bool:
    """Hold `account` back from sends when `err` is a bot check (qwen.bot_check_pause_first
    hours, doubled on each strike up to qwen.bot_check_pause: quota.py; or until
    `qwenpipe login --account NAME`) or an empty answer (until local midnight). The hold and
    its journal step ("hold") come first; the page the bot check showed is kept after, as an
    extra (keep_screenshot). False for any other error (nothing held).

    An account already held for the same reason is not struck again: what it meets while held
    (its sent chats read, a page left for the check) is the check it is held for, and a second
    strike would double a hold the site did not lengthen."""
    if err.code not in HOLD_CODES:
        return False
    now = ctx.clock()
    already = ctx.ws.chat_quota.held(now, account)
    if already is not None and already.kind == HOLD_CODES[err.code]:
        ctx.say(f"{ctx.slug}: {already.words()} (met again while held: not a new strike)")
        return True
    pause, first = float(ctx.qwen.bot_check_pause), float(ctx.qwen.bot_check_pause_first)
    until = ctx.ws.chat_quota.hold(
        now, err.code, str(err), account, bot_check_pause=pause, bot_check_pause_first=first
    )
    held = ctx.ws.chat_quota.held(now, account)
    ctx.log(
        "hold",
        engine="qwen",
        account=account,
        kind=HOLD_CODES[err.code],
        until=clock_words(until),
        error=str(err),
        code=err.code,
    )
    ctx.say(f"{ctx.slug}: {held.words() if held else HOLD_CODES[err.code]}")
    if err.screenshot:
        keep_screenshot(ctx, account, err.screenshot)
    return True


def keep_screenshot(ctx: Context, account: str, png: bytes) -> None:
    """Keep the page the bot check showed in `.qwenpipe/` (0600) for the user to see. Optional:
    a file that cannot be written there (a link at its place, a full disk) is reported on stderr
    and in the journal ("screenshot"), never raised, and what is at its place is left as it is."""
    shot = screenshot_path(ctx.ws.state_dir, account)
    try:
        files.atomic_write(shot, png)  # PRIVATE: 0600; refuses a link before it writes anything
    except (SetupProblem, OSError) as err:
        ctx.log("screenshot", engine="qwen", account=account, error=str(err))
        ctx.say(f"{ctx.slug}: the page the bot check showed was not kept: {err}")
        return
    ctx.log("screenshot", engine="qwen", account=account, path=str(shot))
    ctx.say(f"{ctx.slug}: the page as it was is in {shot}")
