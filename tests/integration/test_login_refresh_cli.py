"""login.refresh_hours: a run whose saved login ends soon saves the login the site renews
(0600, atomically, said on stderr, shown by status and doctor); one far from its end is left
alone; a refresh the site refuses neither holds up the send nor loses the article."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

from pipeline.batch.status import iso
from pipeline.signin.saved import state_token_expiry
from pipeline.simulator.api import make_token

# Its projects launch their own browser (tests/sim_project.py):
# the saved login a launch loads and renews.
OWN_BROWSER = True

pytestmark = pytest.mark.browser
HOUR = 3600


SIMULATOR = {"require_login": True, "answer_seconds": 0.3, "thinking_seconds": 0.1}  # conftest.py `sim`


def saved_login(project, sim, hours_left: float):
    """A storage state as `qwenpipe login` saves it, its token ending in `hours_left` hours."""
    token = make_token(time.time() + hours_left * HOUR - 168 * HOUR)
    cookie = {
        "name": "token",
        "value": token,
        "domain": "127.0.0.1",
        "path": "/",
        "expires": time.time() + hours_left * HOUR,
        "httpOnly": False,
        "secure": False,
        "sameSite": "Lax",
    }
    state = {
        "cookies": [cookie],
        "origins": [{"origin": sim.base_url, "localStorage": [{"name": "token", "value": token}]}],
    }
    path = project / "state.json"
    path.write_text(json.dumps(state, indent=1))
    path.chmod(0o600)
    return path, state_token_expiry(path)


def test_a_saved_login_near_its_end_is_renewed_saved_privately_and_shown(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    state, before = saved_login(project, sim, hours_left=3)
    text = prompt(project, "renewed", "Write about a login that renews itself.")
    result = qwenpipe_in_process("generate", "renewed", cwd=project)
    assert result.returncode == 42, result.stderr
    assert f"the chat login was renewed: {state} now expires" in result.stderr
    assert [e["prompt"] for e in sim.sends()].count(text) == 1
    after = state_token_expiry(state)
    assert after > before + 100 * HOUR, "the saved login does not last longer"
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    assert not [p for p in project.iterdir() if p.name.startswith(".state.json")], "a temporary file is left"

    status = json.loads(qwenpipe_in_process("status", "--json", cwd=project).stdout)
    assert status["login"]["expires_at"] == iso(after)
    doctor = json.loads(qwenpipe_in_process("doctor", "--json", cwd=project).stdout)
    saved = next(c for c in doctor["checks"] if c["name"] == "saved login")
    assert saved["status"] == "ok" and saved["expires_at"] == after


def test_a_saved_login_far_from_its_end_is_left_untouched(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    state, _ = saved_login(project, sim, hours_left=5 * 24)
    content, mtime = state.read_bytes(), state.stat().st_mtime_ns
    prompt(project, "untouched", "Write about a login with days left.")
    result = qwenpipe_in_process("generate", "untouched", cwd=project)
    assert result.returncode == 42, result.stderr
    assert "login" not in result.stderr
    assert state.read_bytes() == content and state.stat().st_mtime_ns == mtime


def test_a_refresh_the_site_refuses_neither_holds_up_the_send_nor_loses_the_article(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    state, _ = saved_login(project, sim, hours_left=3)
    content = state.read_bytes()
    text = prompt(project, "refused", "Write about a site that will not renew a login.")
    sim.set(renew_hours=0)  # the site hands out no fresh token, on page load or on request
    try:
        result = qwenpipe_in_process("generate", "refused", "--wait", cwd=project)
    finally:
        sim.set(renew_hours=24)
    assert result.returncode == 0, result.stderr
    assert "could not refresh the saved chat login (the site gave no newer token)" in result.stderr
    meta, body = read_article(project / "articles" / "refused.md")
    assert meta["engine"] == "qwen" and body
    assert [e["prompt"] for e in sim.sends()].count(text) == 1
    assert state.read_bytes() == content
