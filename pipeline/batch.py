"""The whole batch at a glance: every article's phase from one scan of the folders.

Read-only: no lock is taken, nothing is written. `cycle` uses it to decide who needs what,
`status` to draw the dashboard. Each folder is listed once (os.scandir); per-article state
files are read only for unfinished articles.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import files
from .article import ArticleFiles, ArticleState
from .errors import SetupProblem
from .prompts import SLUG_RE

# Phases, in the order an article moves through them.
PENDING = "pending"  # prompt, nothing sent
SENDING = "sending"  # intent marker, no URL: a send was interrupted (recovery will look first)
SENT = "sent"  # URL on disk: the chat is generating (or done and not yet collected)
DONE = "done"
DEAD = "dead"  # SLUG.md.failed: skipped until `qwenpipe replay`
ORPHAN = "orphan"  # files in articles/ without a prompt (prompt deleted or renamed)
INVALID = "invalid"  # one of its files is a symlink, a FIFO or a folder: `problem` says which


@dataclass
class ArticleView:
    slug: str
    files: ArticleFiles
    prompt_mtime: float | None = None
    done: bool = False
    sent: bool = False
    sending: bool = False
    dead: bool = False
    done_mtime: float | None = None
    problem: str = ""  # why the article is INVALID (what is wrong and the fix)
    _state: ArticleState | None = field(default=None, repr=False)

    @property
    def phase(self) -> str:
        if self.problem:
            return INVALID
        if self.done:
            return DONE
        if self.dead:
            return DEAD
        if self.prompt_mtime is None:
            return ORPHAN
        if self.sent:
            return SENT
        if self.sending:
            return SENDING
        return PENDING

    @property
    def state(self) -> ArticleState:
        if self._state is None:
            try:
                self._state = ArticleState.load(self.files.state)
            except SetupProblem as problem:  # a FIFO or a link in its place: this article only
                self.problem = self.problem or str(problem)
                self._state = ArticleState()
        return self._state


SUFFIXES = (".md.url", ".md.sending", ".md.failed", ".md.rejected", ".md")


def scan(prompts_dir: Path, articles_dir: Path) -> list[ArticleView]:
    """Every article known from prompts/ or articles/, sorted oldest prompt first, then by slug."""
    views: dict[str, ArticleView] = {}

    def view(slug: str) -> ArticleView:
        if slug not in views:
            views[slug] = ArticleView(slug, ArticleFiles(slug, articles_dir))
        return views[slug]

    for entry in _entries(prompts_dir):
        if entry.name.endswith(".md") and SLUG_RE.fullmatch(entry.name[:-3]) and entry.is_file():
            view(entry.name[:-3]).prompt_mtime = entry.stat().st_mtime
    for entry in _entries(articles_dir):
        name = entry.name
        for suffix in SUFFIXES:
            if name.endswith(suffix):
                slug = name[: -len(suffix)]
                if not SLUG_RE.fullmatch(slug):
                    break
                if not entry.is_file(follow_symlinks=False):  # a dangling link must not stop the batch
                    item = view(slug)
                    item.problem = item.problem or _problem(entry)
                    break
                if suffix == ".md.rejected":
                    break
                item = view(slug)
                if suffix == ".md":
                    item.done = True
                    item.done_mtime = entry.stat(follow_symlinks=False).st_mtime
                elif suffix == ".md.url":
                    item.sent = True
                elif suffix == ".md.sending":
                    item.sending = True
                else:
                    item.dead = True
                break
    return sorted(views.values(), key=lambda v: (v.prompt_mtime or 0.0, v.slug))


def _problem(entry: os.DirEntry) -> str:
    try:
        kind = files.kind_of(entry.stat(follow_symlinks=False).st_mode)
    except OSError:
        kind = "not a regular file"
    return str(files.UnsafeFile(entry.path, kind))


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as err:  # a folder this user may not read: say so, not "internal error"
        raise files.cannot("list", folder, err, folder) from None
