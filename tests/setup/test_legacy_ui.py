"""The older chat UI (`#chat-input` / `#send-message-button`) end to end through the CLI."""

from __future__ import annotations

import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

pytestmark = pytest.mark.browser


SIMULATOR = {"ui": "legacy", "answer_seconds": 1.5, "thinking_seconds": 0.2}  # conftest.py `sim`


def test_generate_wait_on_the_legacy_ui(sim, tmp_path):
    project = make_project(tmp_path, sim)
    text = prompt(project, "old-ui", "Write an article about the older chat page.")
    result = qwenpipe_in_process("generate", "old-ui", "--wait", cwd=project)
    assert result.returncode == 0, result.stderr
    meta, body = read_article(project / "articles" / "old-ui.md")
    assert body == sim.expected_answer(text).strip()
    assert meta["engine"] == "qwen" and meta["chat_url"].startswith(sim.base_url + "/c/")
    assert [e["prompt"] for e in sim.sends()].count(text) == 1


def test_doctor_reports_the_legacy_generation(sim, tmp_path):
    project = make_project(tmp_path, sim)
    result = qwenpipe_in_process("doctor", cwd=project)
    assert result.returncode == 0, result.stdout
    out = result.stdout
    assert "UI generation 'legacy' matched" in out
    assert "textarea#chat-input: found" in out and "#send-message-button: found" in out
    assert "selector stop_button" in out and "none in the 'legacy' UI" in out
