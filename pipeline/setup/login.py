"""`qwenpipe login`: get a logged-in chat session once, keep it as a private storage state.

One account at a time (pipeline/accounts.py: `--account NAME`, or the one account there is).
Three ways in, all ending in that account's saved login (its `storage_state`, mode 0600):
- a visible browser on the site's sign-in page, with the persistent profile (mode 0700): the
  user signs in by hand, we notice through `/api/v2/users/status` or the page, and save;
- `--cdp` / `browser.cdp_url`: a Chrome the user runs and is signed in to; we only check and save;
- `--import FILE`: a storage state or a browser extension's cookie export made elsewhere.
An account the site stopped with its bot check (a hold: contract/quota.py) is also shown the
site's slider in that window, once signed in; the user slides it and the hold ends.

Plain functions, so tests drive the real flow with a hook that fills the sign-in form.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..accounts import Account, account_named, all_accounts
from ..config import Browser, Config
from ..engines.qwen.tokens import jwt_exp_claim, jwt_expiry, plausible_time, state_tokens, token_expiry
from ..errors import UsageProblem
from ..files import TooLarge, UnsafeFile, atomic_write, read_bytes
from ..redact import Verbatim
from ..signin.profile import browser_session
from ..signin.saved import MAX_LOGIN_FILE_BYTES, domain_matches, login_command, save_state
from ..times import clock

# The browser's own modules (engines.qwen.browser, .login, .display) are imported where a
# browser is used.
HEADLESS_ENV = "QWENPIPE_LOGIN_HEADLESS"  # "1": sign in without a window (tests, scripted setups)
SIGNIN_PATH = "/auth?action=signin"
POLL_SECONDS = 0.5


class LoginFailed(Exception):
    """The login could not be completed or checked (exit 1); the message says what to do."""


@dataclass
class LoginResult:
    state_path: Path
    expires_at: float | None
    how: str  # "signed in", "attached", "imported"
    notes: list[str] = field(default_factory=list)


# -- which account, where and whether ------------------------------------------------------------


def account_to_log_in(config: Config, name: str | None) -> Account:
    """The account `qwenpipe login [--account NAME]` is for: the one named, or the only one there
    is. ConfigError (exit 2) names the accounts when the name is not one of them; UsageProblem
    (exit 2) names them when there are several and none is named."""
    if name is not None:
        return account_named(config, name)
    accounts = all_accounts(config)
    if len(accounts) > 1:
        names = ", ".join(a.name for a in accounts)
        raise UsageProblem(
            f"{config.describe()} has {len(accounts)} accounts ({names}): "
            f"name the one to sign in with --account NAME"
        )
    return accounts[0]


def state_key(account: Account) -> str:
    """The config key that names the account's saved login, as messages show it."""
    return f"accounts.{account.name}.storage_state" if account.configured else "browser.storage_state"


def account_browser(config: Config, account: Account, **changes: Any) -> Browser:
    """[browser] with the account's profile and saved login as absolute paths, and its proxy (and `changes`):
    the login writes its state file there, whatever the working folder."""
    paths = {"profile_dir": str(account.profile_dir), "storage_state": str(account.storage_state)}
    return config.browser.replace(**paths, proxy=account.proxy, **changes)


def headless_requested(env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get(HEADLESS_ENV, "") not in ("", "0")


def no_display_help(config: Config, account: Account) -> str:
    """The three ways to log in on a machine without a screen, with this config's exact names."""
    where = config.describe()
    login = login_command(account)
    attach = login.replace("qwenpipe", "qwenpipe --cdp http://127.0.0.1:9222", 1)
    return (
        "no display here (neither DISPLAY nor WAYLAND_DISPLAY is set), so no browser window can open. "
        "Three ways:\n"
        f"  1. on a machine with a screen run `{login}`, copy the file it writes to this machine "
        f"and run `{login} --import FILE` (it becomes {account.storage_state}, "
        f"{state_key(account)} in {where});\n"
        "  2. attach to a Chrome you run and are signed in to: start it with "
        f"--remote-debugging-port=9222, then `{attach}` "
        "(or set browser.cdp_url);\n"
        "  3. run under a virtual screen with browser.headless = false: "
        f"`xvfb-run -a {login}` (apt-get install -y xvfb), signing in through a VNC view of it "
        '(or set browser.display = "xvfb": qwenpipe starts the Xvfb itself).'
    )


# -- the pieces ----------------------------------------------------------------------------------


def wait_for_login(page: Any, base_url: str, timeout: float, *, poll: float = POLL_SECONDS) -> None:
    """Return once the page's session is logged in to `base_url`; LoginFailed after `timeout` s.

    Reads survive the page navigating under them (the sign-in form redirects when it succeeds).
    """
    from playwright.sync_api import Error as PlaywrightError

    from ..engines.qwen.login import read_login_state, site_origin

    deadline = time.monotonic() + timeout
    while True:
        if page.is_closed():
            raise LoginFailed("the browser window was closed before the sign-in finished")
        try:
            if site_origin(page.url) == site_origin(base_url) and read_login_state(page).logged_in(base_url):
                return
        except PlaywrightError as err:
            if page.is_closed() or "closed" in str(err).lower():
                raise LoginFailed("the browser window was closed before the sign-in finished") from None
            # navigating: the next read sees the new page
        if time.monotonic() >= deadline:
            raise LoginFailed(
                f"not signed in after {timeout:g} s; run `qwenpipe login` again (--timeout S for more time)"
            )
        time.sleep(poll)


# -- the flows -----------------------------------------------------------------------------------


def run_login(
    config: Config,
    account: Account,
    *,
    timeout: float = 600,
    on_page: Callable[[Any], None] | None = None,
    say: Callable[[str], None] = print,
    bot_check: str | None = None,
    on_slider: Callable[[Any], None] | None = None,
) -> LoginResult:
    """Sign `account` in (or check an attached browser), then save its storage state.

    `bot_check`: the account is held after the site's bot check (the hold's reason): once
    signed in, the window shows the site's slider (`on_slider` is called with that page, as
    `on_page` with the sign-in page) and waits until it is solved.

    Raises NoDisplay (a window is needed and there is no screen), LoginFailed, and the
    browser's errors (BrowserNotFound, EngineBusy when a run is using the profile).
    """
    from playwright.sync_api import Error as PlaywrightError

    from ..engines.qwen.display import NoDisplay, has_display

    base_url = str(config.qwen.base_url).rstrip("/")
    browser = account_browser(config, account)
    attached = bool(browser.cdp_url)
    if not attached:
        headless = headless_requested()
        # A person signs in by hand, so only a forced Xvfb (watched over VNC) stands in for a screen.
        if not headless and not has_display() and browser.display != "xvfb":
            raise NoDisplay(no_display_help(config, account))
        browser = browser.replace(headless=headless)
    path = account.storage_state
    try:
        slider = Slider(bot_check, account.name, on_slider) if bot_check is not None else None
        expires = _login_in_browser(browser, config, base_url, timeout, on_page, say, slider)
    except PlaywrightError as err:
        first = str(getattr(err, "message", "") or err).strip().splitlines()
        raise LoginFailed(f"the browser could not open {base_url}: {first[0] if first else err}") from None
    return LoginResult(path, expires, "attached" if attached else "signed in")


def _login_in_browser(
    browser: Browser,
    config: Config,
    base_url: str,
    timeout: float,
    on_page: Callable[[Any], None] | None,
    say: Callable[[str], None],
    slider: Slider | None = None,
) -> float | None:
    from ..engines.qwen.login import read_settled_login_state

    attached = bool(browser.cdp_url)
    with browser_session(config, browser) as session:
        page = session.new_page()
        page.set_default_timeout(float(config.qwen.page_timeout) * 1000)
        if attached:
            page.goto(base_url + "/", wait_until="domcontentloaded")
            if on_page:
                on_page(page)
            seen = read_settled_login_state(page, min(timeout, float(config.qwen.page_timeout)))
            if seen is None or not seen.logged_in(base_url):
                raise LoginFailed(
                    f"the browser at {browser.cdp_url} is not signed in to {base_url}: "
                    "sign in there (in that browser's window), then run this again"
                )
        else:
            page.goto(base_url + SIGNIN_PATH, wait_until="domcontentloaded")
            say(f"sign in to {base_url} in the browser window (waiting up to {timeout:g} s)")
            if on_page:
                on_page(page)
            wait_for_login(page, base_url, timeout)
        if slider is not None:
            slider.solve(page, base_url, timeout, say)
        state = Path(browser.storage_state)
        return save_state(session.context, state, only_for=base_url if attached else None)


def bot_check_hold(workspace: Any, name: str) -> Any:
    """The account's bot-check hold (contract/quota.py's Hold), or None; read only where there
    is a store (a login never creates one)."""
    from ..contract.quota import BOT_CHECK

    if not workspace.has_store:
        return None
    hold = workspace.chat_quota.held(time.time(), name)
    return hold if hold is not None and hold.kind == BOT_CHECK else None


def end_bot_check(workspace: Any, name: str) -> bool:
    """A login solved the account's bot check (or brought a new login from a desktop): its hold
    ends now. Whether there was one."""
    return workspace.chat_quota.lift(time.time(), name) is not None


PUNISH_URL = re.compile(r"\S*_____tmd_____/punish\S*|\S*/punish\?\S*")


@dataclass
class Slider:
    """The site's bot check an account met (the hold's reason, which names the slider's page
    when the site gave one), to be solved by hand in the login window."""

    reason: str
    account: str
    on_page: Callable[[Any], None] | None = None

    def url(self, base_url: str) -> str | None:
        found = PUNISH_URL.search(self.reason)
        return urljoin(base_url + "/", found.group(0).rstrip(").,;")) if found else None

    def solve(self, page: Any, base_url: str, timeout: float, say: Callable[[str], None]) -> None:
        """Show the slider and wait until it is solved (the site leaves its page), or, when the
        site named no page, until the window is closed; LoginFailed after `timeout` s."""
        url = self.url(base_url)
        page.goto(url or base_url + "/", wait_until="domcontentloaded")
        if url:
            say(f"account {self.account} met the site's bot check: slide the slider in the window")
        else:
            say(
                f"account {self.account} met the site's bot check: send a short message in the window, "
                "slide the slider that appears, then close the window"
            )
        if self.on_page:
            self.on_page(page)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if page.is_closed() or (url and "punish" not in urlsplit(page.url).path):
                return
            page.wait_for_timeout(POLL_SECONDS * 1000)
        raise LoginFailed(
            f"the bot check of account {self.account} was not solved within {timeout:g} s; "
            f"the account stays held: run `qwenpipe login --account {self.account}` again"
        )


def import_state(config: Config, account: Account, source: Path, *, now: float | None = None) -> LoginResult:
    """Take a storage state or a cookie export made elsewhere as `account`'s login on this machine.

    UsageProblem (exit 2, nothing written) names the file and what is wrong with it. An existing
    profile keeps its own cookies and ignores the state file, so the cookies are also put into
    the profile (a short headless start; skipped with a note when a run is using it).
    """
    now = time.time() if now is None else now
    state = parse_login_file(source)
    expires = token_expiry(state)
    if expires is not None and expires <= now:
        raise UsageProblem(
            f"{source}: its login token expired on {clock(expires)}; sign in again and export anew"
        )
    notes = []
    host = urlsplit(str(config.qwen.base_url)).hostname or ""
    if not any(domain_matches(c.get("domain", ""), host) for c in state["cookies"]):
        notes.append(f"none of its cookies is for {host} (qwen.base_url): is it the right export?")
    path = account.storage_state
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    atomic_write(path, Verbatim(json.dumps(state, indent=1)), mode=0o600)  # its tokens: its point
    note = apply_to_profile(config, account, path)
    if note:
        notes.append(note)
    return LoginResult(path, expires, "imported", notes)


def apply_to_profile(config: Config, account: Account, path: Path) -> str | None:
    """Put the state's cookies into the account's existing profile; a note for the user, or None."""
    from ..engines.base import EngineBusy, EngineError
    from ..engines.qwen.browser import load_storage_state

    profile = account.profile_dir
    if config.browser.cdp_url or not (profile / "Default").exists():
        return None  # a new profile takes the state file on its first start
    session = browser_session(config, account_browser(config, account, headless=True))
    try:
        load_storage_state(session.context, path)
    except EngineBusy:
        return (
            f"the profile {profile} is in use, so it still holds its old login: "
            f"run `{login_command(account)} --import` again when no run is using it"
        )
    except EngineError as err:
        return f"could not put the cookies into the profile {profile}: {err}"
    finally:
        session.close()
    return f"its cookies are now also in the browser profile {profile}"


# -- reading login files -------------------------------------------------------------------------

SAME_SITE = {"no_restriction": "None", "none": "None", "lax": "Lax", "strict": "Strict"}
COOKIE_EXPORT_HINT = (
    'expected a Playwright storage state (an object with "cookies" and "origins", '
    "as `qwenpipe login` writes) or a cookie export (a JSON list of cookies with name, value "
    'and domain, as "Cookie-Editor" or "EditThisCookie" export them)'
)


def parse_login_file(source: Path) -> dict:
    """A validated storage state from either file shape; UsageProblem names the file and the fault."""
    source = Path(source)
    try:
        # A regular file only (a FIFO never hangs it, /dev/zero is refused), and a bounded read.
        text = read_bytes(source, follow=True, limit=MAX_LOGIN_FILE_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise UsageProblem(f"{source}: no such file") from None
    except UnsafeFile as err:
        raise UsageProblem(
            f"{source} is {err.kind}, not a file: export the login to a file and import that"
        ) from None
    except TooLarge:
        raise UsageProblem(
            f"{source}: larger than {MAX_LOGIN_FILE_BYTES // 1_000_000} MB, far more than a login "
            f"export holds; {COOKIE_EXPORT_HINT}"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UsageProblem(f"{source}: cannot read it ({err})") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise UsageProblem(f"{source}: not JSON ({err}); {COOKIE_EXPORT_HINT}") from None
    if isinstance(data, dict) and isinstance(data.get("cookies"), list):
        state = _storage_state(source, data)
    elif isinstance(data, list):
        state = {"cookies": [_exported_cookie(source, i, c) for i, c in enumerate(data, 1)], "origins": []}
    else:
        raise UsageProblem(f"{source}: {COOKIE_EXPORT_HINT}")
    if not state["cookies"]:
        raise UsageProblem(f"{source}: holds no cookies; export them while signed in to the chat site")
    tokens = state_tokens(state)
    if not tokens:
        raise UsageProblem(
            f"{source}: holds no `token` cookie or localStorage entry, so no chat login; "
            "export the cookies of chat.qwen.ai while signed in"
        )
    for token in tokens:
        exp = jwt_exp_claim(token)
        if exp is not None and not plausible_time(exp):
            raise UsageProblem(
                f"{source}: its login token's `exp` ({exp!r:.40}) is not a time (seconds since 1970, "
                "before the year 3000): the token is damaged; sign in again and export anew"
            )
    return state


def _storage_state(source: Path, data: dict) -> dict:
    cookies = []
    for number, cookie in enumerate(data["cookies"], 1):
        _require_cookie_fields(source, number, cookie)
        cookies.append(cookie)
    origins = data.get("origins", [])
    shape = '"origins" must be a list of {"origin": URL, "localStorage": [{"name": ..., "value": ...}]}'
    if not isinstance(origins, list):
        raise UsageProblem(f"{source}: {shape}")
    for number, origin in enumerate(origins, 1):
        if not isinstance(origin, dict) or not isinstance(origin.get("origin"), str):
            raise UsageProblem(f'{source}: origin #{number} is not an object with an "origin" URL; {shape}')
        entries = origin.get("localStorage", [])
        if not isinstance(entries, list):
            raise UsageProblem(f"{source}: origin #{number}'s localStorage is not a list; {shape}")
        for index, entry in enumerate(entries, 1):
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("name"), str)
                and isinstance(entry.get("value"), str)
            ):
                raise UsageProblem(
                    f"{source}: origin #{number}'s localStorage entry #{index} is not a "
                    f'{{"name": string, "value": string}} pair; {shape}'
                )
    return {"cookies": cookies, "origins": origins}


def _exported_cookie(source: Path, number: int, cookie: Any) -> dict:
    """An extension's cookie (expirationDate, sameSite "no_restriction", hostOnly) as Playwright's."""
    _require_cookie_fields(source, number, cookie, expiry_key="expirationDate")
    expires = cookie.get("expirationDate")
    if cookie.get("session") or not isinstance(expires, (int, float)) or isinstance(expires, bool):
        # A session cookie would not outlive the browser; the login token carries its own end.
        expires = (jwt_expiry(str(cookie["value"])) if cookie["name"] == "token" else None) or -1
    same_site = SAME_SITE.get(str(cookie.get("sameSite") or "").lower(), "Lax")
    secure = bool(cookie.get("secure"))
    if same_site == "None" and not secure:
        same_site = "Lax"  # Chromium drops SameSite=None cookies that are not Secure
    return {
        "name": str(cookie["name"]),
        "value": str(cookie["value"]),
        "domain": str(cookie["domain"]),
        "path": str(cookie.get("path") or "/"),
        "expires": float(expires),
        "httpOnly": bool(cookie.get("httpOnly")),
        "secure": secure,
        "sameSite": same_site,
    }


def _require_cookie_fields(source: Path, number: int, cookie: Any, *, expiry_key: str = "expires") -> None:
    if not isinstance(cookie, dict):
        raise UsageProblem(f"{source}: cookie #{number} is not an object; {COOKIE_EXPORT_HINT}")
    for key in ("name", "value", "domain"):
        if not isinstance(cookie.get(key), str) or (key != "value" and not cookie[key]):
            raise UsageProblem(f"{source}: cookie #{number} has no {key!r} (a string); {COOKIE_EXPORT_HINT}")
    expires = cookie.get(expiry_key)
    if expires is not None and expires != -1 and not plausible_time(expires):
        raise UsageProblem(
            f"{source}: cookie #{number} ({cookie['name']}) has {expiry_key} = {expires!r:.40}, which is "
            "not a time (seconds since 1970 before the year 3000, or -1 for a session cookie)"
        )
