"""The console script's first step: answer the commonest calls before loading the CLI.

`qwenpipe cycle` and `qwenpipe generate SLUG` on a finished article are what cron runs most,
and `status --json` is what monitoring scripts run. Typer builds its parameters with pydantic
(about 0.15 s of imports), so these three are answered here with the same output and exit
code, and everything else goes to the full command line.
"""

from __future__ import annotations

import sys


def plain_words(argv: list[str]) -> tuple[str | None, list[str]] | None:
    """(config, the words) when argv is words and `--config X` alone (before or after them, the
    last one counting); None when it holds any other option (then the full CLI decides)."""
    config, rest, args = None, [], list(argv)
    while args:
        token = args.pop(0)
        if token in ("--config", "-c") and args:
            config = args.pop(0)
        elif token.startswith("--config="):
            config = token.split("=", 1)[1]
        elif token.startswith("-"):
            return None
        else:
            rest.append(token)
    return config, rest


def already_done(argv: list[str]) -> str | None:
    """The article's path when argv is exactly `[--config X] generate SLUG [--config X]` and
    SLUG.md exists; None for anything else (then the full CLI decides, errors included)."""
    plain = plain_words(argv)
    if plain is None:
        return None
    config, rest = plain
    if len(rest) != 2 or rest[0] != "generate":
        return None
    from .config import ConfigError, load
    from .contract.prompts import check_slug
    from .errors import UsageProblem

    slug = rest[1]
    try:
        check_slug(slug)  # the same rule as the full CLI: a bad slug is its exit 2, never a traceback
    except UsageProblem:
        return None
    try:
        articles = load(config).articles_dir
    except (ConfigError, OSError):
        return None
    from .files import SetupProblem, is_regular

    article = articles / f"{slug}.md"
    try:
        return str(article) if is_regular(article) else None
    except SetupProblem:  # a symlink or a FIFO there: the full command line says what is wrong
        return None


STATUS_OPTIONS = ("--state", "--sort")  # the `status --json` options that take a value


def status_json_query(argv: list[str]) -> tuple[str | None, dict] | None:
    """(config, query) when argv is exactly `[--config X] status --json [PATTERN]... [--state S]...
    [--sort S]` (options in any order after `status`, `--config` before or after it); None for
    anything else (--watch, --cdp, an unknown option: the full CLI decides). Several patterns: any."""
    config, args = None, list(argv)
    query: dict = {"state_filter": [], "pattern": [], "sort": "state"}
    seen_command = as_json = False
    while args:
        token = args.pop(0)
        name, has_value, value = token.partition("=")
        if name in ("--config", "-c", *STATUS_OPTIONS) and not (has_value and name == "-c"):
            if not has_value:
                if not args:
                    return None
                value = args.pop(0)
            if name in STATUS_OPTIONS and not seen_command:
                return None
            if name == "--state":
                query["state_filter"].append(value)
            elif name == "--sort":
                query["sort"] = value
            else:
                config = value
        elif token == "--json" and seen_command:
            as_json = True
        elif token.startswith("-"):
            return None
        elif not seen_command:
            if token != "status":
                return None
            seen_command = True
        else:
            query["pattern"].append(token)
    return (config, query) if as_json else None


def answered_status(config: str | None, query: dict) -> bool:
    """Print `status --json` as the full CLI would; False when anything goes wrong (a bad
    config, --state or --sort, an unreadable folder...: found before a byte is printed).
    Status only reads, so the full command line then runs it again and says what is wrong: it
    is the one place that maps failures to messages and exit codes."""
    from .batch import status  # noqa: F401 (imported before the freeze)
    from .cli.status import print_status
    from .config import load
    from .wiring import workspace as open_workspace

    freeze_imports()
    try:
        with open_workspace(load(config)) as workspace:
            print_status(workspace, query, as_json=True)
    except (Exception, KeyboardInterrupt):
        return False
    return True


CRON_EXIT = "--cron-exit"


def cycle_config(argv: list[str]) -> tuple[str | None, bool] | None:
    """(config, cron_exit) when argv is exactly `[--config X] cycle [--cron-exit] [--config X]`
    (what cron runs); None for anything else."""
    words = [token for token in argv if token != CRON_EXIT]
    cron_exit = len(words) == len(argv) - 1
    if len(words) < len(argv) - 1:
        return None  # the flag twice: the full CLI says what it says
    plain = plain_words(words)
    if plain is None or plain[1] != ["cycle"]:
        return None
    if cron_exit and argv.index(CRON_EXIT) < argv.index("cycle"):
        return None  # a flag of `cycle`, not of qwenpipe: the full CLI refuses it there
    return plain[0], cron_exit


def run_cycle(config: str | None, cron_exit: bool = False) -> int:
    """`qwenpipe cycle` as the full CLI runs it (the same command, failures and exit codes),
    without loading Typer: most cron cycles have nothing to do, and Typer would be most of it."""
    from .batch import cycle  # noqa: F401 (imported before the freeze)
    from .cli.running import cron_exit_of, cycle_command, exit_code_of
    from .config import load
    from .wiring import workspace as open_workspace

    freeze_imports()

    def run() -> int:
        with open_workspace(load(config)) as workspace:
            return cycle_command(workspace, cron_exit=cron_exit)

    code = exit_code_of(run)
    return cron_exit_of(code) if cron_exit else code


def freeze_imports() -> None:
    """Keep what the imports made out of every later garbage collection. A cycle or a status
    over 10,000 articles allocates enough for several full collections, and each would walk
    every module's objects again: about a quarter of a no-op cycle's CPU. Nothing imported is
    ever garbage, so nothing is kept that would have been freed."""
    import gc

    gc.freeze()


def main() -> None:
    cycle = cycle_config(sys.argv[1:])
    if cycle is not None:
        sys.exit(run_cycle(*cycle))
    status = status_json_query(sys.argv[1:])
    if status is not None and answered_status(*status):
        from .exitcodes import ExitCode

        sys.exit(ExitCode.DONE)
    done = already_done(sys.argv[1:])
    if done:
        sys.stdout.write(done + "\n")
        from .console import as_line
        from .exitcodes import ExitCode

        sys.stderr.write(as_line(f"{done} is already done") + "\n")
        sys.exit(ExitCode.DONE)
    from .cli.app import main as full

    full()
