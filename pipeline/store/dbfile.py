"""Where the database file lives, made private: the file 0600 in a 0700 folder, no symlink followed.

The store holds prompts' errors and chat URLs: nobody else on the machine needs to read them.
A symlink in place of the folder or of a database file could make qwenpipe write somewhere
else (another user's file, another project's store), so one is refused, never followed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .protocol import StoreError

DB_NAME = "qwenpipe.db"
SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite's own files beside the database


def prepare(folder: Path) -> Path:
    """The database path in `folder` (articles/.qwenpipe), created private if missing."""
    folder = Path(folder)
    try:
        _private_folder(folder)
    except OSError as err:
        raise StoreError(
            f"{folder}: cannot make the store's folder ({err.strerror}); run as the folder's owner"
        ) from None
    path = folder / DB_NAME
    for candidate in (path, *(Path(f"{path}{suffix}") for suffix in SIDE_FILES)):
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode):
            raise StoreError(f"{candidate}: a symlink; refusing to follow it (remove it and run again)")
        if info.st_nlink > 1:
            raise _hard_link(candidate, info.st_nlink)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise StoreError(
            f"{path}: cannot open the store ({err.strerror}); check the folder's owner"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path}: not a regular file; remove it and run again")
        if info.st_nlink > 1:
            raise _hard_link(path, info.st_nlink)
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path


def _hard_link(path: Path, links: int) -> StoreError:
    return StoreError(
        f"{path}: a hard link (the same file has {links} names, another one elsewhere); qwenpipe "
        "will not write it, as that would change the file at the other name too: give it a file "
        f"of its own (`cp -p {path} {path}.own && mv {path}.own {path}`; the other name keeps "
        "the old file) and run again"
    )


def _private_folder(folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{folder}: not a plain folder (a symlink?); the store's folder must be a real one")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, 0o700)
