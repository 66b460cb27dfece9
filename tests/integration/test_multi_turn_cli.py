"""A three-turn prompt through `qwenpipe generate`: real processes, real Chromium, the simulator.

The chat is the record of progress: every run reads it, and sends the next turn only when the
previous answer is complete and the next turn is not in the chat yet. A SIGKILL right after a
turn is sent never makes it be sent again, and the article is always the third answer.
"""

from __future__ import annotations

import time

import pytest
from sim_project import finish_answer, journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe

from pipeline.engines.qwen.api import chat_id_from_url

pytestmark = pytest.mark.browser

SEPARATOR = "\n=== next turn ===\n"
ANSWER_SECONDS = 0.0  # complete once sent: the run after a send finds it done
LONG = 600.0  # an answer still growing whatever the start-up time of the next run; ended by hand


SIMULATOR = {"answer_seconds": ANSWER_SECONDS, "thinking_seconds": 0.0, "url_delay": 0.1}  # conftest.py `sim`


def three_turns(project, slug: str, topic: str) -> list[str]:
    texts = [
        f"Outline an article about {topic}.",
        f"Now write the full article about {topic} from the outline.",
        f"Polish the {topic} article and keep its headings.",
    ]
    prompt(project, slug, SEPARATOR.join(texts))
    return texts


def chat_turns(sim, project, slug: str) -> list[tuple[int, str]]:
    """(turn, prompt) of every message that reached the article's chat, accepted or not."""
    url = (project / "articles" / f"{slug}.md.url").read_text().strip()
    chat_id = chat_id_from_url(url)
    return [(e["turn"], e["prompt"]) for e in sim.ledger() if e["chat_id"] == chat_id]


def last_turn_done(sim, project, slug: str) -> bool:
    """The simulator's own view: the chat's last answer is finished (what the page will show)."""
    chat_id = chat_id_from_url((project / "articles" / f"{slug}.md.url").read_text().strip())
    view = sim.store.chat_view(chat_id)
    return bool(view and view["messages"] and view["messages"][-1].get("finished"))


def finish_now(sim, project, slug: str) -> None:
    """End the chat's growing answer now (the long answers below only have to outlast the re-run
    that looks at them mid-way)."""
    finish_answer(sim, (project / "articles" / f"{slug}.md.url").read_text().strip())


def run_until(project, slug: str, stop, *, env=None, limit: int = 40) -> list[int]:
    """`qwenpipe generate SLUG` again and again until `stop(returncode)`; the exit codes seen."""
    codes = []
    for _ in range(limit):
        result = qwenpipe("generate", slug, cwd=project, env=env)
        codes.append(result.returncode)
        assert result.returncode in (0, 3, 42, -9), result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        if stop(result.returncode):
            return codes
        time.sleep(0.3)
    raise AssertionError(f"gave up after {limit} runs: {codes}")


def test_three_turns_end_to_end_one_send_each(sim, tmp_path):
    project = make_project(tmp_path, sim)
    texts = three_turns(project, "tea", "green tea")

    codes = run_until(project, "tea", lambda code: code == 0)

    assert codes[0] == 42 and codes.count(42) == 3, codes  # one run per turn sent
    assert chat_turns(sim, project, "tea") == [(1, texts[0]), (2, texts[1]), (3, texts[2])]
    assert all(e["accepted"] for e in sim.ledger() if e["prompt"] in texts)
    meta, body = read_article(project / "articles" / "tea.md")
    assert body == sim.expected_answer(texts[2], turn=3).strip()
    assert body != sim.expected_answer(texts[1], turn=2).strip()
    assert meta["engine"] == "qwen" and meta["turns"] == 3
    sent = [e.get("turn") for e in journal(project) if e["event"] == "sent"]
    assert sent == [None, 2, 3], sent  # the first send is the plain one, then turns 2 and 3
    again = qwenpipe("generate", "tea", cwd=project)
    assert again.returncode == 0 and len(chat_turns(sim, project, "tea")) == 3


def test_sigkill_after_sending_turn_2_then_reruns(sim, tmp_path):
    project = make_project(tmp_path, sim)
    texts = three_turns(project, "crash", "crash recovery")
    article = project / "articles" / "crash.md"

    assert qwenpipe("generate", "crash", cwd=project).returncode == 42
    deadline = time.monotonic() + 20
    while not last_turn_done(sim, project, "crash"):
        assert time.monotonic() < deadline, "turn 1 never finished"
        time.sleep(0.2)
    # Turn 2's answer takes long enough that the re-run after the crash finds it still growing.
    sim.set(answer_seconds=LONG)
    killed = run_until(
        project, "crash", lambda code: code == -9, env={"QWENPIPE_CRASH_AT": "after_send"}, limit=10
    )
    assert killed[-1] == -9, killed  # SIGKILLed right after send_turn returned
    assert chat_turns(sim, project, "crash") == [(1, texts[0]), (2, texts[1])]

    rerun = qwenpipe("generate", "crash", cwd=project)
    assert rerun.returncode == 3, rerun.stderr
    assert "turn 2 of 3" in rerun.stderr
    assert chat_turns(sim, project, "crash") == [(1, texts[0]), (2, texts[1])], "turn 2 sent again"
    assert not article.exists()
    finish_now(sim, project, "crash")

    # Turn 3 grows for a while: a run in the middle of it must write nothing.
    codes = run_until(project, "crash", lambda code: code in (0, 42))
    assert codes[-1] == 42, codes
    assert chat_turns(sim, project, "crash") == [(1, texts[0]), (2, texts[1]), (3, texts[2])]
    growing = qwenpipe("generate", "crash", cwd=project)
    assert growing.returncode == 3, growing.stderr
    assert "turn 3 of 3" in growing.stderr
    assert not article.exists() and not (project / "articles" / "crash.md.rejected").exists()
    assert not last_turn_done(sim, project, "crash"), "turn 3 finished too early for this check"
    finish_now(sim, project, "crash")

    codes = run_until(project, "crash", lambda code: code == 0)
    assert 42 not in codes, codes
    assert chat_turns(sim, project, "crash") == [(1, texts[0]), (2, texts[1]), (3, texts[2])]
    _, body = read_article(article)
    assert body == sim.expected_answer(texts[2], turn=3).strip()
