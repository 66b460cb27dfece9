"""The chaos runners' check of the day's send count against the site's ledger can fail."""

from __future__ import annotations

import time

import chaos_common

from pipeline.store.protocol import SendCounts


class CountingStore:
    def __init__(self, counts: dict[str, int]):
        self.counts = counts
        self.asked: list[float] = []

    def send_counts(self, start: float, end: float = float("inf")) -> SendCounts:
        self.asked.append(start)
        return SendCounts(self.counts)

    def events(self):
        return iter(())  # the steps a mismatch lists


def test_the_check_passes_only_when_the_counts_agree():
    now = time.time()
    site = [{"account": "a"}, {"account": "b"}, {"account": "b"}]
    assert chaos_common.send_count_problem(CountingStore({"a": 1, "b": 2}), now, site, per_account=True) == ""
    # one send counted that the site never took, or one the store missed
    assert "the site took" in chaos_common.send_count_problem(
        CountingStore({"a": 2, "b": 2}), now, site, per_account=True
    )
    assert "the site took" in chaos_common.send_count_problem(
        CountingStore({"a": 1, "b": 1}), now, site, per_account=False
    )
    # the right total, but at the wrong account: only the per-account check sees it
    wrong_account = CountingStore({"a": 0, "b": 3})
    assert chaos_common.send_count_problem(wrong_account, now, site, per_account=False) == ""
    assert chaos_common.send_count_problem(CountingStore({"b": 3}), now, site, per_account=True)


def test_the_day_counted_is_the_one_the_trial_began_in():
    store = CountingStore({})
    started = time.time()
    chaos_common.send_count_problem(store, started, [], per_account=False)
    (start,) = store.asked
    assert start <= started < start + 25 * 3600
    assert time.localtime(start)[3:6] == (0, 0, 0)
