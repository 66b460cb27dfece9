"""Exit codes: what cron scripts and users branch on (fixed by the design)."""

from enum import IntEnum


class ExitCode(IntEnum):
    DONE = 0  # the article is on disk (or the cycle finished everything)
    FAILED = 1  # hard failure and no fallback: change strategy
    USAGE = 2  # cannot run as asked: bad arguments, config or prompt; nothing written
    WORKING = 3  # still generating, backing off, throttled, or in progress elsewhere
    QUEUED = 42  # the prompt was sent just now (like HTTP 202 Accepted)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)
