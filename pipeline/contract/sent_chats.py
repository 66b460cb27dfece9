"""The chats an account's first sends made, recorded with the account's browser profile, where
every workspace that uses that account (its profile and saved login) finds them: one small file
per chat, `<profile_dir>/qwenpipe-chats/<chat id>`, naming the articles folder and the slug.

A workspace's own `.md.url` files and store tell its own articles' chats apart; this record is
what tells it the chats of another workspace on the same account, so that the recovery of an
interrupted send never adopts one of those because it holds the same text (adoption.py).
Two workspaces with copies of one login in different profiles share nothing but the site:
they are told apart only by when a chat was made (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from urllib.parse import urlparse

from .. import files
from ..accounts import account_named
from ..config import Config
from ..redact import Verbatim

FOLDER = "qwenpipe-chats"
MAX_RECORD = 4096


def _folder(config: Config, account: str) -> Path:
    """The account's record folder; UnsafeFile when something other than a real folder is there
    (a symlink would send the records elsewhere)."""
    folder = account_named(config, account).profile_dir / FOLDER
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return folder
    except OSError as err:
        raise files.cannot("read the folder", folder, err) from None
    if not stat.S_ISDIR(mode):
        raise files.UnsafeFile(folder, files.kind_of(mode), "a folder")
    return folder


def record(config: Config, account: str, url: str, articles: Path, slug: str) -> None:
    """Record that `slug` of the workspace at `articles` sent into the chat at `url` (a checked
    chat URL) from `account`: written whole or not at all, never over another article's record
    of the same chat."""
    chat_id = urlparse(url).path.rstrip("/").rpartition("/c/")[2]
    if not chat_id or "/" in chat_id or chat_id.startswith("."):
        return  # not a chat's URL
    # Names, written as they are (as the intent marker's): the reader compares them with its own.
    data = Verbatim(json.dumps({"articles": str(articles), "slug": slug}) + "\n")
    files.create_new(_folder(config, account) / chat_id, data, mode=files.PRIVATE)


def others(config: Config, account: str, articles: Path, slug: str) -> dict[str, str]:
    """Chat path (`/c/<id>`) -> who sent it, for every chat `account`'s record names that is
    not this article's (`slug` in the workspace at `articles`)."""
    named: dict[str, str] = {}
    try:
        folder = _folder(config, account)
    except files.SetupProblem:
        return named  # not a folder of records: none to read (a send refuses to write there)
    try:
        with os.scandir(folder) as entries:
            found = [e for e in entries if e.is_file(follow_symlinks=False)]
    except OSError:
        return named
    for entry in found:
        try:
            with open(entry.path, "rb") as handle:
                data = json.loads(handle.read(MAX_RECORD))
        except (OSError, ValueError):
            data = None  # unreadable: still a chat some send made
        who = data if isinstance(data, dict) else {}
        if who.get("articles") == str(articles) and who.get("slug") == slug:
            continue  # this article's own
        where = who.get("articles")
        named[f"/c/{entry.name}"] = (
            f"{who.get('slug', '?')} (in {where})" if isinstance(where, str) else "another workspace"
        )
    return named
