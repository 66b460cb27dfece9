"""What every command module of the command line shares: the `--config` option and the workspace
it names. app.py and every command module import it; it imports none of them."""

# No `from __future__ import annotations`: Typer reads ConfigOption at runtime.
from typing import Annotated

import typer

ConfigOption = Annotated[
    str | None,
    typer.Option("--config", "-c", help="config.toml to use (default: $QWENPIPE_CONFIG, else ./config.toml)"),
]


def workspace_of(ctx: typer.Context, config: str | None = None):
    """The workspace of the command's config (its own `--config`, else the global one), with
    the global `--cdp` applied. Its store is closed when the command ends, however it ends: a
    program that runs several commands keeps no database of one open into the next."""
    from ..config import load
    from ..wiring import workspace as open_workspace

    loaded = load(config or ctx.obj.get("config"))
    cdp = ctx.obj.get("cdp")
    if cdp is not None:
        loaded = loaded.with_override("browser", "cdp_url", cdp, "--cdp")
    workspace = open_workspace(loaded)
    ctx.call_on_close(workspace.close)
    return workspace
