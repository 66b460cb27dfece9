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
