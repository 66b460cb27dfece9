"""The one guard every path the config names goes through at load (design.md, "Guarantees at
the boundaries"): what is there must be of the kind the key wants (never a FIFO, socket or
device; never a symlink where qwenpipe writes or reads a secret), and never one of the
project's own files or folders (this config file, the prompts and articles with the store,
sidecars and locks under them, another key's saved login, browser profile, published pages, key
file or metrics file): a key written whole would replace it, a key read would hand it out.

Each path key of the schema says its PathKind (`key(..., path=...)` in pipeline/config.py); the
config gathers the keys in force as Places and asks `problem` about each. Pure: no config, no
errors of its own, so that config.py words the refusal and tests call it as they like.
Comparisons use real paths (a folder linked into the project is still the project), while the
path itself is never resolved: writers use it as written, and refuse a link there themselves.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


class PathKind(enum.Enum):
    """What a path key names, and so what may be at its path."""

    # paths.prompts, paths.articles: the project's own folders. A symlink is followed (the
    # project's articles on a larger disk); the others' keys are refused inside them.
    PROJECT = "project folder"
    FILE_WRITTEN = "file written"  # replaced whole (a saved login, the metrics): a file or nothing
    FOLDER_WRITTEN = "folder written"  # written into (a browser profile, publish.dir)
    FILE_READ = "file read"  # read, never written (the router's key file): it must be there
    # browser.executable: run, a name looked up on PATH or a path. A symlink is how packages
    # install a browser (/usr/bin/google-chrome), so it is followed; it is never written.
    PROGRAM = "program"

    @property
    def folder(self) -> bool:
        return self in (PathKind.PROJECT, PathKind.FOLDER_WRITTEN)

    @property
    def follows_links(self) -> bool:
        return self in (PathKind.PROJECT, PathKind.PROGRAM)

    @property
    def noun(self) -> str:
        return "folder" if self.folder else "file"


@dataclass(frozen=True)
class Place:
    """A path in force: `name` as messages say it ("paths.articles", "this config file",
    "accounts.main.storage_state"), its absolute, unresolved `path`, and whether a folder."""

    name: str
    path: Path
    folder: bool

    @cached_property
    def real(self) -> Path:
        """Its real path, for comparisons only (a lstat per level: once per place)."""
        return Path(os.path.realpath(self.path))


def absolute(root: Path, value: str) -> Path:
    """A path key's value as an absolute path, `~` expanded and relative to `root` (the config's
    folder), `..` taken lexically. Never resolved: a symlink at it stays visible to lstat."""
    return Path(os.path.abspath(root / os.path.expanduser(value)))


def problem(
    name: str,
    kind: PathKind,
    path: Path,
    places: Iterable[Place],
    later: Iterable[Place] = (),
    example: str = "",
) -> str | None:
    """Why `path`, the value of the key `name` of `kind`, cannot be used, and the fix (`example`:
    a value that would do), or None. The words follow the key and its value in the message
    (`... is a symlink; ...`). `later`: the places of keys named after this one, which refuse it
    only by holding it: two keys of one path are refused on the second, which names the first."""
    return _kind_problem(kind, path) or _place_problem(name, kind, path, places, later, example)


def _kind_problem(kind: PathKind, path: Path) -> str | None:
    from .files import kind_of  # here: the engines import `absolute`, and never pipeline.files

    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None  # made when first written; a missing key file is read_key_file's to say
    except OSError as err:
        return f"cannot be looked at: {err.strerror}"
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        if not kind.follows_links:
            return (
                f"is a symlink (to {os.path.realpath(path)}); qwenpipe does not follow links where it "
                f"writes or reads a secret: name the {kind.noun} itself"
            )
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return None  # a dangling link: nothing is there yet
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return f"is {kind_of(mode)}, not a {kind.noun}; qwenpipe will not use it: point it at a {kind.noun}"
    if kind is PathKind.PROJECT:
        return None  # a file where the folder belongs: check_folders and the writers say it
    if stat.S_ISDIR(mode) != kind.folder:
        return f"is {kind_of(mode)}, not a {kind.noun}: point it at a {kind.noun} (or where none is yet)"
    return None


_DOING = {
    PathKind.FILE_WRITTEN: "qwenpipe would write over",
    PathKind.FOLDER_WRITTEN: "qwenpipe would write into",
    PathKind.FILE_READ: "qwenpipe would read, and send as the key,",
    PathKind.PROGRAM: "qwenpipe would run",
}


def _place_problem(
    name: str, kind: PathKind, path: Path, places: Iterable[Place], later: Iterable[Place], example: str
) -> str | None:
    if kind is PathKind.PROJECT:
        return None  # the project's folders are what the others are measured against
    real = Path(os.path.realpath(path))
    for place, is_later in (*((p, False) for p in places), *((p, True) for p in later)):
        if place.name == name:
            continue
        at = place.real
        if real == at and not is_later:
            clash = f"is {place.name}" + ("" if real == path else f" ({at})")
            what = "it"
        elif place.folder and str(real).startswith(os.path.join(at, "")):  # strictly inside
            clash, what = f"is inside {place.name} ({at})", "the project's own files there"
        else:
            continue
        fix = f"point it at a {kind.noun} of its own" + (f", e.g. {example!r}" if example else "")
        return f"{clash}; {_DOING[kind]} {what}: {fix}"
    return None
