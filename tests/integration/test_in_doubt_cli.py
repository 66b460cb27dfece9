"""Recovery adopts only what proves to be its own, and "never sent" needs proof (issue 36, item 4),
end to end: `qwenpipe` processes, real Chromium, the simulator. The simulator's ledger is the
truth about sends; the decision itself is tested with the fake engines (tests/unit/test_in_doubt.py).
"""

from __future__ import annotations

import json

import pytest
from sim_project import journal, make_project, prompt, wait_stored_finished
from tests_cli_helpers import qwenpipe, qwenpipe_in_process

from pipeline.engines.qwen.api import chat_id_from_url

pytestmark = pytest.mark.browser

# Answers complete once sent (these tests are about sends and recovery, not an answer's growth).
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.2}  # conftest.py `sim`
KILLED_BEFORE_CLICK = {"QWENPIPE_CRASH_AT": "before_send"}
KILLED_AFTER_SEND = {"QWENPIPE_CRASH_AT": "after_send"}


def ledger_of(sim, text: str) -> list[dict]:
    return [entry for entry in sim.ledger() if entry["prompt"] == text]


def sends_today(project) -> int:
    result = qwenpipe_in_process("status", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["sends"]["today"]


def on_one_login(project, shared):
    """The project's account is the one login at `shared` (its profile and saved login), as two
    workspaces of one person on one machine share it."""
    config = project / "config.toml"
    text = config.read_text(encoding="utf-8")
    text = text.replace('profile_dir = "profile"', f'profile_dir = "{shared / "profile"}"')
    text = text.replace('storage_state = "state.json"', f'storage_state = "{shared / "state.json"}"')
    config.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("ui", ["live-2026-08", "late-2026"])
def test_a_workspace_killed_before_its_click_never_adopts_the_chat_another_workspace_sent(sim, tmp_path, ui):
    """Same account, same text: the first is killed before its click, the second sends; the
    first's recovery finds the second's chat by its text and must not take it (nor delete it,
    with delete_chats = "after_collect"): it is in doubt, counted, not sent again at once."""
    sim.set(ui=ui)
    text = f"Write about tea in two workspaces on one login ({ui})."
    one, two = tmp_path / "one", tmp_path / "two"
    for project in (one, two):
        make_project(project, sim, router=False, extra='delete_chats = "after_collect"')
        on_one_login(project, tmp_path)
        prompt(project, "tea", text)

    crashed = qwenpipe("generate", "tea", cwd=one, env=KILLED_BEFORE_CLICK)
    assert crashed.returncode == -9, crashed.stderr
    sent = qwenpipe_in_process("generate", "tea", cwd=two)
    assert sent.returncode == 42, sent.stderr
    theirs = (two / "articles" / "tea.md.url").read_text().strip()

    recovery = qwenpipe_in_process("generate", "tea", cwd=one)
    assert recovery.returncode == 3, recovery.stderr
    assert "is in doubt" in recovery.stderr and str(two / "articles") in recovery.stderr
    assert "found the chat the interrupted send made" not in recovery.stderr
    assert not (one / "articles" / "tea.md.url").exists(), "the other workspace's chat was adopted"
    assert (one / "articles" / "tea.md.sending").exists()
    assert len(ledger_of(sim, text)) == 1, "sent again at once"
    assert sends_today(one) == 1, "the send in doubt is counted"
    assert chat_id_from_url(theirs) not in sim.deleted_chats(), "the other workspace's chat was deleted"

    wait_stored_finished(sim, theirs)
    done = qwenpipe_in_process("generate", "tea", cwd=two)  # its own chat, still there
    assert done.returncode == 0, done.stderr
    assert (two / "articles" / "tea.md").exists()
    assert not any(e["event"] in ("recovered", "chat_deleted") for e in journal(one))


def test_a_new_chat_the_site_is_slow_to_show_reaches_the_site_once_counted_once(sim, tmp_path):
    """Read-after-write lag: the chat an interrupted send named reads as not found for a while.
    The recovery waits instead of sending again; once the site shows the chat it is adopted."""
    project = make_project(tmp_path, sim, router=False)
    text = prompt(project, "tea", "Write about tea to a site slow to show new chats.")
    sim.set(read_lag=600.0)
    # Killed after the click; or the send itself fails first, its page showing the new chat as
    # missing (an error): either way the site took the prompt and no URL is on disk.
    crashed = qwenpipe("generate", "tea", cwd=project, env=KILLED_AFTER_SEND)
    assert crashed.returncode in (-9, 3), crashed.stderr
    assert len(ledger_of(sim, text)) == 1
    assert not (project / "articles" / "tea.md.url").exists()
    assert (project / "articles" / "tea.md.sending").exists()

    for _ in range(3):  # each run looks again, finds nothing, and sends nothing
        rerun = qwenpipe_in_process("generate", "tea", cwd=project)
        assert rerun.returncode == 3, rerun.stderr
        assert "is in doubt" in rerun.stderr, rerun.stderr
    assert len(ledger_of(sim, text)) == 1
    assert sends_today(project) == 1

    sim.set(clock_offset=601.0)  # the site's clock passes the lag: the chat shows
    rerun = qwenpipe_in_process("generate", "tea", cwd=project)
    assert rerun.returncode in (0, 3), rerun.stderr
    assert "found the chat the interrupted send made" in rerun.stderr
    url = (project / "articles" / "tea.md.url").read_text().strip()
    assert chat_id_from_url(url) == ledger_of(sim, text)[0]["chat_id"]
    assert len(ledger_of(sim, text)) == 1 and sends_today(project) == 1
    events = [e["event"] for e in journal(project)]
    assert events.count("recovery_in_doubt") == 3 and "unsent" not in events
