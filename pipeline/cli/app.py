"""The command line: parse, call the core, map outcomes to exit codes. Nothing else lives here.

This module holds the app, its global options and the one list of its commands (COMMANDS, in
help order); each command is a module-level function of the cli module its docstring names.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .. import __version__
from ..console import out, say
from ..exitcodes import ExitCode
from . import contract, cron, dashboard, log, prompts, setup, simulate, store
from .common import ConfigOption
from .running import exit_code_of


def _usage_name(argument) -> str:
    """An argument on the usage line as Click writes it: SLUG, or [SLUG] when it may be left
    out (Typer's own `{SLUG}` reads like one of publish.after's placeholders)."""
    name = argument.make_metavar() if argument.metavar is None else argument.metavar
    several = argument.nargs != 1
    name = name.removesuffix("...") if several else name  # Click's own dots, once, outside
    name = name if argument.required else f"[{name}]"
    return name + ("..." if several else "")


if hasattr(typer.core.TyperArgument, "_usage_display_name"):  # the Typer versions that brace them
    typer.core.TyperArgument._usage_display_name = _usage_name

if hasattr(typer.core.TyperArgument, "display_type"):
    _display_type = typer.core.TyperArgument.display_type

    def _one_value_type(argument, ctx) -> str:
        """An argument given several times shows one value's type (`PATTERN... <str>`: the
        dots say several), not Python's `<list[str]>`."""
        shown = _display_type(argument, ctx)
        return f"<{shown[6:-2]}>" if shown.startswith("<list[") else shown

    typer.core.TyperArgument.display_type = _one_value_type


app = typer.Typer(
    name="qwenpipe",
    help="Generate articles with the chat.qwen.ai web chat, unattended, paying once per prompt.",
    no_args_is_help=True,
    # `--install-completion` / `--show-completion`: Tab completes commands, options and choices.
    add_completion=True,
    # Plain help: the rich panels label every flag `<bool>`, though a flag takes no value.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        out().print(f"qwenpipe {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    config: ConfigOption = None,
    cdp: Annotated[
        str | None,
        typer.Option(
            "--cdp", help="attach to a running, logged-in Chrome at this URL (overrides browser.cdp_url)"
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    ctx.obj = {"config": config, "cdp": cdp}


# Every command, in the order `qwenpipe --help` lists them: (its name, the function that runs it).
# Each is a module-level function of its cli module; this list is the one place they are added.
COMMANDS = (
    ("generate", contract.generate_command),
    ("cycle", cron.cycle_command),
    ("cron", cron.cron_command),
    ("replay", contract.replay_command),
    ("init", setup.init_command),
    ("simulate", simulate.simulate_command),
    ("status", dashboard.status_command),
    ("accounts", dashboard.accounts_command),
    ("show", dashboard.show_command),
    ("sync", store.sync_command),
    ("login", setup.login_command),
    ("doctor", setup.doctor_command),
    ("report", setup.report_command),
    ("log", log.log_command),
    ("new", prompts.new_command),
    ("import", prompts.import_command),
    ("publish", prompts.publish_command),
)
# The groups of commands, listed after the commands: (its name, its help, its commands).
GROUPS = (("store", store.GROUP_HELP, (("init", store.init_command),)),)


def _add_commands() -> None:
    """COMMANDS and GROUPS into the app, in their order (the order help lists them)."""
    for name, command in COMMANDS:
        app.command(name)(command)
    for name, help_text, commands in GROUPS:
        group = typer.Typer(help=help_text)
        for sub, command in commands:
            group.command(sub)(command)
        app.add_typer(group, name=name)


_add_commands()


def run(argv: list[str] | None = None) -> int:
    """Run the command line in-process and return its exit code; expected failures become one
    clear line on stderr, never a traceback. The command's workspace closes its store when the
    command ends (common.workspace_of)."""
    from typer.exceptions import TyperException

    def parse_and_run() -> int:
        try:
            result = app(args=argv, prog_name="qwenpipe", standalone_mode=False)
        except typer.Exit as done:
            return done.exit_code
        except typer.Abort:
            say("qwenpipe: interrupted")
            return ExitCode.INTERRUPTED
        except TyperException as bad:  # bad usage: unknown option, missing argument
            show = getattr(bad, "show", None)
            show() if show else say(f"qwenpipe: {bad.format_message()}")
            return ExitCode.USAGE
        return result if isinstance(result, int) else ExitCode.DONE

    return exit_code_of(parse_and_run)


def main() -> None:
    """Console script entry point."""
    sys.exit(run())
