"""`qwenpipe cycle --cron-exit`: the exit code cron, systemd and a health check read.

A cycle's own codes (42 sent, 3 still working, 1 failed hard, 0 all done) tell a script what
happened; cron calls every non-zero one a failure ("failed with exit status 42") and a health
check pings it as one. Under --cron-exit a cycle exits 0 when all is well or merely in progress
(it sent prompts, waits for answers, backs off, is throttled, another cycle holds the batch, the
store failed once or twice), and 1 only when something needs a person:

- an article is dead-lettered (it waits for `qwenpipe replay` forever);
- a prompt is invalid (it never moves until the prompt or the file is fixed);
- the chat is logged out and the router did not write what it refused (no router, or one that
  fails: its key missing under cron, say);
- the store stopped STORE_CYCLES cycles in a row (a database that cannot be reached for a few
  cycles is someone's to fix, not a passing hiccup).

A bad config is 2, as everywhere. The reasons are said on stderr, one line each, with the fix.
"""

from __future__ import annotations

from ..exitcodes import ExitCode

STORE_CYCLES = 3  # cycles in a row stopped by the store before a person is needed
NEEDS_PERSON = ExitCode.FAILED


def person_needed(report, workspace) -> list[str]:
    """What in this cycle's report needs a person, one line each with the fix ([] when nothing)."""
    reasons = []
    dead = report.counts["dead"] + sum(1 for slug in report.failed if workspace.article(slug).failed.exists())
    if dead:
        reasons.append(
            f"{dead} article(s) dead-lettered: `qwenpipe status --state dead` lists them, "
            "`qwenpipe replay SLUG` tries one again"
        )
    if report.invalid:
        shown = ", ".join(report.invalid[:5]) + (" ..." if len(report.invalid) > 5 else "")
        reasons.append(f"{len(report.invalid)} invalid article(s) never move until fixed: {shown}")
    unwritten = len(report.logged_out) - len(report.routed_logged_out)
    if unwritten:
        reasons.append(
            f"the chat is logged out and the router did not write {unwritten} article(s): "
            "run `qwenpipe login` (and check [router]: `qwenpipe doctor`)"
        )
    return reasons


def cron_code(report, workspace) -> tuple[ExitCode, list[str]]:
    """The cron exit code of a cycle that ran, and why a person is needed (if one is)."""
    if report.busy_owner:
        return ExitCode.DONE, []  # another cycle is at work: in progress
    reasons = person_needed(report, workspace)
    return (NEEDS_PERSON if reasons else ExitCode.DONE), reasons


def store_code(failures: int) -> tuple[ExitCode, str]:
    """The cron exit code of a cycle the store stopped, the `failures`-th in a row."""
    if failures >= STORE_CYCLES:
        return NEEDS_PERSON, (
            f"the store stopped {failures} cycles in a row: check the database ([store] url, "
            "`qwenpipe doctor`); nothing was sent meanwhile"
        )
    return ExitCode.DONE, (
        f"the store stopped this cycle ({failures} in a row; a person is needed from "
        f"{STORE_CYCLES} on); nothing was sent, the next cycle tries again"
    )
