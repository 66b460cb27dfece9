"""Dead-man's-switch pings (healthchecks.io / Cronitor style): `/start`, then the exit code.

A ping is a courtesy to the user's monitoring: it never fails, slows or blocks a cycle for long.
"""

from __future__ import annotations

from collections.abc import Callable

PING_TIMEOUT = 5.0


def ping(url: str, suffix: str, *, say: Callable[[str], None] = lambda _m: None) -> bool:
    """GET `url/suffix`; True when the monitor answered 2xx. Failures are reported, never raised."""
    if not url:
        return False
    import httpx

    target = f"{url.rstrip('/')}/{suffix}"
    try:
        response = httpx.get(target, timeout=PING_TIMEOUT, follow_redirects=True)
    except httpx.HTTPError as err:
        say(f"notify: ping {suffix} failed ({type(err).__name__}); the cycle goes on")
        return False
    if response.status_code >= 300:
        say(f"notify: ping {suffix} answered HTTP {response.status_code}; the cycle goes on")
        return False
    return True
