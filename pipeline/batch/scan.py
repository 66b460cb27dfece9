"""The whole batch at a glance: every article's phase from one scan of the folders.

Read-only: no lock is taken, nothing is written. `cycle` uses it to decide who needs what,
`status` to draw the dashboard. Each folder is listed once (os.scandir); per-article state
files are read only for unfinished articles.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .. import __version__, files
from ..contract.article import ArticleFiles, ArticleState
from ..contract.phases import Files, Phase, phase_of
from ..errors import UsageProblem
from ..store.protocol import ArticleRecord, PromptCheck


@functools.cache
def no_record() -> ArticleRecord:
    """The record of an article the store has none of: made on first need, as ArticleRecord
    itself (records.py: a warm `status` makes neither)."""
    return ArticleRecord()


_new_tuple = tuple.__new__


class ArticleView:
    """One article as one scan of the folders saw it. A plain class with slots, not a
    dataclass: a scan makes 10,000 of them, and each costs a third of a dataclass's memory."""

    __slots__ = (
        "slug",
        "_folder",
        "prompt_mtime",
        "done",
        "sent",
        "sending",
        "dead",
        "problem",
        "file_problem",
        "_state",
        "_state_problem",
        "_record",
        "_attached",
        "_done_entry",
        "_prompt_entry",
        "_url_entry",
        "_sending_entry",
        "_files",
    )

    def __init__(self, slug: str, folder: Path):
        self.slug, self._folder = slug, folder
        self.prompt_mtime: float | None = None  # None: no prompt file
        self.done = self.sent = self.sending = self.dead = False
        self.problem: str | None = None  # why the prompt is invalid (names the file and the fix)
        self.file_problem: str | None = None  # one of its own files is unsafe: wins even over "done"
        self._state: ArticleState | None = None
        self._state_problem = ""  # its old state file is a link or a FIFO
        self._record: Any = None  # its store record, when attach_records gave one
        self._attached = False  # attach_records ran: `record` is the store's
        self._done_entry: os.DirEntry | None = None  # SLUG.md, as listed
        self._prompt_entry: os.DirEntry | None = None  # prompts/SLUG.md, as listed (stat when asked)
        self._url_entry: os.DirEntry | None = None  # SLUG.md.url, as listed (status stamps it)
        self._sending_entry: os.DirEntry | None = None  # SLUG.md.sending, as listed
        self._files: ArticleFiles | None = None

    def __repr__(self) -> str:
        return f"ArticleView({self.slug!r}, {self.phase.value})"

    @property
    def files(self) -> ArticleFiles:
        if self._files is None:
            self._files = ArticleFiles(self.slug, self._folder)
        return self._files

    @property
    def sending_file(self) -> str:
        """ArticleFiles.sending_file, for rotation.sender_of: it asks only where the listing saw
        a marker, so the view's files are built only for those articles."""
        return self.files.sending_file

    @property
    def record(self) -> ArticleRecord:
        """Its record, to read (status, the plan): the store's as attached, without the working
        copy `state` builds; `state` where there is no attached record or its old state file
        is unsafe (which makes this article alone invalid)."""
        if self._attached and self._state is None and not self._state_problem:
            return self._record or no_record()
        return self.state

    @property
    def _prompt_info(self) -> os.stat_result | None:
        entry = self._prompt_entry
        if entry is None:
            return None
        try:
            return entry.stat()  # cached by the DirEntry: one stat at most
        except OSError:  # gone since the listing
            return None

    @property
    def prompt_stamp(self) -> str:
        """What identifies this version of the prompt file (see PromptCheck); "" when unknown.
        Its ctime too: an edit that kept the size and put the mtime back (os.utime, a tool that
        preserves times, an edit within the mtime's tick) still changes the ctime."""
        info = self._prompt_info
        if info is None:
            return ""
        return f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{__version__}"

    @property
    def done_mtime(self) -> float | None:
        """SLUG.md's mtime, read when first asked (publishing asks; nothing else needs it)."""
        if self._done_entry is None:
            return None
        try:
            return self._done_entry.stat(follow_symlinks=False).st_mtime
        except OSError:  # gone since the listing: as if never published
            return None

    def seen(self) -> Files:
        """Its files, as the scan saw them (what phases.decide takes). A method, not a property,
        and built as the tuple it is (Files' fields in order): Python 3.11 calls a property, and
        the named tuple's own __new__, the slow way, and a plan asks this of every article."""
        return _new_tuple(
            Files,
            (
                self.prompt_mtime is not None,
                self.done,
                self.sent,
                self.sending,
                self.dead,
                self.file_problem or "",
                self.problem or "",
            ),
        )

    @property
    def phase(self) -> Phase:
        """The phase its files alone show (its record, the quota and the time not considered)."""
        return phase_of(self.seen())

    @property
    def state(self) -> ArticleState:
        if self._state_problem:  # this article alone is invalid; asked only of one not settled
            self.file_problem = self.file_problem or self._state_problem
            self._state_problem, self._state = "", ArticleState()
        if self._state is None:  # its record as attach_records gave it (none without: a fresh one)
            record = self._record
            self._state = ArticleState.from_record(record) if record is not None else ArticleState()
        return self._state

    def check_prompt(self, prompts_dir: Path, max_request_bytes: int) -> bool:
        """Load the prompt once to learn whether it could be sent; False (and `problem` set) when
        it never could: it does not load, or a turn's chat request would be over
        `max_request_bytes` (qwen.max_prompt_bytes). A cycle asks this only of the prompts it is
        about to send: reading 10,000 waiting prompts each cron run would cost more than the run
        itself."""
        from ..contract.prompts import check_request_size, load_prompt

        if not self.problem:
            try:
                check_request_size(load_prompt(prompts_dir, self.slug), max_request_bytes)
            except UsageProblem as problem:
                self.problem = str(problem)
        return not self.problem

    @property
    def why_invalid(self) -> str:
        """What makes the article invalid (what is wrong and the fix); empty when it is not."""
        return self.file_problem or self.problem or ""


SUFFIXES = (".md", ".md.url", ".md.sending", ".md.failed", ".md.rejected")  # no name has two: done first
# Each suffix -> the flag of the view it sets.
MARKS = {".md": "done", ".md.url": "sent", ".md.sending": "sending", ".md.failed": "dead"}


@contextlib.contextmanager
def no_collections() -> Iterator[None]:
    """No garbage collection within: a scan, or a status, of 100,000 articles makes hundreds of
    thousands of objects that all live to its end, and the collector would walk them again and
    again (a sixth of a scan, a third of a status). They make no cycle worth collecting before
    then; the collector runs as it did before once the block ends (an exception too)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def scan(
    prompts_dir: Path, articles_dir: Path, leftovers: list[str] | None = None, links: list[str] | None = None
) -> list[ArticleView]:
    """Every article known from prompts/ or articles/: the finished ones (SLUG.md) first, by
    slug, then the others oldest prompt first, then by slug (the order sends go in).

    A prompt that could never be sent is invalid, with its problem: a file name that is not a
    slug (its view is named by the file's stem), or, for an article not done, a prompt that
    does not load (bad front matter, empty, not UTF-8...): no prompt is read here; status
    checks the waiting ones (check_waiting_prompts), a cycle the ones it picks
    (ArticleView.check_prompt). Only the prompts of unfinished articles are stat'ed (their
    age orders the sends): a batch of 10,000 finished articles costs two folder listings.
    `leftovers`, when given, receives the names in articles/ that carry our temporaries' prefix
    (files.TMP_PREFIX): a cycle sweeps them from this listing instead of listing again.
    `links`, when given, receives the paths of the prompts that are symbolic links (what they
    point to may change while prompts/ does not: status keeps no document over them).
    """
    with no_collections():
        return _scan(prompts_dir, articles_dir, leftovers, links)


def _scan(
    prompts_dir: Path, articles_dir: Path, leftovers: list[str] | None, links: list[str] | None = None
) -> list[ArticleView]:
    """scan's work, the collector paused."""
    # The prompt rules, here rather than at import: a warm `status` that shows its kept document
    # scans nothing, and this module is on its path (docs/performance.md, "Start-up").
    from ..contract.prompts import MAX_SLUG, SLUG_RE, is_folder_notes, is_slug, name_problem

    views: dict[str, ArticleView] = {}
    fullmatch = SLUG_RE.fullmatch
    for entry in _entries(articles_dir):
        name = entry.name
        if name.endswith(".md"):  # most names: an article
            slug, mark = name[:-3], "done"
        elif name.endswith(SUFFIXES):
            if leftovers is not None and name.startswith(files.TMP_PREFIX):
                leftovers.append(name)  # ours, named as if a sidecar (TMP_RE): never an article
                continue
            suffix = name[name.rfind(".md.") :]
            slug, mark = name[: -len(suffix)], MARKS.get(suffix)
        else:  # a temporary's name ends with its random part, never with a suffix of ours
            if leftovers is not None and name.startswith(files.TMP_PREFIX):
                leftovers.append(name)
            continue
        regular = entry.is_file(follow_symlinks=False)  # from the listing: no stat
        if mark is None and regular:
            continue  # SLUG.md.rejected: the last answer the checks refused, not a state
        item = views.get(slug)
        if item is None:
            if not fullmatch(slug):  # checked once per slug, not once per file
                continue
            item = views[slug] = ArticleView(slug, articles_dir)
        if not regular:  # a dangling link must not stop the batch
            item.file_problem = item.file_problem or _problem(entry)
        elif mark == "done":
            item.done = True
            item._done_entry = entry  # its mtime only when publishing asks (no stat here)
        elif mark == "sent":
            item.sent, item._url_entry = True, entry
        elif mark == "sending":
            item.sending, item._sending_entry = True, entry
        else:
            setattr(item, mark, True)
    for entry in _entries(prompts_dir):
        name = entry.name
        # README.md (9 characters, in any case: no character's lower() changes a length here)
        if not name.endswith(".md") or name[0] == "." or (len(name) == 9 and is_folder_notes(name)):
            continue  # hidden files (editors' and systems' own) and the folder's README are not prompts
        if links is not None and entry.is_symlink():
            links.append(entry.path)
        regular = entry.is_file()
        if not regular and entry.is_dir():
            continue
        slug = name[:-3]
        item = views.get(slug)
        shaped = item is not None  # articles/ made it: its name passed the slug rule there
        if item is None:
            item = views[slug] = ArticleView(slug, articles_dir)
        item.prompt_mtime = 0.0  # it exists; its age is read below, for unfinished articles only
        if not regular:  # a FIFO or a dangling link: said, never opened
            item.problem = _problem(entry)
            continue
        item._prompt_entry = entry
        if not (len(slug) <= MAX_SLUG if shaped else is_slug(slug)):
            item.problem = name_problem(prompts_dir / name)
    finished, waiting = [], []
    for item in views.values():
        if item.done:
            finished.append(item)
        else:
            info = item._prompt_info
            if info is not None:
                item.prompt_mtime = info.st_mtime
            waiting.append(item)
    finished.sort(key=_by_slug)
    waiting.sort(key=_by_age)
    return finished + waiting


def _by_slug(view: ArticleView) -> str:
    return view.slug


def _by_age(view: ArticleView) -> tuple[float, str]:
    return (view.prompt_mtime or 0.0, view.slug)


def check_waiting_prompts(
    views: list[ArticleView],
    prompts_dir: Path,
    max_request_bytes: int,
    remembered: Mapping[str, PromptCheck] | None = None,
) -> list[PromptCheck]:
    """Check the prompt of every article not finished (`problem` set where it could never be
    sent). A prompt whose file (and the size limit it was judged by) is as a remembered check
    saw it is not read again; returns the checks made now, for the caller to remember."""
    remembered = remembered or {}
    learned = []
    for item in views:
        if item.prompt_mtime is None or item.problem or item.done or item.dead:
            continue
        known, stamp = remembered.get(item.slug), item.prompt_stamp
        stamp = stamp and f"{stamp}:{max_request_bytes}"
        if known is not None and known.stamp == stamp and stamp:
            item.problem = known.problem or None
            continue
        item.check_prompt(prompts_dir, max_request_bytes)
        if stamp:
            learned.append(PromptCheck(item.slug, stamp, item.problem or ""))
    return learned


def attach_records(views: list[ArticleView], state_dir: Path, store) -> None:
    """Give every view its record from one read of the store (`store` None: a project that
    never ran), instead of one query per article when its `state` is asked for; and its
    unsafe files (attach_unsafe)."""
    attach_unsafe(views, state_dir)
    attach_store_records(views, store)


def attach_unsafe(views: list[ArticleView], state_dir: Path) -> None:
    """An old state file (state/SLUG.json, imported into the store) or a lock (locks/SLUG.lock)
    that is a link or a FIFO stays that article's problem, found from one listing of each folder."""
    # Its lock (locks/SLUG.lock) a link or a FIFO: its step refuses it (ArticleFiles.check).
    unsafe = {**unsafe_entries(state_dir / "locks", ".lock"), **unsafe_entries(state_dir / "state", ".json")}
    if unsafe:
        for view in views:
            view._state_problem = unsafe.get(view.slug, "")


def attach_store_records(views: list[ArticleView], store, slugs: list[str] | None = None) -> None:
    """Give each view its record from one read of the store (of `slugs` only, when given: the
    views' own)."""
    records = store.articles(slugs) if store is not None else {}
    get = records.get
    for view in views:  # each record becomes a state only when asked (a done article never is)
        view._record, view._attached = get(view.slug), True


def overlay_batch(views: list[ArticleView], store, articles_dir: Path) -> dict[str, str]:
    """A shared batch (several hosts): each view as the batch's rows say it is, whatever this
    host's files show yet (finished, sent, or being sent on any host); views are added for the
    batch's articles this host has no file of. Returns slug -> the host that sent or wrote it."""
    from ..contract.hosts import host_of

    by_slug = {view.slug: view for view in views}

    def view(slug: str) -> ArticleView:
        if slug not in by_slug:
            by_slug[slug] = ArticleView(slug, articles_dir)
            views.append(by_slug[slug])
        return by_slug[slug]

    where: dict[str, str] = {}
    for send in store.first_sends().values():
        item = view(send.slug)
        item.sent = item.sent or bool(send.chat_url)
        item.sending = item.sending or not send.chat_url
        where[send.slug] = host_of(send.owner)
    for slug, finished in store.finished().items():
        view(slug).done = True
        where[slug] = where.get(slug) or finished.host
    return where


def unsafe_entries(folder: Path, suffix: str) -> dict[str, str]:
    """Slug -> problem for each entry NAME{suffix} of `folder` that is not a regular file (a
    link, a FIFO, a folder), from one listing: no file is opened or followed."""
    found = {}
    for entry in _entries(folder):
        if entry.name.endswith(suffix) and not entry.is_file(follow_symlinks=False):
            found[entry.name[: -len(suffix)]] = _problem(entry)
    return found


def one(prompts_dir: Path, articles_dir: Path, slug: str) -> ArticleView:
    """One article's view, from its own files only (its prompt is not read)."""
    item = ArticleView(slug, articles_dir)
    item.done, item.sent = item.files.md.exists(), item.files.url.exists()
    item.sending, item.dead = item.files.sending.exists(), item.files.failed.exists()
    if (prompts_dir / f"{slug}.md").exists():
        item.prompt_mtime = (prompts_dir / f"{slug}.md").stat().st_mtime
    return item


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
