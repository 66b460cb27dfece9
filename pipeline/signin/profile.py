"""The browser profile's lock (one qwenpipe process per profile) and a browser session with it:
what `login`, `doctor` and the chat engines (pipeline/wiring.py) start their browser with."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..engines.base import EngineBusy
from ..files import FileLock, LockBusy

if TYPE_CHECKING:  # a cycle with nothing to do loads no browser code
    from ..config import Browser, Config
    from ..engines.qwen.browser import BrowserSession


def lock_browser_profile(profile: Path) -> Callable[[], None]:
    """The profile lock engines are given: one qwenpipe process per browser profile. Chromium
    refuses a second browser on it anyway; this makes the refusal a "busy" that names the holder."""
    lock = FileLock(profile / "qwenpipe.lock", purpose=" ".join(sys.argv[1:3]) or "qwenpipe")
    try:
        return lock.acquire().release
    except LockBusy as busy:
        raise EngineBusy(
            f"the browser profile {profile} is in use by {busy.owner}; "
            "this run steps aside and tries again later"
        ) from None


def browser_session(config: Config, browser: Browser | None = None) -> BrowserSession:
    """A browser session on the config's profile (`browser` instead of [browser]), its lock given."""
    from ..engines.qwen.browser import BrowserSession

    return BrowserSession(
        config.browser if browser is None else browser,
        root=config.root,
        lock_profile=lock_browser_profile,
    )
