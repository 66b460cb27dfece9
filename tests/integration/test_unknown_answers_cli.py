"""What qwenpipe does with an answer of the site nobody has seen yet (issue 37, item 3), end to
end: `qwenpipe` in process, the module's shared Chromium, the simulator forcing one fault at one
step (its fuzz mode's `fault`). The simulator's ledger is the truth about sends; the rules
themselves are tested with the fake engines (tests/unit/test_unknown_answers.py).
"""

from __future__ import annotations

import json

import pytest
from sim_project import journal, make_project, prompt, wait_stored_finished
from tests_cli_helpers import qwenpipe_in_process

pytestmark = pytest.mark.browser

SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.2}  # conftest.py `sim`


def taken(sim, text: str) -> int:
    return sum(1 for entry in sim.ledger() if entry["prompt"] == text and entry["accepted"])


def unknown_answers(project) -> list[dict]:
    return [e for e in journal(project) if e["event"] == "unknown_answer"]


def sends_today(project) -> int:
    result = qwenpipe_in_process("status", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["sends"]["today"]


@pytest.fixture
def project(tmp_path, sim):
    yield make_project(tmp_path, sim, router=False)
    sim.set(fault="")  # a forced fault the test did not meet never reaches the next


def test_an_unknown_error_after_the_site_took_the_send_is_in_doubt_and_never_sent_twice(sim, project):
    """The site took the prompt, then answered the send with an error code nobody has seen: in
    doubt (counted, journalled), looked at again, the chat found and adopted; one send in all."""
    text = prompt(project, "tea", "Write about tea that the site took before it said something odd.")
    sim.set(fault="completion:unknown_code_taken")
    first = qwenpipe_in_process("generate", "tea", cwd=project)
    assert first.returncode == 3, first.stderr
    assert "in doubt" in first.stderr and "something unknown" in first.stderr
    assert taken(sim, text) == 1 and sends_today(project) == 1
    assert not (project / "articles" / "tea.md.url").exists()
    (seen,) = unknown_answers(project)
    assert seen["where"] == "completion" and seen["account"] == "default"
    code = sim.faults()[-1]["detail"]
    assert code in seen["seen"], (code, seen)

    wait_stored_finished(sim, next(e["chat_id"] for e in sim.ledger() if e["prompt"] == text))
    again = qwenpipe_in_process("generate", "tea", cwd=project)  # poll_interval = 0: its look is due
    assert again.returncode in (0, 3), again.stderr
    done = qwenpipe_in_process("generate", "tea", cwd=project)
    assert done.returncode == 0, done.stderr
    assert taken(sim, text) == 1 and sends_today(project) == 1, "sent twice"
    assert (project / "articles" / "tea.md").exists()


@pytest.mark.parametrize("fault", ["login_check:unknown_code", "new_chat:unknown_code", "new_chat:html_503"])
def test_an_unknown_answer_before_the_prompt_left_is_transient_and_sends_once_later(sim, project, fault):
    """The login check before the click, or the new chat the page makes before its completion,
    answered with a code nobody has seen (or a gateway's page, which the app draws in its own
    place): transient, nothing counted, journalled; the send goes at the next run, once."""
    step = fault.split(":")[0]
    config = project / "config.toml"
    config.write_text(config.read_text().replace("page_timeout = 15", "page_timeout = 8"))
    text = prompt(project, "tea", f"Write about tea after an odd {fault}.")
    sim.set(fault=fault)
    first = qwenpipe_in_process("generate", "tea", cwd=project)
    assert first.returncode == 3, first.stderr
    assert taken(sim, text) == 0 and sends_today(project) == 0
    assert [e["where"] for e in unknown_answers(project)] == [step]
    assert not (project / "articles" / "tea.md.sending").exists()
    sent = qwenpipe_in_process("generate", "tea", cwd=project)
    assert sent.returncode == 42, sent.stderr
    assert taken(sim, text) == 1


def test_a_stream_that_ends_in_a_status_nobody_has_seen_is_looked_at_again_never_resent(sim, project):
    """`generate --wait` reads the answer from the page's stream; a stream whose last frame says
    `completed` for `finished` is no answer: journalled (stream), and the chat's own page decides."""
    text = prompt(project, "tea", "Write about tea in a stream that ends oddly.")
    sim.set(fault="stream:unknown_status")
    done = qwenpipe_in_process("generate", "tea", "--wait", cwd=project)
    assert done.returncode == 0, done.stderr
    assert taken(sim, text) == 1 and (project / "articles" / "tea.md").exists()
    assert [e["where"] for e in unknown_answers(project)] == ["stream"]
    assert "completed" in unknown_answers(project)[0]["seen"]


def test_an_unknown_page_where_the_chat_should_be_holds_the_account_not_strike_after_strike(sim, project):
    """The chat's page answers with a widget nobody has seen: the account is held once (as for a
    bot check: a hold that learns), not failed look after look; the page is journalled as seen;
    no prompt goes from the held account; the chat itself is read again once its page is back."""
    config = project / "config.toml"
    config.write_text(config.read_text().replace("page_timeout = 15", "page_timeout = 8"))
    text = prompt(project, "tea", "Write about tea on a page that is not the chat.")
    sent = qwenpipe_in_process("generate", "tea", cwd=project)
    assert sent.returncode == 42, sent.stderr
    wait_stored_finished(sim, (project / "articles" / "tea.md.url").read_text())
    sim.set(fault="chat_page:unknown_widget")
    held = qwenpipe_in_process("generate", "tea", cwd=project)
    assert held.returncode == 1, held.stderr
    assert "unknown page where the chat should be" in held.stderr
    (seen,) = unknown_answers(project)
    assert seen["where"] == "chat_json" and "One moment" in seen["seen"], seen
    holds = [e for e in journal(project) if e["event"] == "hold"]
    assert [h["kind"] for h in holds] == ["bot check"]

    other = prompt(project, "milk", "Write about milk while the account is held.")
    waiting = qwenpipe_in_process("generate", "milk", cwd=project)
    assert waiting.returncode in (1, 3), waiting.stderr
    assert taken(sim, other) == 0, "a prompt went from the held account"

    done = qwenpipe_in_process("generate", "tea", cwd=project)
    assert done.returncode == 0, done.stderr
    assert taken(sim, text) == 1 and len(unknown_answers(project)) == 1
    assert [e["event"] for e in journal(project)].count("hold") == 1


def test_the_chats_page_answered_with_a_gateway_error_is_transient_not_a_hold(sim, project):
    """The chat's own address answering an HTTP 5xx page is the site failing, not leaving the
    chat: looked at again after a backoff, journalled as seen, the account not held."""
    config = project / "config.toml"
    config.write_text(config.read_text().replace("page_timeout = 15", "page_timeout = 8"))
    text = prompt(project, "tea", "Write about tea behind a tired gateway.")
    assert qwenpipe_in_process("generate", "tea", cwd=project).returncode == 42
    wait_stored_finished(sim, (project / "articles" / "tea.md.url").read_text())
    sim.set(fault="chat_page:html_504")
    failed = qwenpipe_in_process("generate", "tea", cwd=project)
    assert failed.returncode == 3, failed.stderr
    (seen,) = unknown_answers(project)
    assert seen["where"] == "chat_json" and "HTTP 504" in seen["seen"], seen
    assert "hold" not in [e["event"] for e in journal(project)]
    done = qwenpipe_in_process("generate", "tea", cwd=project)
    assert done.returncode == 0, done.stderr
    assert taken(sim, text) == 1
