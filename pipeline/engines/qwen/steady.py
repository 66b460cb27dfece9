"""When an answer read again and again counts as complete, or as cut short: the counting that
the engine's watch loops and the collector (collect.py) share; and when one read is enough (an
answer the site says it stored, finished, long ago)."""

from __future__ import annotations

from email.utils import parsedate_to_datetime

from ..base import Code, TransientError
from .api import ChatView, epoch_seconds

STALL_READS = 3  # reads of "page idle, API unfinished" before the answer counts as cut short
# Two reads of one chat's JSON at least this far apart once its stored status says finished:
# the stability reads then only have to show that no chunk still lands after the status was
# stored (the simulator stores `done` 0.3 s before "finished"; the real site's stream sends
# chunks tens of ms apart). 3 reads 0.25 s apart span 0.5 s, longer than any gap seen. Where no
# stored status vouches for the answer, the reads stay a second apart (read_interval).
API_STABLE_SECONDS = 0.25
READ_SECONDS = 1.0  # the stability reads of a page: `stable_reads` reads this far apart
# The site stamps whole seconds (`updated_at`, `timestamp`) and so does the HTTP Date header: each
# can read up to a second early, so an age read from the two is short of the truth by up to 2 s.
STAMP_GRAIN = 1.0


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


def settled_after(stable_reads: int) -> float:
    """How long before the site's now a chat must have last changed for one read of it to say as
    much as the stability reads would: the time they span (`stable_reads` reads a second apart),
    plus a second for each of the two whole-second stamps compared."""
    return max(1, stable_reads) * READ_SECONDS + 2 * STAMP_GRAIN


def finished_long_ago(view: ChatView, site_now: float | None, *, stable_reads: int) -> bool:
    """Whether a read of a chat whose one answer the site stored as finished (the caller checked
    that) can be taken as it stands: the site's own clock (`site_now`, the read's Date header)
    says the chat last changed at least `settled_after(stable_reads)` ago (docs/qwen-site.md,
    "Reading an answer"). Never when the site stamped nothing after the send, when its clock is
    not known, or when the stamp lies in its future (a negative age): then the stability reads
    decide."""
    if site_now is None or view.last_write is None:
        return False
    return site_now - view.last_write >= settled_after(stable_reads)


def site_time(date_header: str | None) -> float | None:
    """The site's clock as an HTTP Date header gives it (epoch seconds), or None when there is no
    such header or it is not a plausible time."""
    if not date_header:
        return None
    try:
        when = parsedate_to_datetime(date_header)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:
        return None  # a date without a zone is not a clock we can compare with the site's stamps
    return epoch_seconds(when.timestamp())
