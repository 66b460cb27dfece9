"""Collecting many sent chats through ONE open page: the site's JSON decides where it can.

A cycle with 200 chats in flight would otherwise load 200 pages. The page's own `fetch` (which
carries the login and the site's anti-bot headers) reads `/api/v2/chats/<id>` for each chat, in
batches started in the page and left running (the chats read again first, then new ones), the
reads' starts spaced so that at most `qwen.api_reads_per_second` start in a second (the site sees
no burst). Each decided chat is handed to the caller while the next batch is being read, so the
writing of one chat's article and the reading of the others overlap.

The JSON decides a chat when it can:
- complete at the first read: the stored completion status says finished, without error, and
  the site's own clock (the read's Date header) says the chat last changed well before the time
  the stability reads would span (steady.finished_long_ago: a chat finished long ago, the usual
  case of a cron cycle, costs one read);
- complete: the stored completion status says finished, without error, AND the answer's
  markdown read the same `qwen.stable_reads` times in a row, reads of one chat at least
  API_STABLE_SECONDS apart (never the flag alone: a flag set before the last chunk landed
  shows as text that still changes);
- still generating: the stored status says not finished (or no reply yet);
- not decided (the chat's own page must look): no stored status at all, a shape we do not
  know, an error body, a finished status with an empty answer, or text that keeps changing
  under a finished status. Those are left out of the result, and the caller opens their pages
  (the page's signals, as `check` has always done).

The collector only reads; the contract decides what a result means and writes the article.
One collector per open page: with several accounts, one per account's browser context.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..base import Answer, EngineError, Generating
from .api import ChatShapeError, chat_id_from_url, classify_api_error, parse_chat
from .page import ApiUnusable, fetched_reads, start_fetches
from .steady import API_STABLE_SECONDS, Steadiness, finished_long_ago, site_time

# Reads of a chat whose status says finished while its text still changes, before its page decides.
UNSTEADY_READS = 3
# Batches of reads under way in the page at once: while the caller handles one batch's chats,
# the next is being read (the page never idles between two batches).
BATCHES_AHEAD = 2


class Pacer:
    """Reads start at most `per_second` a second, evenly spaced (a burst of 200 reads is what
    an anti-bot system notices). `clock` is injectable: tests pace a fake clock."""

    def __init__(self, per_second: float, *, clock: Callable[[], float] = time.monotonic):
        if not per_second > 0:
            raise ValueError(f"reads per second must be more than 0, not {per_second!r}")
        self.interval = 1.0 / per_second
        self.clock = clock
        self._next: float | None = None

    def reserve(self, count: int, not_before: float = float("-inf")) -> float:
        """The start (a clock time, now or later) of `count` reads one `interval` apart, the
        first not before `not_before`; they are booked: the next reads come after them. The
        caller waits for that start (the page does, in `start_fetches`)."""
        now = self.clock()
        start = max(now, not_before, self._next if self._next is not None else now)
        self._next = start + count * self.interval
        return start


class ChatCollector:
    """Reads the JSON of many chats through one open page (`page`, already on the chat site)."""

    def __init__(
        self,
        page: Any,
        *,
        stable_reads: int,
        reads_per_second: float,
        engine: str = "qwen",
        extra: dict | None = None,
        timeout: float = 30,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.page = page
        self.stable_reads = max(1, stable_reads)
        self.pacer = Pacer(reads_per_second, clock=clock)
        self.clock = clock
        self.engine, self.extra, self.timeout = engine, dict(extra or {}), timeout
        # A batch's reads span about API_STABLE_SECONDS: a chat read again two batches later is
        # then far enough from its last read without anyone waiting.
        self.batch = max(1, math.ceil(reads_per_second * API_STABLE_SECONDS))
        self.reads = 0  # JSON reads made (the benchmark and the tests count them)

    def collect(self, chat_urls: list[str]) -> Iterator[tuple[str, Answer | Generating]]:
        """(chat URL, Answer or Generating) for every chat the JSON decides, each as soon as it
        is decided; the others are left out (their pages must look). While the caller handles
        one, the page goes on reading (up to BATCHES_AHEAD batches). Never raises for one chat's
        problem: a WAF page or a bot check on a read leaves that chat and every one after it to
        their pages."""
        fresh = deque(url for url in dict.fromkeys(chat_urls) if chat_id_from_url(url))
        again: deque[str] = deque()  # read, not decided yet: read again, oldest read first
        steady: dict[str, Steadiness] = {}
        reads: dict[str, int] = {}
        last_read: dict[str, float] = {}
        under_way: deque[tuple[list[str], list[str], str]] = deque()  # (urls, paths, key)
        gap = self.pacer.interval

        def start_batch() -> bool:
            urls = [again.popleft() for _ in range(min(self.batch, len(again)))]
            urls += [fresh.popleft() for _ in range(min(self.batch - len(urls), len(fresh)))]
            if not urls:
                return False
            # Each chat's read at least API_STABLE_SECONDS after its last one.
            earliest = max(
                last_read.get(url, float("-inf")) + API_STABLE_SECONDS - i * gap for i, url in enumerate(urls)
            )
            start = self.pacer.reserve(len(urls), earliest)
            paths = [f"/api/v2/chats/{chat_id_from_url(url)}" for url in urls]
            # The plan spaces a chat's reads; the page keeps them apart by when they were answered
            # (a read served late would otherwise hold the same words as the next one).
            key = start_fetches(
                self.page,
                paths,
                timeout=self.timeout,
                gap=gap,
                delay=start - self.clock(),
                spacing=API_STABLE_SECONDS,
            )
            for i, url in enumerate(urls):
                last_read[url] = start + i * gap
            under_way.append((urls, paths, key))
            self.reads += len(urls)
            return True

        while len(under_way) < BATCHES_AHEAD and start_batch():
            pass
        while under_way:
            urls, paths, key = under_way.popleft()
            decided: list[tuple[str, Answer | Generating]] = []
            refused = False
            for url, read in zip(
                urls, fetched_reads(self.page, key, paths, timeout=self.timeout), strict=True
            ):
                if isinstance(read.body, EngineError):
                    refused = True  # the site refuses reading (WAF, bot check): pages tell the rest
                    break
                reads[url] = reads.get(url, 0) + 1
                seen, settled = judge_body(
                    read.body,
                    chat_id_from_url(url),
                    engine=self.engine,
                    extra=self.extra,
                    site_now=site_time(read.date),
                    stable_reads=self.stable_reads,
                )
                counting = steady.setdefault(url, Steadiness(self.stable_reads))
                if isinstance(seen, Answer) and (settled or counting.steady(seen.markdown)):
                    decided.append((url, seen))
                elif isinstance(seen, Answer) and reads[url] < self.stable_reads + UNSTEADY_READS:
                    again.append(url)  # read it again two batches on
                elif isinstance(seen, Generating):
                    decided.append((url, seen))
                # else: the JSON cannot decide, or "finished" text that keeps changing: the page looks
            if refused:
                yield from decided
                return
            while len(under_way) < BATCHES_AHEAD and start_batch():
                pass
            yield from decided


def judge_body(
    body: Any, chat_id: str, *, engine: str, extra: dict, site_now: float | None, stable_reads: int
) -> tuple[Answer | Generating | None, bool]:
    """One read of one chat: a candidate Answer (stored status finished), Generating, or None
    when the JSON cannot decide; and whether that Answer is complete from this read alone (the
    site, by its clock `site_now`, stored it finished long ago: steady.finished_long_ago)."""
    if isinstance(body, ApiUnusable) or classify_api_error(body) is not None:
        return None, False  # the chat's page reports it as it always has (gone, logged out, quota...)
    try:
        view = parse_chat(body, chat_id)
    except ChatShapeError:
        return None, False
    seen = judge_read(view, chat_id, engine=engine, extra=extra)
    settled = isinstance(seen, Answer) and finished_long_ago(view, site_now, stable_reads=stable_reads)
    return seen, settled


def judge_read(view, chat_id: str, *, engine: str = "qwen", extra: dict | None = None):
    """A one-turn chat's first answer as its JSON shows it: a candidate Answer (its stored status
    says finished: the stability reads still have to agree), Generating, or None (undecided)."""
    if not view.turns:
        return Generating("waiting for the chat to show the message")
    turn, stored = view.turns[0], view.stored[0]
    if turn.error or stored is None:
        return None
    if stored is False:
        return Generating(f"writing: {len(turn.answer):,} chars" if turn.answer else "generating")
    if not turn.answer.strip():
        return None
    more = {"source": "api", "chat_id": chat_id, **(extra or {})}
    return Answer(turn.answer, engine, title=view.real_title, model=view.model, extra=more)
