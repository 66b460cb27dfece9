"""The chat's quotas: the site's own daily limit (learned when it says so) and ours (config).

When the site says the daily quota is spent, nothing is sent to the chat by any process until
the time it names (or the next local midnight): the store's quota block records that.

A *hold* is the same record for the other reasons an account is left alone: a bot check (or
until `qwenpipe login --account NAME` solves it) and answers that came back empty (until the
next local midnight, as a quota). The reason says which kind.

A bot-check hold learns (docs/reliability.md, "A hold that learns"): the site's risk score fades
after 15-30 quiet minutes, so the first hold is short (`qwen.bot_check_pause_first`); a strike,
a bot check within STRIKE_WINDOW of the end of the last one, doubles the last hold, up to
`qwen.bot_check_pause`; a day without one starts again from the first. After a hold the
account's next send is a probe: it goes alone (`probing`), the rest of its sends wait for it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..engines.base import Code
from ..store.protocol import DEFAULT_ACCOUNT, SendCounts
from ..times import clock
from .journal import Journal

if TYPE_CHECKING:
    from ..store.protocol import Store

STRIKE_WINDOW = 86400.0  # s: a bot check this soon after the last bot-check hold ended is a strike
LONGEST_BLOCK = 86400.0  # s: a block the site gave no hours for lasts until midnight, at most a day
# The reasons of the holds that are not the site's quota: a hold's reason starts with its kind.
BOT_CHECK = "bot check"
EMPTY_ANSWERS = "answers came back empty"
HOLD_CODES = {Code.BOT_CHECK: BOT_CHECK, Code.EMPTY_ANSWER: EMPTY_ANSWERS}  # engine error code -> kind


class Hold(NamedTuple):
    """An account held back from sends (the store's quota block, read back): until when, since
    when, and why (the site's quota, a bot check, empty answers)."""

    account: str
    until: float
    since: float
    reason: str

    @property
    def kind(self) -> str:
        """ "bot check", "answers came back empty", or "quota" (the site's daily quota)."""
        for kind in HOLD_CODES.values():
            if self.reason.startswith(kind):
                return kind
        return "quota"

    def words(self) -> str:
        """The hold in a sentence for status, accounts and doctor (the bot check's says the fix)."""
        name, until, since = self.account, clock(self.until), clock(self.since) if self.since else "?"
        if self.kind == BOT_CHECK:
            return (
                f"bot check since {since} on account {name}: run `qwenpipe login --account {name}` "
                f"on a desktop to solve it (or it is tried again at {until})"
            )
        if self.kind == EMPTY_ANSWERS:
            return f"answers came back empty on account {name} since {since}: no sends from it until {until}"
        return f"the chat's daily quota of account {name} is spent until {until} ({self.reason})"

    def short(self) -> str:
        """A few words for a table cell."""
        if self.kind == BOT_CHECK:
            return f"bot check until {clock(self.until)}"
        if self.kind == EMPTY_ANSWERS:
            return f"empty answers until {clock(self.until)}"
        return f"spent until {clock(self.until)}"


def held_words(until: float, reason: str) -> str:
    """Why nothing may go to the chat when every account is held, in a phrase: the quota's own
    words for the site's quota, the hold's kind for the others."""
    kind = Hold("", until, 0.0, reason).kind
    if kind == "quota":
        return f"the chat's daily quota is spent until {clock(until)} ({reason})"
    return f"every account is held back until {clock(until)} ({reason})"


def screenshot_path(state_dir: Path, account: str) -> Path:
    """Where the page a bot check showed on `account` is kept (0600), for the user to see."""
    return state_dir / f"bot-check-{account}.png"


def trace_path(state_dir: Path, account: str) -> Path:
    """Where the Playwright trace of `account`'s last run is kept (0600, `[browser] trace`)."""
    return state_dir / f"trace-{account}.zip"


def planned(block, now: float) -> tuple[float, float]:
    """(until, since) of a store block as it stands at `now`. A block lasts no longer from `now`
    than it was set for (until - since): one recorded under a clock that has since moved back
    would otherwise stop the chat for days, so it is re-planned from `now`."""
    until = block.until
    since = block.since or until - LONGEST_BLOCK  # 0: imported from a quota.json without it
    if since > now:
        return now + min(max(until - since, 0.0), LONGEST_BLOCK), now
    return until, block.since


@dataclass
class ChatQuota:
    """Each account's send block (the site said the day's sends are spent), kept in the store.
    (A docstring of its own: `@dataclass` writes a missing one with inspect.signature, at import.)"""

    store: Store  # the workspace's store, which keeps each account's block

    def blocked_until(
        self, now: float, *, replan: bool = True, account: str = DEFAULT_ACCOUNT
    ) -> tuple[float, str] | None:
        """(until, reason) while sends to the chat are stopped, else None. A block the clock
        moved back under is re-planned from `now` (`planned`) and, when `replan`, saved (readers
        such as `status` pass False: they never write). Each account has its own block."""
        block = self.store.quota_block(account, now)
        if block is None:
            return None
        until, since = planned(block, now)
        if replan and (until, since) != (block.until, block.since):
            self._save(until, now, block.reason, account)
        return (until, block.reason) if until > now else None

    def _save(self, until: float, since: float, reason: str, account: str) -> None:
        from ..store.protocol import QuotaBlock

        with self.store.transaction() as tx:
            tx.block_quota(QuotaBlock(account, until=until, reason=reason, since=since))

    def block(
        self, now: float, retry_after: float | None, reason: str, account: str = DEFAULT_ACCOUNT
    ) -> float:
        """Stop sends from `account` (only: the others go on) until the site's hours pass."""
        until = now + retry_after if retry_after else next_local_midnight(now)
        self._save(until, now, reason, account)
        return until

    def hold(
        self,
        now: float,
        code: str,
        detail: str,
        account: str,
        *,
        bot_check_pause: float,
        bot_check_pause_first: float | None = None,
    ) -> float:
        """Hold `account` back for the engine error `code` (HOLD_CODES): a bot check for
        bot_check_hours (the first hold `bot_check_pause_first` hours, None: as long as the
        longest), empty answers until the next local midnight. Returns the end. A bot check met
        while its account is still held (sends side by side) leaves that hold as it is."""
        kind = HOLD_CODES[code]
        if kind == BOT_CHECK:
            held = self.held(now, account)
            if held is not None and held.kind == BOT_CHECK:
                return held.until
            first = bot_check_pause if bot_check_pause_first is None else bot_check_pause_first
            until = now + self.bot_check_hours(now, account, first, bot_check_pause) * 3600
        else:
            until = next_local_midnight(now)
        self._save(until, now, f"{kind}: {detail}", account)
        return until

    def bot_check_hours(self, now: float, account: str, first: float, longest: float) -> float:
        """How long a bot check met now holds `account`: `first` hours, or, on a strike (the
        account's last bot-check hold ended less than STRIKE_WINDOW ago), twice that hold (at
        least `first`); never more than `longest`."""
        last = self.store.quota_block(account, now - STRIKE_WINDOW)
        if last is None or Hold(account, last.until, last.since, last.reason).kind != BOT_CHECK:
            return min(first, longest)
        lasted = max(last.until - last.since, 0.0) / 3600
        return min(max(2 * lasted, first), longest)

    def probing(self, now: float, account: str) -> Hold | None:
        """The bot-check hold that ended with no send from `account` since: its next send is a
        probe, alone. None when there is none (no such hold, or a send since passed)."""
        block = self.store.quota_block(account, 0.0)
        if block is None or block.until > now:
            return None
        hold = Hold(account, block.until, block.since, block.reason)
        if hold.kind != BOT_CHECK or self.store.send_counts(block.until).of(account):
            return None
        return hold

    def held(self, now: float, account: str) -> Hold | None:
        """The account's hold (of any kind) while it lasts, as a Hold; None when it may send.
        A reader: never re-plans what it reads."""
        block = self.store.quota_block(account, now)
        if block is None:
            return None
        until, since = planned(block, now)  # the end `blocked_until` works with: one end for one hold
        return Hold(account, until, since, block.reason) if until > now else None

    def lift(self, now: float, account: str, kind: str = BOT_CHECK) -> Hold | None:
        """End the account's hold of `kind` now (the user solved the bot check); the hold that
        ended, or None when there was none of that kind (another kind stays as it is)."""
        hold = self.held(now, account)
        if hold is None or hold.kind != kind:
            return None
        self._save(now, hold.since, hold.reason, account)
        return hold


class SendBudget:
    """One cycle's sends to the chat (`qwen.max_sends_per_cycle`, 0 = no limit): a first send
    and a multi-turn prompt's later turn count alike. Poll threads may send later turns side by
    side, so a send is reserved atomically before it happens; a reservation whose send then
    does not happen (the browser was busy) stays spent, which errs on the side of fewer sends,
    unless the engine proves nothing was submitted (`give_back`)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.limit and self.used >= self.limit:
                return False
            self.used += 1
            return True

    def give_back(self) -> None:
        """Return a reservation whose send provably never reached the chat."""
        with self._lock:
            self.used = max(0, self.used - 1)


def next_local_midnight(now: float) -> float:
    return _local_midnight(now, days=1)


def local_day_start(now: float) -> float:
    return _local_midnight(now, days=0)


def day_start(now: float, back: int) -> float:
    """The local midnight that begins the day `back` days before the one `now` is in."""
    return _local_midnight(now, days=-back)


def _local_midnight(now: float, *, days: int) -> float:
    """The local midnight that begins the day `days` after the one `now` is in. The offset is
    midnight's own (mktime decides daylight saving for the time it is given): an aware datetime
    replaced to 00:00 keeps the offset of `now`, an hour off on the days the clocks change."""
    day = time.localtime(now)
    return time.mktime((day.tm_year, day.tm_mon, day.tm_mday + days, 0, 0, 0, 0, 0, -1))


def sends_today(
    journal: Journal, now: float, accounts: list[str] | None = None, counts: SendCounts | None = None
) -> int:
    """Prompts sent to the chat since local midnight: each `sending` step that may have reached
    it (one the engine proved unsent, an `unsent` step, does not count): one query of the store,
    or `counts`, today's, when the caller read them. `accounts`: only theirs (a batch several
    hosts share: qwen.max_sends_per_day is this host's)."""
    if counts is None:
        counts = journal.store.send_counts(local_day_start(now))
    return counts.total if accounts is None else sum(counts.of(name) for name in accounts)


def host_accounts(config) -> list[str] | None:
    """The accounts whose sends this host's qwen.max_sends_per_day counts: its own in a shared
    batch (other hosts' sends are theirs), None (every send) on one machine."""
    if not config.store.url:
        return None
    from ..accounts import all_accounts

    return [account.name for account in all_accounts(config)]
