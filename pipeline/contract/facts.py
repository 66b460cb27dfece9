"""The facts phases.decide takes, assembled in one place for the step and the cycle's plan.

The step assembles them for one article under its lock (its accounts' standing read only when a
send may be next); the plan for every article of a cycle at once (every account's standing, the
sends planned so far counted in). Both build their limits and facts here, so the two can never
read an article differently.
"""

from __future__ import annotations

from collections.abc import Callable

from .hosts import Served, chat_limits
from .phases import Facts, Failure, Files, Limits, Record
from .rotation import Capacity


def engine_limits(config, engine: str = "auto") -> Limits:
    """The limits that come from the config and the engine asked for (auto, qwen or router)."""
    qwen = config.qwen
    return Limits(
        router=bool(config.router.enabled),
        engine=engine,
        poll_interval=qwen.poll_interval,
        max_attempts=qwen.max_attempts,
    )


def send_limits(
    limits: Limits,
    able: Capacity,
    *,
    skipped: bool = False,
    per_day: int = 0,
    sends_today: Callable[[], int] = lambda: 0,
    per_cycle: int = 0,
    cycle_sends: int = 0,
) -> Limits:
    """`limits` with what the accounts `able` can take: the site's quota block, or why none may
    send (`account_off`, unless `skipped`: an account this run skipped, whose refusal the send
    then meets), else the send counts against our limits. The daily count (`sends_today`, a
    read of the journal) is read only when the quota lets a send through and a limit is set."""
    if able.quota_until is not None:
        return limits._replace(quota_until=able.quota_until, quota_reason=able.quota_reason)
    if able.off and not skipped:
        return limits._replace(account_off=able.off)
    return limits._replace(
        max_sends_per_day=per_day,
        sends_today=sends_today() if per_day else 0,
        max_sends_per_cycle=per_cycle,
        cycle_sends=cycle_sends,
    )


def facts(
    workspace,
    files: Files,
    record: Record,
    limits: Limits,
    now: float,
    *,
    sender: Callable[[], tuple[str, float]],
    served: dict[str, Served] | None = None,
    planning: bool = False,
    wait: bool = False,
    next_turn: int = 0,
    failure: Failure = Failure.NONE,
) -> Facts:
    """The facts of one article. An article whose chat is sent or being sent is its account's
    alone: `sender()` names that account and when its send was recorded, and hosts.chat_limits
    says whether it may go on with it (disabled, another host's, orphaned)."""
    if (files.sent or files.sending) and not (files.done or files.dead):
        account, since = sender()
        limits = chat_limits(workspace, limits, account, since, now, served)
    return Facts(
        files, record, limits, now, planning=planning, wait=wait, next_turn=next_turn, failure=failure
    )
