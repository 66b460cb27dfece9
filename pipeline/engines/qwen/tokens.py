"""The site's login token in a saved storage state: where it is and when it expires.

Pure reading of what was already parsed (no browser, no file): `status` warns days ahead
from the file alone, and the login and the engine read the same way.
"""

from __future__ import annotations

import json
from binascii import a2b_base64  # base64's own decoder, without base64's imports (status reads tokens)
from typing import Any


def listed(table: Any, key: str) -> list:
    """`table[key]` when `table` is an object and that is a list, else []: a saved state may have
    been edited by hand, and reading it must never raise."""
    value = table.get(key) if isinstance(table, dict) else None
    return value if isinstance(value, list) else []


def local_storage(origin: Any) -> list[dict]:
    """An origin's localStorage entries that are {"name": str, "value": str} pairs."""
    return [
        i
        for i in listed(origin, "localStorage")
        if isinstance(i, dict) and isinstance(i.get("name"), str) and isinstance(i.get("value"), str)
    ]


def state_tokens(state: Any) -> list[str]:
    """The login `token` values of a storage state (its cookies and localStorage), whatever the
    shape of what was read: a malformed state has fewer tokens, never an exception."""
    found = [
        c["value"]
        for c in listed(state, "cookies")
        if isinstance(c, dict) and c.get("name") == "token" and isinstance(c.get("value"), str)
    ]
    for origin in listed(state, "origins"):
        found += [i["value"] for i in local_storage(origin) if i["name"] == "token"]
    return [token for token in found if token]


# The latest time a saved expiry may name (1 Jan 3000): beyond it a date cannot be shown or
# compared with a clock (1e30 overflows), so it is not an expiry but a broken or forged token.
LATEST_EXPIRY = 32503680000.0


def plausible_time(value: Any) -> bool:
    """Whether `value` is an epoch time a login can expire at: a finite number, 0 to LATEST_EXPIRY."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= LATEST_EXPIRY


_FROM_URLSAFE = str.maketrans("-_", "+/")


def jwt_exp_claim(token: str) -> Any:
    """The raw `exp` claim of a JWT such as the site's login token; None when unreadable."""
    try:
        payload = token.split(".")[1]
        # base64.urlsafe_b64decode, as that module does it
        claims = json.loads(a2b_base64(payload.translate(_FROM_URLSAFE) + "=" * (-len(payload) % 4)))
        return claims.get("exp") if isinstance(claims, dict) else None
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def jwt_expiry(token: str) -> float | None:
    """The `exp` (epoch seconds) of a JWT, None when unreadable or not a plausible time."""
    exp = jwt_exp_claim(token)
    return float(exp) if plausible_time(exp) else None


def session_expiry(state: Any) -> float | None:
    """When the session a storage state holds ends: its `token` cookie's (the JWT's `exp`, else
    the cookie's own expiry); None when it holds no such cookie, whatever its shape. Each renewal
    hands back a new session that ends later: the later of two is the newer."""
    found = []
    for cookie in listed(state, "cookies"):
        if not (isinstance(cookie, dict) and cookie.get("name") == "token" and cookie.get("value")):
            continue
        exp = jwt_expiry(cookie["value"]) if isinstance(cookie["value"], str) else None
        expires = cookie.get("expires")
        if exp is None and plausible_time(expires) and expires > 0:  # -1: ends with the browser
            exp = float(expires)
        if exp is not None:
            found.append(exp)
    return max(found) if found else None


def token_expiry(state: Any) -> float | None:
    """When the login in a storage state (already parsed) expires: the session it holds (its
    `token` cookie), not the access token of a few minutes the page keeps in localStorage
    (docs/qwen-site.md, "Login"); a state without that cookie: its latest readable `token`.
    None when it holds none, whatever its shape."""
    session = session_expiry(state)
    if session is not None:
        return session
    expiries = [e for e in (jwt_expiry(t) for t in state_tokens(state)) if e is not None]
    return max(expiries) if expiries else None
