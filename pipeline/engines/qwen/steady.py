"""When an answer read again and again counts as complete, or as cut short: the counting that
the engine's watch loops and the collector (collect.py) share."""

from __future__ import annotations

from pipeline.engines.base import Code, TransientError

STALL_READS = 3  # reads of "page idle, API unfinished" before the answer counts as cut short
# Two reads of one chat's JSON at least this far apart once its stored status says finished:
# the stability reads then only have to show that no chunk still lands after the status was
# stored (the simulator stores `done` 0.3 s before "finished"; the real site's stream sends
# chunks tens of ms apart). 3 reads 0.25 s apart span 0.5 s, longer than any gap seen. Where no
# stored status vouches for the answer, the reads stay a second apart (read_interval).
API_STABLE_SECONDS = 0.25


class Steadiness:
    """The counting both watch loops share. A candidate answer is complete once it was read the
    same `needed` times in a row; "page idle, API unfinished" read STALL_READS times means the
    site stopped the answer without finishing it."""

    def __init__(self, needed: int):
        self.needed = needed
        self.previous: str | None = None
        self.same = 0
        self.stalled = 0

    def steady(self, candidate: str) -> bool:
        self.same = self.same + 1 if candidate == self.previous else 1
        self.previous = candidate
        return self.same >= self.needed

    def unfinished(self, *, stalled: bool) -> None:
        self.previous, self.same = None, 0
        self.stalled = self.stalled + 1 if stalled else 0
        if self.stalled >= STALL_READS:
            raise TransientError(
                "the answer stopped before the site marked it finished (cut short)", code=Code.CUT_SHORT
            )
