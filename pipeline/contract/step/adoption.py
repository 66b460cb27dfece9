"""Which chat an interrupted send made: the rule a recovery by the prompt's text follows (pure,
but for the listing of the other articles' chats)."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from ...engines.base import FoundChat
from ...store.protocol import DEFAULT_ACCOUNT
from ..article import ArticleFiles

RECOVERY_CLOCK_SLACK = 10.0  # s: the site's clock (chat creation times) may run this far behind ours


def chats_of_other_articles(article: ArticleFiles) -> dict[str, str]:
    """Chat path (`/c/<id>`) -> slug, for every other article's `.md.url` in its folder."""
    named: dict[str, str] = {}
    try:
        with os.scandir(article.folder) as entries:
            sidecars = [e for e in entries if e.name.endswith(".md.url") and e.name != article.url.name]
    except OSError:
        return named
    for entry in sidecars:
        if not entry.is_file(follow_symlinks=False):
            continue  # never open what is not a plain file (a FIFO would hang)
        try:
            with open(entry.path, "rb") as handle:
                text = handle.read(4096).decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.split():
            named[urlparse(line).path.rstrip("/")] = entry.name[: -len(".md.url")]
    return named


def chats_in_batch(store, slug: str) -> dict[str, str]:
    """Chat path -> slug for every other article's sent chat in a shared batch's store."""
    return {
        urlparse(send.chat_url).path.rstrip("/"): send.slug
        for send in store.sends()
        if send.chat_url and send.slug != slug
    }


def adoptable_chat(
    found: list[FoundChat],
    marker: dict | None,
    prompt_sha256: str,
    taken: dict[str, str],
    account: str = DEFAULT_ACCOUNT,
) -> tuple[str | None, str]:
    """(url, "") for the one chat an interrupted send made, else (None, why it is in doubt).

    A chat is this article's only if its first message is the prompt (`found` holds only such
    chats), the site made it after the intent marker was written (less RECOVERY_CLOCK_SLACK),
    and no other article's `.md.url` names it, and the marker names `account`, whose chat list
    `found` is; and only if exactly one chat passes and none
    is undecidable (a chat whose creation time the site does not give). Two articles with the
    same text, or two workspaces on one account, must never share a chat: a second send costs
    one prompt, a shared chat costs an article.
    """
    since = marker.get("time") if marker else None
    if not isinstance(since, (int, float)) or isinstance(since, bool):
        return None, "the intent marker does not say when the send was attempted"
    if marker.get("prompt_sha256") != prompt_sha256:
        return None, "the prompt changed since the interrupted send (or the marker does not say)"
    if (marker.get("account") or DEFAULT_ACCOUNT) != account:  # `found` is `account`'s chat list
        return None, f"the interrupted send went to account {marker.get('account')!r}, not {account!r}"
    ours, unknown, others = [], [], []
    for chat in found:
        owner = taken.get(urlparse(chat.url).path.rstrip("/"))
        if owner:
            others.append(f"{chat.url} is {owner}'s")
        elif chat.created is None:
            unknown.append(chat.url)
        elif chat.created < since - RECOVERY_CLOCK_SLACK:
            others.append(f"{chat.url} was made {since - chat.created:.0f} s before this send")
        else:
            ours.append(chat.url)
    if unknown:
        return None, f"the site does not say when {_few(unknown)} was made"
    if len(ours) > 1:
        return None, f"{len(ours)} chats made since the interrupted send hold this prompt: {_few(ours)}"
    if not ours:
        return None, f"the chats that hold this prompt are other sends': {_few(others)}"
    return ours[0], ""


def _few(items: list[str]) -> str:
    return "; ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")
