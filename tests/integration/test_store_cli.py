"""The store under the file contract, end to end: deleting qwenpipe.db loses history, never an
article, and never causes a second send (real processes, real Chromium, the simulator)."""

from __future__ import annotations

import pytest
from sim_project import journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

pytestmark = pytest.mark.browser


# Answers complete once sent: the run after the deletion finds the answer to collect.
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.2}  # conftest.py `sim`


def delete_the_store(project):
    found = list((project / "articles" / ".qwenpipe").glob("qwenpipe.db*"))
    assert found, "the store was not where docs/store.md says"
    for path in found:
        path.unlink()


@pytest.mark.parametrize("command", ["generate", "cycle"])
def test_deleting_the_database_after_a_send_never_sends_again_and_the_article_is_collected(
    sim, tmp_path, command
):
    project = make_project(tmp_path, sim)
    text = prompt(project, "tea", f"Write an article about green tea (store, {command}).")
    args = ("generate", "tea") if command == "generate" else ("cycle",)
    first = qwenpipe_in_process(*args, cwd=project)
    assert first.returncode == 42, first.stderr
    url = (project / "articles" / "tea.md.url").read_text().strip()
    delete_the_store(project)
    for _ in range(60):
        result = qwenpipe_in_process(*args, cwd=project)
        if result.returncode != 3:
            break
    assert result.returncode == 0, result.stderr
    meta, body = read_article(project / "articles" / "tea.md")
    assert meta["chat_url"] == url and body == sim.expected_answer(text).strip()
    assert [e["prompt"] for e in sim.sends()].count(text) == 1, "sent a second time"
    events = [e["event"] for e in journal(project) if e["slug"] == "tea"]
    assert "sending" not in events and "done" in events, events  # history from the deletion on
