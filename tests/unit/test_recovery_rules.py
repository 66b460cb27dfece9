"""Recovery after a crash, honest send counts and front matter ownership, with the fake engines."""

from __future__ import annotations

import hashlib
import json
import time
import tomllib

import pytest
from fakes import Crash, answer, crash_at, took_nothing
from project_files import add_prompt

from pipeline.contract.step import RECOVERY_CLOCK_SLACK, Status, adoptable_chat, generate
from pipeline.engines.base import FoundChat, HardError


def front_matter(path):
    text = path.read_text(encoding="utf-8")
    head, _body = text[4:].split("\n+++\n", 1)
    return tomllib.loads(head)


def events(workspace, slug=None):
    return [e["event"] for e in workspace.journal.read(slug=slug)]


# -- 12: keys qwenpipe owns ----------------------------------------------------------------------


def test_a_router_article_never_carries_the_prompts_own_chat_url(project, workspace, engines):
    add_prompt(project, "tea", meta='chat_url = "https://example.com/c/mine"\nmodel = "mine"\nauthor = "Ann"')
    outcome = generate(workspace, "tea", engines, engine="router")
    assert outcome.status is Status.DONE and outcome.engine == "router"
    meta = front_matter(project / "articles" / "tea.md")
    assert "chat_url" not in meta and meta["engine"] == "router" and meta["model"] == "test/model"
    assert meta["author"] == "Ann", "the prompt's own keys still pass through"


def test_a_router_article_after_a_failed_chat_does_not_name_the_chat(project, workspace, engines, chat):
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(HardError("chat gone", code="chat_deleted"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.DONE and outcome.engine == "router"
    meta = front_matter(project / "articles" / "tea.md")
    assert meta["engine"] == "router" and "chat_url" not in meta


def test_a_chat_article_without_a_model_does_not_take_the_prompts_model(project, workspace, engines, chat):
    add_prompt(project, "tea", meta='model = "not-the-chat"\nprompt_sha256 = "forged"')
    generate(workspace, "tea", engines)
    chat.enqueue_check(answer())
    assert generate(workspace, "tea", engines).status is Status.DONE
    meta = front_matter(project / "articles" / "tea.md")
    assert meta["engine"] == "qwen" and "model" not in meta
    assert meta["prompt_sha256"] != "forged" and len(meta["prompt_sha256"]) == 64


# -- 6: a send that never reached the site is not a send ------------------------------------------


def no_router(project):
    from pipeline.config import load
    from pipeline.wiring import workspace as open_workspace

    (project / "config.toml").write_text(
        "[qwen]\npoll_interval = 0\nmax_attempts = 5\nmax_sends_per_day = 1\n"
        "[router]\nenabled = false\n[article]\nmin_words = 0\n"
    )
    return open_workspace(load(project / "config.toml"))


def logged_out_before_typing() -> HardError:
    return took_nothing(HardError("not logged in to the chat site: run `qwenpipe login`", code="logged_out"))


def test_a_send_refused_before_typing_counts_no_send_and_leaves_no_marker(project, chat):
    from pipeline.contract.quota import sends_today
    from pipeline.contract.workspace import Engines
    from pipeline.wiring import router_engine

    ws = no_router(project)
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=router_engine)
    add_prompt(project, "tea")
    for _ in range(2):
        chat.send_error = logged_out_before_typing()
        assert generate(ws, "tea", eng).status is Status.FAILED
        assert not (project / "articles" / "tea.md.sending").exists()
    assert sends_today(ws.journal, time.time()) == 0
    assert events(ws).count("unsent") == 2
    chat.send_error = None  # logged in again: the daily limit of 1 is still whole
    outcome = generate(ws, "tea", eng)
    assert outcome.status is Status.QUEUED and chat.sends == 1
    assert "find_chats" not in [h[0] for h in chat.history], "looked for a chat that was never sent"


def test_a_failure_after_the_click_still_counts_and_keeps_the_marker(project, chat):
    from pipeline.contract.quota import sends_today
    from pipeline.contract.workspace import Engines
    from pipeline.wiring import router_engine

    ws = no_router(project)
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=router_engine)
    add_prompt(project, "tea")
    chat.send_error = HardError("no chat address appeared", code="no_chat_url")  # nothing_sent unset
    assert generate(ws, "tea", eng).status is Status.FAILED
    assert (project / "articles" / "tea.md.sending").exists(), "the send may have reached the site"
    assert sends_today(ws.journal, time.time()) == 1


def test_an_unsent_send_gives_its_place_in_the_cycle_budget_back(project, workspace, engines, chat):
    from pipeline.contract.quota import SendBudget

    budget = SendBudget(1)
    add_prompt(project, "tea")
    chat.send_error = logged_out_before_typing()
    assert generate(workspace, "tea", engines, budget=budget).engine == "router"  # it went on
    assert budget.used == 0
    add_prompt(project, "coffee", "Write about coffee.")
    chat.send_error = None
    assert generate(workspace, "coffee", engines, budget=budget).status is Status.QUEUED


def test_the_send_counts_take_back_only_the_unsent_send(project, workspace):
    journal = workspace.journal
    journal.append("a", "sending", engine="qwen")
    journal.append("b", "sending", engine="qwen")
    journal.append("b", "unsent", engine="qwen", code="logged_out")
    journal.append("b", "unsent", engine="qwen", code="logged_out")  # a stray second one takes nothing
    journal.append("c", "sending", engine="qwen")
    journal.append("c", "unsent", engine="qwen", code="logged_out")
    journal.append("c", "sending", engine="qwen")  # sent again: it counts
    assert workspace.store.send_counts(0).total == 2


# -- 5: recovery adopts only this article's chat --------------------------------------------------


class Clock:
    """One clock for the contract and the fake site; tests move it."""

    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def interrupted(workspace, slug, engines, clock, point="before_send", *, older=False):
    with crash_at(point), pytest.raises(Crash):
        generate(workspace, slug, engines, clock=clock)
    assert workspace.article(slug).sending.exists()
    if older:
        as_older_version(workspace, slug)


def as_older_version(workspace, slug):
    """The interrupted send as a version that never named its chat left it: the marker and the
    store's intent without a chat id (recovery then searches the chat list by text)."""
    article = workspace.article(slug)
    marker = json.loads(article.sending.read_text())
    for key in ("names_chat", "chat_id"):
        marker.pop(key, None)
    article.sending.write_text(json.dumps(marker))
    send = next(s for s in workspace.store.sends(slug) if s.turn == 1)
    with workspace.store.transaction() as tx:
        tx.forget_sends(slug)
        tx.record_intent(slug, send.intent._replace(chat_id=None))


def test_a_marker_records_what_recovery_needs(project, workspace, engines):
    add_prompt(project, "tea")
    clock = Clock()
    interrupted(workspace, "tea", engines, clock)
    marker = json.loads(workspace.article("tea").sending.read_text())
    assert marker["time"] == clock.now and marker["account"] == "default"
    assert marker["prompt_sha256"] == hashlib.sha256(b"Write about tea.").hexdigest()


def test_a_second_article_with_the_same_text_never_adopts_the_firsts_chat(project, workspace, engines, chat):
    clock = Clock()
    chat.clock = clock
    add_prompt(project, "tea")
    add_prompt(project, "tea-again")  # the same text (a template)
    assert generate(workspace, "tea", engines, clock=clock).status is Status.QUEUED
    first = (project / "articles" / "tea.md.url").read_text()
    clock.now += 2  # within the clock slack: only the other article's .md.url tells them apart
    interrupted(workspace, "tea-again", engines, clock, older=True)
    said = []
    outcome = generate(workspace, "tea-again", engines, clock=clock, say=said.append)
    assert outcome.status is Status.WORKING and chat.sends == 1  # in doubt: not sent again at once
    assert "recovery_in_doubt" in events(workspace, "tea-again")
    assert any("is tea's" in line and "is in doubt" in line for line in said), said
    clock.now += workspace.config.qwen.lost_chat_after
    outcome = generate(workspace, "tea-again", engines, clock=clock)
    assert outcome.status is Status.QUEUED and chat.sends == 2
    assert (project / "articles" / "tea-again.md.url").read_text() != first


def test_a_chat_made_before_the_marker_is_another_sends(project, workspace, engines, chat):
    """Two workspaces on one account: the other one's chat holds the same text, made earlier."""
    clock = Clock()
    chat.clock = clock
    chat.send("Write about tea.")  # the other workspace's send: no .md.url here names it
    clock.now += 60
    add_prompt(project, "tea")
    interrupted(workspace, "tea", engines, clock, older=True)
    said = []
    outcome = generate(workspace, "tea", engines, clock=clock, say=said.append)
    assert outcome.status is Status.WORKING and chat.sends == 1
    assert any("60 s before this send" in line for line in said), said
    reasons = [
        e.get("reason", "") for e in workspace.journal.read(slug="tea") if e["event"] == "recovery_in_doubt"
    ]
    assert reasons and "before this send" in reasons[0]


def test_the_chat_an_interrupted_send_made_is_adopted_even_with_a_clock_a_little_behind(
    project, workspace, engines, chat
):
    clock = Clock()
    chat.clock = lambda: clock.now - 5  # the site's clock runs 5 s behind ours
    add_prompt(project, "tea")
    interrupted(workspace, "tea", engines, clock, point="after_send", older=True)
    outcome = generate(workspace, "tea", engines, clock=clock)
    assert chat.sends == 1 and outcome.status is Status.WORKING
    assert (project / "articles" / "tea.md.url").read_text().strip() == chat.known_chats["Write about tea."]
    assert "recovered" in events(workspace, "tea")


@pytest.mark.parametrize("older", [False, True], ids=["intent naming its chat", "older intent"])
def test_an_adopted_chat_is_the_stores_send_of_that_article(project, workspace, engines, chat, older):
    """What other hosts of a shared batch write to their .md.url, and what keeps a second article
    with the same text from adopting this chat, is the store's send: an adoption records it."""
    clock = Clock()
    chat.clock = clock
    add_prompt(project, "tea")
    interrupted(workspace, "tea", engines, clock, point="after_send", older=older)
    assert generate(workspace, "tea", engines, clock=clock).status is Status.WORKING
    url = (project / "articles" / "tea.md.url").read_text().strip()
    sends = workspace.store.sends("tea")
    assert [(s.turn, s.chat_url, s.account) for s in sends] == [(1, url, "default")]
    assert workspace.store.send_counts(0).total == chat.sends == 1


@pytest.mark.parametrize("case", ["unknown time", "two fresh chats", "old marker"])
def test_recovery_in_doubt_sends_again_only_when_lost_and_says_why(project, workspace, engines, chat, case):
    """An intent an older version wrote names no chat: the chat list decides; in doubt, the
    prompt is sent again only after qwen.lost_chat_after."""
    clock = Clock()
    chat.clock = clock
    add_prompt(project, "tea")
    interrupted(workspace, "tea", engines, clock, point="after_send", older=True)
    if case == "unknown time":
        chat.created = dict.fromkeys(chat.created)
    elif case == "two fresh chats":
        chat.send("Write about tea.")  # another workspace, at the same moment
    else:
        workspace.article("tea").sending.write_text("{}")
    sends = chat.sends
    said = []
    outcome = generate(workspace, "tea", engines, clock=clock, say=said.append)
    assert outcome.status is Status.WORKING and chat.sends == sends
    assert "recovery_in_doubt" in events(workspace, "tea")
    assert any("is in doubt" in line for line in said), said
    clock.now += workspace.config.qwen.lost_chat_after
    outcome = generate(workspace, "tea", engines, clock=clock, say=said.append)
    assert outcome.status is Status.QUEUED and chat.sends == sends + 1
    assert any("taking it as lost, sending again" in line for line in said), said


def test_adoptable_chat_rules():
    since = 1_800_000_000.0
    marker = {"time": since, "prompt_sha256": "h", "account": "default"}
    url = "https://chat.qwen.ai/c/{}-0000-4000-8000-000000000000".format
    mine = FoundChat(url("00000001"), since + 3)
    assert adoptable_chat([mine], marker, "h", {}) == (mine.url, "")
    slack = FoundChat(url("00000002"), since - RECOVERY_CLOCK_SLACK)
    assert adoptable_chat([slack], marker, "h", {})[0] == slack.url
    older = FoundChat(url("00000003"), since - RECOVERY_CLOCK_SLACK - 1)
    assert adoptable_chat([older], marker, "h", {})[0] is None
    assert adoptable_chat([mine, older], marker, "h", {})[0] == mine.url
    assert adoptable_chat([mine], marker, "h", {"/c/00000001-0000-4000-8000-000000000000": "b"})[0] is None
    assert adoptable_chat([mine, FoundChat(url("00000004"), None)], marker, "h", {})[0] is None
    assert adoptable_chat([mine], {**marker, "account": "work"}, "h", {})[0] is None
    assert adoptable_chat([mine], {"time": True, "prompt_sha256": "h"}, "h", {})[0] is None
    assert adoptable_chat([mine], None, "h", {})[0] is None


def test_a_hosts_daily_count_is_its_own_accounts_sends_only(workspace):
    """A batch several hosts share counts every host's sends; qwen.max_sends_per_day of one host
    counts its own accounts' (quota.host_accounts gives them; None on one machine: every send)."""
    from pipeline.contract.quota import host_accounts, sends_today

    for account in ("a", "a", "b"):
        workspace.journal.append("tea", "sending", engine="qwen", account=account)
    now = time.time()
    assert sends_today(workspace.journal, now) == 3
    assert sends_today(workspace.journal, now, ["a"]) == 2 and sends_today(workspace.journal, now, []) == 0
    assert host_accounts(workspace.config) is None


# -- the order of the two writes that end a send --------------------------------------------------


@pytest.mark.parametrize("path", ["send", "recovery"])
def test_the_intent_marker_of_a_taken_send_goes_only_once_its_url_is_on_disk(
    project, workspace, engines, chat, monkeypatch, path
):
    """A kill between removing SLUG.md.sending and writing SLUG.md.url would leave neither file,
    and the next run would send again: the marker of a send the site took goes only after the
    URL is on disk (a kill between them leaves both, and the URL wins). No crash point sits
    between the two writes, so this watches the order itself."""
    from pipeline import files

    seen = []
    remove = files.remove

    def watched(target):
        if target.name.endswith(".md.sending") and target.exists():
            seen.append(target.with_name(target.name.replace(".md.sending", ".md.url")).exists())
        return remove(target)

    add_prompt(project, "tea")
    clock = Clock()
    if path == "recovery":
        interrupted(workspace, "tea", engines, clock, point="after_send")
    monkeypatch.setattr(files, "remove", watched)
    outcome = generate(workspace, "tea", engines, clock=clock)
    assert chat.sends == 1 and outcome.status in (Status.QUEUED, Status.WORKING), outcome
    assert seen == [True], "the marker went before the URL was written"
    assert (project / "articles" / "tea.md.url").exists()


def test_an_article_written_while_its_marker_stands_removes_the_marker_only_after_the_article(
    project, workspace, engines, chat, monkeypatch
):
    """A send that may have reached the site keeps its marker; when the router then writes the
    article, the marker goes only once the article is on disk: a kill between them must leave
    the marker (recovery, no second send), never neither file (a second send)."""
    from pipeline import files

    seen = []
    remove = files.remove

    def watched(target):
        if target.name == "tea.md.sending" and target.exists():
            seen.append(target.with_name("tea.md").exists())
        return remove(target)

    add_prompt(project, "tea")
    chat.send_error = HardError("no chat address appeared", code="no_chat_url")  # may have been sent
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.FAILED and workspace.article("tea").sending.exists(), outcome
    monkeypatch.setattr(files, "remove", watched)  # the router asked for by hand, the send in doubt
    outcome = generate(workspace, "tea", engines, engine="router")
    assert outcome.status is Status.DONE and outcome.engine == "router", outcome
    assert seen == [True], "the marker went before the article was written"


def test_a_first_send_after_the_files_of_an_earlier_one_were_deleted_forgets_it(
    project, workspace, engines, chat
):
    """Deleting SLUG.md.url asks for a new send (replay says so): the store's record of the
    earlier send must not refuse it as a second send of turn 1."""
    add_prompt(project, "tea")
    assert generate(workspace, "tea", engines).status is Status.QUEUED
    (project / "articles" / "tea.md.url").unlink()
    assert generate(workspace, "tea", engines).status is Status.QUEUED and chat.sends == 2
    url = (project / "articles" / "tea.md.url").read_text().strip()
    assert [(s.turn, s.chat_url) for s in workspace.store.sends("tea")] == [(1, url)]


@pytest.mark.parametrize("store_knows", ["nothing", "no account"])
def test_an_adoption_records_the_send_the_store_lost_with_the_markers_account_and_time(
    project, workspace, engines, chat, store_knows
):
    """The database was deleted (it loses history, never an article), or an older version
    recorded the intent without an account: the chat found is recorded as the marker says."""
    from pipeline.store.protocol import Intent

    clock = Clock()
    chat.clock = clock
    add_prompt(project, "tea")
    interrupted(workspace, "tea", engines, clock, point="after_send")
    marker = json.loads(workspace.article("tea").sending.read_text())
    (send,) = workspace.store.sends("tea")
    with workspace.store.transaction() as tx:
        tx.forget_sends("tea")
        if store_knows == "no account":
            tx.record_intent("tea", Intent(1, send.intent_at, send.prompt_sha256, "", 1, "", send.chat_id))
    clock.now += 10
    assert generate(workspace, "tea", engines, clock=clock).status is Status.WORKING and chat.sends == 1
    url = (project / "articles" / "tea.md.url").read_text().strip()
    (send,) = workspace.store.sends("tea")
    assert (send.turn, send.chat_url, send.account, send.intent_at) == (1, url, "default", marker["time"])


def test_an_adoption_saves_the_articles_state_before_its_journal_step(
    project, workspace, engines, chat, monkeypatch
):
    """Killed while journaling the recovery, the record already says when and what was sent."""
    from pipeline.contract.article import ArticleState
    from pipeline.contract.journal import Journal

    clock = Clock()
    add_prompt(project, "tea")
    interrupted(workspace, "tea", engines, clock, point="after_send")
    original = Journal.append

    def append(self, slug, event, **fields):
        if event == "recovered":
            raise Crash("mid_journal")
        return original(self, slug, event, **fields)

    monkeypatch.setattr(Journal, "append", append)
    clock.now += 10
    with pytest.raises(Crash):
        generate(workspace, "tea", engines, clock=clock)
    state = ArticleState.load(workspace.store, workspace.article("tea"))
    assert (state.engine, state.sent_sha256) == ("qwen", hashlib.sha256(b"Write about tea.").hexdigest())
    assert state.sent_at == clock.now
