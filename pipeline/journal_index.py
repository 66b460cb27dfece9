"""An incremental index of the journal, so that `status` never re-reads its whole history.

The journal only grows (O_APPEND), so everything status needs can be folded in line by line:
per-slug aggregates (last event, engine, chat URL, sent time, last error) and the number of
prompts sent per local day. The index remembers the byte offset it has read up to and reads
only what was appended since.

The index is a cache in `.qwenpipe/journal.index.json`, never a source of truth:
- a missing or corrupt index is rebuilt from the journal;
- a rotated, replaced or truncated journal (other inode, smaller than the offset, different
  first bytes) is read again from the start;
- no lock is ever taken: two processes may refresh it at once, both write it atomically, and
  the last one wins (either copy is correct up to its own offset).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from . import files
from .journal import Journal, is_entry

INDEX_NAME = "journal.index.json"
INDEX_VERSION = 2  # 2: SlugSummary.turns
HEAD_BYTES = 64  # the journal's first bytes: a replaced journal with the same inode still differs here
CHUNK_BYTES = 4 << 20
SAVE_AFTER_LINES = 1000
KEEP_SEND_DAYS = 8  # exact send times kept for this many local days (quotas look at today only)

# Events after which an article with hard failures is still "failed" (no newer progress).
FAILURE_EVENTS = frozenset({"hard", "quota", "router_failed", "dead_letter"})


@dataclass
class SlugSummary:
    """What the journal says about one article, folded from its lines in order."""

    events: int = 0
    sends: int = 0  # "sending" steps: prompts that may have reached the chat (less "unsent" ones)
    sending_ts: float = 0.0  # the last "sending" still counted: an "unsent" step takes it back
    first_ts: float = 0.0
    last_ts: float = 0.0
    last_event: str = ""
    engine: str = ""  # engine of the last sent/recovered/fallback/done step
    sent_ts: float = 0.0  # last "sent" or "recovered"
    done_ts: float = 0.0
    chat_url: str = ""
    last_error: str = ""
    last_code: str = ""
    transient: int = 0
    hard: int = 0
    turns: int = 0  # the prompt's number of turns, from its "done" step (0: not said)

    def fold(self, entry: dict) -> None:
        event = str(entry.get("event", ""))
        ts = _number(entry.get("ts"))
        self.events += 1
        self.first_ts = self.first_ts or ts
        self.last_ts, self.last_event = ts, event
        if event == "sending":
            self.sends += 1
            self.sending_ts = ts
        elif event == "unsent":
            self.sends -= 1 if self.sending_ts else 0
            self.sending_ts = 0.0
        elif event in ("sent", "recovered"):
            self.sent_ts = ts
        elif event == "done":
            self.done_ts = ts
            turns = _number(entry.get("turns"))
            self.turns = int(turns) if 0 < turns <= 1000 else 0  # a hand-edited line must not raise
        elif event == "transient":
            self.transient += 1
        elif event == "hard":
            self.hard += 1
        if event in ("sent", "recovered", "fallback", "done") and entry.get("engine"):
            self.engine = str(entry["engine"])
        if entry.get("chat_url"):
            self.chat_url = str(entry["chat_url"])
        if entry.get("error"):
            self.last_error, self.last_code = str(entry["error"]), str(entry.get("code") or "")

    def to_json(self) -> dict:
        # Defaults are left out: 10,000 slugs stay a small file that loads fast.
        blank = SlugSummary()
        return {k: v for k, v in vars(self).items() if v != getattr(blank, k)}

    @classmethod
    def from_json(cls, data: dict) -> SlugSummary:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class JournalIndex:
    """The folded journal. `refresh()` brings it up to date with what was appended since."""

    journal: Journal
    path: Path
    offset: int = 0
    inode: int = 0
    device: int = 0
    head: str = ""  # hex of the journal's first bytes when it was read from the start
    slugs: dict[str, SlugSummary] = field(default_factory=dict)
    send_days: dict[str, int] = field(default_factory=dict)  # local "YYYY-MM-DD" -> sends
    send_times: list[float] = field(default_factory=list)  # the last KEEP_SEND_DAYS days, exact
    lines_read: int = 0  # lines folded by the last refresh (for tests and the bench)

    @classmethod
    def beside(cls, journal: Journal) -> JournalIndex:
        return cls(journal, journal.path.parent / INDEX_NAME)

    # -- reading -------------------------------------------------------------------------------

    def summary(self, slug: str) -> SlugSummary | None:
        return self.slugs.get(slug)

    def sends_since(self, ts: float) -> int:
        """Prompts sent to the chat (journal "sending" steps, less those an "unsent" step took
        back) at or after `ts`.

        Exact within the last KEEP_SEND_DAYS local days; further back whole days are counted.
        """
        exact = sum(1 for t in self.send_times if t >= ts)
        kept_from = _day(min(self.send_times)) if self.send_times else None
        first_day = _day(ts)
        older = sum(
            n
            for day, n in self.send_days.items()
            if day >= first_day and (kept_from is None or day < kept_from)
        )
        return exact + older

    # -- refreshing ----------------------------------------------------------------------------

    def refresh(self) -> JournalIndex:
        """Load the saved index, fold in the journal's new lines, save it when anything changed."""
        try:
            with files.open_read(self.journal.path) as handle:  # a regular file, never a link
                stat = os.fstat(handle.fileno())
        except FileNotFoundError:
            self._reset()
            return self
        self._load()
        if not self._still_valid(stat):
            self._reset()
            self.inode, self.device = stat.st_ino, stat.st_dev
            self.head = _read_head(self.journal.path).hex()
        elif len(self.head) < 2 * HEAD_BYTES:
            self.head = _read_head(self.journal.path).hex()  # the first bytes were checked: extend
        start = self.offset
        self.lines_read = 0
        for entry in self._new_entries(stat.st_size):
            self._fold(entry)
            self.lines_read += 1
        # Saving costs as much as the whole index (10,000 slugs); re-reading a few new lines next
        # time costs almost nothing. So save a fresh build, or once enough lines piled up.
        if self.offset != start and (start == 0 or self.lines_read >= SAVE_AFTER_LINES):
            self._save()
        return self

    def _new_entries(self, size: int) -> Iterator[dict]:
        """The entries appended since `offset`, advancing it line by line.

        Like Journal.read_with_offsets (torn and foreign lines skipped, a last line without its
        newline left for later), but decoded a chunk at a time: a cold build of a
        100,000-line journal is most of what `status` costs, so the per-line overhead matters.
        """
        with files.open_read(self.journal.path) as handle:
            handle.seek(self.offset)
            while self.offset < size:
                chunk = handle.read(min(CHUNK_BYTES, size - self.offset))
                whole = chunk.rfind(b"\n") + 1
                if whole == 0:
                    if len(chunk) < CHUNK_BYTES:
                        return  # only a line still being written
                    whole = len(chunk)  # one absurdly long line: skip it
                else:
                    handle.seek(self.offset + whole)
                for line in chunk[:whole].decode("utf-8", errors="replace").split("\n"):
                    if not line:
                        continue
                    try:
                        entry = _decode(line)
                    except ValueError:
                        continue
                    if is_entry(entry):
                        yield entry
                self.offset += whole

    def _still_valid(self, stat: os.stat_result) -> bool:
        if (self.inode, self.device) != (stat.st_ino, stat.st_dev) or stat.st_size < self.offset:
            return False
        head = bytes.fromhex(self.head)
        if _read_head(self.journal.path, len(head)) != head:
            return False
        if self.offset == 0:
            return True
        # The index must end on a line boundary of *this* journal.
        with files.open_read(self.journal.path) as handle:
            handle.seek(self.offset - 1)
            return handle.read(1) == b"\n"

    def _fold(self, entry: dict) -> None:
        slug = entry["slug"]
        summary = self.slugs.get(slug)
        if summary is None:
            summary = self.slugs[slug] = SlugSummary()
        taken_back = summary.sending_ts if entry.get("event") == "unsent" else 0.0
        summary.fold(entry)
        if entry.get("event") == "sending":
            ts = _number(entry.get("ts"))
            day = _day(ts)
            self.send_days[day] = self.send_days.get(day, 0) + 1
            self.send_times.append(ts)
        elif taken_back:
            # The send announced just before never reached the chat (the engine proved it).
            # Without its "sending" in this index (an older index), it stays counted: fewer sends.
            day = _day(taken_back)
            if self.send_days.get(day):
                self.send_days[day] -= 1
            if taken_back in self.send_times:
                self.send_times.remove(taken_back)

    def _prune_send_times(self) -> None:
        if not self.send_times:
            return
        days = sorted({_day(t) for t in self.send_times})
        keep_from = days[-KEEP_SEND_DAYS:][0]
        self.send_times = [t for t in self.send_times if _day(t) >= keep_from]

    def _reset(self) -> None:
        self.offset = self.inode = self.device = 0
        self.head = ""
        self.slugs, self.send_days, self.send_times = {}, {}, []

    def _load(self) -> None:
        try:
            data = json.loads(files.read_bytes(self.path))
            if data.get("version") != INDEX_VERSION:
                raise ValueError("another index version")
            source = data["journal"]
            self.offset, self.inode, self.device = (
                int(source["offset"]),
                int(source["inode"]),
                int(source["device"]),
            )
            self.head = str(source["head"])
            bytes.fromhex(self.head)
            self.slugs = {s: SlugSummary.from_json(v) for s, v in data["slugs"].items()}
            self.send_days = {str(k): int(v) for k, v in data["send_days"].items()}
            self.send_times = [float(t) for t in data["send_times"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError, files.SetupProblem):
            self._reset()  # missing, corrupt or not a regular file: rebuilt from the journal

    def _save(self) -> None:
        self._prune_send_times()
        data = {
            "version": INDEX_VERSION,
            "journal": {"offset": self.offset, "inode": self.inode, "device": self.device, "head": self.head},
            "slugs": {s: v.to_json() for s, v in self.slugs.items()},
            "send_days": self.send_days,
            "send_times": self.send_times,
        }
        # A read-only folder, a full disk or a symlink in its place costs a slower next refresh,
        # never the status itself.
        with contextlib.suppress(OSError, files.SetupProblem):
            files.atomic_write(self.path, json.dumps(data, separators=(",", ":")), mode=files.PRIVATE)


def sends_since(journal: Journal, ts: float) -> int:
    """Prompts sent to the chat at or after `ts`, reading only what the journal gained since the
    last call (for quota checks: `sends_since(journal, local_day_start(now))`)."""
    return JournalIndex.beside(journal).refresh().sends_since(ts)


def read_slug_entries(journal: Journal, slug: str) -> Iterator[dict]:
    """Every journal entry of one article, oldest first (for `show`).

    A bytes test skips the other articles' lines without parsing them: one pass over a
    100,000-line journal stays well under a second.
    """
    needle = json.dumps(slug).encode("utf-8")
    try:
        handle = files.open_read(journal.path)
    except FileNotFoundError:
        return
    with handle:
        for raw in handle:
            if needle not in raw or not raw.endswith(b"\n"):
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if is_entry(entry) and entry.get("slug") == slug:
                yield entry


def _read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    try:
        with files.open_read(path) as handle:
            return handle.read(size)
    except (OSError, files.SetupProblem):
        return b""


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


_decode = json.JSONDecoder().decode
_days: dict[int, str] = {}


def _day(ts: float) -> str:
    """The local date of `ts`. Memoised per quarter hour: every time zone's offset is a multiple
    of 15 minutes, so all instants of one quarter hour fall on the same local day."""
    quarter = int(ts // 900)
    day = _days.get(quarter)
    if day is None:
        day = _days[quarter] = datetime.fromtimestamp(quarter * 900).strftime("%Y-%m-%d")
    return day
