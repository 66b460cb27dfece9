"""`qwenpipe store init`: create or migrate the store's schema (store.url, else the SQLite file).

Only this command migrates a PostgreSQL store: several hosts' cron jobs must not race a
migration, and a host running an older qwenpipe must stop, not write an old shape (every other
command refuses another schema version with exit 2, naming this command).
"""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
import typer

from .common import ConfigOption, workspace_of


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="The store: history and bookkeeping (SQLite, or PostgreSQL for several hosts).")
    app.add_typer(group, name="store")

    @group.command("init")
    def init_command(ctx: typer.Context, config: ConfigOption = None) -> None:
        """Create the store's schema, or migrate it to this qwenpipe's version (safe to repeat)."""
        from ..console import say
        from ..store import initialize

        workspace = workspace_of(ctx, config)
        done = initialize(workspace.config.store.url, workspace.state_dir)
        if done.before == done.after and done.kind == "postgresql":
            say(f"store {done.where}: already at schema version {done.after}; nothing to do")
        elif done.kind == "postgresql":
            was = "no schema" if done.before == 0 else f"schema version {done.before}"
            say(f"store {done.where}: {was} -> schema version {done.after}")
        else:
            say(f"store {done.where} (SQLite): at schema version {done.after} (it migrates itself on use)")
