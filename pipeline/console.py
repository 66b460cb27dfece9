"""Two consoles: results on stdout, messages and progress on stderr; plain text off a terminal.

Both write through pipeline.redact.MaskedStream: nothing they print can show the router key.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

from .redact import MaskedStream


def _console(stderr: bool) -> Console:
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
    """One message line on stderr (markup off: messages quote paths and prompts verbatim)."""
    err().print(message, markup=False)


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()
