"""Durable, careful file primitives: atomic writes, kernel-released locks, safe reads.

Everything the contract promises rests on two facts: a reader sees either the old file or the
whole new one (write to a temporary file, fsync, rename, fsync the folder), and a lock held by
a process dies with it (flock), so a SIGKILL never leaves a stale lock behind.

And on a third: the files are ours. Nothing here follows a symlink it did not make (a link at a
lock or the journal would truncate or append to whatever it points to), nothing blocks on a FIFO
(open with O_NONBLOCK, then insist on a regular file), nothing is changed in place through a
hard link (a file of ours with a second name elsewhere: a lock would truncate, a chmod would
tighten, the other name's file), and what holds chat URLs and errors is private: 0600 files in
0700 folders. A file of the wrong kind is a SetupProblem naming it. Replacing a file (atomic_write
renames a new one over the name) never touches another name's file, so that stays allowed.

And on a fourth: what is written holds no secret. Every file's bytes pass through `_temporary`,
which applies the one mask on everything kept (redact.mask_kept), so a new record cannot forget
it; only text the caller marks `redact.Verbatim` (an article, a published page, a saved login)
is written as it is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from .crashpoints import crashpoint
from .errors import SetupProblem
from .records import record
from .redact import mask_kept

STATE_DIR = ".qwenpipe"  # articles/.qwenpipe: the project's own folder (journal, state, locks)
PRIVATE = 0o600  # files that hold chat URLs and errors: the journal, state, locks, markers
PRIVATE_DIR = 0o700
SHARED = None  # atomic_write's mode for what the user reads (articles, the config): per umask
# Temporaries: a prefix no user file carries, and the exact shape mkstemp gives it, so that a
# sweep removes only what a killed writer of ours left (never `.tmp-my-notes.txt`).
TMP_PREFIX = ".qwenpipe-tmp-"
TMP_RE = re.compile(re.escape(TMP_PREFIX) + r".+\.[a-z0-9_]{8}")


def _read_umask() -> int:
    # Read once, at import (one thread): setting the umask to read it is racy under threads.
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _read_umask()


class UnsafeFile(SetupProblem):
    """`path` is a symlink, FIFO, folder or device where qwenpipe keeps a regular file (or a
    file where it keeps a folder): refused, and left untouched."""

    def __init__(self, path: Path | str, kind: str, wanted: str = "a regular file", fix: str = ""):
        self.path, self.kind = Path(path), kind
        fix = fix or f"move it away or delete it (qwenpipe makes its own {wanted} there)"
        super().__init__(f"{path} is {kind}, not {wanted}; qwenpipe will not use it: {fix}")


def kind_of(mode: int) -> str:
    """What a file of `st_mode` is, in words."""
    for test, words in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def hard_link_problem(path: Path | str, links: int) -> UnsafeFile:
    """The refusal of a file of ours that has `links` names: written or chmodded in place, it
    would change the file at the other name too (the user's, or another project's)."""
    return UnsafeFile(
        path,
        f"a hard link (the same file has {links} names, another one elsewhere)",
        "a file of qwenpipe's own",
        "delete this name (`rm` leaves the file at its other name as it is); qwenpipe makes its own",
    )


def _lstat_kind(path: Path | str) -> str:
    try:
        return kind_of(os.lstat(path).st_mode)
    except OSError:
        return "not a regular file"


def cannot(doing: str, path: Path | str, err: OSError, folder: Path | str | None = None) -> SetupProblem:
    """A SetupProblem for an OSError on one of our own files: what, where, and the fix."""
    code = err.errno
    if code in (errno.EACCES, errno.EPERM):
        where = folder or Path(path).parent
        fix = f"give this user read and write access to {where} (e.g. chmod u+rwx), or set paths.articles"
    elif code == errno.EROFS:
        fix = "the file system is read-only: point paths.articles at a writable folder"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some disk space (nothing was half-written)"
    elif code == errno.ENOTDIR:
        fix = "a part of that path is a file where a folder belongs: move the file away"
    else:
        fix = "check the folder and run again"
    return SetupProblem(f"cannot {doing} {path}: {err.strerror or err}; {fix}")


def is_regular(path: Path | str) -> bool:
    """True for a regular file, False when nothing is there, UnsafeFile for anything else (a
    symlink, even to a regular file, a FIFO, a folder). Never follows a symlink."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    if stat.S_ISREG(mode):
        return True
    raise UnsafeFile(path, kind_of(mode))


def open_regular(
    path: Path | str, flags: int = os.O_RDONLY, *, private: bool = False, follow: bool = False
) -> int:
    """os.open for a regular file only: never through a symlink at `path` (unless `follow`, for
    the user's own inputs), never blocking on a FIFO. With `private`, a file of ours: created
    0600, and an older version's 0644 tightened. Opened for writing or `private`, never one with
    another name (a hard link): UnsafeFile. FileNotFoundError when it is not there."""
    flags |= os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, PRIVATE if private else 0o666)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EMLINK):
            raise UnsafeFile(path, _lstat_kind(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(path, kind_of(info.st_mode))
        if (private or flags & (os.O_WRONLY | os.O_RDWR)) and info.st_nlink > 1:
            raise hard_link_problem(path, info.st_nlink)
        if private and stat.S_IMODE(info.st_mode) != PRIVATE and info.st_uid == os.geteuid():
            os.fchmod(fd, PRIVATE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_read(path: Path | str, *, follow: bool = False) -> BinaryIO:
    """A binary reader of a regular file (see open_regular)."""
    return os.fdopen(open_regular(path, follow=follow), "rb")


class TooLarge(SetupProblem):
    """`path` holds more than the `limit` bytes its reader takes: refused, never read whole."""

    def __init__(self, path: Path | str, limit: int):
        self.path, self.limit = Path(path), limit
        super().__init__(f"{path} is larger than {limit:,} bytes, far more than such a file holds")


def read_bytes(path: Path | str, *, follow: bool = False, limit: int | None = None) -> bytes:
    """A regular file's bytes (see open_regular). With `limit`, at most that many: a larger file
    is TooLarge after reading limit+1 bytes (memory stays bounded whatever the file's size)."""
    with open_read(path, follow=follow) as handle:
        if limit is None:
            return handle.read()
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(path, limit)
    return data


def ensure_folder(folder: Path) -> Path:
    """Create `folder` and its parents if needed. From the project's own `.qwenpipe` folder down,
    each level must be a real folder (a symlink would send our files elsewhere) and is made
    private (0700, also an older version's 0755)."""
    folder = Path(folder)
    own = _own_levels(folder)
    if own is None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise UnsafeFile(folder, _lstat_kind(folder), "a folder") from None
        except OSError as err:
            raise cannot("create the folder", folder, err) from None
        return folder
    ensure_folder(own[0].parent)
    for level in own:
        _private_folder(level)
    return folder


def _own_levels(folder: Path) -> list[Path] | None:
    """The levels of `folder` from the (last) `.qwenpipe` down, or None outside of one."""
    parts = Path(folder).parts
    if STATE_DIR not in parts:
        return None
    top = len(parts) - 1 - parts[::-1].index(STATE_DIR)
    return [Path(*parts[: index + 1]) for index in range(top, len(parts))]


def check_folder(folder: Path) -> None:
    """Read-only: UnsafeFile when a level of our own `.qwenpipe` folder in `folder` is a symlink
    or a file (what ensure_folder would refuse); missing levels are fine (nothing written yet)."""
    for current in _own_levels(folder) or []:
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return
        except OSError as err:
            raise cannot("read the folder", current, err) from None
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeFile(current, kind_of(info.st_mode), "a folder")


def _private_folder(folder: Path) -> None:
    try:
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # another process made it just now
                os.mkdir(folder, PRIVATE_DIR)
            info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode):  # a symlink, even to a folder, is refused
            raise UnsafeFile(folder, kind_of(info.st_mode), "a folder")
        if stat.S_IMODE(info.st_mode) != PRIVATE_DIR and info.st_uid == os.geteuid():
            os.chmod(folder, PRIVATE_DIR)
    except OSError as err:
        raise cannot("create the folder", folder, err) from None


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: Path, data: str | bytes, *, mode: int | None = PRIVATE, crash_at: str = "", sync: bool = True
) -> None:
    """Replace `path` with `data` so that no reader, and no crash, ever sees half of it.

    `mode`: PRIVATE (0600) unless asked, so that a forgotten mode leaks nothing; SHARED follows
    the umask (articles, the config). What is at `path` must be a regular file or nothing: a
    symlink, FIFO or folder there is refused (UnsafeFile) and left as it was. An OSError (a
    read-only folder, a full disk) is a SetupProblem. `sync=False`: no fsync, for a file a power
    cut may set back to its older version (or leave empty) without harm. `data` is masked
    (redact.mask_kept) unless it is redact.Verbatim.
    """
    path = Path(path)
    ensure_folder(path.parent)
    is_regular(path)
    with _temporary(path, data, mode, sync=sync) as tmp:
        if crash_at:
            crashpoint(crash_at)
        is_regular(path)  # checked again just before the rename: the window stays small
        os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


@contextlib.contextmanager
def _temporary(path: Path, data: str | bytes, mode: int | None, *, sync: bool = True) -> Iterator[str]:
    """The name of a finished temporary copy of `data` beside `path`, for the body to move into
    place: written whole, its mode `mode` exactly (None: per umask), fsynced unless `sync=False`.
    Removed at the end if it is still there, however the body ends; an OSError in the writing or
    in the body is a SetupProblem naming `path`. The one place every file's bytes pass: masked
    here (redact.mask_kept)."""
    data = mask_kept(data)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    # Named as mkstemp names them (so a sweep knows it); created private, then given its mode.
    tmp = str(path.parent / f"{TMP_PREFIX}{path.name}.{os.urandom(4).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE)
    except OSError as err:
        raise cannot("write", path, err) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fchmod(handle.fileno(), (0o666 & ~UMASK) if mode is None else mode)
            if sync:
                os.fsync(handle.fileno())
        yield tmp
    except OSError as err:
        raise cannot("write", path, err) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def create_new(path: Path, data: str | bytes, *, mode: int | None = SHARED, sync: bool = True) -> bool:
    """Write `path` whole, but only if nothing is there: False, and nothing written, when a file
    (or anything else) already is. Never half a file, never an overwrite, even when two writers
    race (the finished temporary is hard-linked into place, which fails if the name is taken).

    `sync=False`, for many small files at once: no fsync per file (on a disk that is most of the
    time); the caller flushes them all with one os.sync() at the end."""
    path = Path(path)
    ensure_folder(path.parent)
    if os.path.lexists(path):
        return False
    with _temporary(path, data, mode, sync=sync) as tmp:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    if sync:
        fsync_dir(path.parent)
    return True


def remove(path: Path) -> bool:
    """Delete `path` durably; False when it was not there. A symlink or a folder at `path` is
    not ours to delete: UnsafeFile."""
    try:
        if not is_regular(path):
            return False
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as err:
        raise cannot("delete", path, err) from None
    fsync_dir(Path(path).parent)
    return True


def clean_stale_temporaries(
    folder: Path, older_than: float = 300, names: Iterable[str] | None = None
) -> list[Path]:
    """Remove temporary files a killed writer of ours left behind (never a finished file).

    Only regular files of exactly our temporaries' shape, owned by this user; anything else is
    not ours and stays. A leftover that cannot be removed never stops the caller. `names`: the
    folder's names carrying TMP_PREFIX as the caller's own listing saw them (a cycle's scan of
    articles/: one listing of 100,000 names for both); None: the folder is listed here.
    """
    removed = []
    now = time.time()
    # Every cycle sweeps articles/ (one name per article): the names are filtered by our prefix
    # in one pass, and only the few that carry it are matched and looked at.
    for name in _names(folder, TMP_PREFIX) if names is None else names:
        if not TMP_RE.fullmatch(name):
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            info = os.lstat(path)
            ours = stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
            if ours and now - info.st_mtime > older_than:
                os.unlink(path)
                removed.append(Path(path))
    return removed


def _names(folder: Path, prefix: str = "", suffixes: tuple[str, ...] = ("",)) -> list[str]:
    """The names in `folder` that start with `prefix` and end with one of `suffixes`; none when
    it is not a real folder (never through a symlink) or cannot be read."""
    if not _real_folder(folder):
        return []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [name for name in names if name.startswith(prefix) and name.endswith(suffixes)]


def _real_folder(folder: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(folder).st_mode)
    except OSError:
        return False


def make_private(folder: Path, suffixes: tuple[str, ...] = ("",)) -> None:
    """chmod 0600 the regular files of this user in `folder` whose name ends with one of
    `suffixes` (what an older version left 0644). Symlinks, hard links (the mode is the file's, at
    its other name too) and other users' files are left alone."""
    for name in _names(folder, "", suffixes):
        if TMP_RE.fullmatch(name):
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError, SetupProblem):
            info = os.lstat(path)
            if (
                stat.S_ISREG(info.st_mode)
                and info.st_nlink == 1
                and stat.S_IMODE(info.st_mode) != PRIVATE
                and info.st_uid == os.geteuid()
            ):
                os.close(open_regular(path, private=True))  # fchmod, never via a link


class LockBusy(Exception):
    """Another live process holds the lock; `owner` says who (pid and what it runs)."""

    def __init__(self, path: Path, owner: str):
        super().__init__(f"{owner} holds {path}")
        self.path = path
        self.owner = owner


@record
class FileLock:
    """An exclusive, non-blocking flock on `path`. The kernel releases it when the process dies.

    The holder writes its pid and purpose into the file so that a refused process can name it.
    """

    path: Path
    purpose: str = ""
    _fd: int | None = None

    def acquire(self) -> FileLock:
        ensure_folder(self.path.parent)
        try:
            fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, private=True)
        except OSError as err:
            raise cannot("open the lock", self.path, err) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LockBusy(self.path, self._holder()) from None
            raise
        try:
            os.ftruncate(fd, 0)
            owner = {"pid": os.getpid(), "purpose": self.purpose, "since": time.time()}
            os.pwrite(fd, mask_kept(json.dumps(owner)).encode(), 0)  # its purpose names a slug
        except OSError as err:  # a full disk: the lock is released with the fd
            os.close(fd)
            raise cannot("write the lock", self.path, err) from None
        self._fd = fd
        return self

    def _holder(self) -> str:
        """Who holds the lock: its holder writes its pid a moment after it took the lock, so a
        blank owner is read again for up to OWNER_WAIT seconds before it is "another process"."""
        deadline = time.monotonic() + OWNER_WAIT
        owner = read_lock_owner(self.path)
        while owner == UNKNOWN_OWNER and time.monotonic() < deadline:
            time.sleep(0.01)
            owner = read_lock_owner(self.path)
        return owner

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


UNKNOWN_OWNER = "another process"
OWNER_WAIT = 0.5  # seconds a busy lock's blank owner is read again (see FileLock._holder)


def read_lock_owner(path: Path) -> str:
    """A short description of who holds the lock at `path`, for messages."""
    try:
        info = json.loads(read_bytes(path) or b"{}")
    except (OSError, ValueError, SetupProblem):
        return UNKNOWN_OWNER
    if not isinstance(info, dict):
        return UNKNOWN_OWNER
    pid = info.get("pid")
    purpose = info.get("purpose")
    if not pid:
        return UNKNOWN_OWNER
    return f"pid {pid}" + (f" ({purpose})" if purpose else "")
