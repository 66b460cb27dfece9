"""`qwenpipe init`, `qwenpipe login`, `qwenpipe doctor` and `qwenpipe report`: setting a machine
up once, checking it, and bundling what a user sends when an article went wrong.

Exit codes as everywhere: 0 fine; 1 failed (not signed in, a doctor check failed); 2 cannot run
as asked (bad config, bad import file, a window needed and no screen); 3 the browser profile is
in use by a run (try again later).
"""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..exitcodes import ExitCode
from .common import ConfigOption, workspace_of


def login_command(
    ctx: typer.Context,
    import_file: Annotated[
        Path | None,
        typer.Option(
            "--import",
            help="take this storage state or cookie export (JSON list) instead of signing in",
            dir_okay=False,
        ),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for the sign-in")] = 600,
    account_name: Annotated[
        str | None,
        typer.Option("--account", help="the [accounts.NAME] to sign in (needed when there are several)"),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Sign in to the chat once (a browser window opens) and keep the login (mode 0600)."""
    from ..console import say
    from ..engines.base import EngineBusy, EngineError
    from ..errors import UsageProblem
    from ..setup.login import (
        LoginFailed,
        account_to_log_in,
        bot_check_hold,
        end_bot_check,
        import_state,
        run_login,
        state_key,
    )
    from ..times import describe_expiry

    if not 0 < timeout <= 86400:  # also refuses nan, which would wait forever
        raise UsageProblem(f"--timeout {timeout}: must be more than 0 and at most 86400 seconds")
    workspace = workspace_of(ctx, config)
    account = account_to_log_in(workspace.config, account_name)
    hold = bot_check_hold(workspace, account.name)
    try:
        if import_file is not None:
            result = import_state(workspace.config, account, import_file)
        else:
            reason = hold.reason if hold else None
            result = run_login(workspace.config, account, timeout=timeout, say=say, bot_check=reason)
    except LoginFailed as failed:
        say(f"qwenpipe: login: {failed}")
        raise typer.Exit(ExitCode.FAILED) from None
    except EngineBusy as busy:
        say(f"qwenpipe: login: {busy}")
        raise typer.Exit(ExitCode.WORKING) from None
    except EngineError as error:
        say(f"qwenpipe: login: {error}")
        raise typer.Exit(ExitCode.FAILED) from None
    say(f"{result.how}: the login is saved in {result.state_path} (mode 0600, {state_key(account)})")
    say(f"the chat login {describe_expiry(result.expires_at)}")
    for note in result.notes:
        say(f"note: {note}")
    if hold is not None and end_bot_check(workspace, account.name):
        say(f"the bot check hold on account {account.name} is over: its sends start again")


def doctor_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document")] = False,
    config: ConfigOption = None,
) -> None:
    """Check the setup: config, browser, login, the page's selectors, router, articles. 0 = all pass."""
    from ..console import say
    from ..redact import mask, mask_data
    from ..setup.doctor import run_doctor

    workspace = workspace_of(ctx, config)  # a bad config is exit 2 before anything is checked
    progress = None if as_json or not sys.stderr.isatty() else (lambda step: say(f"checking {step}..."))
    report = run_doctor(workspace.config, progress=progress)
    if as_json:
        sys.stdout.write(json.dumps(mask_data(report.to_json()), ensure_ascii=False, indent=1) + "\n")
    else:
        sys.stdout.write(mask(report.text()))
    raise typer.Exit(report.exit_code)


def report_command(
    ctx: typer.Context,
    slug: Annotated[str, typer.Argument(help="the article: prompts/SLUG.md", metavar="SLUG")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="the zip to write (default: ./qwenpipe-report-SLUG-TIME.zip)",
            dir_okay=False,
            metavar="PATH",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Write one zip to send with a bug report: SLUG's journal, records and files, the last
    day's unknown answers, screenshots, the last run's trace, versions, the config, every
    secret masked. Its path on stdout."""
    from ..console import out, say
    from ..setup.report import write_report

    workspace = workspace_of(ctx, config)
    bundle = write_report(workspace, slug, output.absolute() if output else None)
    out().print(str(bundle.path), markup=False)
    say(bundle.summary())


def init_command(
    ctx: typer.Context,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing config file")] = False,
    config: ConfigOption = None,
) -> None:
    """Write a commented config.toml with every key at its default."""
    from ..config import config_path, load, render_default_config
    from ..console import say
    from ..errors import UsageProblem
    from ..files import SHARED, atomic_write

    path, _named = config_path(config or ctx.obj.get("config"))
    if path.exists() and not force:
        raise UsageProblem(f"{path} already exists; use --force to overwrite it")
    atomic_write(path, render_default_config(), mode=SHARED)
    say(f"wrote {path}")
    from ..setup.gitignore import ensure_gitignore

    ignored = ensure_gitignore(path.parent)
    if ignored:
        say(ignored)
    prompts = load(path).prompts_dir
    if not prompts.is_dir():
        prompts.mkdir(parents=True)
        say(f"made {prompts}: write each prompt there as SLUG.md")
