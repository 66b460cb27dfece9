"""`qwenpipe store init`: create or migrate the store's schema (store.url, else the SQLite file);
`qwenpipe sync`: this host's articles/ from a shared batch's rows.

Only this command migrates a PostgreSQL store: several hosts' cron jobs must not race a
migration, and a host running an older qwenpipe must stop, not write an old shape (every other
command refuses another schema version with exit 2, naming this command).
"""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
import typer

from ..errors import UsageProblem
from .common import ConfigOption, workspace_of

GROUP_HELP = "The store: history and bookkeeping (SQLite, or PostgreSQL for several hosts)."


def init_command(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Create the store's schema, or migrate it to this qwenpipe's version (safe to repeat)."""
    from ..console import say
    from ..store import initialize

    workspace = workspace_of(ctx, config)
    done = initialize(workspace.config.store.url, lambda: workspace.store)
    if done.before == done.after and done.kind == "postgresql":
        say(f"store {done.where}: already at schema version {done.after}; nothing to do")
    elif done.kind == "postgresql":
        was = "no schema" if done.before == 0 else f"schema version {done.before}"
        say(f"store {done.where}: {was} -> schema version {done.after}")
    else:
        say(f"store {done.where} (SQLite): at schema version {done.after} (it migrates itself on use)")


def sync_command(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Write every finished article (and the .md.url of every sent one) of the batch several
    hosts share into this host's articles/ (every cycle does it too)."""
    from .. import files
    from ..console import say
    from ..contract.hosts import sync

    workspace = workspace_of(ctx, config)
    if not workspace.config.store.url:
        raise UsageProblem(
            "sync needs a batch several hosts share: set [store] url in "
            f"{workspace.config.describe()} (on one machine, articles/ is already the record)"
        )
    files.ensure_folder(workspace.articles_dir)
    done = sync(
        workspace.store, workspace.articles_dir, workspace.config.store.host, workspace.this_host_store
    )
    say(done.line())
