"""What the batch dashboard commands (cli/dashboard.py) print: status, its --watch and
--history, and the accounts. No Typer here: the console script answers `status --json` with
print_status alone (pipeline/entry.py).

They only read (the journal index is a cache they may rewrite, atomically and without a lock),
so they are safe to run at any time, even while a cycle is under way.
"""

import json
import sys
import time

from ..redact import mask, mask_data, masked_json


def print_accounts(workspace, as_json: bool) -> None:
    from ..batch.dashboard import accounts_table
    from ..batch.status import collect_accounts

    accounts = collect_accounts(workspace, time.time())
    if as_json:
        document = {"accounts": [account.to_json() for account in accounts]}
        sys.stdout.write(json.dumps(mask_data(document), ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(mask(accounts_table(accounts, time.time())))


def print_history(workspace, as_json: bool) -> None:
    from ..batch.history import collect_history

    workspace.config.require_prompts_dir()  # the wrong folder: exit 2, said
    found = collect_history(workspace)
    if as_json:
        indent = 1 if sys.stdout.isatty() else None
        sys.stdout.write(masked_json(found.to_json(), ensure_ascii=False, indent=indent) + "\n")
        return
    from ..batch.chart import history_table
    from ..batch.dashboard import plain_wanted

    plain = plain_wanted()
    if plain:  # a log or a pipe: as wide as the chart is, never wrapped at 80 columns
        from rich.console import Console

        console = Console(file=sys.stdout, color_system=None, width=400, highlight=False)
    else:
        console = _stdout()
    console.print(history_table(found, plain=plain))


def print_status(workspace, query: dict, as_json: bool) -> None:
    from ..batch.status import collect
    from ..console import say

    status = collect(workspace, **query, as_text=as_json)  # its rows may be the text kept whole
    if as_json:
        # Indented for a person at a terminal; one compact line for scripts.
        if sys.stdout.isatty():
            sys.stdout.write(masked_json(status.to_json(), ensure_ascii=False, indent=1) + "\n")
        else:  # the same bytes as json.dumps(to_json()), written faster (BatchStatus.json_text)
            sys.stdout.write(status.script_json() + "\n")
    else:  # the dashboard (rich's tables) only for a person: a script's --json never loads it
        from ..batch.dashboard import plain_status, plain_wanted, rich_status

        if plain_wanted():
            sys.stdout.write(mask(plain_status(status)))
        else:
            console = _stdout()
            console.print(rich_status(status, width=console.width))
    for warning in status.warnings:
        say(f"warning: {warning}")


HISTORY_HEIGHT = 18  # lines of the fortnight's chart: its title, head and 14 days, a blank line
MIN_ROWS_BESIDE_HISTORY = 10  # the articles' rows a terminal keeps before the chart takes room


def watch_status(workspace, query: dict, interval: float) -> None:
    """Redraw in place every `interval` seconds until Ctrl-C, which ends it with exit 0.

    Live with auto_refresh off and one update per tick: one repaint per refresh, no flicker.
    """
    from rich.live import Live

    from ..batch.dashboard import footer_height, plain_status, plain_wanted, refreshed_line, rich_status
    from ..batch.status import collect

    console = _stdout()
    plain = plain_wanted()
    try:
        if not console.is_terminal:  # a pipe: a fresh snapshot per tick, nothing to redraw
            while True:
                status = collect(workspace, **query)
                refreshed = refreshed_line(status, interval)
                sys.stdout.write(mask(plain_status(status, warnings=True, refreshed=refreshed)) + "\n")
                sys.stdout.flush()
                time.sleep(interval)
        with Live(console=console, screen=False, auto_refresh=False, transient=False) as live:
            while True:
                status = collect(workspace, **query)
                refreshed = refreshed_line(status, interval)
                width = console.width
                # Room for rows: the terminal less the refresh line, the table's head, the
                # "... more" line, a blank line and the footer as it wraps at this width.
                room = max(console.size.height - 6 - footer_height(status, width, warnings=True), 3)
                # The fortnight's chart above, where it leaves the articles room of their own.
                chart = room - HISTORY_HEIGHT >= MIN_ROWS_BESIDE_HISTORY
                shape = {"warnings": True, "max_rows": room - HISTORY_HEIGHT if chart else room}
                shape["refreshed"] = refreshed
                if plain:
                    view = _plain_text(plain_status(status, **shape))
                else:
                    view = rich_status(status, width=width, **shape)
                if chart:
                    from rich.console import Group

                    from ..batch.chart import history_table
                    from ..batch.history import collect_history

                    view = Group(history_table(collect_history(workspace), plain=plain), view)
                live.update(view, refresh=True)
                time.sleep(interval)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a watch ends: exit 0


def _plain_text(text: str):
    from rich.text import Text

    return Text(text.rstrip("\n"), no_wrap=False, overflow="fold")  # wrapped at words, never cut


def _stdout():
    from ..console import out

    return out()
