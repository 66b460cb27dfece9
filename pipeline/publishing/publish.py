"""Publishing: a done article copied to `publish.dir` (a Hugo site's content folder), a step
after done that never touches the contract.

- Only the article (SLUG.md) is ever copied, never a sidecar, and only its public fields: the
  page's (PUBLIC_KEYS) and the prompt's own front matter (`tags`, `categories`, `publishDate`
  from the prompt or its topic list, kept as they are); qwenpipe's bookkeeping (`engine`,
  `account`, `model`, `prompt_sha256`, `chat_url`...) stays in `articles/` unless
  `publish.keep` names it. `draft` is set, a `description` is added when it has none (an
  article written before articles had one), and with `strip_title` the body loses its leading
  `#` heading (the theme shows the title).
- Atomically (the site never sees half a page), and again only when the article changed.
- What was written is recorded (`articles/.qwenpipe/published/SLUG.json`: the sha256 of the
  article read and of the page written; SLUG.lock beside it: one publisher at a time). A page
  whose bytes are no longer what qwenpipe wrote was edited by hand: it is left alone, and said
  so, until the person deletes it.
- `publish.after` (e.g. `git add {path} && git commit ...`) runs after each page written, in
  a session of its own, stopped after `publish.after_timeout` with its process group and its
  descendants (hook.py says what cannot be reached). Its failure is reported (its last lines,
  its output never kept whole) and recorded; the next cycle runs it again. The article is never
  at stake.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from .. import files
from ..config import Config, ConfigError, Publish
from ..contract.journal import NO_ARTICLE
from ..contract.prompts import FENCE, check_slug, split_front_matter
from ..contract.render import OWNED_KEYS, description, strip_title_heading
from ..errors import SetupProblem, UsageProblem
from ..files import FileLock, LockBusy
from ..redact import Verbatim

RECORDS = "published"  # under articles/.qwenpipe/
# Of the keys qwenpipe writes (render.OWNED_KEYS), those a public page carries: the page's own.
PUBLIC_KEYS = frozenset({"title", "date", "description"})
TOP_HEADING_RE = re.compile(r"^ {0,3}#[ \t]+\S")  # a level-1 markdown heading
AFTER_OUTPUT_LINES = 3  # of a failing `after` command's output, in its message


@dataclass(frozen=True)
class Result:
    slug: str
    status: str  # published, unchanged, held (edited by hand), busy, failed, after_failed
    message: str

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "after_failed")


def check_publish_dir(config: Config) -> Path | None:
    """publish.dir, or None when publishing is off. ConfigError when it is a file, a symlink or
    anything but a folder (a missing one is made at the first publish)."""
    folder = config.publish_dir
    if folder is None:
        return None
    shown = f"publish.dir = {config.publish.dir!r} ({folder}, {config.describe()})"
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return folder
    except OSError as err:
        raise ConfigError(f"{shown}: cannot read: {err.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(
            f"{shown} is a symlink; qwenpipe writes only into a real folder: set publish.dir to "
            f"the folder it points to ({os.path.realpath(folder)})"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{shown} is {files.kind_of(info.st_mode)}, not a folder; point it at a folder")
    return folder


def check_keep(config: Config) -> None:
    """ConfigError for a `publish.keep` entry that names no key qwenpipe writes (a typo keeps
    nothing, silently, otherwise): the prompt's own keys are on the page anyway."""
    unknown = [name for name in config.publish.keep if name not in OWNED_KEYS - PUBLIC_KEYS]
    if unknown:
        raise ConfigError(
            f"publish.keep = {config.publish.keep!r} in {config.describe()}: {unknown[0]!r} is not one "
            f"of qwenpipe's own front matter keys ({', '.join(sorted(OWNED_KEYS - PUBLIC_KEYS))}); "
            "a prompt's own keys are published without it"
        )


def page_path(config: Config, folder: Path, slug: str) -> Path:
    """DIR/SLUG.md, or DIR/SLUG/index.md with publish.bundle (a Hugo page bundle)."""
    return folder / slug / "index.md" if config.publish.bundle else folder / f"{slug}.md"


def page_text(article: str, where: Path, settings: Publish) -> str:
    """The published page for the article text `article`. UsageProblem when its front matter is
    not TOML (an article edited by hand)."""
    meta, body = split_front_matter(article, where)
    private = OWNED_KEYS - PUBLIC_KEYS - set(settings.keep)
    meta = {key: value for key, value in meta.items() if key not in private}
    meta["draft"] = bool(settings.draft) or meta.get("draft") is True  # a prompt's own draft holds
    body = body.strip()
    if not isinstance(meta.get("description"), str):  # an article written before it had one
        meta["description"] = description(body)
    if settings.strip_title:
        body = without_title(body, meta.get("title"))
    return f"{FENCE}\n{tomli_w.dumps(meta)}{FENCE}\n\n{body}\n"


def without_title(body: str, title: object) -> str:
    """The body without its leading heading when that is the title, or is a `#` heading at all:
    the theme shows the page's title, and a second title (worded a little differently by the
    chat) is what made pages show it twice."""
    if isinstance(title, str) and title.strip():
        stripped = strip_title_heading(body, title)
        if stripped != body:
            return stripped
    lines = body.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and TOP_HEADING_RE.match(lines[first]):
        return "\n".join(lines[first + 1 :]).strip()
    return body


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_path(articles_dir: Path, slug: str) -> Path:
    return articles_dir / files.STATE_DIR / RECORDS / f"{slug}.json"


def read_record(articles_dir: Path, slug: str) -> dict:
    """What was last published for `slug`; {} when nothing (or the record is unreadable: then a
    page that exists counts as not ours, and is kept)."""
    try:
        data = json.loads(files.read_bytes(record_path(articles_dir, slug)))
    except (OSError, ValueError, SetupProblem):
        return {}
    return data if isinstance(data, dict) else {}


def publish_one(config: Config, journal, slug: str, folder: Path) -> Result:
    """Publish the done article `slug` to `folder` if it changed, then run publish.after when a
    page was written (or its last run failed). Never raises for a problem of this article."""
    articles = config.articles_dir
    # Beside the record, not among the article locks: `SLUG.publish.lock` could be another slug's.
    lock = FileLock(record_path(articles, slug).with_suffix(".lock"), purpose=f"publish {slug}")
    try:
        lock.acquire()
    except LockBusy as busy:
        return Result(slug, "busy", f"{slug}: being published by {busy.owner}; left to it")
    try:
        return _publish_locked(config, journal, slug, folder)
    except (UsageProblem, SetupProblem, OSError) as problem:
        if isinstance(problem, OSError):
            problem = files.cannot("publish", problem.filename or slug, problem)
        journal.append(slug, "publish_failed", error=str(problem))
        return Result(slug, "failed", f"{slug}: not published: {problem} (the article is kept)")
    finally:
        lock.release()


def _publish_locked(config: Config, journal, slug: str, folder: Path) -> Result:
    """Publish one done article into `folder` (the publish lock held): its page written when
    its source changed, the journal told; UsageProblem when it is not done or not UTF-8."""
    settings = config.publish
    articles = config.articles_dir
    source = articles / f"{slug}.md"
    try:
        mtime = os.stat(source).st_mtime  # before the read: a change after it is seen next time
        article = files.read_bytes(source)
    except FileNotFoundError:
        raise UsageProblem(f"{slug} is not done ({source} does not exist)") from None
    try:
        page = page_text(article.decode("utf-8"), source, settings).encode("utf-8")
    except UnicodeDecodeError:
        raise UsageProblem(f"{source}: not UTF-8 text") from None
    target = page_path(config, folder, slug)
    if settings.bundle and os.path.lexists(target.parent):
        kind = files.kind_of(os.lstat(target.parent).st_mode)
        if kind != "a folder":
            raise files.UnsafeFile(target.parent, kind, "a folder (the page bundle)")
    record = read_record(articles, slug)
    try:
        current = files.read_bytes(target)
    except FileNotFoundError:
        current = None
    base = {"path": str(target), "source_sha256": _sha(article), "source_mtime": mtime}
    if current is not None and current != page and _sha(current) != record.get("written_sha256"):
        _save(articles, slug, {**record, **base, "held": True})
        journal.append(slug, "publish_held", path=str(target))
        return Result(
            slug,
            "held",
            f"{slug}: {target} was edited by hand (it is not what qwenpipe wrote), so it is not "
            f"overwritten; to publish {source} there, delete it (or move your edits into the "
            f"article) and run `qwenpipe publish {slug}`",
        )
    wrote = current != page
    if wrote:  # the article's own text, as it is (redact.Verbatim)
        files.atomic_write(target, Verbatim(page.decode("utf-8")), mode=files.SHARED)
    # Due after a new page, and again until it has succeeded once for the page as it is.
    after_due = bool(settings.after) and (
        wrote or record.get("after") != "ok" or record.get("written_sha256") != _sha(page)
    )
    error = run_after(config, target, slug) if after_due else None
    after = ("failed" if error else "ok") if after_due else record.get("after", "")
    outcome = {**base, "written_sha256": _sha(page), "time": time.time(), "after": after}
    # A failed `after` is due again, and so is an article edited while it was being published.
    again = bool(error) or _mtime(source) != mtime
    _save(articles, slug, {**outcome, "after_error": error or ""}, due_again=again)
    if error:
        journal.append(slug, "publish_after_failed", path=str(target), error=error)
        what = f"published to {target}" if wrote else f"{target} is published"
        return Result(slug, "after_failed", f"{slug}: {what}, but {error}; the next cycle runs it again")
    if not wrote:
        ran = " (publish.after ran again)" if after_due else ""
        return Result(slug, "unchanged", f"{slug}: {target} is up to date{ran}")
    journal.append(slug, "published", path=str(target))
    return Result(slug, "published", f"{slug}: published to {target}")


def _save(articles: Path, slug: str, record: dict, *, due_again: bool = False) -> None:
    """Write the record. The cycle skips an article whose record is newer than it (one folder
    listing, no record read); `due_again` dates the record 1970, so the next cycle looks again."""
    path = record_path(articles, slug)
    files.atomic_write(path, json.dumps(record, ensure_ascii=False) + "\n")
    if due_again:
        os.utime(path, ns=(0, 0))


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def record_times(articles_dir: Path) -> dict[str, float]:
    """slug -> its record's mtime, from one listing of the records' folder."""
    times: dict[str, float] = {}
    folder = articles_dir / files.STATE_DIR / RECORDS
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".json"):
                with contextlib.suppress(OSError):
                    times[entry.name[: -len(".json")]] = entry.stat(follow_symlinks=False).st_mtime
    return times


def run_after(config: Config, path: Path, slug: str) -> str | None:
    """Run publish.after for one page: None when it succeeded (or there is none), else why not.
    In the config's folder, in a session of its own, stopped on the timeout with its process
    group and every process descending from it (publishing/hook.py: what that cannot reach);
    of its output only the head and the tail are kept, and its last lines said."""
    command = config.publish.after
    if not command:
        return None
    return _run_hook(
        config, "publish.after", command.format(path=shlex.quote(str(path)), slug=shlex.quote(slug))
    )


def _run_hook(config: Config, key: str, line: str) -> str | None:
    """Run the command `line` of the config key `key` (see run_after): None when it succeeded."""
    from . import hook

    timeout = config.publish.after_timeout
    try:
        ran = hook.run(["/bin/sh", "-c", line], cwd=config.root, timeout=timeout)
    except OSError as err:
        return f"{key} could not start: {err.strerror}"
    if ran.returncode is None:
        return (
            f"{key} ran longer than publish.after_timeout = {timeout:g} s and was stopped "
            f"(its process group and every process it started that is still its descendant): {line}"
        )
    if ran.returncode:
        tail = ran.output.last_lines(AFTER_OUTPUT_LINES)
        said = f": {' / '.join(tail)}" if tail else ""
        size = f" ({ran.output.size:,} bytes of output; the last lines shown)" if ran.output.cut else ""
        return f"{key} exited {ran.returncode} ({line}){said}{size}"
    return None


AFTER_CYCLE_RECORD = "publish_after_cycle.json"  # under articles/.qwenpipe/: did its last run fail


def after_cycle(workspace, published: int, *, say: Callable[[str], None]) -> Result | None:
    """publish.after_cycle, once at the end of a cycle that published `published` page(s) (> 0),
    or whose last run failed (a push the remote refused is pushed by the next cycle): None when
    it is not due, else its Result ("after_failed" when it failed: said, recorded, run again).
    Never raises for the command's failure; the cycle goes on."""
    config = workspace.config
    command = config.publish.after_cycle
    folder = config.publish_dir
    if not command or folder is None:
        return None
    record = workspace.state_dir / AFTER_CYCLE_RECORD
    try:
        failed = json.loads(files.read_bytes(record)).get("failed") is True
    except (OSError, ValueError, AttributeError, SetupProblem):
        failed = False
    if not published and not failed:
        return None
    error = _run_hook(config, "publish.after_cycle", command.format(dir=shlex.quote(str(folder))))
    files.atomic_write(record, json.dumps({"failed": bool(error), "error": error or "", "time": time.time()}))
    if error:
        workspace.journal.append(NO_ARTICLE, "publish_after_failed", error=error)
        result = Result("*", "after_failed", f"publish: {error}; the next cycle runs it again")
        say(result.message)
        return result
    return Result("*", "published", "publish: publish.after_cycle ran")


def publish_by_hand(workspace, slug: str | None, *, say: Callable[[str], None]) -> list[Result]:
    """`qwenpipe publish SLUG | --all`: every result said. ConfigError when publishing is off or
    publish.dir cannot be used; UsageProblem for a bad slug or an article not done."""
    config = workspace.config
    folder = check_publish_dir(config)
    check_keep(config)
    if folder is None:
        raise ConfigError(
            f"publishing is off (publish.dir is empty in {config.describe()}); set it, e.g. "
            '[publish] dir = "site/content/posts"'
        )
    if slug is not None:
        check_slug(slug)
        if not workspace.article(slug).md.exists():
            raise UsageProblem(f"{slug} is not done ({workspace.article(slug).md} does not exist)")
        slugs = [slug]
    else:
        slugs = done_slugs(workspace.articles_dir)
        if not slugs:
            say(f"no done articles in {workspace.articles_dir}")
    results = []
    for name in slugs:
        result = publish_one(config, workspace.journal, name, folder)
        say(result.message)
        results.append(result)
    return results


def done_slugs(articles_dir: Path) -> list[str]:
    from ..contract.prompts import is_slug

    try:
        with os.scandir(articles_dir) as entries:
            names = [e.name for e in entries if e.name.endswith(".md") and e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(n[:-3] for n in names if is_slug(n[:-3]))


def publish_done(
    workspace, done: Iterable[tuple[str, float | None]], *, say: Callable[[str], None]
) -> list[Result]:
    """The cycle's step after its articles: publish each done article (slug, mtime when known)
    whose record does not show it published as it is now; a failed `after` is tried again.
    Quiet when publishing is off; one line when publish.dir cannot be used (nothing else stops)."""
    config = workspace.config
    try:
        folder = check_publish_dir(config)
        check_keep(config)
    except ConfigError as problem:
        say(f"publish: nothing published: {problem}")
        return [Result("*", "failed", str(problem))]
    if folder is None:
        return []
    recorded = record_times(config.articles_dir)
    results = []
    for slug, mtime in done:
        if mtime is not None and recorded.get(slug, -1.0) >= mtime:
            continue  # published (or held) since the article last changed, and nothing is due
        result = publish_one(config, workspace.journal, slug, folder)
        if result.status != "unchanged":
            say(result.message)
        results.append(result)
    return results
