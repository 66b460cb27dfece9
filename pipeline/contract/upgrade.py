"""Upgrade in place: a workspace written before the store is imported into it, once.

What the old version kept in `articles/.qwenpipe/`: `journal.jsonl` (the events), `state/*.json`
(the records) and `quota.json` (the chat's quota block); beside the articles, `SLUG.md.sending`
(an intent marker). All of it is read with the old readers themselves (torn and corrupt journal
lines are skipped as they always were) and written in one step: a run killed midway leaves
nothing imported, and the next run imports it all. The old files are left as they are.
A second import adds nothing: the step first claims the store's `legacy_import` key.

The wiring runs it when it opens a workspace's SQLite store (pipeline/wiring.py, `open_sqlite`):
the store itself knows nothing of the files above it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from .. import files
from ..errors import SetupProblem
from ..records import record
from ..store.protocol import (
    DEFAULT_ACCOUNT,
    IMPORT_KEY,
    SEND_EVENT,
    SENT_EVENTS,
    ArticleRecord,
    Event,
    Intent,
    QuotaBlock,
    Store,
    dumps,
)
from .article import ArticleState
from .journal import read_lines
from .quota import LONGEST_BLOCK


@record(frozen=True)
class ImportReport:
    events: int
    articles: int
    sends: int
    intents: int
    quota_blocked: bool


@record(frozen=True)
class _Sent:
    intent_at: float
    sent_at: float
    chat_url: str


def import_once(store: Store, state_dir: Path) -> ImportReport | None:
    """Import the old files of `state_dir` (articles/.qwenpipe); None when it was done before."""
    if store.meta(IMPORT_KEY) is not None:
        return None  # the usual case: one read, no file touched
    state_dir = Path(state_dir)
    entries = list(read_lines(state_dir / "journal.jsonl"))
    states = {}
    for path in sorted((state_dir / "state").glob("*.json")):
        try:
            states[path.stem] = ArticleState.read_file(path)
        except SetupProblem:  # a link or a FIFO: that article's problem (it says so), not the import's
            continue
    sends = _sends(entries)
    markers = {
        slug: intent
        for slug, intent in _markers(state_dir.parent).items()
        if (slug, intent.turn) not in sends
    }
    recorded = read_quota(state_dir / "quota.json")  # as written: the import never rewrites it
    blocked = (recorded[0], recorded[2]) if recorded else None
    report = ImportReport(len(entries), len(states), len(sends), len(markers), blocked is not None)
    with store.transaction() as tx:
        if not tx.claim_meta(IMPORT_KEY, dumps(asdict(report))):
            return None  # another process imported it while we read the files
        for entry in entries:
            tx.append(
                Event.from_entry(entry, account=DEFAULT_ACCOUNT if entry.get("engine") == "qwen" else "")
            )
        for slug, state in states.items():
            tx.put_article(_record(slug, state))
        for (slug, turn), sent in sends.items():
            sha = states[slug].sent_sha256 if slug in states else ""
            tx.record_intent(slug, Intent(turn, sent.intent_at, sha))
            tx.record_sent(slug, turn, sent.chat_url, sent.sent_at)
        for slug, intent in markers.items():
            tx.record_intent(slug, intent)
        if blocked:
            tx.block_quota(QuotaBlock(DEFAULT_ACCOUNT, until=blocked[0], reason=blocked[1]))
    return report


def read_quota(path: Path) -> tuple[float, float, str] | None:
    """The old quota.json as written, (until, since, reason), or None when there is none to trust."""
    try:
        data = json.loads(files.read_bytes(path))  # UnsafeFile for a symlink or a FIFO
        until, reason = float(data["blocked_until"]), str(data.get("reason", ""))
        since = float(data.get("since", until - LONGEST_BLOCK))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return until, since, reason


def _record(slug: str, state: ArticleState) -> ArticleRecord:
    return state.to_record(slug)


def _sends(entries: list[dict]) -> dict[tuple[str, int], _Sent]:
    """(slug, turn) -> its send, from the journal's `sending` and `sent`/`recovered` steps. A turn
    sent again later (its files deleted on purpose) keeps its last send."""
    intents: dict[tuple[str, int], float] = {}
    sends: dict[tuple[str, int], _Sent] = {}
    for entry in entries:
        key = (entry["slug"], _turn(entry.get("turn")))
        if entry.get("event") == SEND_EVENT:
            intents[key] = entry["ts"]
        elif entry.get("event") in SENT_EVENTS and entry.get("chat_url"):
            sends[key] = _Sent(intents.pop(key, entry["ts"]), entry["ts"], str(entry["chat_url"]))
    return sends


def _markers(articles_dir: Path) -> dict[str, Intent]:
    """Intent markers (SLUG.md.sending: time, pid, prompt_sha256) of first sends."""
    found = {}
    for path in sorted(articles_dir.glob("*.md.sending")):
        try:
            data = json.loads(files.read_bytes(path))  # a link or a FIFO is refused, never followed
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except (OSError, ValueError, SetupProblem):
            data = {}  # the marker's presence is what counts; its details may be lost
        when = data.get("time")
        pid = data.get("pid")
        found[path.name.removesuffix(".md.sending")] = Intent(
            turn=1,
            time=float(when) if isinstance(when, (int, float)) else _mtime(path),
            prompt_sha256=str(data.get("prompt_sha256") or ""),
            pid=pid if isinstance(pid, int) else 0,
        )
    return found


def _turn(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
