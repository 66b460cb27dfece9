"""The site as public clients saw it in late 2026 (docs/qwen-site.md):
`qwenpipe generate` in real Chromium against the simulator, which gains each behaviour as a
setting. One simulator for the module; each test sets what it needs and the fixture resets it."""

from __future__ import annotations

import json
import uuid

import pytest
from browser_helpers import browser_config
from sim_project import journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

from pipeline.engines.qwen.browser import BrowserSession
from pipeline.engines.qwen.page import read_dom_state
from pipeline.engines.qwen.selectors import CURRENT
from pipeline.simulator.api import make_token

pytestmark = pytest.mark.browser

SIMULATOR = {"answer_seconds": 0.6, "thinking_seconds": 0.2, "url_delay": 0.1}  # conftest.py `sim`


def save_login(project, sim) -> str:
    """A saved login as `qwenpipe login` writes it: the token cookie and localStorage.token."""
    token = make_token()
    host = sim.base_url.split("//")[1].split(":")[0]
    state = {
        "cookies": [{"name": "token", "value": token, "domain": host, "path": "/", "expires": -1}],
        "origins": [{"origin": sim.base_url, "localStorage": [{"name": "token", "value": token}]}],
    }
    (project / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return token


def generate_waiting(project, slug):
    """`generate --wait`: send, stay on the chat, finish (one process, one browser)."""
    return qwenpipe_in_process("generate", slug, "--wait", cwd=project)


CHOSEN = ("model", "thinking", "web_search")  # what the ledger says the page chose


def sends_of(sim, text):
    return [e for e in sim.ledger() if e["prompt"] == text]


# -- item 2: the site's own auth header ------------------------------------------------------


def test_api_reads_carry_the_saved_token_as_a_bearer_header(sim, tmp_path):
    # The site refuses every API call that lacks `Authorization: Bearer <localStorage.token>`:
    # the login check, the chat's JSON and the chat list all have to send it.
    sim.set(require_auth_header=True)
    project = make_project(tmp_path, sim, router=False, own_browser=True)  # the token its launch loads
    save_login(project, sim)
    text = prompt(project, "bearer", "Write an article about bearer tokens.")

    done = generate_waiting(project, "bearer")

    assert done.returncode == 0, done.stderr
    _, body = read_article(project / "articles" / "bearer.md")
    assert body == sim.expected_answer(text).strip()
    assert [e["accepted"] for e in sends_of(sim, text)] == [True]


# -- item 3: the model, thinking and web search, chosen on the page ----------------------------


def test_model_and_modes_come_from_config_and_the_prompt_front_matter(sim, tmp_path):
    sim.set(ui="current")  # the page with the thinking toggle and a "Web Search" mode
    project = make_project(tmp_path, sim, router=False, extra='model = "Qwen3.6-Plus"\n')
    plain = prompt(project, "plain", "Write an article about the default choices.")
    chosen_body = "Write an article about a chosen model."
    prompt(
        project,
        "chosen",
        '+++\ntitle = "Chosen"\n[qwen]\nmodel = "qwen3.7-max"\nthinking = "off"\nweb_search = true\n'
        f"+++\n{chosen_body}\n",
    )

    for slug in ("plain", "chosen"):
        done = generate_waiting(project, slug)
        assert done.returncode == 0, (slug, done.stderr)

    (sent_plain,) = sends_of(sim, plain)
    (sent_chosen,) = sends_of(sim, chosen_body)
    assert [sent_plain[k] for k in CHOSEN] == ["qwen3.6-plus", True, False]
    assert [sent_chosen[k] for k in CHOSEN] == ["qwen3.7-max", False, True]
    meta, _ = read_article(project / "articles" / "chosen.md")
    assert meta["model"] == "qwen3.7-max" and meta["title"] == "Chosen" and "qwen" not in meta
    assert read_article(project / "articles" / "plain.md")[0]["model"] == "qwen3.6-plus"


def test_a_model_the_picker_does_not_offer_fails_hard_before_anything_is_sent(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False, extra='model = "Qwen9-Ultra"\n')
    text = prompt(project, "ultra", "Write an article about a model that does not exist.")

    result = qwenpipe_in_process("generate", "ultra", cwd=project)

    assert result.returncode == 1, result.stderr
    assert "'Qwen9-Ultra' is not a model the site offers" in result.stderr
    assert "'Qwen3.7-Max'" in result.stderr and "Traceback" not in result.stderr
    assert sends_of(sim, text) == []
    assert sorted(p.name for p in (project / "articles").glob("ultra*")) == []  # no marker, no URL
    events = [e["event"] for e in journal(project)]
    assert "unsent" in events and "sent" not in events


def test_an_answer_from_another_model_is_never_the_article(sim, tmp_path):
    # The site did not keep the choice: the chat's JSON names another model.
    sim.set(serve_model="qwen3.5-flash")
    project = make_project(tmp_path, sim, router=False, extra='model = "Qwen3.7-Max"\n')
    text = prompt(project, "swapped", "Write an article about swapped models.")

    result = generate_waiting(project, "swapped")

    assert result.returncode == 1, result.stderr
    assert "answered with model 'qwen3.5-flash', not qwen.model = 'Qwen3.7-Max'" in result.stderr
    assert not (project / "articles" / "swapped.md").exists()
    assert [e["model"] for e in sends_of(sim, text)] == ["qwen3.7-max"]


def test_a_bad_qwen_table_in_the_front_matter_is_exit_2_naming_file_key_and_value(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    prompt(project, "bad", '+++\n[qwen]\nthinking = "maybe"\n+++\nWrite about anything.\n')
    prompt(project, "unknown", '+++\n[qwen]\nbase_url = "http://elsewhere"\n+++\nWrite about anything.\n')

    bad = qwenpipe_in_process("generate", "bad", cwd=project)
    unknown = qwenpipe_in_process("generate", "unknown", cwd=project)

    assert bad.returncode == 2 and unknown.returncode == 2
    assert "bad.md: qwen.thinking = 'maybe' must be one of 'auto', 'on', 'off'" in bad.stderr
    assert "unknown.md: unknown key qwen.base_url in the front matter" in unknown.stderr
    assert not list((project / "articles").glob("*.md*"))


# -- item 5: the site's other late-2026 answers ----------------------------------------------


def test_a_send_the_site_calls_in_progress_is_clicked_again_shortly(sim, tmp_path):
    sim.set(in_progress_sends=1)  # the first click meets "The chat is in progress!"
    project = make_project(tmp_path, sim, router=False)
    text = prompt(project, "busy", "Write an article about busy chats.")

    done = generate_waiting(project, "busy")

    assert done.returncode == 0, done.stderr
    assert [e["accepted"] for e in sends_of(sim, text)] == [False, True]


def test_http_200_with_x_actual_status_code_404_is_chat_not_found(sim, tmp_path):
    # The body says nothing the API classifier knows, and the page shows an empty chat: only the
    # header tells that the chat is gone.
    sim.set(not_found_header=True)
    project = make_project(tmp_path, sim, router=False)
    prompt(project, "gone", "Write an article about a chat that is gone.")
    url = f"{sim.base_url}/c/{uuid.uuid4()}"
    (project / "articles" / "gone.md.url").write_text(url + "\n", encoding="utf-8")

    result = qwenpipe_in_process("generate", "gone", cwd=project)

    assert result.returncode == 1, result.stderr
    assert "the chat no longer exists" in result.stderr and "x-actual-status-code: 404" in result.stderr
    assert [e["code"] for e in journal(project) if e["event"] == "hard"] == ["chat_not_found"]


def test_a_finished_thinking_phase_is_not_a_finished_answer(sim, tmp_path):
    # The chat's JSON says only the stream's last phase and status: "thinking_summary" /
    # "finished" while the answer is still being written (held one word short of its end). The
    # legacy page shows no stop or copy button, so the JSON is all there is to tell.
    sim.set(ui="legacy", stream_status=True, hold_answers=True)
    project = make_project(tmp_path, sim, router=False)
    text = prompt(project, "thought", "Write an article about thinking before answering.")

    assert qwenpipe_in_process("generate", "thought", cwd=project).returncode == 42
    working = qwenpipe_in_process("generate", "thought", cwd=project)
    assert working.returncode == 3, working.stderr
    assert not (project / "articles" / "thought.md").exists()

    sim.set(hold_answers=False)
    done = generate_waiting(project, "thought")
    assert done.returncode == 0, done.stderr
    assert read_article(project / "articles" / "thought.md")[1] == sim.expected_answer(text).strip()


def test_the_late_2026_page_send_stop_and_hidden_copy_buttons(sim, tmp_path):
    # Send inside .message-input-right-button-send (no send-button class), a stop button known by
    # its aria-label only, the copy button in a footer hidden until hover.
    sim.set(ui="late-2026", hold_answers=True)
    project = make_project(tmp_path, sim, router=False)
    text = prompt(project, "late", "Write an article about the late 2026 page.")

    queued = qwenpipe_in_process("generate", "late", cwd=project)
    assert queued.returncode == 42, queued.stderr
    url = (project / "articles" / "late.md.url").read_text().strip()
    with BrowserSession(browser_config(tmp_path / "look")) as session:
        page = session.new_page()
        page.goto(url)
        page.wait_for_selector(".qwen-chat-message-assistant")
        generating = read_dom_state(page, CURRENT)
        sim.set(hold_answers=False)
        page.wait_for_selector(".copy-response-button", state="attached", timeout=15000)
        done = read_dom_state(page, CURRENT)
        copy_hidden = not page.locator(".copy-response-button").is_visible()
    assert generating.stop_visible and not generating.copy_button
    assert done.copy_button and copy_hidden and not done.stop_visible

    finished = generate_waiting(project, "late")
    assert finished.returncode == 0, finished.stderr
    assert read_article(project / "articles" / "late.md")[1] == sim.expected_answer(text).strip()
    assert [e["accepted"] for e in sends_of(sim, text)] == [True]
