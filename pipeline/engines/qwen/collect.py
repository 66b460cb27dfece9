"""Collecting many sent chats through ONE open page: the site's JSON decides where it can.

A cycle with 200 chats in flight would otherwise load 200 pages. The page's own `fetch` (which
carries the login and the site's anti-bot headers) reads `/api/v2/chats/<id>` for each chat, in
rounds (every chat still undecided once, in one in-page call), the reads' starts spaced so that
at most `qwen.api_reads_per_second` start in a second (the site sees no burst).

The JSON decides a chat when it can:
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

import time
from collections.abc import Callable
from typing import Any

from pipeline.engines.base import Answer, EngineError, Generating
from pipeline.engines.qwen.api import ChatShapeError, chat_id_from_url, classify_api_error, parse_chat
from pipeline.engines.qwen.engine import API_STABLE_SECONDS, Steadiness
from pipeline.engines.qwen.page import ApiUnusable, fetch_bodies

# Reads of a chat whose status says finished while its text still changes, before its page decides.
UNSTEADY_READS = 3


class Pacer:
    """Reads start at most `per_second` a second, evenly spaced (a burst of 200 reads is what
    an anti-bot system notices). `clock` and `sleep` are injectable: tests pace a fake clock."""

    def __init__(
        self,
        per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not per_second > 0:
            raise ValueError(f"reads per second must be more than 0, not {per_second!r}")
        self.interval = 1.0 / per_second
        self.clock, self.sleep = clock, sleep
        self._next: float | None = None

    def reserve(self, count: int, not_before: float = float("-inf")) -> float:
        """Wait until `count` reads may start one `interval` apart, the first not before
        `not_before` (a clock time); return the first one's start. The caller spaces the rest."""
        now = self.clock()
        start = max(now, not_before, self._next if self._next is not None else now)
        if start > now:
            self.sleep(start - now)
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
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.page = page
        self.stable_reads = max(1, stable_reads)
        self.pacer = Pacer(reads_per_second, clock=clock, sleep=sleep)
        self.engine, self.extra, self.timeout = engine, dict(extra or {}), timeout
        self.reads = 0  # JSON reads made (the benchmark and the tests count them)

    def collect(self, chat_urls: list[str]) -> dict[str, Answer | Generating]:
        """Chat URL -> Answer or Generating, for every chat the JSON decides; the others are left
        out (their pages must look). Never raises for one chat's problem: a WAF page or a bot
        check on a read leaves that chat and every one after it to their pages."""
        results: dict[str, Answer | Generating] = {}
        wanted = [url for url in dict.fromkeys(chat_urls) if chat_id_from_url(url)]
        pending = {url: Steadiness(self.stable_reads) for url in wanted}
        reads: dict[str, int] = {}
        last_read: dict[str, float] = {}
        gap = self.pacer.interval
        while pending:
            # One round: every pending chat once, in one in-page call whose reads start `gap`
            # apart; each chat's read at least API_STABLE_SECONDS after its read of the round before.
            urls = list(pending)
            earliest = max(
                last_read.get(url, float("-inf")) + API_STABLE_SECONDS - i * gap for i, url in enumerate(urls)
            )
            start = self.pacer.reserve(len(urls), earliest)
            paths = [f"/api/v2/chats/{chat_id_from_url(url)}" for url in urls]
            bodies = fetch_bodies(self.page, paths, timeout=self.timeout, gap=gap)
            self.reads += len(urls)
            for i, (url, body) in enumerate(zip(urls, bodies, strict=True)):
                if isinstance(body, EngineError):
                    return results  # the site refuses reading (WAF, bot check): pages tell the rest
                last_read[url] = start + i * gap
                reads[url] = reads.get(url, 0) + 1
                seen = judge_body(body, chat_id_from_url(url), engine=self.engine, extra=self.extra)
                if isinstance(seen, Answer) and pending[url].steady(seen.markdown):
                    results[url] = seen
                elif isinstance(seen, Answer) and reads[url] < self.stable_reads + UNSTEADY_READS:
                    continue  # read it again in the next round
                elif isinstance(seen, Generating):
                    results[url] = seen
                # else: the JSON cannot decide, or "finished" text that keeps changing: the page looks
                del pending[url]
        return results


def judge_body(body: Any, chat_id: str, *, engine: str, extra: dict) -> Answer | Generating | None:
    """One read of one chat: a candidate Answer (stored status finished), Generating, or None
    when the JSON cannot decide."""
    if isinstance(body, ApiUnusable) or classify_api_error(body) is not None:
        return None  # the chat's page reports it as it always has (gone, logged out, quota...)
    try:
        view = parse_chat(body)
    except ChatShapeError:
        return None
    return judge_read(view, chat_id, engine=engine, extra=extra)


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
