"""Durable file primitives: atomic writes, kernel-released locks.

Everything the contract promises rests on two facts: a reader sees either the old file or the
whole new one (write to a temporary file, fsync, rename, fsync the folder), and a lock held by
a process dies with it (flock), so a SIGKILL never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .crashpoints import crashpoint

TMP_PREFIX = ".tmp-"


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: str | bytes, *, mode: int = 0o644, crash_at: str = "") -> None:
    """Replace `path` with `data` so that no reader, and no crash, ever sees half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if crash_at:
            crashpoint(crash_at)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def remove(path: Path) -> bool:
    """Delete `path` durably; False when it was not there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(Path(path).parent)
    return True


def clean_stale_temporaries(folder: Path, older_than: float = 300) -> list[Path]:
    """Remove temporary files a killed writer left behind (never a finished file)."""
    removed = []
    now = time.time()
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            if entry.name.startswith(TMP_PREFIX) and now - entry.stat().st_mtime > older_than:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
    return removed


class LockBusy(Exception):
    """Another live process holds the lock; `owner` says who (pid and what it runs)."""

    def __init__(self, path: Path, owner: str):
        super().__init__(f"{owner} holds {path}")
        self.path = path
        self.owner = owner


@dataclass
class FileLock:
    """An exclusive, non-blocking flock on `path`. The kernel releases it when the process dies.

    The holder writes its pid and purpose into the file so that a refused process can name it.
    """

    path: Path
    purpose: str = ""
    _fd: int | None = None

    def acquire(self) -> FileLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LockBusy(self.path, read_lock_owner(self.path)) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(
            fd, json.dumps({"pid": os.getpid(), "purpose": self.purpose, "since": time.time()}).encode(), 0
        )
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            # Leave the file (unlinking races with a process that just opened it), but blank
            # the owner so that nobody reads a finished holder as a live one.
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_lock_owner(path: Path) -> str:
    """A short description of who holds the lock at `path`, for messages."""
    try:
        info = json.loads(Path(path).read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    pid = info.get("pid")
    purpose = info.get("purpose")
    if not pid:
        return "another process"
    return f"pid {pid}" + (f" ({purpose})" if purpose else "")


def lock_holder_alive(path: Path) -> bool:
    """True when the pid recorded in the lock file is a live process.

    Read-only on purpose: even a brief shared flock taken by `status` could make a cycle's
    non-blocking exclusive lock fail. A reused pid can make this say True wrongly: it is for
    display, never for deciding who may act.
    """
    try:
        pid = int(json.loads(Path(path).read_text() or "{}").get("pid", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
