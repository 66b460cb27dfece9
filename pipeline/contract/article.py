"""One article: its files in `articles/`, and the small state record beside them.

| file                       | meaning                                              |
|----------------------------|------------------------------------------------------|
| SLUG.md                    | done (front matter + markdown)                       |
| SLUG.md.url                | the prompt was sent: the chat URL                    |
| SLUG.md.sending            | intent marker: a send was about to happen            |
| SLUG.md.failed             | dead letter (TOML), cleared by `qwenpipe replay`     |
| SLUG.md.rejected           | the last answer that failed the article checks       |
| .qwenpipe/qwenpipe.db      | the store: the journal, each article's record (attempts,|
|                            | last poll, next try, last error), quota blocks          |
| .qwenpipe/state/SLUG.json  | the record as versions before the store kept it (imported)|
| .qwenpipe/locks/SLUG.lock  | the per-article flock                                |
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
from dataclasses import field, fields
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from .. import files
from ..engines.base import Code, TransientError
from ..engines.unknown import Where, unknown
from ..errors import UsageProblem
from ..records import record
from ..redact import Verbatim
from ..store.protocol import ArticleRecord

if TYPE_CHECKING:
    from ..store.protocol import Store

CHAT_PATH_RE = re.compile(r"^/c/([a-f0-9-]{20,})$")
STATE_DIR = files.STATE_DIR
# Sidecars are private (0600) like the journal: they hold chat URLs and error text, and they are
# not articles (only SLUG.md follows the umask, for whoever publishes articles/).
SIDECAR_SUFFIXES = (".md.url", ".md.sending", ".md.failed", ".md.rejected")
MAX_ERRORS_KEPT = 20


def _count(value: object) -> int:
    """A count from an old state file: a whole number the store can hold, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    number = int(value)  # OverflowError for an infinity
    if not 0 <= number <= 2**31 - 1:
        raise ValueError(value)
    return number


def _time(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    seconds = float(value)  # OverflowError for an integer of 400 digits
    if not math.isfinite(seconds):
        raise ValueError(value)
    return seconds


NOT_IN_FILES = ("slug", "intent")  # the record's fields an old state file never held


@functools.cache
def record_fields() -> tuple[str, ...]:
    """The record's fields a state file held: asked when first needed, as ArticleRecord is
    made (records.py: a warm `status` makes neither)."""
    return tuple(f.name for f in fields(ArticleRecord) if f.name not in NOT_IN_FILES)


@record(frozen=True)
class ArticleFiles:
    slug: str
    folder: Path

    @property
    def md(self) -> Path:
        return self.folder / f"{self.slug}.md"

    @property
    def url(self) -> Path:
        return self.folder / f"{self.slug}.md.url"

    @property
    def sending(self) -> Path:
        return Path(self.sending_file)

    @property
    def sending_file(self) -> str:
        """The intent marker's path as a string: status looks for 10,000 of them, and building
        a Path costs more than the look."""
        return f"{self.folder}/{self.slug}.md.sending"

    @property
    def failed(self) -> Path:
        return self.folder / f"{self.slug}.md.failed"

    @property
    def rejected(self) -> Path:
        return self.folder / f"{self.slug}.md.rejected"

    @property
    def lock(self) -> Path:
        return self.folder / STATE_DIR / "locks" / f"{self.slug}.lock"

    @property
    def state(self) -> Path:
        return self.folder / STATE_DIR / "state" / f"{self.slug}.json"

    def check(self) -> None:
        """UnsafeFile (a SetupProblem) when one of the article's files is not a regular file: a
        symlink (even to a good file), a FIFO, a folder. Nothing of the article is read or
        written through it; the other articles are not concerned."""
        files.check_folder(self.state.parent)
        files.check_folder(self.lock.parent)
        for path in (self.md, self.url, self.sending, self.failed, self.rejected, self.state, self.lock):
            files.is_regular(path)


@record
class ArticleState(ArticleRecord):
    """The contract's working copy of an article's record (the fields are ArticleRecord's, the
    store's; the journal keeps the whole story): its errors a list the contract appends to."""

    errors: list[dict] = field(default_factory=list)  # type: ignore[assignment]

    @classmethod
    def load(cls, store: Store, article: ArticleFiles) -> ArticleState:
        """The article's record in `store`, or a fresh one when the store knows nothing of it
        (losing it costs an early poll, never a second send: the sidecar files say what was sent)."""
        files.is_regular(article.state)  # UnsafeFile: a link or a FIFO there is this article's problem
        record = store.article(article.slug)
        return cls() if record is None else cls.from_record(record)

    @classmethod
    def from_record(cls, record) -> ArticleState:
        return cls(
            **{name: getattr(record, name) for name in cls.__dataclass_fields__ if name != "errors"},
            errors=[dict(e) for e in record.errors],
        )

    @classmethod
    def read_file(cls, path: Path) -> ArticleState:
        """A state file as versions before the store wrote it (for the store's import), or a
        fresh state when it is missing or unreadable."""
        try:
            data = json.loads(files.read_bytes(path))  # UnsafeFile for a symlink or a FIFO
        except (OSError, ValueError):
            return cls()
        if not isinstance(data, dict):
            return cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k not in NOT_IN_FILES}
        try:
            state = cls(**known)
            for name in ("attempts", "hard_failures", "turn", "turns"):
                setattr(state, name, _count(getattr(state, name)))
            for name in ("last_poll", "next_try", "sent_at"):
                setattr(state, name, _time(getattr(state, name)))
        except (TypeError, ValueError, OverflowError):  # a hand-edited or damaged file: start afresh
            return cls()
        for name in ("engine", "last_error", "last_error_code", "progress", "sent_sha256"):
            if not isinstance(getattr(state, name), str):
                setattr(state, name, "")
        errors = state.errors if isinstance(state.errors, list) else []
        state.errors = [e for e in errors if isinstance(e, dict)]
        return state

    def save(self, store: Store, slug: str) -> None:
        """Write the record of article `slug` to `store` (one step)."""
        with store.transaction() as tx:
            tx.put_article(self.to_record(slug))

    def to_record(self, slug: str) -> ArticleRecord:
        """The record the store keeps (masked by the store's write; the open intent is the store's own)."""
        data = {name: getattr(self, name) for name in record_fields()}
        return ArticleRecord(slug, **{**data, "errors": tuple(data["errors"])})

    def record_error(self, when: float, engine: str, code: str, message: str) -> None:
        self.last_error, self.last_error_code = message, code
        self.errors.append({"time": when, "engine": engine, "code": code, "error": message})
        del self.errors[:-MAX_ERRORS_KEPT]


def parse_chat_url(text: str, base_url: str, where: Path) -> str:
    """The chat URL in a `.md.url` file, if it is one of `base_url`'s chats; else UsageProblem.

    A sidecar is data on disk that anyone may have edited: it is never opened blindly.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fix = f"fix or delete {where} (deleting it means the prompt may be sent again)"
    if len(lines) != 1:
        raise UsageProblem(f"{where}: expected one line with the chat URL, found {len(lines)}; {fix}")
    url = lines[0]
    parsed, base = urlparse(url), urlparse(base_url)
    if parsed.scheme not in ("http", "https") or parsed.netloc != base.netloc:
        raise UsageProblem(
            f"{where}: {url!r} is not on qwen.base_url ({base.scheme}://{base.netloc}); "
            f"refusing to open it. {fix}, or set qwen.base_url"
        )
    if not CHAT_PATH_RE.match(parsed.path) or parsed.query or parsed.fragment:
        raise UsageProblem(f"{where}: {url!r} is not a chat URL like {base_url.rstrip('/')}/c/<id>; {fix}")
    return url


def chat_url(base_url: str, chat_id: str, where: Path) -> str:
    """The URL of the chat `chat_id` names (the chat the page's completion named, as an intent
    records it). A name that is no chat id the site makes (a new chat answered without its id:
    `undefined`) is the site's answer, not the user's input, so never UsageProblem (exit 2): an
    unknown answer at new_chat (TransientError), which before the click is a send refused
    (nothing sent) and after it a send in doubt (step/recover.py). `where`: the record named."""
    url = f"{base_url.rstrip('/')}/c/{chat_id}"
    if not CHAT_PATH_RE.match(urlparse(url).path):
        error = TransientError(
            f"{where} names chat {chat_id[:40]!r}, no chat id the site makes: the site's answer to "
            "the new chat was not one we know",
            code=Code.MISSING_FIELD,
        )
        raise unknown(error, Where.NEW_CHAT, what=f"the completion named chat {chat_id[:40]!r}")
    return url


def read_chat_url(article: ArticleFiles, base_url: str) -> str | None:
    """The validated chat URL of an article, or None when it was never sent."""
    try:
        raw = files.read_bytes(article.url)  # UnsafeFile for a symlink or a FIFO: never opened
    except FileNotFoundError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageProblem(f"{article.url}: not UTF-8 text; it should hold one chat URL") from None
    return parse_chat_url(text, base_url, article.url)


# .qwenpipe/tightened: make_private has run on this folder. Every file this version writes there
# is private already, so the tightening (a look at every name in articles/ and in locks/) is
# needed once, not every cycle. Bump TIGHTENED_AS when more files become private: once more.
TIGHTENED = "tightened"
TIGHTENED_AS = b"1\n"


def write_marker(path: Path, marker: dict) -> None:
    """The intent marker (SLUG.md.sending) at `path`, atomically. Its names (the account, the
    lease's owner, the chat's id) are written as they are (redact.Verbatim), since recovery finds
    the send by them: an account named after a word of a weak proxy password must stay itself.
    It holds no text from outside (no error, no answer)."""
    files.atomic_write(path, Verbatim(json.dumps(marker) + "\n"))


def read_marker(path) -> dict | None:
    """The intent marker's record (SLUG.md.sending), or None when it is missing or unreadable."""
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(4096))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def make_private(articles_dir: Path) -> None:
    """Tighten what an older version wrote with the umask (0644): the sidecars in articles/ and
    every file under .qwenpipe/ become 0600 (its folders are made 0700 by files.ensure_folder).
    Only this user's regular files in real folders; nothing is followed or stops the caller.
    Once per folder: skipped when its `tightened` marker says it was done."""
    state = articles_dir / STATE_DIR
    marker = state / TIGHTENED
    try:
        if files.read_bytes(marker) == TIGHTENED_AS:
            return
    except (OSError, files.SetupProblem):  # none yet (or not a file of ours): tighten
        pass
    files.make_private(articles_dir, SIDECAR_SUFFIXES)
    for folder in (state, state / "state", state / "locks"):
        files.make_private(folder)
    # A marker that cannot be written (a link there, a full disk) means: tighten again next time.
    with contextlib.suppress(files.SetupProblem):
        files.atomic_write(marker, TIGHTENED_AS)
