"""Which account sends, and whether an article's own account may go on with its chat.

Rotation ([accounts] rotation): a new send goes to the usable account with the fewest sends
today ("spread", the default), or with the most sends left under its own `max_sends_per_day`
("fill": none = unlimited), ties in config order; an account the site blocked
(quota), or that this run found logged out or behind a bot check, is skipped until that
clears. Affinity: once an account took the prompt, only that account ever looks at the chat
or sends its next turn; its being disabled or blocked makes the article wait, never move.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from .. import send_hours
from ..accounts import Account, all_accounts, saved_login_problem
from ..store.protocol import DEFAULT_ACCOUNT, Send, SendCounts
from .quota import local_day_start


class Standing(NamedTuple):
    """One account as rotation sees it now."""

    account: Account
    sends_today: int
    left: int | None  # sends left under its own limit; None: it has none
    quota_until: float | None = None  # the site blocked it until then
    quota_reason: str = ""
    off: str = ""  # why it cannot send at all now (disabled, no saved login, logged out...)

    @property
    def can_send(self) -> bool:
        return not self.off and self.quota_until is None and (self.left is None or self.left > 0)


class Capacity(NamedTuple):
    """What a group of accounts (every one, the pinned one, or an article's sender) can take:
    the first that may send, else why none can (a quota block until a time, or `off`)."""

    chosen: Account | None
    quota_until: float | None = None
    quota_reason: str = ""
    off: str = ""
    left: int | None = None  # sends left today across the group; None: unlimited


def standings(
    workspace,
    now: float,
    skipped: Mapping[str, object],
    names: Sequence[str] = (),
    *,
    replan: bool = True,
    probed: Collection[str] = (),
    counts: SendCounts | None = None,
) -> list[Standing]:
    """The accounts (all, or those `names`, in config order) with their counts and blocks.
    `skipped`: accounts this run found unusable, with why (see Engines.unavailable). `replan`:
    False for readers (status), which never write (see ChatQuota.blocked_until). `probed`:
    accounts whose probe send after a bot-check hold this run made (Engines.probed): the rest
    of their sends wait for the next run. `counts`: today's sends, when the caller read them
    (status reads them once for every line it shows)."""
    config = workspace.config
    accounts = [a for a in all_accounts(config) if not names or a.name in names]
    # Today's counts: for limits, and for "spread" rotation among several accounts.
    per_account = any(a.max_sends_per_day for a in accounts) or len(accounts) > 1
    if not per_account:
        counts = None
    elif counts is None:
        counts = workspace.store.send_counts(local_day_start(now))
    found = []
    for account in accounts:
        sent = counts.of(account.name) if counts else 0
        left = max(account.max_sends_per_day - sent, 0) if account.max_sends_per_day else None
        off = str(skipped.get(account.name) or "")
        if not account.enabled:
            off = f"account {account.name} is disabled (enabled = false in {account.where})"
        off = off or saved_login_problem(config, account)
        off = off or outside_send_hours(account, now)
        if not off and account.name in probed:
            off = (
                f"account {account.name} made its one probe send after its bot-check hold this run; "
                "its other sends wait for the next cycle"
            )
        blocked = workspace.chat_quota.blocked_until(now, replan=replan, account=account.name)
        found.append(
            Standing(
                account,
                sent,
                left,
                quota_until=blocked[0] if blocked else None,
                quota_reason=blocked[1] if blocked else "",
                off=off,
            )
        )
    return found


def outside_send_hours(account: Account, now: float) -> str:
    """Why `account` may not send now for its send_hours (pipeline/send_hours.py), with when
    it may; "" when it may send now."""
    hours = send_hours.parse(account.send_hours)  # checked when the config was loaded
    if hours is None or hours.allows(now):
        return ""
    return f"account {account.name} {hours.words(now)}"


def capacity(found: list[Standing], rotation: str = "spread") -> Capacity:
    """The account a send goes to, or why none may send now: every usable account blocked by
    the site (its earliest end), else the first reason one is off. `rotation` ([accounts]
    rotation): "spread", the one with the fewest sends today (the sends, and the risk of a bot
    check, shared); "fill", the one with the most left under its limit (the first fills up
    before the next takes over). Ties in config order."""
    ready = [s for s in found if s.can_send]
    if ready:
        if rotation == "fill":
            best = max(ready, key=lambda s: float("inf") if s.left is None else s.left)  # first of equals
        else:
            best = min(ready, key=lambda s: s.sends_today)
        lefts = [s.left for s in ready]
        return Capacity(best.account, left=None if None in lefts else sum(lefts))  # type: ignore[arg-type]
    blocked = [s for s in found if not s.off and s.quota_until is not None]
    if blocked:
        first = min(blocked, key=lambda s: s.quota_until or 0.0)
        return Capacity(None, quota_until=first.quota_until, quota_reason=first.quota_reason, left=0)
    spent = [s for s in found if not s.off]
    if spent:
        names = ", ".join(f"{s.account.name} ({s.account.max_sends_per_day})" for s in spent)
        return Capacity(None, off=f"daily limit of every account reached: {names}", left=0)
    if not found:
        return Capacity(None, off="no such account in config.toml", left=0)
    return Capacity(None, off="; ".join(s.off for s in found), left=0)


def sender_problem(workspace, name: str) -> str:
    """Why the account that sent an article's chat cannot go on with it now ("" when it can):
    it was removed from config.toml or disabled. The article then waits for it."""
    for account in all_accounts(workspace.config):
        if account.name == name:
            if account.enabled:
                return ""
            return (
                f"its chat belongs to account {name}, which is disabled (enabled = false in "
                f"{account.where}): it waits; set enabled = true to collect it"
            )
    return (
        f"its chat belongs to account {name}, which is not in {workspace.config.describe()}: "
        f"it waits; add [accounts.{name}] back (its profile_dir and storage_state) to collect it"
    )


def sender_of(article, first_send: Send | None, *, may_have_marker: bool = True) -> str:
    """The account that took (or was about to take) an article's prompt: its intent marker's,
    else its first send's in the store, else `default` (a send from before accounts, or an
    old marker that does not say). `may_have_marker=False`: a folder listing just saw none
    (status and the plan ask for 10,000 articles; the look costs more than the rest)."""
    marker = None
    if may_have_marker and os.access(article.sending_file, os.F_OK):  # a bool, no exception
        from .article import read_marker

        marker = read_marker(article.sending_file)
    named = marker.get("account") if marker else None
    if isinstance(named, str) and named:
        return named
    if marker is None and first_send is not None:
        return first_send.account
    return DEFAULT_ACCOUNT
