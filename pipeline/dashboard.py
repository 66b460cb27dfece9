"""Rendering of `status` and `show`: a rich table on a terminal, plain aligned text elsewhere.

Plain text (no colour, no box drawing) is what cron mails, pipes and NO_COLOR users get; it is
built as one string, so 10,000 rows print in a blink. The data comes from pipeline.status.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .status import STATES, ArticleStory, BatchStatus, LastCycle, Row, ago, clock, login_warning

STATE_STYLES = {
    "failed": "bold red",
    "dead": "red",
    "invalid": "bold red",
    "backoff": "yellow",
    "quota": "magenta",
    "sending": "cyan",
    "generating": "blue",
    "pending": "white",
    "done": "green",
    "orphan": "dim",
}
COLUMNS = ("SLUG", "STATE", "ENGINE", "AGE", "ATTEMPTS", "HARD", "NEXT TRY", "LAST ERROR", "CHAT URL")
SHRINKS = "LAST ERROR"  # on a narrow terminal this column gives way first (slugs and URLs stay whole)
MIN_ERROR_WIDTH = 12
ERROR_WIDTH = 80  # the last error is one line; the full text is in `show SLUG`


def plain_wanted(stream=None) -> bool:
    """No colour and no box drawing: NO_COLOR is set, or the stream is not a terminal."""
    stream = stream or sys.stdout
    return bool(os.environ.get("NO_COLOR")) or not stream.isatty()


# -- status ----------------------------------------------------------------------------------


def cells(row: Row, now: float) -> tuple[str, ...]:
    return (
        row.slug,
        f"{row.state} (turn {row.turn} of {row.turns})" if row.turns else row.state,
        row.engine or "-",
        ago(row.age_seconds) if row.age_seconds is not None else "-",
        str(row.attempts),
        str(row.hard_failures),
        f"in {ago(row.next_try - now)}" if row.next_try else "-",
        _shorten(row.last_error or "-", ERROR_WIDTH),
        row.chat_url or "-",
    )


def totals_line(status: BatchStatus) -> str:
    counts = [f"{state} {status.totals[state]}" for state in STATES if status.totals[state]]
    return f"{sum(status.totals.values())} articles: " + (", ".join(counts) or "none")


def sends_line(status: BatchStatus) -> str:
    limit = (
        f" of {status.sends_limit} (qwen.max_sends_per_day)" if status.sends_limit else " (no daily limit)"
    )
    line = f"sends today: {status.sends_today}{limit}"
    if status.quota_blocked_until is not None:
        line += f"; chat quota spent until {clock(status.quota_blocked_until)}"
    return line


def cycle_line(cycle: LastCycle | None, now: float) -> str:
    if cycle is None:
        return "last cycle: none recorded"
    if cycle.running and cycle.started is not None:
        since = f"{clock(cycle.started)} ({ago(now - cycle.started)} ago, pid {cycle.pid})"
        return f"last cycle: running since {since}"
    if cycle.finished is None:
        return "last cycle: none finished"
    summary = f": {cycle.summary}" if cycle.summary else ""
    return (
        f"last cycle: finished {clock(cycle.finished)} ({ago(now - cycle.finished)} ago), "
        f"exit {cycle.exit_code}{summary}"
    )


def login_line(status: BatchStatus) -> str | None:
    """When the saved chat login runs out; nothing when there is no saved login to read."""
    login = status.login
    if login is None or login.expires_at is None:
        return None
    left = login.expires_at - status.now
    if left <= 0:
        return f"chat login: expired {clock(login.expires_at)} ({ago(-left)} ago)"
    return f"chat login: expires {clock(login.expires_at)} (in {ago(left)})"


def plain_status(status: BatchStatus, *, warnings: bool = False, max_rows: int | None = None) -> str:
    rows, hidden = _limit(status.rows, max_rows)
    lines = _aligned([COLUMNS, *(cells(r, status.now) for r in rows)])
    if hidden:
        lines.append(f"... {hidden} more (filter with --state or a PATTERN)")
    if not status.rows:
        lines = ["no articles match" if sum(status.totals.values()) else "no articles (prompts/ is empty)"]
    lines += ["", totals_line(status), sends_line(status), cycle_line(status.last_cycle, status.now)]
    lines += [line for line in [login_line(status)] if line]
    if warnings:
        lines += [f"warning: {w}" for w in status.warnings]
    return "\n".join(lines) + "\n"


def rich_status(
    status: BatchStatus, *, warnings: bool = False, max_rows: int | None = None, width: int = 200
) -> RenderableType:
    rows, hidden = _limit(status.rows, max_rows)
    values = [cells(row, status.now) for row in rows]
    widths = {name: max([len(name), *(len(v[i]) for v in values)]) for i, name in enumerate(COLUMNS)}
    shown = fitting_columns(widths, width)
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, expand=False)
    for name in shown:
        table.add_column(name, no_wrap=True, overflow="ellipsis", width=widths[name])
    for row, value in zip(rows, values, strict=True):
        cell = dict(zip(COLUMNS, value, strict=True))
        cell["STATE"] = Text(cell["STATE"], style=STATE_STYLES.get(row.state, ""))
        table.add_row(*(cell[name] for name in shown))
    parts: list[RenderableType] = [table]
    if hidden:
        parts.append(Text(f"... {hidden} more (filter with --state or a PATTERN)", style="dim"))
    if not status.rows:
        parts = [
            Text("no articles match" if sum(status.totals.values()) else "no articles (prompts/ is empty)")
        ]
    totals = Text()
    for state in STATES:
        if status.totals[state]:
            totals.append(f" {state} {status.totals[state]} ", style=STATE_STYLES[state])
    parts += [
        Text(f"{sum(status.totals.values())} articles:", style="bold") + totals,
        Text(sends_line(status), style="red" if status.sends_stopped else ""),
        Text(cycle_line(status.last_cycle, status.now), style=_cycle_style(status.last_cycle)),
    ]
    login = login_line(status)
    if login:
        parts.append(Text(login, style="yellow" if login_warning(status.login, status.now) else ""))
    if warnings:
        parts += [Text(f"warning: {w}", style="yellow") for w in status.warnings]
    return Group(*parts)


def fitting_columns(widths: dict[str, int], width: int) -> list[str]:
    """The columns that fit in `width`, one line per article: the last error is shortened
    first, then dropped, then the chat URL (`show SLUG` and --json have both in full)."""
    names = list(COLUMNS)
    for dropped in (None, SHRINKS, "CHAT URL", "ENGINE", "HARD", "ATTEMPTS"):
        if dropped:
            names.remove(dropped)
        spare = width - sum(widths[n] for n in names) - 3 * len(names)  # padding, rules, edges
        if SHRINKS in names and spare < 0 and widths[SHRINKS] + spare >= MIN_ERROR_WIDTH:
            widths[SHRINKS] += spare
            spare = 0
        if spare >= 0:
            break
    return names


def _cycle_style(cycle: LastCycle | None) -> str:
    if cycle is None or cycle.exit_code in (None, 0, 3, 42):  # 3 and 42 mean work under way
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
            f"engine: {row.engine or '-'}  attempts: {row.attempts}  hard failures: {row.hard_failures}"
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
            Text(f"engine: {row.engine or '-'}  attempts: {row.attempts}  hard failures: {row.hard_failures}")
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
