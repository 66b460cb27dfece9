"""The ledger: every prompt that reached the simulated site, taken or refused, in order.

It is what the tests count sends by (a prompt is in it as soon as the server received it, even when
the site refused it), kept in memory and, when the run names a file, rewritten there atomically
after each entry so that a reader in another process never sees half of it.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path


class Ledger:
    """The prompts received, oldest first; not locked (the chat store's lock covers it)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path else None
        self._entries: list[dict] = []
        self._write()

    def record(
        self,
        chat_id: str,
        prompt: str,
        turn: int,
        accepted: bool,
        scenario: str,
        choice: dict,
        account: str | None,
        fault: str | None = None,
    ) -> None:
        """One prompt received: `choice` is what the page chose for it (model, thinking, search),
        `fault` the fuzzing mode's fault the request met, if any."""
        extra = {"fault": fault} if fault else {}
        self._entries.append(
            {
                "time": time.time(),
                "account": account,  # "" in a run without accounts, None for a logged-out request
                "chat_id": chat_id,
                "prompt": prompt,
                "turn": turn,
                "accepted": accepted,
                "scenario": scenario,
                "model": choice["model"],  # as the page chose it
                "thinking": choice["thinking"],
                "web_search": choice["web_search"],
                **extra,
            }
        )
        self._write()

    def entries(self) -> list[dict]:
        """A copy of every entry (a caller's change does not reach the ledger)."""
        return [dict(entry) for entry in self._entries]

    def _write(self) -> None:
        """Rewrite the ledger file atomically (tmp + rename) so a reader never sees half of it."""
        if self.path is None:
            return
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".ledger-", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self._entries, handle, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
