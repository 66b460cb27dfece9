"""Is this page logged in to the chat site? The one check, used by the engine before it types,
by `qwenpipe login` while the user signs in, and by `qwenpipe doctor`.

One in-page read says where the page is, whether it shows the sign-in form, and what the
site's `/api/v2/users/status` answers. The site's answer decides; when it gives none (no JSON:
a firewall, a bot check, no network) the page has to tell: the app on the site, not /auth.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..base import Code, EngineError, HardError, TransientError
from ..unknown import FIRST_BYTES, Where
from ..unknown import unknown as mark_unknown
from .api import LOGIN_HINT, classify_api_error, is_logged_in_status
from .headers import NoHeaders, headers_for_call
from .page import evaluate, refusal_in
from .selectors import CURRENT
from .tokens import jwt_expiry

STATUS_PATH = "/api/v2/users/status"
SETTLE_PAUSE = 0.25  # between reads while the page is still on its way somewhere

# Never throws: a body that is not JSON comes back as text, a failed fetch as nothing. With no
# headers learned from the page's own calls (`headers` null) it asks the site nothing.
_LOGIN_STATE_JS = """
async ({statusPath, loginSelector, ms, headers}) => {
  const login = document.querySelector(loginSelector);
  const seen = {
    url: location.href,
    login_form: !!(login && (!login.checkVisibility || login.checkVisibility())),
  };
  if (!headers) return seen;
  try {
    const r = await fetch(statusPath, {credentials: 'include', headers, signal: AbortSignal.timeout(ms)});
    const body = await r.text();
    try { seen.json = JSON.parse(body); } catch (e) { seen.text = body.slice(0, 4000); }
  } catch (e) { /* no network, or no answer in time: the page has to tell */ }
  return seen;
}
"""
# How long the login check waits for the page's first API call to learn its headers from.
LEARN_WAIT_SECONDS = 5


@dataclass(frozen=True)
class LoginSeen:
    """One look at a page's login."""

    url: str = ""
    login_form: bool = False  # the sign-in form is shown
    status: bool | None = None  # what the site's status API says; None when it said nothing
    refusal: EngineError | None = None  # the status API answered with a firewall or bot check
    unknown: EngineError | None = None  # ... or with an answer nobody has seen (engines/unknown.py)

    @property
    def definite(self) -> bool:
        """The site answered, or the page is the sign-in page: reading again will not tell more."""
        return self.status is not None or "/auth" in self.url or self.login_form

    def logged_in(self, base_url: str) -> bool:
        """The site says so; or, when its API does not answer JSON, the page is the app, not /auth."""
        if self.status is not None:
            return self.status
        parts = urlsplit(self.url)
        same_site = f"{parts.scheme}://{parts.netloc}" == site_origin(base_url)
        return same_site and not parts.path.startswith("/auth") and not self.login_form

    def send_blocker(self) -> EngineError | None:
        """What must stop a send: the site says logged out, or asks for a bot check. Without an
        answer from the site the page's own signals (checked by the engine) have to do."""
        if self.refusal is not None:
            return self.refusal
        if self.unknown is not None:  # before the click: transient, tried again after a backoff
            return self.unknown
        if self.status is False:
            return HardError(f"not logged in to the chat site: {LOGIN_HINT}", code=Code.LOGGED_OUT)
        return None


def read_login_state(page: Any, timeout: float = 10) -> LoginSeen:
    """One read of the page and the site's status API (aborted after `timeout` seconds)."""
    try:
        headers = headers_for_call(page, wait=min(timeout, LEARN_WAIT_SECONDS))
    except NoHeaders:
        headers = None  # the page said nothing to the site yet: its own signals decide
    arg = {"statusPath": STATUS_PATH, "loginSelector": CURRENT.login, "ms": int(timeout * 1000)}
    seen = evaluate(page, _LOGIN_STATE_JS, {**arg, "headers": headers})
    refusal = unknown = None
    if "json" in seen:
        error = classify_api_error(seen["json"])
        refusal = error if error is not None and error.code == Code.BOT_CHECK else None
        unknown = error if error is not None and error.unknown is not None else None
        if error is None and is_logged_in_status(seen["json"]) is None:
            unknown = _unread_status(seen["json"])  # a field it needs missing or of another type
    elif "text" in seen:
        refusal = refusal_in(seen["text"])
    if unknown is not None:
        unknown.unknown = unknown.unknown.at(Where.LOGIN_CHECK)
    return LoginSeen(
        url=str(seen.get("url", "")),
        login_form=bool(seen.get("login_form")),
        status=is_logged_in_status(seen.get("json")),
        refusal=refusal,
        unknown=unknown,
    )


def _unread_status(body: Any) -> EngineError:
    """The login check answered as a success without the status it needs (`data`, true or false):
    before the click, a transient failure naming the field (engines/unknown.py)."""
    error = TransientError(
        f"the site's {STATUS_PATH} answered without its field data (true or false): the site changed",
        code=Code.MISSING_FIELD,
    )
    return mark_unknown(error, Where.LOGIN_CHECK, field="data", body=json.dumps(body)[:FIRST_BYTES])


def read_settled_login_state(page: Any, timeout: float) -> LoginSeen | None:
    """The first read that says something definite, or the last read when `timeout` runs out;
    None when the page never answered. Reads survive the page navigating under them."""
    from playwright.sync_api import Error as PlaywrightError

    deadline = time.monotonic() + timeout
    seen: LoginSeen | None = None
    while time.monotonic() < deadline:
        try:
            seen = read_login_state(page, timeout=min(timeout, 10))
        except PlaywrightError:
            seen = None  # navigating (a redirect to /auth): read the new page
        if seen is not None and seen.definite:
            break
        time.sleep(SETTLE_PAUSE)
    return seen


AUTHS_PATH = "/api/v1/auths/"

# What public clients do to renew: ask the site for the session user (it answers with a token
# and its expiry, fresh when the old one is near its end) and keep that token where the site's
# own frontend reads it. Never throws: a failure comes back as {problem} or {json}.
_RENEW_JS = """
async ({path, ms, headers}) => {
  const old = localStorage.getItem('token');
  let body;
  try {
    const r = await fetch(path, {credentials: 'include', headers, signal: AbortSignal.timeout(ms)});
    body = await r.text();
  } catch (e) { return {problem: 'no answer (' + e + ')'}; }
  let json;
  try { json = JSON.parse(body); } catch (e) { return {problem: 'an answer that is not JSON'}; }
  const data = json && typeof json.data === 'object' && json.data ? json.data : json;
  const token = data && typeof data.token === 'string' ? data.token : '';
  if (!token) return {json};
  if (token !== old) localStorage.setItem('token', token);
  return {token};
}
"""


@dataclass(frozen=True)
class Renewal:
    """What the site answered when asked for a renewed login token."""

    token: str | None = None  # the token it gave (now in the page's localStorage and cookie)
    problem: str | None = None  # why there is none, in words


def renew_login(page: Any, base_url: str, timeout: float = 10) -> Renewal:
    """Ask the site (from the page, as its own frontend does) for the session's token, fresh
    when the old one is near its end, and keep it in the page's localStorage and `token` cookie.
    Raises only Playwright's errors (the page or the browser went away)."""
    try:
        headers = headers_for_call(page, wait=min(timeout, LEARN_WAIT_SECONDS))
    except NoHeaders as err:
        return Renewal(problem=f"{AUTHS_PATH} not asked: {err}")
    seen = evaluate(page, _RENEW_JS, {"path": AUTHS_PATH, "ms": int(timeout * 1000), "headers": headers})
    token = seen.get("token")
    if not token:
        if "problem" in seen:
            return Renewal(problem=f"{AUTHS_PATH} gave {seen['problem']}")
        error = classify_api_error(seen.get("json"))
        return Renewal(problem=f"{AUTHS_PATH}: {error}" if error else f"{AUTHS_PATH} gave no token")
    _keep_token_cookie(page.context, base_url, token)
    return Renewal(token=token)


def _keep_token_cookie(context: Any, base_url: str, token: str) -> None:
    """The `token` cookie carries the renewed token too, when the site did not set it itself."""
    cookies = [c for c in context.cookies(base_url) if c.get("name") == "token"]
    stale = [c for c in cookies if c.get("value") != token]
    if cookies and len(stale) == len(cookies):
        expires = jwt_expiry(token)
        context.add_cookies(
            [{**c, "value": token, **({"expires": expires} if expires else {})} for c in stale]
        )


def site_origin(url: str) -> str:
    """scheme://host[:port] of a URL: what "the same site" compares."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
