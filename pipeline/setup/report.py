"""`qwenpipe report SLUG`: one file a user can send when an article went wrong.

A zip (not a tar.gz): it opens with a double click on every desktop system the person it is
sent to may use, one member can be read without unpacking the rest (`unzip -p BUNDLE
journal.json`), and the Playwright trace inside is a zip already, which `playwright
show-trace` opens as it is. It holds:

- `journal.json`: every journal step of the article;
- `records.json`: what the store keeps about it (its record, its sends, a lease, a chat
  deletion, the finished row's metadata, its prompt's check) and the holds of the accounts it
  concerns;
- `files.json` and `files/`: the prompt and the sidecars (size, time, sha256, and their text);
- `unknown_answers.json`: the journal's `unknown_answer` steps of the last day, of every article;
- `screenshots/`: the page each account showed at its last bot check;
- `traces/`: the Playwright trace of each account's last run (`[browser] trace = true`);
- `versions.json`, `config.toml` (the config in force) and `doctor.txt` (doctor's checks of
  this machine alone: no browser started, nothing asked over the network).

Every secret is masked in every member, a trace's members too (its network log holds the
cookies and headers of each request): the secrets this process registered
(known_secrets.register_all: the router key, proxy passwords, PGPASSWORD, notify tokens), every
password written in a URL, login tokens (JWT), and the login's own cookies and stored values,
read from each account's saved login and from the trace's own requests. A screenshot is an
image: its pixels are what the page showed, never a key of ours.

The bundle is written whole or not at all (files.atomic_write), where the path guard allows
(never over this config or inside the project's folders, a profile or a saved login).
"""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import platform
import time
import zipfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import __version__, files
from ..accounts import all_accounts
from ..config import Config
from ..contract.article import SIDECAR_SUFFIXES
from ..contract.prompts import check_slug
from ..contract.quota import screenshot_path, trace_path
from ..contract.workspace import Workspace
from ..errors import UsageProblem
from ..pathguard import PathKind
from ..redact import MIN_RUN, is_zip, mask, mask_data, mask_kept, mask_zip, registered

UNKNOWN_ANSWER = "unknown_answer"  # the journal's step for an answer the driver has never seen
UNKNOWN_WINDOW = 86400.0  # seconds: the unknown answers of the last day, of every article
FILE_LIMIT = 20_000_000  # bytes: a larger sidecar or prompt is listed, not copied
TRACE_HEADERS = ("cookie", "set-cookie", "authorization")  # request and response headers


@dataclass
class Bundle:
    """A report written: where, what it holds (name -> bytes in the zip) and what was left out."""

    path: Path
    members: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        size = self.path.stat().st_size if self.path.exists() else 0
        lines = [f"report: {self.path} ({size:,} bytes, {len(self.members)} files, every secret masked)"]
        lines += [f"  {name} ({count:,} bytes)" for name, count in self.members.items()]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def default_output(slug: str, now: float) -> Path:
    """`qwenpipe-report-SLUG-YYYYmmdd-HHMMSS.zip` in the current folder."""
    stamp = datetime.fromtimestamp(now).strftime("%Y%m%d-%H%M%S")
    return Path.cwd() / f"qwenpipe-report-{slug}-{stamp}.zip"


def check_output(config: Config, path: Path) -> Path:
    """`path` as a bundle may be written there: through the path guard (pipeline/pathguard.py),
    else UsageProblem naming it and the fix."""
    problem = config.path_problem("--output", PathKind.FILE_WRITTEN, path)
    if problem:
        raise UsageProblem(f"--output {path} {problem}")
    return path


def known_slugs(workspace: Workspace) -> set[str]:
    """Every slug this project knows: its prompts, its articles' files, the store's records."""
    found = {p.name[: -len(".md")] for p in _listed(workspace.prompts_dir) if p.name.endswith(".md")}
    for path in _listed(workspace.articles_dir):
        for suffix in (".md", *SIDECAR_SUFFIXES):
            if path.name.endswith(suffix):
                found.add(path.name[: -len(suffix)])
    if workspace.has_store:
        found |= set(workspace.store.articles()) | set(workspace.store.summaries())
    return found


def _listed(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def check_known(workspace: Workspace, slug: str) -> None:
    """UsageProblem for a slug the project has never heard of, naming the close ones."""
    check_slug(slug)
    known = known_slugs(workspace)
    if slug in known:
        return
    close = difflib.get_close_matches(slug, sorted(known), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else " (`qwenpipe status` lists the articles)"
    raise UsageProblem(
        f"unknown article {slug!r}: no {workspace.prompts_dir / (slug + '.md')}, no files in "
        f"{workspace.articles_dir} and nothing in the store{hint}"
    )


def write_report(
    workspace: Workspace, slug: str, output: Path | None = None, now: float | None = None
) -> Bundle:
    """Bundle what is known about `slug` (see the module) into one zip at `output` (default:
    default_output), masked, written atomically. UsageProblem for an unknown slug or an output
    the path guard refuses, before anything is read or written."""
    now = time.time() if now is None else now
    check_known(workspace, slug)
    path = check_output(workspace.config, Path(output) if output else default_output(slug, now))
    bundle = Bundle(path)
    traces = _traces(workspace, bundle)
    secrets = (*registered(), *login_secrets(workspace.config), *_trace_secrets(traces.values()))
    members = _Members(secrets, bundle)
    has_store = workspace.has_store
    members.add_json("journal.json", list(workspace.journal.read(slug=slug)) if has_store else [])
    members.add_json("records.json", _records(workspace, slug, now) if has_store else {})
    _add_files(workspace, slug, members)
    members.add_json("unknown_answers.json", _unknown_answers(workspace, now) if has_store else [])
    for account in all_accounts(workspace.config):
        shot = screenshot_path(workspace.state_dir, account.name)
        data = _read(shot, bundle)
        if data is not None:
            members.add_bytes(f"screenshots/{shot.name}", data)
    for name, data in traces.items():
        members.add_bytes(f"traces/{name}", data)
    if not traces:
        bundle.notes.append(
            "no Playwright trace: set `[browser] trace = true` and run again to have the next run's"
            if not workspace.config.browser.trace
            else "no Playwright trace yet: the next run that opens the browser keeps one"
        )
    doctor = _doctor(workspace.config)
    members.add_json("versions.json", _versions(doctor))
    members.add_text("config.toml", _config_toml(workspace.config))
    members.add_text("doctor.txt", doctor.text() if doctor else "doctor could not run\n")
    members.add_text("README.txt", _readme(slug, now))
    files.atomic_write(path, members.zipped(), mode=files.PRIVATE)  # masked again at the disk
    return bundle


class _Members:
    """The bundle's members, each masked as it is added (`secrets` and the one mask on what is
    kept), in the order added."""

    def __init__(self, secrets: Iterable[str], bundle: Bundle):
        self.secrets = tuple(sorted(set(secrets)))
        self.bundle = bundle
        self.data: dict[str, bytes] = {}

    def masked(self, data: bytes) -> bytes:
        """Bytes masked: a zip member by member (mask_zip), text as text, anything else as it is."""
        if is_zip(data):
            return mask_zip(data, self.masked)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        return mask_kept(mask(text, self.secrets)).encode("utf-8")

    def add_json(self, name: str, value: Any) -> None:
        # Masked value by value before serialising, so that a mask never swallows a quote.
        text = json.dumps(
            mask_kept_data(mask_data(value, self.secrets)), ensure_ascii=False, indent=1, default=str
        )
        self._put(name, (text + "\n").encode("utf-8"))

    def add_text(self, name: str, text: str) -> None:
        self._put(name, self.masked(text.encode("utf-8")))

    def add_bytes(self, name: str, data: bytes) -> None:
        self._put(name, self.masked(data))

    def _put(self, name: str, data: bytes) -> None:
        self.data[name] = data
        self.bundle.members[name] = len(data)

    def zipped(self) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in self.data.items():
                info = zipfile.ZipInfo(name, time.localtime()[:6])
                info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o600 << 16
                archive.writestr(info, data)
        return out.getvalue()


def mask_kept_data(value: Any) -> Any:
    """`value` with the disk's mask (login tokens, passwords) on every string in it."""
    if isinstance(value, str):
        return mask_kept(value)
    if isinstance(value, dict):
        return {mask_kept_data(k): mask_kept_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_kept_data(v) for v in value]
    return value


# -- what is read --------------------------------------------------------------------------------


def _records(workspace: Workspace, slug: str, now: float) -> dict:
    store = workspace.store
    record = store.article(slug)
    sends = store.sends(slug)
    finished = store.finished([slug]).get(slug)
    lease = store.lease(slug, now)
    check = store.prompt_checks().get(slug)
    accounts = {send.account for send in sends} | {
        event.account for event in store.events(slug) if event.account
    }
    return {
        "article": asdict(record) if record else None,
        "sends": [asdict(send) for send in sends],
        "lease": lease._asdict() if lease else None,
        "chat_deletions": [asdict(deletion) for deletion in store.chat_deletions(slug)],
        # The article itself is the user's, and on disk: its row's metadata is enough.
        "finished": {k: v for k, v in asdict(finished).items() if k != "document"} if finished else None,
        "prompt_check": check._asdict() if check else None,
        "holds": [block._asdict() for block in store.quota_blocks(now) if block.account in accounts],
    }


def _unknown_answers(workspace: Workspace, now: float) -> list[dict]:
    """The journal's `unknown_answer` steps (its `where`, `seen`, `account`...) of the last day,
    of every article, oldest first."""
    return [
        event.to_entry()
        for event in workspace.store.events(since=now - UNKNOWN_WINDOW)
        if event.event == UNKNOWN_ANSWER
    ]


def _add_files(workspace: Workspace, slug: str, members: _Members) -> None:
    """The prompt and the article's sidecars: each one's size, time and sha256 in files.json,
    its text under files/. The article (SLUG.md) is listed, not copied: it is the user's own."""
    article = workspace.article(slug)
    places = [("prompt", workspace.prompts_dir / f"{slug}.md", True), ("article", article.md, False)]
    places += [(f"sidecar {suffix}", article.folder / f"{slug}{suffix}", True) for suffix in SIDECAR_SUFFIXES]
    listed = []
    for what, path, copied in places:
        try:
            info = path.stat()
        except OSError:
            listed.append({"what": what, "path": str(path), "exists": False})
            continue
        data = _read(path, members.bundle, follow=what == "prompt")
        entry = {
            "what": what,
            "path": str(path),
            "exists": True,
            "bytes": info.st_size,
            "modified": datetime.fromtimestamp(info.st_mtime).astimezone().isoformat(timespec="seconds"),
            "sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
        }
        listed.append(entry)
        if copied and data is not None:
            members.add_bytes(f"files/{path.name}", data)
    members.add_json("files.json", listed)


def _read(path: Path, bundle: Bundle, *, follow: bool = False) -> bytes | None:
    """A regular file's bytes; None (and a note, unless it is simply not there) otherwise."""
    try:
        return files.read_bytes(path, follow=follow, limit=FILE_LIMIT)
    except FileNotFoundError:
        return None
    except (OSError, files.SetupProblem) as err:
        bundle.notes.append(f"{path} left out: {getattr(err, 'strerror', None) or err}")
        return None


def _traces(workspace: Workspace, bundle: Bundle) -> dict[str, bytes]:
    found = {}
    for account in all_accounts(workspace.config):
        path = trace_path(workspace.state_dir, account.name)
        data = _read(path, bundle)
        if data is not None:
            found[path.name] = data
    return found


def login_secrets(config: Config) -> tuple[str, ...]:
    """The values of every account's saved login (its cookies and stored values) long enough
    to be a secret: nobody registers them (a run needs them as they are), yet a report must
    hold none of them."""
    from ..engines.qwen.saved_login import saved_state
    from ..engines.qwen.tokens import listed, local_storage

    found = []
    for account in all_accounts(config):
        state = saved_state(account.storage_state)
        found += [c.get("value") for c in listed(state, "cookies") if isinstance(c, dict)]
        for origin in listed(state, "origins"):
            found += [item.get("value") for item in local_storage(origin)]
    return tuple(value for value in found if isinstance(value, str) and len(value) >= MIN_RUN)


def _trace_secrets(traces: Iterable[bytes]) -> tuple[str, ...]:
    """The cookie and authorization values a trace's network log holds: the browser's own,
    whether or not a saved login has them (a profile's cookies, a renewed session)."""
    found: list[str] = []
    for data in traces:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist():
                    if info.filename.endswith(".network"):
                        found += _network_secrets(archive.read(info))
        except (zipfile.BadZipFile, OSError):
            continue
    return tuple(value for value in found if len(value) >= MIN_RUN)


def _network_secrets(log: bytes) -> list[str]:
    found: list[str] = []
    for line in log.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        snapshot = entry.get("snapshot") if isinstance(entry, dict) else None
        for side in ("request", "response"):
            part = snapshot.get(side) if isinstance(snapshot, dict) else None
            if isinstance(part, dict):
                found += _header_secrets(part.get("headers"))
                found += [c.get("value") for c in part.get("cookies") or [] if isinstance(c, dict)]
    return [value for value in found if isinstance(value, str)]


def _header_secrets(headers: Any) -> list[str]:
    found = []
    for header in headers if isinstance(headers, list) else []:
        if not isinstance(header, dict) or str(header.get("name", "")).lower() not in TRACE_HEADERS:
            continue
        name, value = str(header["name"]).lower(), str(header.get("value", ""))
        if name == "authorization":  # "Bearer TOKEN"
            found += value.split()[-1:]
        elif name == "cookie":  # "a=1; b=2"
            found += [pair.partition("=")[2].strip() for pair in value.split(";")]
        else:  # Set-Cookie: one cookie a line, "a=1; Path=/; ..."
            found += [line.split(";")[0].partition("=")[2].strip() for line in value.split("\n")]
    return found


def _doctor(config: Config) -> Any:
    from .doctor import run_doctor

    try:
        return run_doctor(config, offline=True)
    except Exception:  # a report is what a user sends when things are broken: never its end
        return None


def _versions(doctor: Any) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        playwright = version("playwright")
    except PackageNotFoundError:
        playwright = None
    browser = next((c for c in doctor.checks if c.name == "browser"), None) if doctor else None
    return {
        "qwenpipe": __version__,
        "playwright": playwright,
        "browser": (browser.extra.get("version") or browser.detail) if browser else None,
        "python": platform.python_version(),
        "os": platform.platform(),
    }


def _config_toml(config: Config) -> str:
    import tomli_w

    values = {section: dict(keys) for section, keys in config.values.items() if keys}
    header = f"# the config in force: {config.describe()} (every secret masked)\n"
    return header + tomli_w.dumps(values)


def _readme(slug: str, now: float) -> str:
    when = datetime.fromtimestamp(now).astimezone().isoformat(timespec="seconds")
    return (
        f"qwenpipe report for {slug}, made {when} by qwenpipe {__version__}.\n"
        "journal.json: the article's steps; records.json: what the store keeps about it;\n"
        "files.json, files/: its prompt and sidecars; unknown_answers.json: answers the driver\n"
        "had never seen, of the last day; screenshots/: the page at a bot check; traces/: a\n"
        "Playwright trace of the last run (open it with `playwright show-trace FILE`);\n"
        "versions.json, config.toml, doctor.txt: this machine. Every secret is masked.\n"
    )


__all__ = ["Bundle", "check_known", "check_output", "default_output", "login_secrets", "write_report"]
