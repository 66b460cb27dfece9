"""The intent names its chat before the prompt leaves (issue 26, item 11), and what recovery does
with it: an edited prompt is not sent twice (issue 27, item 6), a send that never happened is
given back (item 7), with the fake engines. The browser's side is in
tests/integration/test_intents_cli.py."""

from __future__ import annotations

import hashlib
import json

import pytest
from fakes import Crash, answer, crash_at
from project_files import add_prompt, write_config

from pipeline.config import load
from pipeline.contract.quota import sends_today
from pipeline.contract.step import Status, generate, replay
from pipeline.contract.workspace import Engines
from pipeline.errors import UsageProblem
from pipeline.wiring import router_engine
from pipeline.wiring import workspace as open_workspace

TEXT = "Write about tea."


def killed(workspace, slug, engines, point):
    with crash_at(point), pytest.raises(Crash):
        generate(workspace, slug, engines)
    assert workspace.article(slug).sending.exists()


def events(workspace, slug):
    return [e["event"] for e in workspace.journal.read(slug=slug)]


def received(chat, text=TEXT) -> int:
    """How many times the site got `text` (every chat holding it as a message)."""
    return sum(users.count(text) for users in chat.messages.values())


# -- item 11: the chat is on record before the prompt leaves --------------------------------------


def test_the_chat_is_named_in_the_marker_and_the_store_before_the_prompt_leaves(
    project, workspace, engines, chat
):
    add_prompt(project, "tea")
    seen = {}
    original = chat.send

    def send(text, choice=None, *, on_chat_id=None):
        def named(chat_id):
            on_chat_id(chat_id)
            seen["marker"] = json.loads(workspace.article("tea").sending.read_text())
            seen["store"] = [s.chat_id for s in workspace.store.sends("tea")]
            seen["received"] = received(chat)

        return original(text, choice, on_chat_id=named)

    chat.send = send
    outcome = generate(workspace, "tea", engines)
    chat_id = outcome.chat_url.rsplit("/", 1)[1]
    assert seen == {
        "marker": {**seen["marker"], "chat_id": chat_id},
        "store": [chat_id],
        "received": 0,
    }


def test_a_chat_that_cannot_be_recorded_is_never_sent_to(project, workspace, engines, chat):
    add_prompt(project, "tea")
    original = chat.send

    def send(text, choice=None, *, on_chat_id=None):
        on_chat_id("../not-a-chat")  # a chat id recovery could never open: refused, nothing sent
        return original(text, choice, on_chat_id=on_chat_id)

    chat.send = send
    # The site's answer, not the user's input: never exit 2 (UsageProblem), an unknown answer
    # journalled; this fake lets its send fail as it is (the real hold also marks it nothing_sent).
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.WORKING and "unknown_answer" in events(workspace, "tea")
    assert received(chat) == 0 and chat.sends == 0
    assert [s.chat_id for s in workspace.store.sends("tea")] == [""]  # nothing named: never sent


def test_a_send_killed_before_its_prompt_left_is_sent_once(project, workspace, engines, chat):
    """Its named chat is there and empty: the proof it was never sent (before the click, with no
    chat named, nothing proves it: tests/unit/test_in_doubt.py)."""
    add_prompt(project, "tea")
    killed(workspace, "tea", engines, "after_naming")
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.QUEUED and received(chat) == 1
    assert "recovery_not_found" in events(workspace, "tea")
    looked = [h[0] for h in chat.history if h[0] in ("find_chats", "user_messages")]
    assert looked == ["user_messages"]


def test_two_workspaces_on_one_account_killed_after_sending_the_same_text_each_adopt_their_own(
    tmp_path, chat
):
    """Same text, same account, the same second: only the named chat tells them apart."""
    spaces = []
    for name in ("one", "two"):
        root = tmp_path / name
        (root / "prompts").mkdir(parents=True)
        (root / "articles").mkdir()
        write_config(root, "[qwen]\npoll_interval = 0\n[article]\nmin_words = 0\n")
        add_prompt(root, "tea")
        ws = open_workspace(load(root / "config.toml"))
        spaces.append(
            (root, ws, Engines(ws.config, chat_factory=lambda _c: chat, router_factory=router_engine))
        )
    for _root, ws, engines in spaces:
        killed(ws, "tea", engines, "after_send")
    urls = []
    for root, ws, engines in spaces:
        assert generate(ws, "tea", engines).status is Status.WORKING
        urls.append((root / "articles" / "tea.md.url").read_text())
    assert urls[0] != urls[1] and received(chat) == 2 and chat.sends == 2
    assert not any(h[0] == "find_chats" for h in chat.history)


def test_a_named_chat_the_site_no_longer_has_is_sent_anew_only_when_lost(project, workspace, engines, chat):
    add_prompt(project, "tea")
    killed(workspace, "tea", engines, "after_send")
    chat.messages.clear()  # deleted on the site before anyone answered it (or not shown yet)
    now = [__import__("time").time()]
    assert generate(workspace, "tea", engines, clock=lambda: now[0]).status is Status.WORKING
    assert chat.sends == 1
    now[0] += workspace.config.qwen.lost_chat_after
    outcome = generate(workspace, "tea", engines, clock=lambda: now[0])
    assert outcome.status is Status.QUEUED and chat.sends == 2


# -- issue 27, item 6: an edited prompt is not sent twice -----------------------------------------


@pytest.mark.parametrize("older", [False, True], ids=["named chat", "older intent"])
def test_a_prompt_edited_after_a_crash_adopts_the_chat_of_what_was_sent(
    project, workspace, engines, chat, older
):
    add_prompt(project, "tea")
    killed(workspace, "tea", engines, "after_send")
    if older:  # a version that never named its chat: the chat list is searched by what was sent
        from test_recovery_rules import as_older_version

        as_older_version(workspace, "tea")
    add_prompt(project, "tea", "Write about green tea instead.")
    said = []
    chat.enqueue_check(answer())
    outcome = generate(workspace, "tea", engines, say=said.append)
    assert chat.sends == 1 and received(chat, "Write about green tea instead.") == 0
    assert outcome.status is Status.DONE
    assert any("changed after it was sent" in line and "replay tea --fresh" in line for line in said), said
    recovered = [e for e in workspace.journal.read(slug="tea") if e["event"] == "recovered"]
    assert recovered[0]["prompt_edited_after_send"] is True
    assert "prompt_edited_after_send" in (project / "articles" / "tea.md").read_text() or any(
        e.get("prompt_edited_after_send") for e in workspace.journal.read(slug="tea") if e["event"] == "done"
    )


def test_replay_fresh_is_the_one_way_to_send_the_edited_text(project, workspace, engines, chat):
    add_prompt(project, "tea")
    killed(workspace, "tea", engines, "after_send")
    add_prompt(project, "tea", "Write about green tea instead.")
    assert generate(workspace, "tea", engines).status is Status.WORKING  # adopted, nothing sent
    assert generate(workspace, "tea", engines).status is Status.WORKING
    assert chat.sends == 1
    message = replay(workspace, "tea", fresh=True)
    assert "tea.md.url" in message and not workspace.article("tea").url.exists()
    assert workspace.store.sends("tea") == []
    assert generate(workspace, "tea", engines).status is Status.QUEUED
    assert received(chat, "Write about green tea instead.") == 1 and chat.sends == 2
    assert [e for e in workspace.journal.read(slug="tea") if e["event"] == "replay"][0]["fresh"] is True


def test_replay_fresh_refuses_a_done_article(project, workspace, engines, chat):
    add_prompt(project, "tea")
    chat.enqueue_check(answer())
    generate(workspace, "tea", engines)
    generate(workspace, "tea", engines)
    assert workspace.article("tea").md.exists()
    with pytest.raises(UsageProblem, match="delete it first"):
        replay(workspace, "tea", fresh=True)


# -- issue 27, item 7: a send that never happened is given back -----------------------------------


@pytest.mark.parametrize("point", ["after_naming"])
def test_sends_killed_before_the_prompt_left_do_not_use_the_daily_limit(tmp_path, chat, point):
    root = tmp_path
    (root / "prompts").mkdir()
    (root / "articles").mkdir()
    write_config(root, "[qwen]\npoll_interval = 0\nmax_sends_per_day = 2\n[article]\nmin_words = 0\n")
    add_prompt(root, "tea")
    ws = open_workspace(load(root / "config.toml"))
    engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=router_engine)
    for _ in range(2):
        killed(ws, "tea", engines, "before_send" if point == "older intent" else point)
        if point == "older intent":
            from test_recovery_rules import as_older_version

            as_older_version(ws, "tea")
    outcome = generate(ws, "tea", engines)
    assert outcome.status is Status.QUEUED, outcome.message
    assert received(chat) == 1
    assert sends_today(ws.journal, __import__("time").time()) == 1


def test_a_marker_records_the_hash_of_what_it_sends(project, workspace, engines):
    add_prompt(project, "tea")
    killed(workspace, "tea", engines, "before_send")
    marker = json.loads(workspace.article("tea").sending.read_text())
    assert marker["prompt_sha256"] == hashlib.sha256(TEXT.encode()).hexdigest()
    assert "chat_id" not in marker


@pytest.mark.parametrize("dies_at", ["recovery_not_found", "unsent"])
def test_a_kill_while_a_send_is_given_back_never_leaves_it_counted(
    project, workspace, engines, chat, dies_at, monkeypatch
):
    """The intent's withdrawal, its `unsent` step and the marker's removal are one: a process
    killed among them (chaos found it between the withdrawal and `unsent`) leaves either the
    interrupted send to recover again, or the send given back; the day's count is always the
    sends the site took."""
    from pipeline.contract.journal import Journal

    add_prompt(project, "tea")
    killed(workspace, "tea", engines, "after_naming")  # its chat there and empty: given back
    original = Journal.append_in

    def append_in(self, tx, slug, event, **fields):
        entry = original(self, tx, slug, event, **fields)
        if event == dies_at:
            raise Crash(event)
        return entry

    with monkeypatch.context() as patched:
        patched.setattr(Journal, "append_in", append_in)
        with pytest.raises(Crash):
            generate(workspace, "tea", engines)
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.QUEUED, outcome.message
    assert received(chat) == 1
    assert workspace.store.send_counts(0).total == 1
