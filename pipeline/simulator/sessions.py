"""Rotating sessions, as the late-2026 site has them (docs/qwen-site.md, "Login"): on by the
`rotating_sessions` setting.

Sign-in gives a session (the `token` cookie, 30 days). The page turns it into an access token of
900 seconds with `GET /api/v2/auths/refresh`, which also hands back a new session: each use ends
the old one, so a saved login is stale as soon as a page has renewed it once. A session that was
just replaced still refreshes for a few seconds (two pages of one browser loading at once), and
answers with the session that replaced it. A signed-out refresh answers HTTP 200
`{"success": false, "data": {"code": "Unauthorized", "details": "401 Unauthorized"}}`.

Times are the site's clock (ChatStore.site_time: the run's clock_offset moves it), so a test
lets 900 seconds pass without waiting for them.
"""

from __future__ import annotations

import threading

SESSION_SECONDS = 30 * 86400
ACCESS_SECONDS = 900
GRACE_SECONDS = 10  # a replaced session still refreshes this long (pages loading side by side)
REFRESH_PATH = "/api/v2/auths/refresh"
SIGNED_OUT_BODY = {"success": False, "data": {"code": "Unauthorized", "details": "401 Unauthorized"}}


class Sessions:
    """Each account's current session number, and when the one before it was replaced."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: dict[str, int] = {}
        self._replaced_at: dict[str, float] = {}

    def current(self, account: str) -> int:
        with self._lock:
            return self._current.get(account, 0)

    def good(self, account: str, number: object, now: float) -> bool:
        """Whether session `number` of `account` still counts now: the current one, or the one
        it replaced less than GRACE_SECONDS ago."""
        if not isinstance(number, int) or isinstance(number, bool):
            return False
        with self._lock:
            current = self._current.get(account, 0)
            replaced = self._replaced_at.get(account)
        return number == current or (
            number == current - 1 and replaced is not None and now - replaced < GRACE_SECONDS
        )

    def rotate(self, account: str, number: int, now: float) -> int:
        """A refresh with session `number` (good): the session that replaces it. The current one
        is replaced by a new one; the one just replaced answers with the current one."""
        with self._lock:
            current = self._current.get(account, 0)
            if number != current:
                return current
            self._current[account] = current + 1
            self._replaced_at[account] = now
            return current + 1

    def sign_in(self, account: str, now: float) -> int:
        """A sign-in: a new session, every older one ended."""
        with self._lock:
            self._current[account] = self._current.get(account, 0) + 2  # no grace for the old one
            self._replaced_at[account] = now
            return self._current[account]
