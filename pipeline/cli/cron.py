"""`qwenpipe cycle` and `qwenpipe cron`: the cycle cron runs, and the lines that install it.
How a cycle runs is cli/running.py's (pipeline/entry.py answers a plain `cycle` without Typer).
"""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
from typing import Annotated

import typer

from ..console import out, say
from . import running
from .common import ConfigOption, workspace_of
from .running import cron_exit_of, exit_code_of


def cycle_command(
    ctx: typer.Context,
    cron_exit: Annotated[
        bool,
        typer.Option(
            "--cron-exit",
            help="exit 0 unless a person is needed (dead letters, invalid prompts, logged out with "
            "no working router, the store down 3 cycles in a row): what `qwenpipe cron` prints",
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """One cron cycle over prompts/: 1 if an article failed hard, else 42 if sent, 3 if working, 0 if done."""
    code = exit_code_of(lambda: running.cycle_command(workspace_of(ctx, config), cron_exit=cron_exit))
    raise typer.Exit(cron_exit_of(code) if cron_exit else code)


def cron_command(
    ctx: typer.Context,
    every: Annotated[
        str, typer.Option(help="time between cycles: minutes (5, 90m) or hours (2h)", metavar="TIME")
    ] = "5m",
    config: ConfigOption = None,
) -> None:
    """Print a crontab line and a systemd service + timer that run `cycle` for this config."""
    from ..config import config_path
    from ..setup.cron import (
        crontab_line,
        key_note,
        logrotate_snippet,
        parse_every,
        systemd_units,
        uneven_note,
    )

    minutes = parse_every(every)
    note = uneven_note(minutes)
    if note:
        say(note)
    path, _named = config_path(config or ctx.obj.get("config"))
    path = path.resolve()
    workspace = workspace_of(ctx, str(path)) if path.exists() else None  # a bad config: now, not at 3 a.m.
    if workspace is None:
        say(f"note: {path} does not exist yet; create it with `qwenpipe init`")
    note = key_note(workspace.config) if workspace else None
    if note:
        say(note)
    service, timer = systemd_units(path, every_minutes=minutes)
    printed = out()
    printed.print("# crontab (crontab -e):", markup=False)
    printed.print(crontab_line(path, every_minutes=minutes), markup=False)
    printed.print("\n# or systemd: ~/.config/systemd/user/qwenpipe.service", markup=False)
    printed.print(service, markup=False)
    printed.print(
        "# ~/.config/systemd/user/qwenpipe.timer  (then: systemctl --user enable --now qwenpipe.timer)",
        markup=False,
    )
    printed.print(timer, markup=False)
    printed.print(
        "# the cron line's log: /etc/logrotate.d/qwenpipe (or `logrotate` from your crontab)", markup=False
    )
    printed.print(logrotate_snippet(path), markup=False)
