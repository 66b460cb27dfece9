"""Keeping an account's saved login fresh on a server (LoginRefresh), given to the chat engine
by pipeline/wiring.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..accounts import Account
from ..config import Config
from ..engines.qwen.tokens import token_expiry
from ..errors import SetupProblem
from ..times import clock, describe_expiry
from .saved import context_state, login_command, save_state, state_token_expiry


class LoginRefresh:
    """Keeps one account's saved login (its storage_state) from running out on a server.

    Called by the engine with each page that shows the chat app; acts once per run. When the
    saved token ends within `login.refresh_hours`, it asks the site for a renewed one (the page
    renews it too) and, when the browser then holds a token that lives longer, saves the state
    (mode 0600, atomically) and says so. Never raises: a refresh that fails leaves the file as
    it was, says why, and the run goes on (the send is never held up by it).

    `account`: whose login (one LoginRefresh per account, given to that account's engine);
    without it, the login [browser] names (the `default` account's, or the account a config
    made for one account's engine is for).
    """

    def __init__(
        self,
        config: Config,
        *,
        say: Callable[[str], None],
        clock: Callable[[], float] = time.time,
        account: Account | None = None,
    ):
        self.path = account.storage_state if account else config.resolve(config.browser.storage_state)
        self.again = login_command(account) if account else "qwenpipe login"
        self.window = float(config.login.refresh_hours) * 3600
        self.base_url = str(config.qwen.base_url).rstrip("/")
        self.only_for = self.base_url if config.browser.cdp_url else None
        self.timeout = float(config.qwen.page_timeout)
        self.say, self.clock = say, clock
        self._lock = threading.Lock()  # a cycle's poll threads share one
        self._done = False

    def __call__(self, page: Any) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            before = state_token_expiry(self.path)
            if self.window <= 0 or before is None or before - self.clock() > self.window:
                return
            self._refresh(page, before)

    def _refresh(self, page: Any, before: float) -> None:
        from playwright.sync_api import Error as PlaywrightError

        from ..engines.qwen.login import renew_login

        try:
            renewal = renew_login(page, self.base_url, self.timeout)
            held = token_expiry(context_state(page.context, self.only_for))
            after = (
                save_state(page.context, self.path, only_for=self.only_for) if (held or 0) > before else None
            )
        except (PlaywrightError, OSError, SetupProblem) as err:
            why = str(getattr(err, "message", "") or err).strip().splitlines()
            self.say(
                f"could not refresh the saved chat login ({why[0] if why else type(err).__name__}); "
                f"it {describe_expiry(before)}, {self.path} is unchanged"
            )
            return
        if after is not None and after > before:
            self.say(
                f"the chat login was renewed: {self.path} now {describe_expiry(after)} "
                f"(it was to end {clock(before)})"
            )
        else:
            why = renewal.problem or "the site gave no newer token"
            self.say(
                f"could not refresh the saved chat login ({why}); "
                f"it {describe_expiry(before)}: if it runs out, run `{self.again}`"
            )
