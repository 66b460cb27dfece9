"""The lease a host holds on an article in a shared batch (contract/hosts.ArticleLease), with the
fake engines and the SQLite store (the Store protocol's leases; the PostgreSQL runs are
tests/integration/test_shared_batch.py and test_hosts.py): a step whose lease is gone records
no intent and sends nothing."""

from __future__ import annotations

import time

import pytest
from fakes import answer
from lease_steps import OTHER_HOST, leased_step, paused_lease, take_over
from project_files import add_prompt

from pipeline.contract.hosts import ArticleLease, host_of, owner_token
from pipeline.contract.step import Status, generate
from pipeline.store.protocol import LeaseLost


def test_an_owner_token_names_its_host_and_is_never_reused():
    first, second = owner_token("berlin-1"), owner_token("berlin-1")
    assert first != second and host_of(first) == host_of(second) == "berlin-1"
    assert host_of("") == "" and host_of("h:1:x") == "h"


def test_a_lease_taken_over_while_stopped_makes_the_step_send_nothing(project, workspace, engines, chat):
    add_prompt(project, "tea")
    store = workspace.store
    lease = paused_lease(store)
    assert store.claim_lease("tea", OTHER_HOST, 30, time.time() + 31)  # expired, taken by h2
    with pytest.raises(LeaseLost):
        leased_step(workspace, engines, lease).run()
    assert chat.sends == 0 and store.sends("tea") == []  # no intent recorded, no click
    assert not (project / "articles" / "tea.md.sending").exists()


def test_a_held_lease_sends_once_with_its_owner_recorded_and_is_released(project, workspace, engines, chat):
    add_prompt(project, "tea")
    store = workspace.store
    lease = ArticleLease(store, "tea", "h1", 30)
    assert lease.claim() == ""
    assert ArticleLease(store, "tea", "h2", 30).claim() == lease.owner  # held: the other steps aside
    outcome = leased_step(workspace, engines, lease).run()
    lease.release()
    assert outcome.status is Status.QUEUED and chat.sends == 1
    (send,) = store.sends("tea")
    assert send.owner == lease.owner and send.chat_url
    assert store.lease("tea", time.time()) is None


def test_a_lease_that_cannot_be_renewed_is_lost(workspace):
    store = workspace.store
    lease = ArticleLease(store, "tea", "h1", 0.3)  # renewed every 0.1 s
    assert lease.claim() == ""
    take_over(store, lease)  # as if it expired and another host took it
    lease._thread.join(timeout=30)  # its next renewal finds the lease another's, and stops
    assert lease.lost and not lease._thread.is_alive()
    with pytest.raises(LeaseLost):
        lease.check()
    lease.release()
    assert store.lease("tea", time.time()).owner == OTHER_HOST  # only its owner releases it


def test_a_lease_lost_between_the_intent_and_the_click_never_clicks(
    project, workspace, engines, chat, monkeypatch
):
    """The intent was recorded with the lease held; then (a host paused past its lease) another
    host took it before the click: the check just before the click stops the send (issue 29)."""
    from pipeline.contract.journal import Journal

    add_prompt(project, "tea")
    store = workspace.store
    lease = paused_lease(store)
    original = Journal.append

    def append(self, slug, event, **fields):
        entry = original(self, slug, event, **fields)
        if event == "sending":  # the intent is on record: now the lease goes to h2
            assert store.sends("tea") and store.sends("tea")[0].chat_url == ""
            take_over(store, lease)
        return entry

    monkeypatch.setattr(Journal, "append", append)
    with pytest.raises(LeaseLost):
        leased_step(workspace, engines, lease).run()
    assert chat.sends == 0  # never clicked
    assert [s.chat_url for s in store.sends("tea")] == [""]  # an intent, no send: h2 recovers it


@pytest.mark.parametrize("first", ["this host", "another host"])
def test_a_leased_step_writes_the_batchs_finished_article(project, workspace, engines, chat, first):
    """In a shared batch the batch's row is the article: the first host to finish it wins, and
    a host finishing after it writes that document, not its own."""
    from pipeline.store.protocol import Finished

    add_prompt(project, "tea")
    store = workspace.store
    assert generate(workspace, "tea", engines).status is Status.QUEUED
    theirs = '+++\ntitle = "Tea"\n+++\n\nThe other host\'s article about tea.\n'
    if first == "another host":
        with store.transaction() as tx:
            assert tx.put_finished(Finished("tea", "qwen", "default", "h2", time.time(), theirs))
    lease = ArticleLease(store, "tea", "h1", 30)
    assert lease.claim() == ""
    chat.enqueue_check(answer())
    outcome = leased_step(workspace, engines, lease).run()
    lease.release()
    assert outcome.status is Status.DONE, outcome
    written = (project / "articles" / "tea.md").read_text()
    (row,) = store.finished(["tea"]).values()
    here = workspace.config.store.host
    assert row.document == written and row.host == ("h2" if first == "another host" else here)
    assert (written == theirs) == (first == "another host")


def test_a_lease_lost_before_the_page_names_the_chat_lets_nothing_go(project, workspace, engines, chat):
    """The last check is in the same store transaction as the chat's name, just before the page lets the
    prompt go: a lease lost after the check before the click still stops the send there."""
    add_prompt(project, "tea")
    store = workspace.store
    lease = paused_lease(store)
    check = lease.check

    def check_then_lose(in_step=None):
        check(in_step) if in_step is not None else check()
        if in_step is None:  # the check before the click passed; then h2 takes the lease over
            take_over(store, lease)

    lease.check = check_then_lose
    with pytest.raises(LeaseLost):
        leased_step(workspace, engines, lease).run()
    assert all(not texts for texts in chat.messages.values())  # the prompt never went
    assert [(s.chat_url, s.chat_id) for s in store.sends("tea")] == [("", "")]  # no chat named
