"""How a command runs, whoever parsed it (Typer, or pipeline/entry.py for the calls cron makes
most): expected failures as one line and their exit code, the watchdog, progress messages, and
the `cycle` command itself. No Typer here: a no-op `cycle` from cron must not pay for it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from ..config import ConfigError
from ..console import err, say, stderr_is_terminal
from ..errors import SetupProblem, UsageProblem
from ..exitcodes import ExitCode
from ..files import LockBusy
from ..store.protocol import StoreBusy


def debug() -> bool:
    """QWENPIPE_DEBUG set: an unexpected exception propagates with its traceback."""
    return bool(os.environ.get("QWENPIPE_DEBUG"))


def exit_code_of(command: Callable[[], int]) -> int:
    """Run `command` and return its exit code; expected failures become one clear line on
    stderr, never a traceback."""
    try:
        return command()
    except (UsageProblem, ConfigError) as problem:
        say(f"qwenpipe: {problem}")
        return ExitCode.USAGE
    except LockBusy as busy:
        say(f"qwenpipe: busy: {busy.owner} holds {busy.path}")
        return ExitCode.WORKING
    except StoreBusy as busy:  # held by another process, or its server unreachable: try later
        say(f"qwenpipe: {busy}")
        return ExitCode.WORKING
    except SetupProblem as problem:  # our files or folders need a person: what and the fix
        say(f"qwenpipe: {problem}")
        return ExitCode.FAILED
    except KeyboardInterrupt:
        say("qwenpipe: interrupted")
        return ExitCode.INTERRUPTED
    except Exception as error:  # the last line of defence for users
        if debug():
            raise
        name = type(error).__name__
        say(f"qwenpipe: internal error: {name}: {error} (QWENPIPE_DEBUG=1 shows the traceback)")
        return ExitCode.FAILED
    finally:
        disarm_watchdog()  # however the command ended, an in-process caller goes on unwatched


@contextlib.contextmanager
def progress(first: str, *, enabled: bool = True, live: bool = False):
    """Progress messages. Off a terminal: plain lines on stderr (say). On a terminal, a spinner:
    `live` (generate --wait) shows each message in the spinner's one line, replacing the last
    (the journal and `show` keep every step); otherwise each message is printed once as a line
    above a spinner that keeps saying `first`. Never both: one message, shown once."""
    if not (enabled and stderr_is_terminal()):
        yield say
        return
    from rich.text import Text

    console = err()
    with console.status(Text(first)) as spinner:

        def report(message: str) -> None:
            if live:
                spinner.update(Text(message))
            else:
                console.print(message, markup=False, highlight=False)

        yield report


def disarm_watchdog() -> None:
    import signal

    if hasattr(signal, "SIGALRM"):
        signal.setitimer(signal.ITIMER_REAL, 0)


def watchdog(seconds: float, what: str, *, code: int = ExitCode.WORKING) -> None:
    """Stop a run that hangs (a frozen browser, a silent server) so cron never piles up behind a
    held lock. Exiting at any instant is as safe as a SIGKILL: every file is written atomically
    and the intent marker makes the next run look before it sends. `code`: the exit code then
    (3, still working; `cycle --cron-exit`: 0, nothing needs a person)."""
    import signal

    def expire(_signum, _frame) -> None:
        say(
            f"qwenpipe: {what} ran longer than {seconds:.0f} s (qwen.run_timeout); stopping. "
            "Nothing is lost: the next run resumes where this one stopped."
        )
        os._exit(code)

    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)


def cycle_command(workspace, *, cron_exit: bool = False) -> ExitCode:
    """`qwenpipe cycle`: one cron cycle over prompts/, its summary said, its exit code returned.
    `cron_exit` (`cycle --cron-exit`, what `qwenpipe cron` prints): 0 unless a person is needed
    (batch/cronexit.py). The monitoring ping always reports that verdict: a health check reads
    any non-zero code as a failure, and a cycle that sent prompts has not failed."""
    from ..batch import cronexit
    from ..batch.cycle import run_cycle, store_failures
    from ..batch.notify import ping
    from ..wiring import engines as wired

    workspace.config.require_prompts_dir()
    ping_url = workspace.config.notify.ping_url
    ping(ping_url, "start", say=say)
    watchdog(
        workspace.config.qwen.run_timeout, "cycle", code=ExitCode.DONE if cron_exit else ExitCode.WORKING
    )
    try:
        with wired(workspace.config, workspace) as engines, progress("cycle: working") as report_line:
            report = run_cycle(workspace, engines, say=report_line)
    except StoreBusy as busy:  # unreachable, or held: 3 ("try later") for the cycle itself
        verdict, why = cronexit.store_code(store_failures(workspace))
        ping(ping_url, str(int(verdict)), say=say)
        if not cron_exit:
            raise
        say(f"qwenpipe: {busy}")
        say(f"cycle: {why}")
        return verdict
    say(report.summary())
    verdict, reasons = cronexit.cron_code(report, workspace)
    for reason in reasons:
        say(f"cycle: needs a person: {reason}")
    ping(ping_url, str(int(verdict)), say=say)
    return verdict if cron_exit else report.exit_code


def cron_exit_of(code: int) -> int:
    """`cycle --cron-exit` when the cycle did not run to its end: "try later" (3: another
    process holds something) is nothing for a person; a bad config (2), our files needing a
    person (1) and Ctrl-C (130) stay as they are."""
    return ExitCode.DONE if code == ExitCode.WORKING else code
