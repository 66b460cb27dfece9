"""What `status` shows of each article, kept in the store (its status_rows) and shown again
while nothing it was made from has changed: a status reads what changed, not everything.

A kept row is shown again only when each of these is as it was when the row was made:
- its files as the listing sees them (`files_key`): which of prompts/SLUG.md, SLUG.md,
  SLUG.md.url, SLUG.md.sending and SLUG.md.failed exist, what is wrong with any of them, and,
  for each file whose content its row reads (the chat URL file of an article its files say is
  generating, the intent marker, an unfinished article's prompt), its inode, size, mtime and
  ctime in nanoseconds;
- its rows in the store: `status_changes.n`, which the store's own triggers raise on every
  write of the article's articles, summaries and sends rows (store/tables.py), whoever writes;
- the limits its phase was decided by (`limits_key`), worked out afresh at every status;
- the workspace's settings and this code's version (`context_key`);
- the clock: before `until` (when its backoff ends; never, for a finished article).

A file changed less than RACY seconds before it was looked at is not kept: a second edit of the
same size within its timestamps' tick would leave the same stamp. What this cannot see is
written in docs/status.md ("How status stays fast").
"""

from __future__ import annotations

import os
from _blake2 import blake2b  # hashlib's own; hashlib itself loads OpenSSL: ~3 ms of start-up
from array import array
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .. import __version__
from ..contract.phases import MAX_BACKOFF, backoff_delay
from ..store.protocol import StatusRow

if TYPE_CHECKING:
    from ..contract.phases import Limits
    from ..contract.workspace import Workspace
    from .scan import ArticleView

RACY = 2.0  # seconds: a file changed this recently may change again with the same stamp
FOREVER = float("inf")
NO_LIMITS = "-"  # a row its limits cannot change (done, dead, orphan, invalid)
NO_ENTRY = ""
CACHE_VERSION = "1"  # raise when what a kept row means changes: every kept row is made again


def digest(text: str) -> str:
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def context_key(workspace: Workspace, shared: bool) -> str:
    """The settings every row is made under: a change makes every row again (once)."""
    config = workspace.config
    return digest(
        repr(
            (
                CACHE_VERSION,
                __version__,
                str(workspace.articles_dir),
                str(workspace.prompts_dir),
                shared,
                config.qwen,
                config.accounts,
                config.store,
                config.router.enabled,
            )
        )
    )


def limits_key(limits: Limits) -> str:
    """What of the limits a row's phase and words depend on (not the day's send count itself:
    only whether it stops the sends)."""
    return digest(repr((limits.sends_stopped, limits.account_off, limits.orphaned)))


def stamp(info: os.stat_result) -> str:
    """What identifies this version of a file: an edit in place changes its size or its times
    (its ctime even when a tool puts its mtime back), a file put in its place its inode."""
    return f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


def files_stamp(infos: list[os.stat_result]) -> str:
    """One stamp of several files, in order: a digest of each one's `stamp` fields (the same
    four numbers), packed as machine integers. Over 8,500 files a warm status compares, this is
    a third of the cost of their `stamp` strings, and one value to keep instead of 8,500."""
    sizes = array("Q", [n for info in infos for n in (info.st_ino, info.st_size)])  # never negative
    times = array("q", [n for info in infos for n in (info.st_mtime_ns, info.st_ctime_ns)])
    return blake2b(sizes.tobytes() + times.tobytes(), digest_size=16).hexdigest()


def _stamp(info: os.stat_result, racy: float) -> str | None:
    if info.st_ctime >= racy or info.st_mtime >= racy:
        return None
    return stamp(info)


FLAGS = tuple(str(flags) for flags in range(32))  # files_key's first part, made once


def read_entries(view: ArticleView) -> tuple[os.DirEntry | None, os.DirEntry | None, bool]:
    """The files whose content its row reads, as listed: the chat URL of an article whose files
    say it is generating (not done, not dead, its prompt there); the marker (its account); and
    whether its prompt is read (one not done: its check). A done article's SLUG.md.url is never
    read."""
    waiting = not view.done
    url = view._url_entry if waiting and view.prompt_mtime is not None and not view.dead else None
    return url, view._sending_entry, waiting


def files_key(view: ArticleView, now: float) -> str | None:
    """The article's files as this listing saw them (see the module's words); None when one of
    them changed too recently for its stamp to be trusted (or vanished since the listing): its
    row is made afresh and not kept."""
    key = FLAGS[
        (view.prompt_mtime is not None) | view.done << 1 | view.sent << 2 | view.sending << 3 | view.dead << 4
    ]
    racy = now - RACY
    url, marker, waiting = read_entries(view)
    if url is None and marker is None:  # most articles: no stamp to take here
        key += "||"
    else:
        try:
            for entry in (url, marker):
                if entry is None:
                    key += "|"
                else:
                    stamp = _stamp(entry.stat(follow_symlinks=False), racy)
                    if stamp is None:
                        return None
                    key += "|" + stamp
        except OSError:
            return None
    if waiting and view._prompt_entry is not None:
        info = view._prompt_info
        stamp = _stamp(info, racy) if info is not None else None
        if stamp is None:
            return None
        key += "|" + stamp
    problems = view.file_problem or view.problem or view._state_problem
    if problems:
        key += "|" + digest(f"{view.file_problem}\0{view.problem}\0{view._state_problem}")
    return key


def within_wait(kept: StatusRow, now: float, qwen) -> bool:
    """The kept row's next try is no further ahead than its own wait. A farther one means the
    clock went back since it was made: phases.schedule pulls that time in, so the row is made
    afresh."""
    if kept.until == FOREVER:
        return True
    longest = backoff_delay(qwen, kept.attempts) if kept.attempts else MAX_BACKOFF
    return kept.until <= now + longest


class KeptRows:
    """The rows a store kept, and whether each may be shown again."""

    def __init__(self, rows: Mapping[str, StatusRow], changes: Mapping[str, int], context: str):
        self.rows, self.changes, self.context = rows, changes, context

    @classmethod
    def read(cls, store, context: str) -> KeptRows:
        changes = store.status_changes()  # before the rows: a write between the two is seen next time
        return cls(store.status_rows(), changes, context)

    def usable(self, slug: str, files: str | None, now: float) -> StatusRow | None:
        """The kept row of `slug` when its files, its store rows, the settings and the clock
        are as they were (its limits are the caller's to compare); else None."""
        kept = self.rows.get(slug)
        if (
            kept is None
            or files is None
            or kept.files != files
            or kept.change != self.changes.get(slug, 0)
            or kept.context != self.context
            or kept.until <= now
        ):
            return None
        return kept

    def gone(self, slugs: set[str]) -> list[str]:
        """The kept rows' slugs that are no longer in the batch."""
        return [slug for slug in self.rows if slug not in slugs]
