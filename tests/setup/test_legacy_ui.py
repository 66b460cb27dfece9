"""The older chat UI (`#chat-input` / `#send-message-button`) end to end through the CLI."""

from __future__ import annotations

import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe

from pipeline.simulator import Simulator

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def legacy():
    with Simulator(port=0, ui="legacy", answer_seconds=1.5, thinking_seconds=0.2).start() as server:
        yield server


def test_generate_wait_on_the_legacy_ui(legacy, tmp_path):
    project = make_project(tmp_path, legacy)
    text = prompt(project, "old-ui", "Write an article about the older chat page.")
    result = qwenpipe("generate", "old-ui", "--wait", cwd=project)
    assert result.returncode == 0, result.stderr
    meta, body = read_article(project / "articles" / "old-ui.md")
    assert body == legacy.expected_answer(text).strip()
    assert meta["engine"] == "qwen" and meta["chat_url"].startswith(legacy.base_url + "/c/")
    assert [e["prompt"] for e in legacy.sends()].count(text) == 1


def test_doctor_reports_the_legacy_generation(legacy, tmp_path):
    project = make_project(tmp_path, legacy)
    result = qwenpipe("doctor", cwd=project)
    assert result.returncode == 0, result.stdout
    out = result.stdout
    assert "UI generation 'legacy' matched" in out
    assert "textarea#chat-input: found" in out and "#send-message-button: found" in out
    assert "selector stop_button" in out and "none in the 'legacy' UI" in out
