"""Run the real `qwenpipe` command line: in-process, or in a subprocess as cron and users do.

`qwenpipe_in_process(...)` runs the command line through `pipeline.cli.app.run`, the in-process
entry point, with the same environment, folder, streams off a terminal and result. It is what the
contract tests use, browser tests included (issue 28): a command then costs neither an
interpreter's start-up and imports nor a Playwright driver's start (about 0.4 CPU-seconds), as
the commands of one test process share one driver, held open between them (`hold_driver`).

`qwenpipe(...)` runs `python -m pipeline` to its end and `spawn(...)` starts it (the one way
tests start the command as a process), for what only a process shows: the console script's
own start-up and fast paths (pipeline/entry.py), a crash point (the process SIGKILLs itself), a
signal, a watchdog, the umask read at start-up, a second process at once.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys

CRASH_AT = "QWENPIPE_CRASH_AT"  # pipeline/crashpoints.py: the process SIGKILLs itself there


def command_env(env: dict[str, str | None] | None = None) -> dict[str, str]:
    """The environment a test's command runs with: this process's, NO_COLOR=1 (no colour codes in
    what tests read), then `env` over it, where a value of None removes that variable."""
    full = {**os.environ, "NO_COLOR": "1"}
    for name, value in (env or {}).items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    return full


def spawn(*args, cwd, env: dict[str, str | None] | None = None, **popen) -> subprocess.Popen:
    """`python -m pipeline ARGS` started in `cwd` with `command_env(env)`, not waited for: the one
    way tests start qwenpipe as a process. Popen's keywords (stdout, stderr, text,
    start_new_session, ...) pass through."""
    command = [sys.executable, "-m", "pipeline", *(str(arg) for arg in args)]
    return subprocess.Popen(command, cwd=cwd, env=command_env(env), **popen)


def qwenpipe(*args, cwd, env=None, timeout=120) -> subprocess.CompletedProcess:
    """`qwenpipe ARGS` in a process, to its end: stdout and stderr captured as text. Past
    `timeout` seconds the process is killed and subprocess.TimeoutExpired raised."""
    with spawn(*args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()  # as subprocess.run: what it started may still hold the pipes
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def qwenpipe_in_process(*args, cwd, env=None, timeout=None) -> subprocess.CompletedProcess:
    """`qwenpipe ARGS` run by `pipeline.cli.app.run` in this process, in `cwd`, with `env` added
    to the environment (NO_COLOR as for a subprocess), stdout and stderr captured (not a
    terminal): a CompletedProcess as `qwenpipe` returns. Afterwards nothing of the run stays:
    the folder, the environment and the alarm the command's watchdog set (the test's own
    timeout is put back); the command's workspace closed its store when the command ended."""
    from pipeline.cli.app import run

    if command_env(env).get(CRASH_AT):
        raise ValueError(f"{CRASH_AT} kills the process it is in: run that command with qwenpipe()")
    hold_driver()
    del timeout  # the command's own watchdog (qwen.run_timeout) and the test's timeout bound it
    stdout, stderr = io.StringIO(), io.StringIO()
    folder = os.getcwd()
    environ = dict(os.environ)
    alarm = signal.getsignal(signal.SIGALRM)
    timer = signal.getitimer(signal.ITIMER_REAL)
    os.environ.clear()
    os.environ.update(command_env(env))
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = run([str(arg) for arg in args])
            except SystemExit as exit:  # a command that ends the process its own way
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, alarm)
        if timer[0]:
            signal.setitimer(signal.ITIMER_REAL, *timer)
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(environ)
    return subprocess.CompletedProcess(["qwenpipe", *args], int(code), stdout.getvalue(), stderr.getvalue())


_held: contextlib.ExitStack | None = None


def hold_driver() -> None:
    """One use of this thread's Playwright driver, kept until `release_driver`: in-process
    commands then start none of their own."""
    global _held
    if _held is None:
        from pipeline.engines.qwen.browser import playwright_driver

        held = contextlib.ExitStack()
        held.enter_context(playwright_driver())
        _held = held


def release_driver() -> None:
    global _held
    held, _held = _held, None
    if held is not None:
        held.close()


def qwenpipe_at_once(*args, cwd, count: int, timeout=120) -> list[tuple[int, str]]:
    """`count` processes of `qwenpipe ARGS` started one after the other without waiting, as
    overlapping cron runs are: (exit code, stderr) of each, in the order they were started."""
    procs = [
        spawn(*args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    return [(p.wait(timeout=timeout), p.stderr.read()) for p in procs]
