"""Running a user's command (publish.after) with a time limit and a bounded memory of its output.

- Its output (stdout and stderr together) is read as it comes; only the first and the last
  KEEP bytes are kept, and how much there was in all: a hook that prints 50 MB costs 8 KB.
- It starts in a session (and process group) of its own. On the timeout the whole group is
  killed by its id, and so is every process that descends from it (found by parent id in
  /proc, on Linux), which reaches a child that made a session of its own (`setsid`).
- What cannot be reached: a process that left the tree altogether (a daemon that forked twice
  and whose parent exited before the timeout: it now belongs to init). Such a process is not
  ours to find, and nothing is ever killed by its name.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

KEEP = 4096  # bytes of the output's head, and of its tail, that are kept
DRAIN_SECONDS = 2.0  # after a kill: how long the output is still read (its last writers dying)


@dataclass
class Kept:
    """The head and the tail of a stream, and its size."""

    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    size: int = 0

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        room = KEEP - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[:-KEEP]

    @property
    def cut(self) -> bool:
        return self.size > len(self.head) + len(self.tail)

    def text(self) -> str:
        return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")

    def last_lines(self, count: int, width: int = 200) -> list[str]:
        """Its last `count` non-empty lines, each cut to `width` characters."""
        text = bytes(self.tail or self.head).decode("utf-8", errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()][-count:]
        return [line if len(line) <= width else line[: width - 3] + "..." for line in lines]


@dataclass
class Ran:
    returncode: int | None  # None: stopped on the timeout
    output: Kept


def run(argv: list[str], *, cwd: Path, timeout: float) -> Ran:
    """Run `argv` in a session of its own; stop it (its group and its descendants) after
    `timeout` seconds. OSError when it cannot start."""
    child = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    kept = Kept()
    assert child.stdout is not None
    with child.stdout as stream:
        deadline = time.monotonic() + timeout
        finished = _read(stream.fileno(), kept, deadline)
        if finished:
            try:
                child.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                finished = False
        if not finished:
            stop(child)
            _read(stream.fileno(), kept, time.monotonic() + DRAIN_SECONDS)
            return Ran(None, kept)
    return Ran(child.returncode, kept)


def _read(fd: int, kept: Kept, deadline: float) -> bool:
    """Read `fd` into `kept` until its end (True) or `deadline` (False)."""
    os.set_blocking(fd, False)
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if not selector.select(left):
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                return True
            kept.add(chunk)


def stop(child: subprocess.Popen) -> None:
    """Kill `child`'s process group by its id, and every process descending from it (twice: one
    may have forked meanwhile), then reap it."""
    for _round in range(2):
        found = descendants(child.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(5)


def descendants(root: int) -> list[int]:
    """Every live process whose chain of parents leads to `root` (Linux: from /proc; elsewhere
    none: the group kill alone)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return []
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                found.append(pid)
                todo.append(pid)
    return found
