"""What every Store implementation must do: the suite runs once per implementation (the `place`
fixture in conftest.py; PostgreSQL joins it with issue 18).

Real processes for the concurrency and the cut-off transactions: a store is shared by cron
jobs, `status` and cycles, and killed with them.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import signal

import pytest
import store_workers
from store_places import open_place

from pipeline.store.protocol import (
    AlreadySent,
    ArticleRecord,
    Event,
    Intent,
    LeaseLost,
    PromptCheck,
    QuotaBlock,
    Store,
    StoreError,
    Summary,
    Transaction,
)

SPAWN = multiprocessing.get_context("spawn")
DAY = 86400.0


def append(store, *events: Event) -> list[int]:
    with store.transaction() as tx:
        return [tx.append(event) for event in events]


# -- events --------------------------------------------------------------------------------


def test_events_read_back_in_append_order_with_their_fields(store):
    seqs = append(
        store,
        Event("a", "sending", 10.0, pid=5, account="main", fields={"engine": "qwen", "attempt": 1}),
        Event("b", "fallback", 11.0, fields={"engine": "router", "reason": "quota"}),
        Event("a", "sent", 12.5, fields={"chat_url": "https://chat.qwen.ai/c/x", "duration": 1.25}),
    )
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    events = list(store.events())
    assert [(e.slug, e.event, e.ts) for e in events] == [
        ("a", "sending", 10.0),
        ("b", "fallback", 11.0),
        ("a", "sent", 12.5),
    ]
    assert events[0].pid == 5 and events[0].account == "main"
    assert events[0].fields == {"engine": "qwen", "attempt": 1}
    assert events[2].fields["duration"] == 1.25
    assert [e.seq for e in events] == seqs


def test_events_of_one_slug_and_since_a_seq_or_a_time(store):
    first, second, third, fourth = append(
        store, Event("a", "x", 1.0), Event("b", "x", 2.0), Event("a", "y", 3.0), Event("b", "y", 4.0)
    )
    assert [e.event for e in store.events("a")] == ["x", "y"]
    assert [e.seq for e in store.events(after=second)] == [third, fourth]
    assert [e.seq for e in store.events("b", after=second)] == [fourth]
    assert [e.seq for e in store.events(since=3.0)] == [third, fourth]
    assert list(store.events("nobody")) == []


def test_a_summary_names_each_slugs_newest_event(store):
    append(store, Event("a", "sending", 1.0), Event("b", "done", 2.0), Event("a", "sent", 3.0))
    assert {slug: s.last_event for slug, s in store.summaries().items()} == {"a": "sent", "b": "done"}


def test_an_event_turns_into_its_journal_line_and_back():
    entry = {
        "time": "2026-12-01T07:47:20+00:00",
        "ts": 5.5,
        "slug": "s",
        "event": "sent",
        "pid": 3,
        "chat_url": "u",
    }
    event = Event.from_entry(entry)
    assert event.to_entry() == entry
    assert Event.from_entry(entry, account="main").to_entry() == {**entry, "account": "main"}


# -- article records -----------------------------------------------------------------------


def test_an_article_record_reads_back_as_written_and_is_replaced_by_an_update(store):
    record = ArticleRecord(
        "a",
        attempts=2,
        hard_failures=1,
        next_try=100.5,
        last_poll=90.25,
        sent_at=80.0,
        engine="qwen",
        last_error="timeout",
        last_error_code="timeout",
        progress="writing: 12 chars",
        turn=2,
        turns=3,
        sent_sha256="abc",
        errors=({"time": 1.0, "engine": "qwen", "code": "timeout", "error": "timeout"},),
    )
    with store.transaction() as tx:
        tx.put_article(record)
    assert store.article("a") == record
    updated = ArticleRecord("a", attempts=0, engine="router", progress="done")
    with store.transaction() as tx:
        tx.put_article(updated)
    assert store.article("a") == updated
    assert store.articles() == {"a": updated}
    assert store.article("unknown") is None


def test_the_intent_is_part_of_the_record_until_the_chat_url_is_recorded(store):
    intent = Intent(1, 50.0, "sha-1", account="main", pid=7, owner="host-a:7:r")
    with store.transaction() as tx:
        tx.put_article(ArticleRecord("a", attempts=1))
        tx.record_intent("a", intent)
        tx.record_intent("b", Intent(1, 51.0, "sha-2"))
    assert store.article("a").intent == intent
    assert store.articles()["b"].intent == Intent(1, 51.0, "sha-2")  # a send with no record yet
    with store.transaction() as tx:
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/1", 52.0)
    assert store.article("a").intent is None
    [send] = store.sends("a")
    assert (send.chat_url, send.sent_at, send.account, send.prompt_sha256) == (
        "https://chat.qwen.ai/c/1",
        52.0,
        "main",
        "sha-1",
    )


# -- sends: recorded once ------------------------------------------------------------------


def test_a_second_send_of_the_same_turn_is_refused(store):
    with store.transaction() as tx:
        tx.record_intent("a", Intent(1, 1.0, "sha"))
    with pytest.raises(AlreadySent) as refused, store.transaction() as tx:
        tx.record_intent("a", Intent(1, 2.0, "sha", account="other"))
    assert refused.value.send.account == "default" and "refusing to send it again" in str(refused.value)
    with store.transaction() as tx:
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/1", 3.0)
        tx.record_intent("a", Intent(2, 4.0, "sha"))  # the next turn is another send
    with pytest.raises(AlreadySent), store.transaction() as tx:
        tx.record_intent("a", Intent(1, 5.0, "sha"))
    assert [(s.turn, s.intent_at) for s in store.sends("a")] == [(1, 1.0), (2, 4.0)]


def test_a_refused_send_undoes_its_whole_step(store):
    with store.transaction() as tx:
        tx.record_intent("a", Intent(1, 1.0, "sha"))
    with pytest.raises(AlreadySent), store.transaction() as tx:
        tx.append(Event("a", "sending", 2.0))
        tx.put_article(ArticleRecord("a", attempts=9))
        tx.record_intent("a", Intent(1, 2.0, "sha"))
    assert list(store.events()) == [] and store.article("a").attempts == 0


def test_processes_racing_to_send_one_turn_record_exactly_one_send(place, store):
    start, results, workers = SPAWN.Event(), SPAWN.Queue(), 6
    store_workers.run_at_once(
        store_workers.try_to_send, [(place, n, start, results) for n in range(workers)], start=start
    )
    outcomes = sorted(results.get(timeout=5)[0] for _ in range(workers))
    assert outcomes == ["refused"] * 5 + ["won"]
    [send] = store.sends("race")
    assert [e.event for e in store.events("race")] == ["sending"]  # the refused steps left nothing
    assert send.account.startswith("a")


def test_the_chat_url_needs_an_intent_and_never_changes(store):
    with pytest.raises(StoreError, match="no recorded intent"), store.transaction() as tx:
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/1", 1.0)
    with store.transaction() as tx:
        tx.record_intent("a", Intent(1, 1.0, "sha"))
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/1", 2.0)
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/1", 3.0)  # the same again: nothing changes
    with pytest.raises(AlreadySent), store.transaction() as tx:
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/2", 4.0)
    assert [(s.chat_url, s.sent_at) for s in store.sends("a")] == [("https://chat.qwen.ai/c/1", 2.0)]


def test_only_an_open_intent_is_named_its_chat(store):
    """The page names the chat before the request leaves the browser: with no open intent there
    (none recorded, or the turn already sent) the store refuses, and nothing may be sent."""
    with pytest.raises(StoreError, match="no open intent"), store.transaction() as tx:
        tx.name_chat("a", 1, "chat-1")
    with store.transaction() as tx:
        tx.record_intent("a", Intent(1, 1.0, "sha", chat_id=""))
        tx.name_chat("a", 1, "chat-1")
    assert [s.chat_id for s in store.sends("a")] == ["chat-1"]
    with store.transaction() as tx:
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/chat-1", 2.0)
    with pytest.raises(StoreError, match="no open intent"), store.transaction() as tx:
        tx.name_chat("a", 1, "chat-2")
    with pytest.raises(StoreError, match="turn 2 has no open intent"), store.transaction() as tx:
        tx.name_chat("a", 2, "chat-1")
    assert [(s.turn, s.chat_id) for s in store.sends("a")] == [(1, "chat-1")]


def test_only_an_intent_without_a_url_can_be_withdrawn_and_forgetting_clears_every_send(store):
    with store.transaction() as tx:
        tx.record_intent("a", Intent(1, 1.0, "sha"))
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/1", 2.0)
        tx.record_intent("a", Intent(2, 3.0, "sha"))
    with store.transaction() as tx:
        assert tx.withdraw_intent("a", 1) is False
        assert tx.withdraw_intent("a", 2) is True
    assert [s.turn for s in store.sends("a")] == [1]
    with store.transaction() as tx:
        assert tx.forget_sends("a") == 1
        tx.record_intent("a", Intent(1, 9.0, "sha-new"))  # a new send, on purpose
    assert [s.prompt_sha256 for s in store.sends("a")] == ["sha-new"]


# -- quotas and send counts ----------------------------------------------------------------


def test_a_quota_block_holds_one_account_until_its_time(store):
    with store.transaction() as tx:
        tx.block_quota(QuotaBlock("main", until=200.0, reason="RateLimited", since=100.0))
        tx.block_quota(QuotaBlock("spare", until=150.0))
    assert store.quota_block("main", 199.0) == QuotaBlock("main", 200.0, "RateLimited", 100.0)
    assert store.quota_block("main", 200.0) is None
    assert store.quota_block("other", 0.0) is None
    assert [b.account for b in store.quota_blocks(120.0)] == ["main", "spare"]
    assert [b.account for b in store.quota_blocks(160.0)] == ["main"]
    with store.transaction() as tx:
        tx.block_quota(QuotaBlock("main", until=300.0, reason="again"))
    assert store.quota_block("main", 250.0).reason == "again"


def test_sends_are_counted_by_day_and_by_account(store):
    day = 1_000 * DAY
    append(
        store,
        Event("a", "sending", day - 1, account="main"),  # yesterday
        Event("a", "sending", day, account="main"),
        Event("a", "sent", day + 1, account="main"),  # not a send
        Event("b", "sending", day + 2, account="spare"),
        Event("c", "sending", day + 3, account="main"),
        Event("c", "fallback", day + 4),
        Event("d", "sending", day + DAY, account="main"),  # tomorrow
    )
    today = store.send_counts(day, day + DAY)
    assert (today.total, today.of("main"), today.of("spare"), today.of("nobody")) == (3, 2, 1, 0)
    assert store.send_counts(day).total == 4
    assert store.send_counts(0, day).by_account == {"main": 1}


def test_a_send_given_back_by_its_next_step_is_not_counted(store):
    """An `unsent` step right after a `sending` (the engine or a recovery proved the site took
    nothing) takes that send back; any other step after it, or an `unsent` after a later send,
    does not. What qwen.max_sends_per_day counts is what the site took."""
    day = 1_000 * DAY
    append(
        store,
        Event("a", "sending", day + 1, account="main"),
        Event("a", "unsent", day + 2, account="main", fields={"code": "bot_check"}),  # given back
        Event("a", "sending", day + 3, account="main"),  # sent again, and taken
        Event("a", "sent", day + 4, account="main"),
        Event("b", "sending", day + 5, account="spare"),
        Event("b", "recovering", day + 6, account="spare"),  # other steps between do not matter
        Event("b", "unsent", day + 7, account="spare", fields={"code": "never_sent"}),
        Event("c", "sending", day + 8, account="main"),  # another article's unsent is not its own
        Event("d", "unsent", day + 9, account="main"),
    )
    counts = store.send_counts(day, day + DAY)
    assert counts.by_account == {"main": 2} and counts.of("spare") == 0, counts


# -- leases --------------------------------------------------------------------------------


def test_a_lease_is_held_by_one_owner_until_it_expires(store):
    assert store.claim_lease("a", "host-a", 30, now=100.0)
    assert not store.claim_lease("a", "host-b", 30, now=110.0)
    assert store.lease("a", 110.0).owner == "host-a"
    assert store.renew_lease("a", "host-a", 30, now=120.0)  # until 150
    assert not store.renew_lease("a", "host-b", 30, now=120.0)
    assert not store.claim_lease("a", "host-b", 30, now=149.0)
    assert store.claim_lease("a", "host-b", 30, now=150.0)  # expired: taken over
    assert not store.renew_lease("a", "host-a", 30, now=151.0)  # woken up: it is lost
    assert not store.release_lease("a", "host-a")
    assert store.release_lease("a", "host-b")
    assert store.lease("a", 151.0) is None


def test_a_lease_ends_at_its_expiry_for_everyone_at_once(store):
    """At the very second a lease expires another host may claim it, so its owner may not renew
    it then, and nobody reads it as held: never two owners at one instant."""
    assert store.claim_lease("a", "host-a", 30, now=100.0)  # until 130
    assert store.lease("a", 129.0).owner == "host-a" and set(store.leases(129.0)) == {"a"}
    assert store.lease("a", 130.0) is None and store.leases(130.0) == {}
    assert not store.renew_lease("a", "host-a", 30, now=130.0)
    with pytest.raises(LeaseLost), store.transaction() as tx:
        tx.check_lease("a", "host-a", 130.0)
    assert store.claim_lease("a", "host-b", 30, now=130.0)
    assert store.lease("a", 130.0).owner == "host-b"


def test_a_step_that_lost_its_lease_writes_nothing(store):
    assert store.claim_lease("a", "host-a", 30, now=100.0)
    with store.transaction() as tx:
        tx.check_lease("a", "host-a", 110.0)
        tx.append(Event("a", "sending", 110.0))
    with pytest.raises(LeaseLost), store.transaction() as tx:
        tx.append(Event("a", "sending", 140.0))
        tx.check_lease("a", "host-a", 140.0)
        tx.record_intent("a", Intent(1, 140.0, "sha"))
    assert [e.ts for e in store.events()] == [110.0] and store.sends("a") == []


# -- several processes, and processes killed mid-step --------------------------------------


def test_processes_appending_and_updating_at_once_lose_nothing(place, store):
    workers, steps = 4, 150
    store_workers.run_at_once(
        store_workers.append_and_update, [(place, n, steps) for n in range(workers)], timeout=120
    )
    events = list(store.events())
    assert len(events) == workers * steps
    for n in range(workers):
        mine = [e.fields["n"] for e in events if e.slug == f"w{n}"]
        assert mine == list(range(steps))  # each worker's events whole and in its order
    assert {slug: r.attempts for slug, r in store.articles().items()} == {
        f"w{n}": steps for n in range(workers)
    }


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_a_process_killed_inside_a_step_leaves_nothing_of_it(place, store, how):
    with store.transaction() as tx:
        tx.append(Event("before", "done", 1.0))
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=store_workers.die_inside_a_step, args=(place, ready, how))
    proc.start()
    assert ready.wait(60)
    if how == "sigkill":
        os.kill(proc.pid, signal.SIGKILL)
    proc.join(60)
    assert proc.exitcode in (1, -signal.SIGKILL)
    again = open_place(place)
    try:
        assert [e.slug for e in again.events()] == ["before"]
        assert again.article("cut") is None and again.sends("cut") == []
        with again.transaction() as tx:  # and the store goes on
            tx.record_intent("cut", Intent(1, 2.0, "sha"))
        assert again.article("cut").intent is not None
    finally:
        again.close()


def test_a_one_time_key_is_claimed_once(store):
    with store.transaction() as tx:
        assert tx.claim_meta("job", "first")
    with store.transaction() as tx:
        assert not tx.claim_meta("job", "second")
    assert store.meta("job") == "first" and store.meta("other") is None


def test_a_step_reads_its_own_writes_for_a_read_modify_write(store):
    with store.transaction() as tx:
        tx.put_article(ArticleRecord("a", attempts=1))
        record = tx.article("a")
        tx.put_article(ArticleRecord("a", attempts=record.attempts + 1))
        assert tx.article("missing") is None
    assert store.article("a").attempts == 2


def test_every_articles_sends_in_one_read(store):
    with store.transaction() as tx:
        tx.record_intent("b", Intent(1, 1.0, "sha", account="spare"))
        tx.record_intent("a", Intent(2, 2.0, "sha", account="main"))
        tx.record_intent("a", Intent(1, 1.0, "sha", account="main"))
    assert [(s.slug, s.turn, s.account) for s in store.sends()] == [
        ("a", 1, "main"),
        ("a", 2, "main"),
        ("b", 1, "spare"),
    ]


def test_first_sends_are_each_articles_turn_one_by_slug(store):
    with store.transaction() as tx:
        tx.record_intent("b", Intent(1, 1.0, "sha", account="spare"))
        tx.record_intent("a", Intent(2, 2.0, "sha", account="other"))
        tx.record_intent("a", Intent(1, 1.0, "sha", account="main"))
        tx.record_sent("a", 1, "https://chat.qwen.ai/c/a", 1.5)
    firsts = store.first_sends()
    assert sorted(firsts) == ["a", "b"]
    assert (firsts["a"].turn, firsts["a"].account, firsts["a"].chat_url) == (
        1,
        "main",
        "https://chat.qwen.ai/c/a",
    )
    assert (firsts["b"].account, firsts["b"].chat_url) == ("spare", "")


@pytest.mark.parametrize("protocol", [Store, Transaction])
def test_the_implementation_has_every_method_of_the_protocol_with_its_parameters(store, protocol):
    with store.transaction() as tx:
        implementation = store if protocol is Store else tx
    for name, wanted in vars(protocol).items():
        if name.startswith("_") and name not in ("__enter__", "__exit__") or not callable(wanted):
            continue
        method = getattr(implementation, name, None)
        assert method is not None, f"{type(implementation).__name__} lacks {name}"
        expected = list(inspect.signature(wanted).parameters)[1:]
        assert list(inspect.signature(method).parameters) == expected, name


def test_summaries_follow_every_append_as_the_events_say(store):
    with store.transaction() as tx:
        tx.append(Event("a", "sending", 1.0, fields={"engine": "qwen"}))
        tx.append(Event("b", "sent", 2.0, fields={"chat_url": "u-b", "engine": "qwen"}))
        tx.append(Event("a", "sent", 3.0, fields={"chat_url": "u-a", "engine": "qwen"}))
        tx.append(Event("a", "poll", 4.0))
        tx.append(Event("b", "done", 5.0, fields={"engine": "qwen", "turns": 3}))
        tx.append(Event("c", "fallback", 6.0, fields={"engine": "router"}))
    got = store.summaries()
    assert got["a"] == Summary("a", last_event="poll", sent_ts=3.0, chat_url="u-a", engine="qwen", turns=0)
    assert got["b"] == Summary("b", last_event="done", sent_ts=2.0, chat_url="u-b", engine="qwen", turns=3)
    assert got["c"] == Summary("c", last_event="fallback", engine="router")
    newest = {e.slug: e.event for e in store.events()}  # oldest first: the last one stays
    assert {slug: s.last_event for slug, s in got.items()} == newest


def test_summaries_of_a_step_cut_off_are_not_written(store):
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.append(Event("a", "sent", 1.0, fields={"chat_url": "u"}))
        raise RuntimeError("killed")
    assert store.summaries() == {}


def test_prompt_checks_are_remembered_and_replaced(store):
    assert store.prompt_checks() == {}
    with store.transaction() as tx:
        tx.put_prompt_checks([PromptCheck("a", "1:2:3", ""), PromptCheck("b", "4:5:6", "b.md: empty")])
    with store.transaction() as tx:
        tx.put_prompt_checks([PromptCheck("a", "7:8:9", "a.md: not UTF-8")])
    assert store.prompt_checks() == {
        "a": PromptCheck("a", "7:8:9", "a.md: not UTF-8"),
        "b": PromptCheck("b", "4:5:6", "b.md: empty"),
    }


def test_a_finished_article_is_recorded_once_and_listed_without_its_document(store):
    from pipeline.store.protocol import Finished

    first = Finished("alpha", "qwen", "a", "h1", 10.0, "+++\ntitle = 'A'\n+++\n\nbody\n")
    with store.transaction() as tx:
        assert tx.put_finished(first)
    with store.transaction() as tx:  # a second finish (another host's) changes nothing
        assert not tx.put_finished(Finished("alpha", "router", "", "h2", 11.0, "other"))
    listed = store.finished()
    assert listed == {"alpha": Finished("alpha", "qwen", "a", "h1", 10.0, "")}
    assert store.finished(["alpha", "beta"]) == {"alpha": first}
    assert store.finished([]) == {}


def test_a_finished_article_cut_off_with_its_step_is_not_recorded(store):
    from pipeline.store.protocol import Finished

    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.put_finished(Finished("alpha", "qwen", document="x"))
        raise RuntimeError("killed")
    assert store.finished() == {}


def test_each_account_is_served_by_its_latest_host(store):
    with store.transaction() as tx:
        tx.serve("h1", ["a", "b"], 100.0)
    with store.transaction() as tx:
        tx.serve("h2", ["b"], 200.0)
        tx.serve("h1", ["a"], 150.0)
    served = store.served()
    assert {k: (v.host, v.seen) for k, v in served.items()} == {"a": ("h1", 150.0), "b": ("h2", 200.0)}


def test_every_lease_held_now_in_one_read(store):
    assert store.claim_lease("a", "h1:1:x", 10, 100.0) and store.claim_lease("b", "h2:1:y", 50, 100.0)
    assert set(store.leases(105.0)) == {"a", "b"}
    assert {slug: lease.owner for slug, lease in store.leases(120.0).items()} == {"b": "h2:1:y"}


def test_a_chats_deletion_is_pending_until_it_is_recorded_deleted(store):
    from dataclasses import replace

    from pipeline.store.protocol import ChatDeletion

    a = ChatDeletion("https://chat.qwen.ai/c/a", "alpha", "acct", since=10.0)
    b = ChatDeletion("https://chat.qwen.ai/c/b", "beta", "default", since=20.0)
    with store.transaction() as tx:
        tx.put_chat_deletion(b)
        tx.put_chat_deletion(a)
    assert store.chat_deletions(pending=True) == [a, b]  # oldest first
    failed = replace(a, tries=1, last_error="api_error")
    done = replace(b, deleted_at=30.0)
    with store.transaction() as tx:
        tx.put_chat_deletion(failed)
        tx.put_chat_deletion(done)
    assert store.chat_deletions(pending=True) == [failed]
    assert store.chat_deletions("beta") == [done] and not done.pending
    assert store.chat_deletions() == [failed, done]
    with pytest.raises(RuntimeError), store.transaction() as tx:  # cut off: nothing of it
        tx.put_chat_deletion(replace(failed, deleted_at=40.0))
        raise RuntimeError("killed")
    assert store.chat_deletions(pending=True) == [failed]
