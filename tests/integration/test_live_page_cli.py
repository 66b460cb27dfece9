"""The chat page as captured live on 2026-08-09 (docs/qwen-site.md; the simulator's ui
"live-2026-08"): thinking is an Ant Design select (Auto / Thinking / Fast), the "+" menu has no
web search, Send / Stop are known by their aria-label, and a sidebar holds New Chat, the chat
list and the user menu. `qwenpipe generate` and `doctor` in real Chromium against the simulator."""

from __future__ import annotations

import pytest
from browser_helpers import browser_config
from sim_project import make_project, prompt
from tests_cli_helpers import qwenpipe_in_process

from pipeline.engines.base import ChatChoice
from pipeline.engines.qwen.browser import BrowserSession
from pipeline.engines.qwen.choices import apply_choice
from pipeline.engines.qwen.selectors import CURRENT

pytestmark = pytest.mark.browser

SIMULATOR = {"ui": "live-2026-08", "answer_seconds": 0.6, "thinking_seconds": 0.2, "url_delay": 0.1}


def sends_of(sim, text):
    return [e for e in sim.ledger() if e["prompt"] == text]


@pytest.mark.parametrize("thinking, enabled", [("on", True), ("off", False), ("auto", True)])
def test_thinking_is_chosen_in_the_select_and_sent(sim, tmp_path, thinking, enabled):
    # Before: qwen.thinking = "on" stopped with "no thinking toggle" and sent nothing. "Auto"
    # sends thinking_enabled true and lets the site decide (the simulator then thinks).
    project = make_project(tmp_path, sim, router=False, extra=f'thinking = "{thinking}"\n')
    text = prompt(project, "think", f"Write an article about thinking {thinking}.")

    queued = qwenpipe_in_process("generate", "think", cwd=project)

    assert queued.returncode == 42, queued.stderr
    assert [(e["accepted"], e["thinking"], e["web_search"]) for e in sends_of(sim, text)] == [
        (True, enabled, False)
    ]


def test_the_select_is_set_back_to_auto_and_shows_each_choice(sim, tmp_path):
    # A page whose select shows another option (a choice the site kept) is set back to "Auto"
    # for qwen.thinking = "auto"; each choice shows in the select's box.
    with BrowserSession(browser_config(tmp_path / "look")) as session:
        page = session.new_page()
        page.goto(sim.base_url + "/")
        shown = page.locator(".thinking-select .ant-select-selection-item")
        seen = []
        for thinking in ("off", "on", "auto"):
            apply_choice(page, CURRENT, ChatChoice(thinking=thinking))
            seen.append(shown.inner_text())
    assert seen == ["Fast", "Thinking", "Auto"]


def test_web_search_is_refused_naming_the_menu_and_nothing_is_sent(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False, extra="web_search = true\n")
    text = prompt(project, "search", "Write an article about searching the web.")

    result = qwenpipe_in_process("generate", "search", cwd=project)

    assert result.returncode == 1, result.stderr
    assert "qwen.web_search = true: the mode menu has no 'Web Search' item" in result.stderr
    assert "'Upload attachment', 'Deep Research'" in result.stderr and "'Tools'" in result.stderr
    assert "set qwen.web_search = false" in result.stderr and "Traceback" not in result.stderr
    assert sends_of(sim, text) == []
    assert sorted(p.name for p in (project / "articles").glob("search*")) == []


def test_doctor_passes_and_names_each_control_of_the_page(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False, extra='thinking = "off"\n')
    prompt(project, "seen", "Write an article about a chat in the list.")
    assert qwenpipe_in_process("generate", "seen", cwd=project).returncode == 42  # the sidebar lists a chat

    result = qwenpipe_in_process("doctor", cwd=project)

    out = result.stdout
    assert result.returncode == 0, out
    found = {
        line.split("selector ", 1)[1].split()[0]: line for line in out.splitlines() if "selector " in line
    }
    for name in (
        "composer",
        "send_button",
        "model_picker",
        "thinking_select",
        "mode_menu",
        "new_chat",
        "user_menu",
    ):
        assert found[name].lstrip().startswith("OK"), found[name]
    assert 'input[role="combobox"][aria-label="Thinking"]: found' in found["thinking_select"]
    assert "which has the thinking select instead" in found["thinking_toggle"]
    assert '[aria-label="New Chat"]: found' in found["new_chat"]
    assert found["chat_item"].lstrip().startswith("OK")  # the chat sent above
    assert "checked when its list is open" in found["thinking_option"]
    choices = next(line for line in out.splitlines() if "page choices" in line)
    assert choices.lstrip().startswith("OK") and "qwen.thinking = 'off'" in choices


def test_doctor_fails_web_search_on_a_page_whose_menu_has_none(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False, extra="web_search = true\n")
    sends = len(sim.sends())

    result = qwenpipe_in_process("doctor", cwd=project)

    assert result.returncode == 1, result.stdout
    line = next(x for x in result.stdout.splitlines() if "page choices" in x)
    assert line.lstrip().startswith("FAIL") and "has no 'Web Search' item" in line
    assert "'Deep Research'" in line and len(sim.sends()) == sends


def test_doctor_fails_a_thinking_setting_the_page_has_no_control_for(sim, tmp_path):
    # Neither the select nor the toggle on the page, and config.toml sets qwen.thinking.
    extra = (
        'thinking = "on"\nselectors = { thinking_select = "select.gone", thinking_toggle = "button.gone" }\n'
    )
    project = make_project(tmp_path, sim, router=False, extra=extra)

    result = qwenpipe_in_process("doctor", cwd=project)

    assert result.returncode == 1, result.stdout
    line = next(x for x in result.stdout.splitlines() if "selector thinking_select" in x)
    assert (
        line.lstrip().startswith("FAIL")
        and "select.gone: MISSING, and config.toml sets qwen.thinking" in line
    )
