"""The console script's first step: answer the commonest cron call before loading the CLI.

`qwenpipe generate SLUG` on a finished article is what cron runs most. Typer builds its
parameters with pydantic (about 0.15 s of imports), so this one case is answered here with
the same output and exit code, and everything else goes to the full command line.
"""

from __future__ import annotations

import sys


def already_done(argv: list[str]) -> str | None:
    """The article's path when argv is exactly `[--config X] generate SLUG [--config X]` and
    SLUG.md exists; None for anything else (then the full CLI decides, errors included)."""
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


def main() -> None:
    done = already_done(sys.argv[1:])
    if done:
        sys.stdout.write(done + "\n")
        from .console import as_line
        from .exitcodes import ExitCode

        sys.stderr.write(as_line(f"{done} is already done") + "\n")
        sys.exit(ExitCode.DONE)
    from .cli.app import main as full

    full()
