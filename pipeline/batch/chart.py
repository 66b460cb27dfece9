"""The fortnight chart of `status --history` (batch/history.py's numbers): a row a day, the
articles as a bar of chat (#) and router (=) parts, each account's sends against its limit, the
dead letters. The glyphs and the numbers say it all: readable without colour, in a log or a pipe."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from .history import History

CHAT, ROUTER, SENT, LEFT = "#", "=", "#", "."
ARTICLES_WIDTH = 20  # the longest articles bar, for the busiest day
SENDS_WIDTH = 10  # a sends bar at its limit (or the account's busiest day, without one)


def history_table(history: History, *, plain: bool = False) -> Table:
    """The chart as a rich Table; `plain`: no colour and no box drawing."""
    table = Table(
        box=None if plain else box.SIMPLE_HEAD,
        title=f"the last {len(history.days)} days (articles: {CHAT} chat, {ROUTER} router)",
        title_justify="left",
        pad_edge=False,
    )
    table.add_column("DAY", no_wrap=True)
    table.add_column("ARTICLES", no_wrap=True)
    for name, limit in history.limits.items():
        table.add_column(f"SENDS {name}" + (f" (of {limit})" if limit else ""), no_wrap=True)
    table.add_column("DEAD", justify="right")
    busiest = max((d.done["qwen"] + d.done["router"] for d in history.days), default=0) or 1
    peaks = {name: max((d.sends[name] for d in history.days), default=0) for name in history.limits}
    for day in history.days:
        chat, router = day.done["qwen"], day.done["router"]
        bar = Text(CHAT * _cells(chat, busiest, ARTICLES_WIDTH), style="" if plain else "green")
        bar.append(ROUTER * _cells(router, busiest, ARTICLES_WIDTH), style="" if plain else "yellow")
        bar.append(f" {chat}+{router}" if chat + router else " -")
        sends = []
        for name, limit in history.limits.items():
            sent = day.sends[name]
            scale = limit or peaks[name] or 1
            used = min(_cells(sent, scale, SENDS_WIDTH), SENDS_WIDTH)
            over = "!" if limit and sent > limit else ""
            cell = Text(SENT * used, style="" if plain else ("red" if over else "cyan"))
            cell.append(LEFT * (SENDS_WIDTH - used) if limit else "", style="" if plain else "dim")
            cell.append(f" {sent}" + (f"/{limit}" if limit else "") + over)
            sends.append(cell)
        dead = Text(str(day.dead) if day.dead else "-", style="red" if day.dead and not plain else "")
        table.add_row(day.day.strftime("%a %m-%d"), bar, *sends, dead)
    return table


def _cells(value: int, scale: int, width: int) -> int:
    """`value` of `scale` as a number of bar cells of `width`; any value above 0 shows one."""
    if value <= 0:
        return 0
    return max(1, round(value * width / scale))
