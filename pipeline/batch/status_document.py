"""The articles of `status --json`, kept whole in the store and shown again while nothing they
were made from changed: a warm status over 100,000 articles lists no folder and reads no kept
row; it compares a few stamps and writes the text it kept.

Kept (the store's meta value `status_document`): the rows' text, with a hole where each time
goes (an age, counted to now; a next try, written in the local time of the look), and what the
rows were made from. Shown again only when each of these is as it was:
- the folders the rows were listed from, prompts/, articles/ and .qwenpipe's locks/ and state/
  (inode, mtime and ctime in nanoseconds, taken before the listing): a file added, removed,
  renamed, replaced or made a link in one of them changes its folder's;
- each file whose content a row reads (status_cache.read_entries: an unfinished article's
  prompt, the chat URL of one generating, an intent marker): inode, size, mtime and ctime,
  taken before it was read. An edit in place changes these, never its folder's; a done
  article's files are never read, so an edit of them changes nothing shown;
- the store's generation (Store.status_generation): every write of an article's rows raises it
  (a cycle's own start and end do not);
- the limits its rows' phases were decided by (today's sends, quota blocks, accounts turned
  off), worked out afresh at every status;
- the settings and this code's version (status_cache.context_key);
- the clock: at or after the time it was made, before the first `until` of its rows.

Not kept when one of these cannot be trusted: a folder or a file changed less than
status_cache.RACY seconds before the look, a prompt that is a symbolic link (what it points to
changes while prompts/ does not), a shared batch (other hosts' rows), text the store would mask.
Only the plain `status --json` (every article, sorted by state) is kept.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, NamedTuple

from ..redact import password_hinted
from . import status_cache

if TYPE_CHECKING:
    from ..contract.workspace import Workspace
    from ..store.protocol import StatusRow
    from .scan import ArticleView

META_KEY = "status_document"
FORMAT = "4"  # raise when what a kept document holds changes
HOLE = "\x1f"  # never in JSON text: json writes every control character escaped
AGE, NEXT_TRY = "a", "n"
MISSING = ""  # the stamp of a folder that is not there


def folders(workspace: Workspace) -> list[str]:
    """The folders a status lists (batch.scan, batch.attach_unsafe)."""
    state = workspace.state_dir
    return [
        str(workspace.prompts_dir),
        str(workspace.articles_dir),
        str(state / "locks"),
        str(state / "state"),
    ]


def folder_stamps(workspace: Workspace) -> list[str]:
    """Each folder's inode, mtime and ctime, taken before it is listed."""
    stamps = []
    for folder in folders(workspace):
        try:
            info = os.stat(folder)
        except OSError:
            stamps.append(MISSING)
        else:
            stamps.append(f"{info.st_ino}:{info.st_mtime_ns}:{info.st_ctime_ns}")
    return stamps


def _racy(stamp: str, now: float) -> bool:
    if stamp == MISSING:
        return False
    _, mtime, ctime = stamp.split(":")
    return max(int(mtime), int(ctime)) / 1e9 >= now - status_cache.RACY


class Document(NamedTuple):
    made: float  # the time of the look that made it
    until: float  # the first of its rows' `until`
    generation: int
    context: str  # status_cache.context_key
    folders: list[str]  # folder_stamps
    sidecars: list[str]  # the chat URL files and intent markers the rows read (never links)
    prompts: list[str]  # the prompts they read (their links followed, as the scan does)
    stamps: str  # status_cache.files_stamp of them all, sidecars first
    limits: list[list]  # [account, sent, limits key] of each row's limits
    count: int  # its rows
    totals: dict[str, int]
    invalid: list[str]  # the invalid articles' problems (BatchStatus.invalid)
    holes: str  # AGE or NEXT_TRY, one a hole of `text`
    values: list[float]  # each hole's time: when the age counts from; the next try
    hinted: bool  # redact.password_hinted(text): shown, it is looked at again for a password
    text: str  # the rows of `status --json`'s "articles", between its brackets

    def dumps(self) -> str:
        head = {"format": FORMAT, **self._asdict()}
        del head["text"]
        return json.dumps(head, ensure_ascii=False, allow_nan=True) + "\n" + self.text

    @classmethod
    def loads(cls, value: str) -> Document | None:
        head, _, text = value.partition("\n")
        try:
            fields = json.loads(head)
            if fields.pop("format", None) != FORMAT:
                return None
            document = cls(**fields, text=text)
        except (ValueError, TypeError):
            return None
        whole = len(document.holes) == len(document.values) == text.count(HOLE)
        return document if whole and isinstance(document.stamps, str) else None


def read(store) -> Document | None:
    value = store.meta(META_KEY)
    return Document.loads(value) if value else None


def holds(document: Document, now: float, generation: int, stamps: list[str], context: Any) -> bool:
    """Whether what `document` was made from is as it was (see the module's words). `context`:
    status.RowContext, which works out the limits afresh."""
    if not (document.made <= now < document.until) or document.generation != generation:
        return False
    if document.folders != stamps or document.context != context.cache_key:
        return False
    for account, sent, key in document.limits:
        if context.limits_key(context.limits_of(account, sent, 0.0)) != key:
            return False
    try:  # a file gone since: changed
        infos = [*map(os.lstat, document.sidecars), *map(os.stat, document.prompts)]
    except OSError:
        return False
    return status_cache.files_stamp(infos) == document.stamps


class ShownRow(NamedTuple):
    """One row as made by this status, and what keeping it needs."""

    row: Any  # status.Row (this module is status's: it imports none of it)
    kept: StatusRow | None  # what the store keeps of it (None: a file too recent to trust)
    view: ArticleView


def made(
    rows: list[ShownRow],
    generation: int,
    stamps: list[str],
    context: Any,
    links: list[str],
    totals,
    invalid,
) -> Document | None:
    """The document of these rows (sorted as shown), or None when it cannot be kept."""
    now = context.now
    if links or any(_racy(stamp, now) for stamp in stamps):
        return None
    sidecars, prompts, sidecar_infos, prompt_infos = [], [], [], []
    limits, holes, values, texts = {}, [], [], []
    until = status_cache.FOREVER
    for row, kept, view in rows:
        if kept is None:
            return None
        until = min(until, kept.until)
        if kept.limits != status_cache.NO_LIMITS:
            limits[kept.account, view.sent or view.sending] = kept.limits
        url, marker, waiting = status_cache.read_entries(view)
        try:
            for entry in (url, marker):
                if entry is not None:
                    sidecar_infos.append(entry.stat(follow_symlinks=False))
                    sidecars.append(entry.path)
        except OSError:
            return None
        if waiting and view._prompt_entry is not None:
            info = view._prompt_info
            if info is None:
                return None
            prompts.append(view._prompt_entry.path)
            prompt_infos.append(info)
        age = next_try = None
        if row.age_seconds is not None:
            age = HOLE
            holes.append(AGE)
            values.append(kept.sent_at)
        if row.next_try is not None:
            next_try = HOLE
            holes.append(NEXT_TRY)
            values.append(row.next_try)
        texts.append(row.json_text(age, next_try))
    if until <= now:
        return None
    text = ", ".join(texts)  # its holes hold numbers and dates: no hint is made or broken there
    return Document(
        now,
        until,
        generation,
        context.cache_key,
        stamps,
        sidecars,
        prompts,
        status_cache.files_stamp(sidecar_infos + prompt_infos),
        [[account, sent, key] for (account, sent), key in limits.items()],
        len(texts),
        dict(totals),
        list(invalid),
        "".join(holes),
        values,
        password_hinted(text),
        text,
    )
