"""Multi-turn prompts with a fake chat: the chat is the record, one send per turn, no stale answer."""

from __future__ import annotations

import pytest
from project_files import add_prompt

from pipeline.contract.step import Status, generate
from pipeline.errors import UsageProblem

THREE = "Outline an article on tea.\n=== next turn ===\nWrite it.\n=== next turn ===\nPolish it."


def user_messages(chat):
    return [text for kind, text in chat.history if kind in ("send", "send_turn")]


def body(project, slug="tea"):
    return (project / "articles" / f"{slug}.md").read_text().split("\n+++\n", 1)[1].strip()


def test_three_turns_one_send_each_and_the_article_is_the_third_answer(project, workspace, engines, chat):
    add_prompt(project, "tea", THREE)
    steps = []
    chat.last_turn_complete.extend([False, True, False, True, False, True])
    for _ in range(10):
        outcome = generate(workspace, "tea", engines)
        steps.append((outcome.status.value, outcome.message.split(":")[1].strip()[:22]))
        if outcome.status is Status.DONE:
            break
    assert [s for s, _ in steps] == ["queued", "working", "queued", "working", "queued", "working", "done"]
    assert user_messages(chat) == ["Outline an article on tea.", "Write it.", "Polish it."]
    assert body(project) == chat.turn_answer(3)
    assert "turns = 3" in (project / "articles" / "tea.md").read_text()


def test_crash_after_sending_turn_2_never_sends_it_again(project, workspace, engines, chat):
    add_prompt(project, "tea", THREE)
    generate(workspace, "tea", engines)
    chat.crash_after_send_turn = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        generate(workspace, "tea", engines)
    chat.crash_after_send_turn = None
    chat.last_turn_complete.append(False)  # turn 2's answer is still growing
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.WORKING and "turn 2 of 3" in outcome.message
    assert not (project / "articles" / "tea.md").exists(), "an article was written from a stale answer"
    while generate(workspace, "tea", engines).status is not Status.DONE:
        pass
    assert user_messages(chat) == ["Outline an article on tea.", "Write it.", "Polish it."]
    assert body(project) == chat.turn_answer(3)


def test_named_answer_turn(project, workspace, engines, chat):
    add_prompt(project, "tea", THREE, meta="[article]\nanswer_turn = 2")
    while generate(workspace, "tea", engines).status is not Status.DONE:
        pass
    assert body(project) == chat.turn_answer(2)


def test_state_shows_the_turn(project, workspace, engines, chat):
    from pipeline.contract.article import ArticleState

    add_prompt(project, "tea", THREE)
    generate(workspace, "tea", engines)
    generate(workspace, "tea", engines)  # turn 1 complete: sends turn 2
    chat.last_turn_complete.append(False)
    generate(workspace, "tea", engines)
    state = ArticleState.load(workspace.store, workspace.article("tea"))
    assert (state.turn, state.turns) == (2, 3) and state.progress.startswith("turn 2 of 3")


def test_a_chat_that_does_not_hold_our_turns_falls_back_with_the_whole_conversation(
    project, workspace, engines, chat, router
):
    add_prompt(project, "tea", THREE)
    generate(workspace, "tea", engines)
    url = (project / "articles" / "tea.md.url").read_text().strip()
    chat.messages[url] = ["Something else entirely."]
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.DONE and outcome.engine == "router"
    assert router.history == ["Outline an article on tea.", "Write it.", "Polish it."]
    assert [len(h) for h in router.conversations] == [0, 1, 2]
    assert router.conversations[2][1][0] == "Write it."
    assert "prompt_mismatch" in [e.get("code") for e in workspace.journal.read()]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("One.\n=== next turn ===\n", "turn 2 of 2 is empty"),
        ("=== next turn ===\nTwo.", "turn 1 of 2 is empty"),
    ],
)
def test_empty_turns_are_refused(project, workspace, engines, text, message):
    add_prompt(project, "tea", text)
    with pytest.raises(UsageProblem, match=message):
        generate(workspace, "tea", engines)


def test_answer_turn_beyond_the_prompt_is_refused(project, workspace, engines):
    add_prompt(project, "tea", "One.\n=== next turn ===\nTwo.", meta="[article]\nanswer_turn = 3")
    with pytest.raises(UsageProblem, match="answer_turn = 3 but the prompt has 2"):
        generate(workspace, "tea", engines)


def test_status_shows_turn_2_of_3(project, workspace, engines, chat):
    from pipeline.batch.dashboard import cells
    from pipeline.batch.status import collect

    add_prompt(project, "tea", THREE)
    generate(workspace, "tea", engines)
    generate(workspace, "tea", engines)
    chat.last_turn_complete.append(False)
    generate(workspace, "tea", engines)
    row = next(r for r in collect(workspace).rows if r.slug == "tea")
    assert (row.turn, row.turns) == (2, 3) and row.to_json()["turns"] == 3
    assert "turn 2 of 3" in cells(row, 0)[1]


# -- a later turn's send holds to the same rules as a first send (mutants survived each) -----------


def sent_turn_1(project, workspace, engines) -> str:
    add_prompt(project, "tea", THREE)
    assert generate(workspace, "tea", engines).status is Status.QUEUED
    return (project / "articles" / "tea.md.url").read_text().strip()


def turn_url(project) -> str:
    return (project / "articles" / "tea.md.url").read_text().strip()


def turn_sends(workspace, number: int = 2):
    return [s for s in workspace.store.sends("tea") if s.turn == number]


def test_a_later_turn_is_recorded_sent_in_its_chat_and_its_state_saved(project, workspace, engines, chat):
    from pipeline.contract.article import ArticleState

    url = sent_turn_1(project, workspace, engines)
    outcome = generate(workspace, "tea", engines)  # turn 1 complete: turn 2 goes
    assert outcome.status is Status.QUEUED and user_messages(chat)[-1] == "Write it."
    assert [(s.chat_url, s.account) for s in turn_sends(workspace)] == [(url, "default")]
    state = ArticleState.load(workspace.store, workspace.article("tea"))
    assert (state.turn, state.progress) == (2, "turn 2 of 3: sent")


def test_a_later_turn_takes_a_place_in_the_cycles_budget(project, workspace, engines, chat):
    from pipeline.contract.quota import SendBudget

    sent_turn_1(project, workspace, engines)
    spent = SendBudget(1)
    assert spent.take()  # the cycle's one send went to another article
    outcome = generate(workspace, "tea", engines, budget=spent)
    assert outcome.status is Status.WORKING and user_messages(chat) == ["Outline an article on tea."]
    assert turn_sends(workspace) == []
    budget = SendBudget(1)
    assert generate(workspace, "tea", engines, budget=budget).status is Status.QUEUED
    assert budget.used == 1 and user_messages(chat)[-1] == "Write it."


def test_a_later_turn_refused_before_typing_is_no_send(project, workspace, engines, chat):
    from pipeline.contract.quota import SendBudget
    from pipeline.engines.base import HardError

    sent_turn_1(project, workspace, engines)
    refused = HardError("not logged in to the chat site: run `qwenpipe login`", code="logged_out")
    refused.nothing_sent = True
    chat.send_turn_error = refused
    budget = SendBudget(2)
    generate(workspace, "tea", engines, budget=budget)
    assert turn_sends(workspace) == [] and budget.used == 0  # its intent and its place given back
    unsent = [e for e in workspace.journal.read(slug="tea") if e["event"] == "unsent"]
    assert [(e.get("turn"), e.get("code")) for e in unsent] == [(2, "logged_out")]
    assert workspace.store.send_counts(0).total == 1


def test_a_later_turn_that_failed_after_the_click_still_counts(project, workspace, engines, chat):
    from pipeline.contract.quota import SendBudget
    from pipeline.engines.base import TransientError

    sent_turn_1(project, workspace, engines)
    chat.send_turn_error = TransientError("the connection dropped after the submit", code="network")
    budget = SendBudget(2)
    generate(workspace, "tea", engines, budget=budget)
    assert [s.chat_url for s in turn_sends(workspace)] == [""]  # the intent stays: in doubt
    assert budget.used == 1 and workspace.store.send_counts(0).total == 2
    assert "unsent" not in [e["event"] for e in workspace.journal.read(slug="tea")]
    # The chat is the record: it does not hold turn 2, so the next run sends it (its intent in
    # doubt is withdrawn, not taken for a send the chat would show)
    chat.send_turn_error = None
    assert generate(workspace, "tea", engines).status is Status.QUEUED
    assert (
        user_messages(chat)[-2:] == ["Write it.", "Write it."]
        and chat.messages[turn_url(project)][-1] == "Write it."
    )
    assert [bool(s.chat_url) for s in turn_sends(workspace)] == [True]


def test_a_lease_lost_between_a_later_turns_intent_and_its_click_never_clicks(
    project, workspace, engines, chat, monkeypatch
):
    from lease_steps import leased_step, paused_lease, take_over

    from pipeline.contract.journal import Journal
    from pipeline.store.protocol import LeaseLost

    sent_turn_1(project, workspace, engines)
    store = workspace.store
    lease = paused_lease(store)
    original = Journal.append

    def append(self, slug, event, **fields):
        entry = original(self, slug, event, **fields)
        if event == "sending" and fields.get("turn") == 2:  # on record: now the lease goes to h2
            take_over(store, lease)
        return entry

    monkeypatch.setattr(Journal, "append", append)
    with pytest.raises(LeaseLost):
        leased_step(workspace, engines, lease).run()
    assert user_messages(chat) == ["Outline an article on tea."]  # turn 2 never clicked
    assert [s.chat_url for s in turn_sends(workspace)] == [""]  # an intent, no send


def test_a_turn_still_being_written_saves_its_progress(project, workspace, engines, chat):
    from pipeline.contract.article import ArticleState

    sent_turn_1(project, workspace, engines)
    generate(workspace, "tea", engines)  # turn 2 sent
    chat.last_turn_complete.append(False)
    assert generate(workspace, "tea", engines).status is Status.WORKING
    state = ArticleState.load(workspace.store, workspace.article("tea"))
    assert state.progress == "turn 2 of 3: writing"
