"""`qwenpipe status` and `qwenpipe show`: the batch dashboard commands.

They only read (the journal index is a cache they may rewrite, atomically and without a lock),
so they are safe to run at any time, even while a cycle is under way.
"""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
import json
import sys
import time
from typing import Annotated

from ..errors import UsageProblem
from ..redact import mask, mask_data, masked_json, masked_json_text


def register(app) -> None:
    """Add `status` and `show` to the Typer app. Typer is imported here, not above: the console
    script answers `status --json` with print_status alone (pipeline/entry.py)."""
    import typer

    from .common import ConfigOption, workspace_of

    @app.command("status")
    def status_command(
        ctx: typer.Context,
        pattern: Annotated[
            list[str] | None,
            typer.Argument(
                help="only slugs matching this glob, e.g. 'tea-*' (several: any of them)",
                metavar="PATTERN...",
            ),
        ] = None,
        watch: Annotated[bool, typer.Option("--watch", help="keep the view up to date until Ctrl-C")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="one JSON document (docs/status.md)")] = False,
        state: Annotated[
            list[str] | None,
            typer.Option("--state", help="only this state (repeat, or comma-separated)", metavar="STATE"),
        ] = None,
        sort: Annotated[
            str, typer.Option("--sort", help="state (default), age (oldest sent first) or slug")
        ] = "state",
        interval: Annotated[
            float, typer.Option("--interval", help="seconds between --watch refreshes")
        ] = 2.0,
        history: Annotated[
            bool,
            typer.Option(
                "--history", help="the last 14 days: articles by engine, sends per account, dead letters"
            ),
        ] = False,
        config: ConfigOption = None,
    ) -> None:
        """Every article's state, engine, age, attempts, last error and chat URL, with the totals."""
        from ..batch.status import check_states

        states = check_states(state)  # a bad --state is exit 2 before anything is read
        if watch and as_json:
            raise UsageProblem("--watch and --json do not go together (run --json in a loop instead)")
        if interval <= 0:
            raise UsageProblem(f"--interval {interval}: must be more than 0 seconds")
        if history and (watch or pattern or state):
            raise UsageProblem(
                "--history is the whole batch's fortnight: without PATTERN, --state or --watch "
                "(status --watch shows it by itself on a terminal tall enough)"
            )
        workspace = workspace_of(ctx, config)
        if history:
            print_history(workspace, as_json)
            return
        query = {"state_filter": states, "pattern": pattern, "sort": sort}
        try:
            if watch:
                watch_status(workspace, query, interval)
            else:
                print_status(workspace, query, as_json)
        except BrokenPipeError:
            # `status | head`: the reader has all it wanted; that is not a failure.
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    @app.command("accounts")
    def accounts_command(
        ctx: typer.Context,
        as_json: Annotated[bool, typer.Option("--json", help="one JSON document (docs/status.md)")] = False,
        config: ConfigOption = None,
    ) -> None:
        """Each chat account: its login and expiry, sends today against its limit, a quota block, enabled."""
        print_accounts(workspace_of(ctx, config), as_json)

    @app.command("show")
    def show_command(
        ctx: typer.Context,
        slug: Annotated[str, typer.Argument(help="the article: prompts/SLUG.md", metavar="SLUG")],
        config: ConfigOption = None,
    ) -> None:
        """One article's whole story: every journal step (engine, duration, error) and its files."""
        from ..batch.dashboard import plain_story, plain_wanted, rich_story
        from ..batch.status import collect_story

        workspace = workspace_of(ctx, config)
        story = collect_story(workspace, slug)
        if not story.known:
            raise UsageProblem(
                f"unknown article {slug!r}: no {workspace.prompts_dir / (slug + '.md')}, "
                f"no files in {workspace.articles_dir} and nothing in the journal"
            )
        if plain_wanted():
            sys.stdout.write(mask(plain_story(story, slug)))
        else:
            _stdout().print(rich_story(story, slug))


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

    status = collect(workspace, **query)
    if as_json:
        # Indented for a person at a terminal; one compact line for scripts.
        if sys.stdout.isatty():
            sys.stdout.write(masked_json(status.to_json(), ensure_ascii=False, indent=1) + "\n")
        else:  # the same bytes as json.dumps(to_json()), written faster (BatchStatus.json_text)
            sys.stdout.write(masked_json_text(status.json_text(), status.to_json, ensure_ascii=False) + "\n")
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
