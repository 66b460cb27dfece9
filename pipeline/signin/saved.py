"""A saved login (an account's storage state, mode 0600): how long it lasts, read from the file
without a browser (`status`, `doctor`), and how a browser's login is saved to it. Below the
commands and the runs alike: `login` saves one, the chat engine's refresh renews one, `status`
and `doctor` read when it ends.

The browser's own modules (engines.qwen.login) are imported where a browser is used: `status`
reads saved logins here and must not load them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..accounts import Account
from ..engines.qwen.tokens import token_expiry
from ..errors import SetupProblem
from ..files import atomic_write, read_bytes
from ..redact import Verbatim

MAX_LOGIN_FILE_BYTES = 16_000_000  # a storage state is a few kB; a browser's whole localStorage a few MB


def login_command(account: Account) -> str:
    """The command that signs this account in again."""
    return f"qwenpipe login --account {account.name}" if account.configured else "qwenpipe login"


def save_state(context: Any, path: Path, *, only_for: str | None = None) -> float | None:
    """Write the context's storage state to `path` (mode 0600; a new folder 0700); its token's expiry.

    `only_for` (a base URL) keeps just that site's cookies and storage: a user's own browser
    holds the logins of every site they use, and those have no business in our file.
    """
    path = Path(path)
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    atomic_write(path, Verbatim(json.dumps(context_state(context, only_for), indent=1)), mode=0o600)
    return state_token_expiry(path)


def context_state(context: Any, only_for: str | None = None) -> dict:
    """The context's storage state; with `only_for` (a base URL) just that site's part."""
    from ..engines.qwen.login import site_origin

    state = context.storage_state()
    if only_for:
        host = urlsplit(only_for).hostname or ""
        state = {
            "cookies": [c for c in state.get("cookies", []) if domain_matches(c.get("domain", ""), host)],
            "origins": [o for o in state.get("origins", []) if o.get("origin") == site_origin(only_for)],
        }
    return state


def state_token_expiry(state_path: Path) -> float | None:
    """When the login saved in a storage-state file expires: its session (the `token` cookie),
    else the latest token in its localStorage (tokens.token_expiry).

    Read from the file, so `status` can warn days ahead without starting a browser; None for a
    file that cannot be read or holds no readable token, whatever it contains.
    """
    if not Path(state_path).is_file():
        return None  # missing, a folder, or a FIFO that would block the read forever
    try:
        # Bounded as an import is (TooLarge is a SetupProblem): a FIFO never hangs `status`.
        state = json.loads(read_bytes(state_path, follow=True, limit=MAX_LOGIN_FILE_BYTES))
    except (OSError, ValueError, RecursionError, SetupProblem):  # RecursionError: [[[[... too deep
        return None
    return token_expiry(state)


def domain_matches(domain: str, host: str) -> bool:
    domain = domain.lstrip(".").lower()
    return bool(domain) and (host == domain or host.endswith("." + domain))
