"""`qwenpipe log`: the journal as lines, for people who used to `tail -f` journal.jsonl."""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
import json
import sys
import time
from typing import Annotated

import typer

from ..redact import mask, mask_data
from .common import ConfigOption, workspace_of

FOLLOW_INTERVAL = 0.5  # seconds between two reads of the store under --follow


def log_command(
    ctx: typer.Context,
    slug: Annotated[str | None, typer.Argument(help="only this article's steps", metavar="SLUG")] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="keep printing new steps until Ctrl-C")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object a line (the journal.jsonl form)")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """The journal: every step of every article (or one), oldest first."""
    if slug is not None:
        from ..contract.prompts import check_slug

        check_slug(slug)
    workspace = workspace_of(ctx, config)
    workspace.check_journal()
    journal = workspace.journal
    try:
        after = _print(journal, slug, 0, as_json)
        while follow:
            time.sleep(FOLLOW_INTERVAL)
            after = _print(journal, slug, after, as_json)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `log | head`: the reader has all it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _print(journal, slug: str | None, after: int, as_json: bool) -> int:
    """Print the steps after event `after`; returns the last one printed (or `after`)."""
    for entry in journal.read(slug=slug, after=after):
        after = entry.pop("seq")
        sys.stdout.write(
            json.dumps(mask_data(entry), ensure_ascii=False, default=str) if as_json else mask(line(entry))
        )
        sys.stdout.write("\n")
    sys.stdout.flush()
    return after


def line(entry: dict) -> str:
    """One step as a line: time, slug, event, then the other fields as key=value."""
    rest = " ".join(
        f"{key}={value}" for key, value in entry.items() if key not in ("time", "ts", "slug", "event")
    )
    return f"{entry['time']} {entry['slug']} {entry['event']}" + (f" {rest}" if rest else "")
