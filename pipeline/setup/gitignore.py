"""`qwenpipe init`'s .gitignore: what must never go into the site's repository.

The README's Hugo layout keeps the project inside the site's repository; `.qwenpipe/` holds the
saved chat login (browser.storage_state, the profile) and, under articles/, the store and the
locks, and the cron line's log grows without end. A .gitignore beside config.toml names them.
"""

from __future__ import annotations

from pathlib import Path

from .. import files
from .cron import CRON_LOG

IGNORED = (".qwenpipe/", CRON_LOG)  # a pattern without a leading / matches at any depth
HEADER = "# qwenpipe: the saved login, the store and locks, and the cron log stay out of git"


def ensure_gitignore(folder: Path) -> str | None:
    """Write (or add to) `folder`/.gitignore so that it names IGNORED; what was done, in words,
    or None when it named them already. Lines already there are kept as they are."""
    path = folder / ".gitignore"
    try:
        text = files.read_bytes(path).decode("utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    present = {line.strip() for line in text.splitlines()}
    missing = [pattern for pattern in IGNORED if pattern not in present and f"/{pattern}" not in present]
    if not missing:
        return None
    lead = text if not text or text.endswith("\n") else text + "\n"
    files.atomic_write(path, lead + "\n".join([HEADER, *missing]) + "\n", mode=files.SHARED)
    return f"{'added to' if text else 'wrote'} {path}: {', '.join(missing)}"
