"""The login is what the browser holds: after a run, an account's saved login file is written
back from its browser context (docs/qwen-site.md, "Login").

The site renews its access token of a few minutes from the session cookie, and every renewal
hands back a new session and ends the old one: a saved login is stale as soon as the page has
renewed it once. So whatever the context holds (cookies and localStorage) goes back to the
account's file when the run ends, when it holds another session than the file: atomically,
mode 0600 (a login that did not change leaves the file as it is). Two runs may have loaded one file;
the one that saves second never puts an older login over a newer one: it writes only when the
file is as it loaded it, or when what it holds is newer (its session ends later) than what the
file holds now. Never raises for a file or a browser that went away: the file stays as it was.

`pipeline.files` is imported where a file is read or written: the engines load without it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tokens import listed, session_expiry

LOCK_WAIT = 2.0  # s: another run saving the same file takes milliseconds
MAX_BYTES = 16_000_000  # as `qwenpipe login --import` reads one


@dataclass(frozen=True)
class Loaded:
    """A login file as a run found it when its browser context was opened."""

    path: Path
    stamp: tuple[int, int, int] | None  # (mtime_ns, size, inode); None: there was no file

    @classmethod
    def of(cls, path: Path) -> Loaded:
        return cls(path, stamp_of(path))


def stamp_of(path: Path) -> tuple[int, int, int] | None:
    """What tells a file changed since it was read: its mtime, size and inode (an atomic
    replace makes a new inode); None when there is no regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino) if os.path.isfile(path) else None


def saved_state(path: Path) -> Any:
    """The storage state saved in `path`; None when unreadable (missing, a link, not JSON)."""
    from ... import files

    try:
        return json.loads(files.read_bytes(path, limit=MAX_BYTES))
    except (OSError, ValueError, RecursionError, files.SetupProblem):
        return None


def held_session(path: Path) -> float | None:
    """When the session saved in `path` ends (tokens.session_expiry); None when unreadable."""
    return session_expiry(saved_state(path))


def sessions_of(state: Any) -> set[str]:
    """The session cookies (`token`) a storage state holds, by value."""
    return {
        c["value"]
        for c in listed(state, "cookies")
        if isinstance(c, dict) and c.get("name") == "token" and isinstance(c.get("value"), str)
    }


def save_back(context: Any, loaded: Loaded) -> bool:
    """Write what `context` holds to `loaded.path` unless that would put an older login over a
    newer one (see the module). A context that holds no session (signed out) leaves the file.
    True when written."""
    from playwright.sync_api import Error as PlaywrightError

    from ... import files
    from ...redact import Verbatim

    try:
        state = context.storage_state()
    except PlaywrightError:
        return False  # the browser is gone: nothing to save
    held = session_expiry(state)
    if held is None or sessions_of(state) == sessions_of(saved_state(loaded.path)):
        return False  # signed out, or the session the file holds: nothing newer to keep
    lock = _lock(loaded.path)
    if lock is None:
        return False  # another run is saving it right now: its login is as new as ours
    try:
        if stamp_of(loaded.path) != loaded.stamp:
            theirs = held_session(loaded.path)
            if theirs is not None and theirs >= held:
                return False  # another run saved a login as new or newer since we loaded it
        # Verbatim: a saved login's tokens are its whole point (the disk's masking leaves them)
        files.atomic_write(loaded.path, Verbatim(json.dumps(state, indent=1)), mode=files.PRIVATE)
        return True
    except files.SetupProblem:
        return False  # a folder gone read-only, a symlink put there: the file stays as it was
    finally:
        lock.release()


def _lock(path: Path) -> Any:
    """The save's lock beside the login file, waited for up to LOCK_WAIT seconds."""
    from ... import files

    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            return files.FileLock(path.with_name(path.name + ".lock"), "saving the login").acquire()
        except files.LockBusy:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        except files.SetupProblem:
            return None
