"""Rendering of `status` and `show`: a rich table on a terminal, plain aligned text elsewhere.

Plain text (no colour, no box drawing) is what cron mails, pipes and NO_COLOR users get; it is
built as one string, so 10,000 rows print in a blink. The data comes from pipeline.batch.status.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Sequence
from datetime import datetime

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..contract.quota import Hold
from ..exitcodes import ExitCode
from ..times import clock, describe_expiry, short_duration
from .status import (
    STATES,
    AccountLine,
    ArticleStory,
    BatchStatus,
    LastCycle,
    Row,
    login_warning,
)

STATE_STYLES = {
    "invalid": "bold red",
    "failed": "bold red",
    "dead": "red",
    "backoff": "yellow",
    "quota": "magenta",
    "sending": "cyan",
    "generating": "blue",
    "pending": "white",
    "done": "green",
    "orphan": "dim",
}
COLUMNS = (
    "SLUG",
    "STATE",
    "ENGINE",
    "ACCOUNT",
    "AGE",
    "ATTEMPTS",
    "HARD",
    "NEXT TRY",
    "LAST ERROR",
    "CHAT URL",
)
# The table's columns depend on the terminal's width only, never on what the rows hold, so a
# refresh never makes a column vanish or come back. Fixed columns have fixed widths (cells
# that do not fit end in "..."); the others share what is left in these proportions.
COLUMN_SETS = (  # (narrowest terminal it is for, columns)
    (150, COLUMNS),
    (100, ("SLUG", "STATE", "ENGINE", "ACCOUNT", "AGE", "ATTEMPTS", "HARD", "NEXT TRY", "LAST ERROR")),
    (0, ("SLUG", "STATE", "AGE", "NEXT TRY", "LAST ERROR")),
)
FIXED_WIDTHS = {"STATE": 14, "ENGINE": 6, "ACCOUNT": 8, "AGE": 5, "ATTEMPTS": 8, "HARD": 4, "NEXT TRY": 8}
SHARES = {"SLUG": 3, "LAST ERROR": 2, "CHAT URL": 3}
URL_WHOLE_FROM = 110  # terminal columns left beside a whole chat URL: the fixed columns and some slug
ERROR_WIDTH = 80  # the last error is one line; the full text is in `show SLUG`


def plain_wanted(stream=None) -> bool:
    """No colour and no box drawing: NO_COLOR is set, or the stream is not a terminal."""
    stream = stream or sys.stdout
    return bool(os.environ.get("NO_COLOR")) or not stream.isatty()


# -- status ----------------------------------------------------------------------------------


def cells(row: Row, now: float, *, compact: bool = False) -> tuple[str, ...]:
    """The row's cells; `compact` (the table's fixed STATE column): "generating 2/3"."""
    state = row.state
    if row.turns and row.turn is None:  # a done multi-turn article: how many turns it had
        state += f" {row.turns}/{row.turns}" if compact else f" ({row.turns} turns)"
    elif row.turns:
        state += f" {row.turn}/{row.turns}" if compact else f" (turn {row.turn} of {row.turns})"
    return (
        row.slug,
        state,
        row.engine or "-",
        f"{row.account or '-'}@{row.host}" if row.host else row.account or "-",  # a shared batch
        short_duration(row.age_seconds) if row.age_seconds is not None else "-",
        str(row.attempts),
        str(row.hard_failures),
        f"in {short_duration(row.next_try - now)}" if row.next_try else "-",
        _shorten(row.last_error or "-", ERROR_WIDTH),
        row.chat_url or "-",
    )


def totals_line(status: BatchStatus) -> str:
    counts = [f"{state} {status.totals[state]}" for state in STATES if status.totals[state]]
    return f"{totals_head(status)} " + (", ".join(counts) or "none")


def totals_head(status: BatchStatus) -> str:
    total = sum(status.totals.values())
    return f"all {total} articles:" if status.filters else f"{total} articles:"


def shown_line(status: BatchStatus) -> str | None:
    """Which rows a filtered view shows, out of how many (the totals are the whole batch's)."""
    if not status.filters:
        return None
    return f"{len(status.rows)} shown of {sum(status.totals.values())} ({status.filters})"


def refreshed_line(status: BatchStatus, interval: float) -> str:
    when = datetime.fromtimestamp(status.now).strftime("%H:%M:%S")
    return f"refreshed {when}, every {interval:g} s (Ctrl-C ends)"


def sends_line(status: BatchStatus) -> str:
    limit = (
        f" of {status.sends_limit} (qwen.max_sends_per_day)" if status.sends_limit else " (no daily limit)"
    )
    line = f"sends today: {status.sends_today}{limit}"
    if status.quota_blocked_until is not None:
        kind = Hold("", status.quota_blocked_until, 0.0, status.quota_reason or "").kind
        what = "chat quota spent" if kind == "quota" else f"every account held back ({kind})"
        line += f"; {what} until {clock(status.quota_blocked_until)}"
    return line


def account_lines(status: BatchStatus) -> list[str]:
    """A line per chat account ([accounts.*] tables; none for the one `default` account, whose
    sends and login the lines above already show): its sends, limit, quota block and login."""
    if not status.several_accounts:
        return []
    lines = []
    for account in status.accounts:
        parts = [f"{account.sends_today} sent today" + (f" of {account.limit}" if account.limit else "")]
        parts[0] += share_words(account)
        if not account.enabled:
            parts.append("disabled")
        if account.hold is not None:
            parts.append(account.hold.short())
        elif account.quota_until is not None:
            parts.append(f"quota spent until {clock(account.quota_until)}")
        parts.append(f"login: {login_words(account, status.now)}")
        lines.append(f"account {account.name}: {', '.join(parts)}")
    return lines


def share_words(account: AccountLine) -> str:
    """An account's share of today's sends (collect_accounts works it out), e.g. " (50% of
    today's)"; "" when none were made."""
    return f" ({round(100 * account.share)}% of today's)" if account.share is not None else ""


def login_words(account: AccountLine, now: float) -> str:
    """An account's saved login in a few words: none, its expiry, or that it expired."""
    expires = account.login.expires_at
    if expires is None:
        return "saved, no expiry read" if account.login.state_file.exists() else "none saved"
    if expires <= now:
        return f"expired {clock(expires)}"
    return f"expires {clock(expires)}"


ACCOUNT_COLUMNS = ("ACCOUNT", "ENABLED", "LOGIN", "SENDS TODAY", "QUOTA", "SAVED LOGIN")


def accounts_table(accounts: list[AccountLine], now: float) -> str:
    """`qwenpipe accounts`: one aligned line per account (plain text: it is short)."""
    rows = [ACCOUNT_COLUMNS]
    for account in accounts:
        login = login_words(account, now)
        limit = f"of {account.limit}" if account.limit else "(no limit)"
        sends = f"{account.sends_today} {limit}{share_words(account)}"
        quota = f"spent until {clock(account.quota_until)}" if account.quota_until is not None else "-"
        quota = account.hold.short() if account.hold is not None else quota
        enabled = "yes" if account.enabled else "no"
        rows.append((account.name, enabled, login, sends, quota, str(account.login.state_file)))
    held = [a.hold.words() for a in accounts if a.hold is not None and a.hold.kind != "quota"]
    lines = list(_aligned(rows))
    if held:  # what to do about them, in words, under the table
        lines += ["", *held]
    return "\n".join(lines) + "\n"


def cycle_line(cycle: LastCycle | None, now: float) -> str:
    if cycle is None:
        return "last cycle: none recorded"
    if cycle.problem:
        return f"last cycle: unknown ({cycle.problem})"
    if cycle.gone and cycle.started is not None:
        since = f"{clock(cycle.started)} ({short_duration(now - cycle.started)} ago, pid {cycle.pid})"
        return f"last cycle: started {since}, stopped without finishing (its process is gone)"
    if cycle.running and cycle.started is not None:
        since = f"{clock(cycle.started)} ({short_duration(now - cycle.started)} ago, pid {cycle.pid})"
        return f"last cycle: running since {since}"
    if cycle.finished is None:
        return "last cycle: none finished"
    summary = f": {cycle.summary}" if cycle.summary else ""
    return (
        f"last cycle: finished {clock(cycle.finished)} ({short_duration(now - cycle.finished)} ago), "
        f"exit {cycle.exit_code}{summary}"
    )


def login_line(status: BatchStatus) -> str | None:
    """When the saved chat login runs out; nothing when there is no saved login to read."""
    login = status.login
    if login is None or login.expires_at is None:
        return None
    return f"chat login: {describe_expiry(login.expires_at, status.now, length=short_duration)}"


def plain_status(
    status: BatchStatus, *, warnings: bool = False, max_rows: int | None = None, refreshed: str | None = None
) -> str:
    rows, hidden = _limit(status.rows, max_rows)
    lines = _aligned([COLUMNS, *(cells(r, status.now) for r in rows)])
    if hidden:
        lines.append(f"... {hidden} more (filter with --state or a PATTERN)")
    if not status.rows:
        lines = ["no articles match" if sum(status.totals.values()) else "no articles (prompts/ is empty)"]
    lines = ([refreshed, ""] if refreshed else []) + lines
    lines += ["", *footer_lines(status, warnings=warnings)]
    return "\n".join(lines) + "\n"


def footer_lines(status: BatchStatus, *, warnings: bool) -> list[str]:
    """The lines below the table: what is shown, the totals, sends, the last cycle, the login."""
    lines = [line for line in [shown_line(status)] if line]
    lines += [totals_line(status), sends_line(status), *account_lines(status)]
    lines += [cycle_line(status.last_cycle, status.now)]
    lines += [line for line in [login_line(status)] if line]
    if warnings:
        lines += [f"warning: {w}" for w in status.warnings]
    return lines


def footer_height(status: BatchStatus, width: int, *, warnings: bool) -> int:
    """Terminal lines the footer takes at `width` (its lines wrap at word boundaries)."""
    lines = footer_lines(status, warnings=warnings)
    return sum(len(textwrap.wrap(line, max(width, 1))) or 1 for line in lines)


def rich_status(
    status: BatchStatus,
    *,
    warnings: bool = False,
    max_rows: int | None = None,
    width: int = 200,
    refreshed: str | None = None,
) -> RenderableType:
    """The status screen (`qwenpipe status`, `--watch`): the table of articles (columns as the
    width allows, `max_rows` of them and a line for the rest), the totals, the batch's lines
    (sends, quota, last cycle, login) and, with `warnings`, what needs a person."""
    rows, hidden = _limit(status.rows, max_rows)
    shown = column_set(width)
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, expand=True, width=width)
    # A chat URL cut short is no use: its column is as wide as the longest one shown (when the
    # terminal has room for it: from 150 columns, `column_set`), the slug and the error share the rest.
    url_width = max((len(row.chat_url or "") for row in rows), default=0)
    for name in shown:
        if name in FIXED_WIDTHS:
            table.add_column(name, no_wrap=True, overflow="ellipsis", width=FIXED_WIDTHS[name])
        elif name == "CHAT URL" and url_width and width >= URL_WHOLE_FROM + url_width:
            table.add_column(name, no_wrap=True, overflow="ellipsis", width=url_width)
        else:
            table.add_column(name, no_wrap=True, overflow="ellipsis", ratio=SHARES[name], min_width=4)
    for row in rows:
        cell = dict(zip(COLUMNS, cells(row, status.now, compact=True), strict=True))
        cell["STATE"] = Text(cell["STATE"], style=STATE_STYLES.get(row.state, ""))
        table.add_row(*(cell[name] for name in shown))
    parts: list[RenderableType] = [_line(refreshed, "dim")] if refreshed else []
    parts.append(table)
    if hidden:
        parts.append(_line(f"... {hidden} more (filter with --state or a PATTERN)", "dim"))
    if not status.rows:
        parts = parts[:-1] + [
            _line("no articles match" if sum(status.totals.values()) else "no articles (prompts/ is empty)")
        ]
    shown_text = shown_line(status)
    if shown_text:
        parts.append(_line(shown_text, "bold"))
    totals = _line(totals_head(status), "bold")
    for state in STATES:
        if status.totals[state]:
            totals.append(f" {state} {status.totals[state]} ", style=STATE_STYLES[state])
    parts += [
        totals,
        _line(sends_line(status), "red" if status.sends_stopped else ""),
        *(_line(line) for line in account_lines(status)),
        _line(cycle_line(status.last_cycle, status.now), _cycle_style(status.last_cycle)),
    ]
    login = login_line(status)
    if login:
        parts.append(_line(login, "yellow" if login_warning(status.login, status.now) else ""))
    if warnings:
        parts += [_line(f"warning: {w}", "yellow") for w in status.warnings]
    return Group(*parts)


def column_set(width: int) -> tuple[str, ...]:
    """The table's columns at a terminal `width` (the chat URL, then the counts, give way first:
    `show SLUG` and --json have them all)."""
    return next(names for narrowest, names in COLUMN_SETS if width >= narrowest)


def _line(text: str, style: str = "") -> Text:
    # Wrapped at word boundaries, never cut at the edge (the consoles soft-wrap by default).
    return Text(text, style=style, no_wrap=False, overflow="fold")


def _cycle_style(cycle: LastCycle | None) -> str:
    # Working (3) and queued (42) mean work under way; only a failure is red, and a cycle that
    # stopped without finishing, or a record that cannot be read.
    if cycle is not None and (cycle.gone or cycle.problem):
        return "red"
    if cycle is None or cycle.exit_code in (None, ExitCode.DONE, ExitCode.WORKING, ExitCode.QUEUED):
        return ""
    return "red"


# -- show ------------------------------------------------------------------------------------


def story_lines(story: ArticleStory, slug: str) -> list[tuple[str, ...]]:
    """The journal entries as table rows: each `sending` step opens a new attempt."""
    rows = []
    attempt = 0
    for entry in story.entries:
        if entry.get("event") == "sending":
            attempt += 1
        detail = (
            entry.get("error") or entry.get("chat_url") or entry.get("progress") or entry.get("reason") or ""
        )
        code = entry.get("code")
        cells = (
            str(entry.get("time", "")),
            str(entry.get("event", "")),
            str(entry.get("engine", "") or "-"),
            str(attempt or "-"),
            f"{entry['duration']}s" if entry.get("duration") is not None else "-",
            f"[{code}] {detail}" if code else str(detail),
        )
        rows.append(tuple(capped(cell) for cell in cells))
    return rows


MAX_FIELD = 2000  # characters of one journal field `show` prints; the journal keeps it all


def capped(text: str, limit: int = MAX_FIELD) -> str:
    """`text`, or its first `limit` characters and how many more the journal holds."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit:,} more characters cut; the journal has them]"


STORY_COLUMNS = ("TIME", "EVENT", "ENGINE", "SEND #", "DURATION", "DETAIL")


def file_lines(story: ArticleStory) -> list[tuple[str, ...]]:
    return [
        (label, "yes" if size is not None else "no", f"{size} B" if size is not None else "-", str(path))
        for label, path, size in story.files
    ]


def plain_story(story: ArticleStory, slug: str) -> str:
    row = story.row
    lines = [f"{slug}: {row.state if row else 'unknown'}"]
    if row:
        lines.append(
            f"engine: {row.engine or '-'}  account: {row.account or '-'}  "
            f"attempts: {row.attempts}  hard failures: {row.hard_failures}"
        )
        lines.append(f"chat URL: {row.chat_url or '-'}")
        if row.last_error:
            lines.append(f"last error: {capped(row.last_error)}")
    lines += ["", "files:", *_aligned(file_lines(story)), "", f"journal ({len(story.entries)} entries):"]
    lines += _aligned([STORY_COLUMNS, *story_lines(story, slug)]) if story.entries else ["(none)"]
    return "\n".join(lines) + "\n"


def rich_story(story: ArticleStory, slug: str) -> RenderableType:
    row = story.row
    state = row.state if row else "unknown"
    head = Text(f"{slug}: ", style="bold") + Text(state, style=STATE_STYLES.get(state, ""))
    parts: list[RenderableType] = [head]
    if row:
        parts.append(
            Text(
                f"engine: {row.engine or '-'}  account: {row.account or '-'}  "
                f"attempts: {row.attempts}  hard failures: {row.hard_failures}"
            )
        )
        parts.append(Text(f"chat URL: {row.chat_url or '-'}"))
        if row.last_error:
            parts.append(Text(f"last error: {capped(row.last_error)}", style="red"))
    files = Table("FILE", "EXISTS", "SIZE", "PATH", box=box.SIMPLE_HEAD, title="files", title_justify="left")
    for values in file_lines(story):
        files.add_row(*values, style="" if values[1] == "yes" else "dim")
    journal = Table(
        *STORY_COLUMNS,
        box=box.SIMPLE_HEAD,
        title=f"journal ({len(story.entries)} entries)",
        title_justify="left",
    )
    for values in story_lines(story, slug):
        style = "red" if values[1] in ("hard", "router_failed", "dead_letter", "quota") else ""
        style = style or ("yellow" if values[1] == "transient" else "")
        journal.add_row(*values, style=style)
    return Group(*parts, files, journal)


# -- helpers ---------------------------------------------------------------------------------


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart; the last column is not padded."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows]


def _limit(rows: list[Row], max_rows: int | None) -> tuple[list[Row], int]:
    if max_rows is None or len(rows) <= max_rows:
        return rows, 0
    return rows[: max(max_rows, 1)], len(rows) - max(max_rows, 1)


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
