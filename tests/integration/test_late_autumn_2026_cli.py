"""The site as public clients described it at the end of September 2026 (docs/qwen-site.md, "Late
autumn 2026"): real Chromium against the simulator in each of its late-autumn shapes."""

from __future__ import annotations

import uuid

import pytest
from sim_project import journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe, qwenpipe_in_process

from pipeline.engines.qwen.api import chat_id_from_url

pytestmark = pytest.mark.browser

SEPARATOR = "\n=== next turn ===\n"
PAGE = 10  # the messages the late-autumn page loads: five turns
# Answers complete as soon as they are sent: every run finds the last one done.
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.1, "history_limit": PAGE}


def turns_prompt(project, slug: str, count: int) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    texts = [f"Step {n} of the article about paged chats ({tag})." for n in range(1, count + 1)]
    prompt(project, slug, SEPARATOR.join(texts))
    return texts


def chat_turns(sim, project, slug: str) -> list[tuple[int, str]]:
    """(turn, prompt) of every message that reached the article's chat, accepted or not."""
    chat_id = chat_id_from_url((project / "articles" / f"{slug}.md.url").read_text().strip())
    return [(e["turn"], e["prompt"]) for e in sim.ledger() if e["chat_id"] == chat_id]


# -- the history in pages ---------------------------------------------------------------------------


@pytest.mark.parametrize("count", [7, 12])
def test_a_long_prompt_on_the_page_that_loads_the_last_page_only(sim, tmp_path, count):
    project = make_project(tmp_path, sim, router=False)
    texts = turns_prompt(project, "long", count)
    pages_before = sim.requests().get("chat_json", 0)

    done = qwenpipe_in_process("generate", "long", "--wait", cwd=project)

    assert done.returncode == 0, done.stderr
    assert chat_turns(sim, project, "long") == list(enumerate(texts, 1))  # each turn once
    _, body = read_article(project / "articles" / "long.md")
    assert body == sim.expected_answer(texts[-1], turn=count).strip()
    assert sim.requests()["chat_json"] > pages_before


def test_a_run_killed_after_sending_turn_7_resumes_without_sending_it_again(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    texts = turns_prompt(project, "crash", 7)
    for _ in range(6):  # one run a turn, each finding the last answer complete
        assert qwenpipe_in_process("generate", "crash", cwd=project).returncode == 42

    killed = qwenpipe("generate", "crash", cwd=project, env={"QWENPIPE_CRASH_AT": "after_send"})

    assert killed.returncode == -9, killed.stderr
    assert chat_turns(sim, project, "crash") == list(enumerate(texts, 1))
    rerun = qwenpipe_in_process("generate", "crash", cwd=project)
    assert rerun.returncode == 0, rerun.stderr
    assert chat_turns(sim, project, "crash") == list(enumerate(texts, 1)), "turn 7 sent again"
    _, body = read_article(project / "articles" / "crash.md")
    assert body == sim.expected_answer(texts[-1], turn=7).strip()
    sent = [e.get("turn") for e in journal(project) if e["event"] == "sent"]
    assert sent == [None, 2, 3, 4, 5, 6], sent  # the killed run never logged its send of turn 7
