"""`qwenpipe generate` and `qwenpipe replay`: one article along the contract, and a dead letter
(or a chat, with --fresh) cleared. The work is in pipeline/contract/step/.

Exit codes: the file contract's (0 done, 42 sent, 3 still working, 1 failed), 2 bad input, 130
interrupted.
"""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
import contextlib
from typing import TYPE_CHECKING, Annotated

import typer

from ..console import out, say
from ..errors import UsageProblem
from ..exitcodes import ExitCode
from ..files import LockBusy
from .common import ConfigOption, workspace_of
from .running import progress, watchdog

if TYPE_CHECKING:
    from ..contract.step import Status


def status_exit(status: "Status") -> ExitCode:
    """The exit code of a step's outcome (the file contract's: 0 done, 42 queued, 3 working, 1 failed)."""
    from ..contract.step import Status  # the contract is loaded only by a command that steps

    return {
        Status.DONE: ExitCode.DONE,
        Status.QUEUED: ExitCode.QUEUED,
        Status.WORKING: ExitCode.WORKING,
        Status.FAILED: ExitCode.FAILED,
    }[status]


def generate_command(
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
            wired(workspace.config, workspace) as engines,
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


def replay_command(
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
