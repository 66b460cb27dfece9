"""One cron cycle: move every unfinished article one step along the contract.

Decides from one scan of the folders (no browser, no lock per article) who needs what: polls
first (to collect finished answers), then sends, oldest prompt first, within the send limits.
Only then, and only if some article needs the chat, does the browser start, once for the
whole cycle. A second cycle while one runs exits at once; the flock dies with a killed cycle.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from . import files
from .batch import DEAD, DONE, ORPHAN, PENDING, SENDING, SENT, ArticleView, scan
from .contract import Status, generate
from .errors import UsageProblem
from .files import FileLock, LockBusy
from .quota import sends_today
from .workspace import Engines, Workspace


@dataclass
class CycleReport:
    """What one cycle did; `exit_code` is what cron sees."""

    busy_owner: str | None = None
    counts: Counter = field(default_factory=Counter)
    sent: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    browser_used: bool = False
    browser_launches: int = 0
    seconds: float = 0.0

    @property
    def in_progress(self) -> int:
        c = self.counts
        return c["generating"] + c["waiting"] + c["throttled"] + c["working"] + c["backoff"]

    @property
    def exit_code(self) -> int:
        if self.busy_owner:
            return 3
        if self.failed or self.invalid:
            return 1
        if self.sent:
            return 42
        if self.in_progress:
            return 3
        return 0

    def summary(self) -> str:
        if self.busy_owner:
            return f"cycle: another cycle is running ({self.busy_owner}); nothing done"
        c = self.counts
        parts = [f"{c['done']} done"]
        for key, label in (
            ("finished", "finished now"),
            ("sent", "sent"),
            ("generating", "generating"),
            ("waiting", "waiting for their next poll"),
            ("backoff", "backing off"),
            ("throttled", "throttled"),
            ("working", "in progress elsewhere"),
            ("failed", "failed hard"),
            ("invalid", "invalid"),
            ("dead", "dead-lettered"),
        ):
            if c[key]:
                parts.append(f"{c[key]} {label}")
        browser = "browser used" if self.browser_used else "no browser"
        return f"cycle: {', '.join(parts)} ({browser}, {self.seconds:.1f} s, exit {self.exit_code})"


def run_cycle(
    workspace: Workspace,
    engines: Engines,
    *,
    say: Callable[[str], None] = lambda _m: None,
    clock: Callable[[], float] = time.time,
) -> CycleReport:
    report = CycleReport()
    try:
        lock = FileLock(workspace.cycle_lock, purpose="cycle").acquire()
    except LockBusy as busy:
        report.busy_owner = busy.owner
        return report
    started = time.monotonic()
    try:
        workspace.articles_dir.mkdir(parents=True, exist_ok=True)
        files.clean_stale_temporaries(workspace.articles_dir)
        _record_cycle(workspace, {"started": clock(), "pid": os.getpid()})
        workspace.journal.append("*", "cycle_start")
        polls, sends = plan(workspace, scan(workspace.prompts_dir, workspace.articles_dir), report, clock())
        for view in polls + sends:
            _step(workspace, engines, view, report, say, clock)
        report.browser_used = engines.chat_started
        report.browser_launches = _browser_launches()
    finally:
        report.seconds = time.monotonic() - started
        workspace.journal.append(
            "*",
            "cycle_end",
            exit_code=report.exit_code,
            summary=report.summary(),
            browser=report.browser_used,
            browser_launches=report.browser_launches,
            duration=round(report.seconds, 3),
        )
        _record_cycle(
            workspace,
            {
                "started": clock() - report.seconds,
                "finished": clock(),
                "pid": os.getpid(),
                "exit_code": report.exit_code,
                "summary": report.summary(),
            },
        )
        lock.release()
    return report


def plan(
    workspace: Workspace, views: list[ArticleView], report: CycleReport, now: float
) -> tuple[list[ArticleView], list[ArticleView]]:
    """(articles to poll, articles to send), counting everything else into the report."""
    qwen = workspace.config.qwen
    polls, pending = [], []
    for view in views:
        phase = view.phase
        if phase == DONE:
            report.counts["done"] += 1
        elif phase == DEAD:
            report.counts["dead"] += 1
        elif phase == ORPHAN:
            continue
        elif phase in (SENT, SENDING):
            state = view.state
            if state.next_try > now:
                report.counts["backoff"] += 1
            elif phase == SENT and now - state.last_poll < qwen["poll_interval"]:
                report.counts["waiting"] += 1
            else:
                polls.append(view)
        elif phase == PENDING:
            if view.state.next_try > now:
                report.counts["backoff"] += 1
            else:
                pending.append(view)
    allowed = len(pending)
    blocked = workspace.chat_quota.blocked_until(now)
    if not blocked:  # while the chat's quota is spent, "sending" means the router: no chat limits
        if qwen["max_sends_per_cycle"]:
            allowed = min(allowed, qwen["max_sends_per_cycle"])
        if qwen["max_sends_per_day"]:
            allowed = min(allowed, max(0, qwen["max_sends_per_day"] - sends_today(workspace.journal, now)))
    report.counts["throttled"] += len(pending) - allowed
    return polls, pending[:allowed]


def _step(
    workspace: Workspace,
    engines: Engines,
    view: ArticleView,
    report: CycleReport,
    say: Callable[[str], None],
    clock: Callable[[], float],
) -> None:
    slug = view.slug
    try:
        outcome = generate(workspace, slug, engines, say=say, clock=clock)
    except UsageProblem as problem:
        report.invalid.append(slug)
        report.counts["invalid"] += 1
        say(f"{slug}: skipped: {problem}")
        return
    say(outcome.message)
    if outcome.status is Status.DONE:
        report.counts["finished"] += 1
        report.counts["done"] += 1
    elif outcome.status is Status.QUEUED:
        report.sent.append(slug)
        report.counts["sent"] += 1
    elif outcome.status is Status.FAILED:
        report.failed.append(slug)
        report.counts["failed"] += 1
    else:
        bucket = {
            "locked": "working",
            "backoff": "backoff",
            "spacing": "waiting",
            "quota": "throttled",
            "limit": "throttled",
        }.get(outcome.reason, "generating")
        report.counts[bucket] += 1


def _browser_launches() -> int:
    # Read without importing: a cycle that never needed the chat must not load Playwright.
    browser = sys.modules.get("pipeline.browser")
    return browser.BrowserSession.launches if browser else 0


def _record_cycle(workspace: Workspace, record: dict) -> None:
    files.atomic_write(workspace.state_dir / "last_cycle.json", json.dumps(record))
