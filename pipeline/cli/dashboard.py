"""`qwenpipe status`, `qwenpipe accounts` and `qwenpipe show`: the batch dashboard commands.

They only read (the journal index is a cache they may rewrite, atomically and without a lock),
so they are safe to run at any time, even while a cycle is under way. What they print is
cli/status.py's.
"""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
import sys
from typing import Annotated

import typer

from ..console import out
from ..errors import UsageProblem
from ..redact import mask
from .common import ConfigOption, workspace_of
from .status import print_accounts, print_history, print_status, watch_status


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
    interval: Annotated[float, typer.Option("--interval", help="seconds between --watch refreshes")] = 2.0,
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


def accounts_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document (docs/status.md)")] = False,
    config: ConfigOption = None,
) -> None:
    """Each chat account: its login and expiry, sends today against its limit, a quota block, enabled."""
    print_accounts(workspace_of(ctx, config), as_json)


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
        out().print(rich_story(story, slug))
