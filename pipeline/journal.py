"""The journal: one JSON line per step, appended by every command, read by status and quotas.

Appends use O_APPEND with one write() per line, so concurrent writers never interleave. A writer
killed mid-line leaves a torn line: readers skip lines that do not parse, and the next writer
starts on a fresh line so that its own line stays whole.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from . import files
from .crashpoints import crashpoint
from .redact import mask_data


@dataclass
class Journal:
    path: Path

    def check(self) -> None:
        """UnsafeFile when the journal (or its folder) is a symlink, a FIFO or a folder: asked
        before a step that must log, so that nothing is marked or sent that could not be logged."""
        files.check_folder(self.path.parent)
        files.is_regular(self.path)

    def append(self, slug: str, event: str, **fields: object) -> dict:
        """Record one step. None-valued fields are left out to keep lines short."""
        now = time.time()
        entry = {
            "time": datetime.fromtimestamp(now).astimezone().isoformat(timespec="seconds"),
            "ts": round(now, 3),
            "slug": slug,
            "event": event,
            "pid": os.getpid(),
        }
        entry.update({k: v for k, v in fields.items() if v is not None})
        line = json.dumps(mask_data(entry), ensure_ascii=False, default=str) + "\n"
        files.ensure_folder(self.path.parent)
        try:
            # Never through a symlink (the lines would land in whatever it points to), never
            # blocking on a FIFO; private, as the journal holds chat URLs and errors.
            fd = files.open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, private=True)
        except OSError as err:
            raise files.cannot("append to the journal", self.path, err) from None
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = "\n" + line
            data = line.encode("utf-8")
            if "mid_journal" in os.environ.get("QWENPIPE_CRASH_AT", ""):  # chaos: leave a torn line
                os.write(fd, data[: len(data) // 2])
                crashpoint("mid_journal")
                data = data[len(data) // 2 :]
            os.write(fd, data)
        except OSError as err:
            raise files.cannot("append to the journal", self.path, err) from None
        finally:
            os.close(fd)
        return entry

    def read(self, *, offset: int = 0, slug: str | None = None) -> Iterator[dict]:
        """Entries from byte `offset` on, oldest first; torn or foreign lines are skipped."""
        for _end, entry in self.read_with_offsets(offset=offset):
            if slug is None or entry.get("slug") == slug:
                yield entry

    def read_with_offsets(self, *, offset: int = 0) -> Iterator[tuple[int, dict]]:
        """(offset after the line, entry) pairs: lets a reader resume where it stopped."""
        try:
            handle = files.open_read(self.path)
        except FileNotFoundError:
            return
        with handle:
            handle.seek(offset)
            position = offset
            for raw in handle:
                if not raw.endswith(b"\n"):
                    break  # a line still being written (or torn): not ours to read yet
                position += len(raw)
                try:
                    entry = json.loads(raw)
                except ValueError:
                    continue
                if is_entry(entry):
                    yield position, entry


MAX_TS = 1e11  # the year 5138: anything later is a corrupt line, not a time


def is_entry(entry: object) -> bool:
    """A journal entry every reader can trust: a dict with a string slug and a real epoch `ts`.

    One corrupt line (ts = 1e20, NaN, "x") must not stop status, show or a cycle.
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("slug"), str):
        return False
    ts = entry.get("ts")
    return isinstance(ts, (int, float)) and not isinstance(ts, bool) and 0 <= ts < MAX_TS
