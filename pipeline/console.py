"""Two consoles: results on stdout, messages and progress on stderr; plain text off a terminal.

Both write through pipeline.redact.MaskedStream: nothing they print can show the router key.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

from .redact import MaskedStream


def _console(stderr: bool) -> Console:
    from rich.console import Console  # imported when used: the fast entry point needs only stamped()

    # Made per call, never cached: the streams are looked up when used (tests swap them).
    stream = sys.stderr if stderr else sys.stdout
    plain = bool(os.environ.get("NO_COLOR")) or not stream.isatty()
    return Console(
        stderr=stderr,
        file=MaskedStream(stream),
        no_color=plain,
        highlight=False,
        soft_wrap=True,
        force_terminal=False if plain else None,
    )


def out() -> Console:
    return _console(stderr=False)


def err() -> Console:
    return _console(stderr=True)


def say(message: str) -> None:
    """One message line on stderr (markup off: messages quote paths and prompts verbatim).

    Off a terminal each line starts with the local time (ISO 8601): cron appends these lines to
    a log for months, and a line without a time cannot be matched with the journal. There it is
    written as plain text, without loading rich (most of a no-op cron cycle's start-up): the
    control characters rich drops (a carriage return would hide the line) dropped too."""
    if stderr_is_terminal():
        err().print(message, markup=False)
        return
    stream = MaskedStream(sys.stderr)
    stream.write(stamped(message).translate(_CONTROL).expandtabs(8) + "\n")
    stream.flush()


_CONTROL = dict.fromkeys((7, 8, 11, 12, 13))  # bell, backspace, vertical tab, form feed, CR


def as_line(message: str) -> str:
    """`message` as it goes to stderr: stamped with the time when stderr is not a terminal."""
    return message if stderr_is_terminal() else stamped(message)


def stamped(message: str) -> str:
    """`message` with every line prefixed by the local time, to the second, with its offset."""
    when = datetime.now().astimezone().isoformat(timespec="seconds")
    return "\n".join(f"{when} {line}" for line in message.split("\n"))


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()
