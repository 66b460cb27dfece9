"""The command line: parse, call the core, map outcomes to exit codes. Nothing else lives here."""

from __future__ import annotations

import contextlib
import inspect
import sys
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from .. import __version__
from ..config import load
from ..console import out, say
from ..errors import UsageProblem
from ..exitcodes import ExitCode
from ..files import LockBusy
from . import log as cli_log
from . import prompts as cli_prompts
from . import setup as cli_setup
from . import status as cli_status
from . import store as cli_store
from .common import ConfigOption, workspace_of
from .running import cron_exit_of, cycle_command, exit_code_of, progress, watchdog

if TYPE_CHECKING:
    from ..contract.step import Status


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


def status_exit(status: Status) -> ExitCode:
    """The exit code of a step's outcome (the file contract's: 0 done, 42 queued, 3 working, 1 failed)."""
    from ..contract.step import Status  # the contract is loaded only by a command that steps

    return {
        Status.DONE: ExitCode.DONE,
        Status.QUEUED: ExitCode.QUEUED,
        Status.WORKING: ExitCode.WORKING,
        Status.FAILED: ExitCode.FAILED,
    }[status]


@app.command()
def generate(
    ctx: typer.Context,
    slug: Annotated[str, typer.Argument(help="the prompt's name: prompts/SLUG.md", metavar="SLUG")],
    wait: Annotated[bool, typer.Option("--wait", help="by hand: stay until the article is written")] = False,
    engine: Annotated[str, typer.Option(help="auto (the contract), qwen (no fallback) or router")] = "auto",
    account: Annotated[
        str | None,
        typer.Option("--account", help="send a first send from this chat account only ([accounts.NAME])"),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Move one article along the contract: 0 done, 42 sent, 3 still working, 1 failed, 2 bad input."""
    from ..contract.step import Status, wait_limit
    from ..contract.step import generate as run_contract
    from ..wiring import ENGINE_CHOICES
    from ..wiring import engines as wired

    if engine not in ENGINE_CHOICES:
        raise UsageProblem(f"--engine {engine!r}: choose one of {', '.join(ENGINE_CHOICES)}")
    workspace = workspace_of(ctx, config)
    qwen = workspace.config.qwen
    limit = wait_limit(qwen) if wait else qwen.run_timeout
    watchdog(limit, f"generate {slug}")
    try:
        with (
            wired(workspace.config) as engines,
            progress(f"{slug}: starting", enabled=wait, live=True) as report,
            _quiet_browser_on_interrupt(),
        ):
            outcome = run_contract(
                workspace, slug, engines, wait=wait, engine=engine, say=report, account=account
            )
    except KeyboardInterrupt:
        say(_interrupted(workspace, slug))
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if outcome.status is Status.DONE:
        out().print(str(workspace.article(slug).md), markup=False)
    say(outcome.message)
    if outcome.status is Status.DONE:
        from ..publishing.publish import publish_done

        publish_done(workspace, [(slug, None)], say=say)  # a step after done: never the exit code
    raise typer.Exit(status_exit(outcome.status))


@contextlib.contextmanager
def _quiet_browser_on_interrupt():
    """Ctrl-C on a terminal reaches the whole process group, so the Playwright driver dies with
    us and the calls it had under way end in "Connection closed", which asyncio would print as
    "Future exception was never retrieved" while the browser is closed; and an answer the driver
    sends to a call the interrupt abandoned is logged by Playwright as "Error occurred in event
    listener", with a traceback. After an interrupt that is expected, not news: both are silenced
    the moment it arrives (the engine's own cleanup talks to the driver before any `except`
    here would run), and the interrupt goes on as Python's own (KeyboardInterrupt)."""
    import signal
    import threading

    def interrupted(_signum, _frame):
        import logging

        for name in ("asyncio", "playwright"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():  # signals reach the main one
        yield
        return
    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def _interrupted(workspace, slug: str) -> str:
    """What an interrupted `generate` leaves behind, and the command that carries on from there."""
    from ..batch.scan import one
    from ..contract.phases import Phase

    view = one(workspace.prompts_dir, workspace.articles_dir, slug)
    again = f"`qwenpipe generate {slug} --wait`"
    if view.phase is Phase.DONE:
        return f"qwenpipe: interrupted; {slug} is written all the same: {view.files.md}"
    if view.phase is Phase.GENERATING:
        return (
            f"qwenpipe: interrupted; {slug} was sent (chat URL in {view.files.url}) and the chat "
            f"goes on writing: {again} (or the next cycle) collects the answer, never sending it again"
        )
    if view.phase is Phase.SENDING:
        return (
            f"qwenpipe: interrupted while sending {slug}: the prompt may have reached the chat; "
            f"{again} looks for its chat before it sends anything"
        )
    return f"qwenpipe: interrupted; {slug} was not sent; {again} sends it"


@app.command()
def cycle(
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
    code = exit_code_of(lambda: cycle_command(workspace_of(ctx, config), cron_exit=cron_exit))
    raise typer.Exit(cron_exit_of(code) if cron_exit else code)


@app.command()
def cron(
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


@app.command()
def replay(
    ctx: typer.Context,
    slug: Annotated[
        str | None, typer.Argument(help="the dead-lettered article to make pending again", metavar="SLUG")
    ] = None,
    all_failed: Annotated[bool, typer.Option("--all-failed", help="every dead-lettered article")] = False,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="forget SLUG's chat (URL, interrupted send, dead letter) so the next run sends "
            "the prompt as it is now, in a new chat: a second send (e.g. after editing the prompt)",
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Clear a dead letter (SLUG.md.failed); the history stays, and its chat is polled before any send."""
    from ..contract.step import replay as run_replay

    workspace = workspace_of(ctx, config)
    if bool(slug) == all_failed:
        raise UsageProblem("give one SLUG or --all-failed")
    if fresh and not slug:
        raise UsageProblem("--fresh takes one SLUG (a new send is never made for many at once)")
    slugs = (
        [slug]
        if slug
        else sorted(p.name[: -len(".md.failed")] for p in workspace.articles_dir.glob("*.md.failed"))
    )
    skipped = 0
    for name in slugs:
        try:
            say(run_replay(workspace, name, fresh=fresh))
        except (UsageProblem, LockBusy) as problem:
            if slug:
                raise
            # One bad dead letter (a hand-made name, a held lock) must not keep the rest waiting.
            skipped += 1
            reason = f"{problem.owner} holds {problem.path}" if isinstance(problem, LockBusy) else problem
            say(f"{name}: not replayed: {reason}")
    if not slugs:
        say("no dead-lettered articles")
    if skipped:
        say(f"replay: {len(slugs) - skipped} of {len(slugs)} replayed, {skipped} not (see above)")
        raise typer.Exit(ExitCode.FAILED)


@app.command()
def init(
    ctx: typer.Context,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing config file")] = False,
    config: ConfigOption = None,
) -> None:
    """Write a commented config.toml with every key at its default."""
    from ..config import config_path, render_default_config
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


def simulate(**given) -> None:
    """Serve a loopback replica of chat.qwen.ai and a 9router-like router until Ctrl-C."""
    from ..simulator.options import SimulatorOptions, serve

    def announce(sim) -> None:
        out().print(sim.base_url, markup=False)
        say(f"simulator on {sim.base_url} (chat) and {sim.base_url}/v1 (router); Ctrl-C stops it")

    serve(SimulatorOptions(**given), announce=announce)


def _typer_signature(specs) -> inspect.Signature:
    """A command's parameters from option specs (the simulator's options are defined once, in
    pipeline/simulator/options.py, for this command line and for `python -m pipeline.simulator`)."""
    params = []
    for spec in specs:
        kind = Literal[spec.choices] if spec.choices else spec.type
        if spec.default is None:
            kind = kind | None
        if spec.choices:  # named in the help text: as a metavar they would not fit on a line
            option = typer.Option(spec.flag, help=f"{spec.help}: {', '.join(spec.choices)}", metavar="NAME")
        elif spec.type is bool and spec.default:  # on unless turned off
            option = typer.Option(f"{spec.flag}/--no-{spec.flag[2:]}", help=spec.help)
        else:
            option = typer.Option(spec.flag, help=spec.help)
        params.append(
            inspect.Parameter(
                spec.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=spec.default,
                annotation=Annotated[kind, option],
            )
        )
    return inspect.Signature(params, return_annotation=None)


def _register_simulate() -> None:
    from ..simulator.options import option_specs

    simulate.__signature__ = _typer_signature(option_specs())
    app.command("simulate")(simulate)


_register_simulate()


# Commands that live in their own modules (kept out of this file to keep it thin).
cli_status.register(app)
cli_store.register(app)
cli_setup.register(app)
cli_log.register(app)
cli_prompts.register(app)


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
