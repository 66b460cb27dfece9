"""Run qwenpipe in a real pseudo-terminal, and read what a person would see on it."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

import tests_cli_helpers

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")
CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b[()][A-Z0-9]|\r\n|\r|\n|[^\x1b\r\n]+")


class Screen:
    """What the program wrote to the terminal, read as it comes."""

    def __init__(self, fd: int):
        self.fd, self.raw = fd, b""

    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", errors="replace"))

    def wait_for(self, pattern: str, timeout: float = 10.0, after: int = 0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text()[after:]):
                return True
            self.pump(0.1)
        return False

    def pump(self, wait: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if ready:
            try:
                self.raw += os.read(self.fd, 65536)
            except OSError:  # the child closed the terminal
                pass

    def drain(self, child: subprocess.Popen, timeout: float = 30.0) -> None:
        """Read until the child has exited and said all it had to say."""
        deadline = time.monotonic() + timeout
        while child.poll() is None and time.monotonic() < deadline:
            self.pump(0.1)
        for _ in range(5):
            self.pump(0.05)


def _ctrl_c_at_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(args: list[str], cwd, *, columns: int = 120, rows: int = 40) -> tuple[subprocess.Popen, Screen]:
    """`python -m pipeline ARGS` with stdin, stdout and stderr on a new terminal of that size,
    leading its own session (so a Ctrl-C, `os.killpg(child.pid, SIGINT)`, reaches what it starts).
    Ctrl-C starts at its default, as in a terminal's foreground job: a test run started in the
    background of a non-interactive shell (`cmd &`) ignores SIGINT, and a child would inherit that
    and never see the Ctrl-C the test sends."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {"NO_COLOR": None, "COLUMNS": None, "LINES": None, "TERM": "xterm-256color"}
    child = tests_cli_helpers.spawn(
        *args,
        cwd=cwd,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        preexec_fn=_ctrl_c_at_default,
    )
    os.close(slave)
    return child, Screen(master)


def screens(raw: bytes):
    """The terminal's visible lines after each piece of output: a small emulator of what rich
    uses (text, CR, LF, erase line, cursor up); colours and cursor visibility are ignored."""
    lines, row, col = [""], 0, 0
    for match in CONTROL.finditer(raw.decode("utf-8", errors="replace")):
        token = match.group(0)
        if token == "\r\n" or token == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            col = 0
        elif match.group(2) == "K":
            lines[row] = lines[row][:col] if match.group(1) in ("", "0") else ""
        elif match.group(2) == "A":
            row = max(row - int(match.group(1) or 1), 0)
        elif token.startswith("\x1b"):
            continue
        else:
            current = lines[row].ljust(col)
            lines[row] = current[:col] + token + current[col + len(token) :]
            col += len(token)
        yield [line.rstrip() for line in lines]
