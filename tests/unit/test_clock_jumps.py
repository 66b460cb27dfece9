"""Clock jumps never stall an article: no scheduled time lies further ahead than its own wait.

The clock is injected (generate and run_cycle take `clock=`); a jump is a test moving it.
"""

from __future__ import annotations

import time

from fakes import answer
from project_files import add_prompt

from pipeline.batch.cycle import run_cycle
from pipeline.config import load
from pipeline.contract.article import ArticleState
from pipeline.contract.phases import MAX_BACKOFF, schedule
from pipeline.contract.step import Status, backoff_delay, generate
from pipeline.contract.workspace import Engines
from pipeline.engines.base import Generating, QuotaSpent, TransientError
from pipeline.wiring import router_engine
from pipeline.wiring import workspace as open_workspace

DAY = 86400.0
POLL = 60.0


class Clock:
    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def spaced_project(project, chat, router):
    (project / "config.toml").write_text(
        f"[qwen]\npoll_interval = {POLL:g}\nmax_attempts = 5\n[article]\nmin_words = 0\n"
    )
    ws = open_workspace(load(project / "config.toml"))
    return ws, lambda: Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)


def looks(chat) -> int:
    return sum(1 for call in chat.history if call[0] == "check")


def test_a_poll_after_the_clock_went_forward_and_back_waits_one_poll_interval(project, chat, router):
    ws, engines = spaced_project(project, chat, router)
    clock = Clock()
    add_prompt(project, "tea")
    assert generate(ws, "tea", engines(), clock=clock).status is Status.QUEUED
    clock.now += 2 * DAY  # forward: the poll is stamped two days ahead
    assert generate(ws, "tea", engines(), clock=clock).reason == "generating"
    clock.now -= 2 * DAY - 120  # and back again
    outcome = generate(ws, "tea", engines(), clock=clock)
    assert outcome.reason == "spacing" and "next look in 60 s" in outcome.message, outcome.message
    assert ArticleState.load(ws.store, ws.article("tea")).last_poll == clock.now, "re-planned on disk"
    clock.now += POLL
    chat.enqueue_check(answer())
    assert generate(ws, "tea", engines(), clock=clock).status is Status.DONE


def test_a_backoff_set_a_day_ahead_lasts_its_own_delay_after_the_clock_went_back(project, chat, router):
    ws, engines = spaced_project(project, chat, router)
    clock = Clock()
    add_prompt(project, "tea")
    generate(ws, "tea", engines(), clock=clock)
    clock.now += DAY + POLL
    chat.enqueue_check(TransientError("WAF page", code="waf"))
    assert generate(ws, "tea", engines(), clock=clock).reason == "backoff"
    clock.now -= DAY  # one day back: next_try is a day and a minute ahead
    outcome = generate(ws, "tea", engines(), clock=clock)
    assert outcome.reason == "backoff"
    assert ArticleState.load(ws.store, ws.article("tea")).next_try == clock.now + backoff_delay(
        ws.config.qwen, 1
    )
    clock.now += POLL
    before = looks(chat)
    generate(ws, "tea", engines(), clock=clock)
    assert looks(chat) == before + 1, "the retry did not happen after its own delay"


def test_the_cycle_re_plans_times_the_clock_left_ahead_and_polls_after_one_interval(project, chat, router):
    ws, engines = spaced_project(project, chat, router)
    clock = Clock()
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    assert sorted(run_cycle(ws, engines(), clock=clock).sent) == ["coffee", "tea"]
    clock.now += 2 * DAY
    chat.enqueue_check(Generating(), TransientError("banner", code="error_banner"))
    run_cycle(ws, engines(), clock=clock)  # one polled two days ahead, one backing off from then
    clock.now -= 2 * DAY - 10
    report = run_cycle(ws, engines(), clock=clock)
    assert report.counts["waiting"] + report.counts["backoff"] == 2, report.counts
    for slug in ("tea", "coffee"):
        state = ArticleState.load(ws.store, ws.article(slug))
        assert state.last_poll <= clock.now and state.next_try <= clock.now + POLL, (slug, state)
    clock.now += POLL
    before = looks(chat)
    report = run_cycle(ws, engines(), clock=clock)
    assert looks(chat) == before + 2, report.counts


def test_schedule_pulls_in_only_what_lies_beyond_its_own_wait():
    now = 1_800_000_000.0
    fine = ArticleState(attempts=2, next_try=now + 2 * POLL, last_poll=now - 1)
    planned = schedule(fine, POLL, now, spaced=True)
    assert planned.reason == "backoff" and planned.until == now + 2 * POLL and not planned.replanned
    ahead = ArticleState(attempts=2, next_try=now + DAY, last_poll=now + DAY)
    planned = schedule(ahead, POLL, now, spaced=True)
    assert planned.replanned and planned.until == now + 2 * POLL == planned.next_try
    assert planned.last_poll == now and ahead.last_poll == now + DAY, "the record is never changed"
    after_give_up = ArticleState(attempts=0, next_try=now + 2 * DAY)  # attempts reset by a hard failure
    assert schedule(after_give_up, POLL, now, spaced=False).until == now + MAX_BACKOFF
    spacing = schedule(ArticleState(last_poll=now + 3 * DAY), POLL, now, spaced=True)
    assert spacing.reason == "spacing" and spacing.until == now + POLL


def test_a_quota_block_recorded_before_the_clock_went_back_lasts_its_own_hours(project, workspace):
    quota = workspace.chat_quota
    ahead = 1_800_000_000.0 + 2 * DAY
    quota.block(ahead, 5 * 3600, "RateLimited")
    now = ahead - 2 * DAY
    until, _reason = quota.blocked_until(now)
    assert until == now + 5 * 3600
    saved = workspace.store.quota_block("default", now)
    assert saved.since == now and saved.until == until, "re-planned in the store"
    assert quota.blocked_until(now + 5 * 3600) is None


def test_a_send_after_a_quota_block_two_days_ahead_waits_hours_not_days(project, chat):
    (project / "config.toml").write_text(
        "[qwen]\npoll_interval = 60\n[router]\nenabled = false\n[article]\nmin_words = 0\n"
    )
    ws = open_workspace(load(project / "config.toml"))
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=router_engine)
    clock = Clock(1_800_000_000.0 + 2 * DAY)
    add_prompt(project, "tea")
    chat.send_error = QuotaSpent("the daily chat quota is spent", retry_after=3600)
    chat.send_error.nothing_sent = True  # refused in words: no send to recover, only the block
    generate(ws, "tea", eng, clock=clock)
    chat.send_error = None
    clock.now -= 2 * DAY
    assert generate(ws, "tea", eng, clock=clock).reason == "quota"
    clock.now += 3600
    add_prompt(project, "coffee", "Write about coffee.")
    assert generate(ws, "coffee", eng, clock=clock).status is Status.QUEUED


def test_status_reads_a_quota_block_left_ahead_without_rewriting_it(project, workspace):
    from pipeline.batch.status import collect

    ahead = time.time() + 2 * 86400
    workspace.chat_quota.block(ahead, 5 * 3600, "RateLimited")
    before = workspace.store.quota_blocks(0)
    status = collect(workspace)
    assert status.sends_stopped  # blocked for its own five hours from now...
    assert workspace.store.quota_blocks(0) == before  # ...and status, a reader, wrote nothing
