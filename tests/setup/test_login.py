"""`qwenpipe login`: signing in on the simulator's page, importing a login, the expiry warning,
and what a logged-out session does (nothing typed, nothing sent)."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest
from sim_project import make_project, prompt, read_article, sign_in_as
from tests_cli_helpers import qwenpipe_in_process

from pipeline.accounts import all_accounts
from pipeline.batch.status import collect
from pipeline.cli.app import run
from pipeline.config import load
from pipeline.setup.login import run_login
from pipeline.simulator.api import make_token
from pipeline.wiring import workspace as open_workspace

# Its projects launch their own browser (tests/sim_project.py):
# the saved login and the profile a launch uses.
OWN_BROWSER = True

DAY = 86400


SIMULATOR = {"require_login": True, "answer_seconds": 1.0, "thinking_seconds": 0.2}  # conftest.py `sim`


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


sign_in = sign_in_as("writer@example.com")  # what a person does on the page the login command opened


@pytest.mark.browser
def test_login_saves_a_private_state_and_generate_then_sends(sim, tmp_path, monkeypatch):
    project = make_project(tmp_path, sim)
    monkeypatch.setenv("QWENPIPE_LOGIN_HEADLESS", "1")
    said = []
    config = load(project / "config.toml")
    result = run_login(config, all_accounts(config)[0], timeout=30, on_page=sign_in, say=said.append)
    state = project / "state.json"
    assert result.state_path == state and result.how == "signed in"
    assert "sign in to" in said[0]
    assert mode(state) == 0o600 and mode(project / "profile") == 0o700
    saved = json.loads(state.read_text())
    assert any(c["name"] == "token" for c in saved["cookies"])
    assert result.expires_at and 6.9 * DAY < result.expires_at - time.time() <= 7 * DAY

    text = prompt(project, "signed-in", "Write about signing in once.")
    sent = qwenpipe_in_process("generate", "signed-in", cwd=project)
    assert sent.returncode == 42, sent.stderr
    assert [e["prompt"] for e in sim.sends()].count(text) == 1

    status = json.loads(qwenpipe_in_process("status", "--json", cwd=project).stdout)
    assert status["login"]["state_file"] == str(state) and status["login"]["expires_at"]
    assert not [w for w in status["warnings"] if "login" in w]


@pytest.mark.browser
def test_logged_out_session_types_nothing_and_the_router_writes_it(sim, tmp_path):
    project = make_project(tmp_path, sim)
    text = prompt(project, "nologin", "Write about forgetting to log in.")
    before = len(sim.ledger())
    result = qwenpipe_in_process("generate", "nologin", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "qwenpipe login" in result.stderr
    meta, _ = read_article(project / "articles" / "nologin.md")
    assert meta["engine"] == "router"
    assert [e for e in sim.ledger()[before:] if e["prompt"] == text] == [], "the prompt reached the chat"


@pytest.mark.browser
def test_logged_out_session_without_router_is_exit_1(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    text = prompt(project, "nologin", "Write about having no login and no router.")
    result = qwenpipe_in_process("generate", "nologin", cwd=project)
    assert result.returncode == 1, result.stderr
    assert "qwenpipe login" in result.stderr and "Traceback" not in result.stderr
    assert not (project / "articles" / "nologin.md").exists()
    assert [e for e in sim.ledger() if e["prompt"] == text] == []


@pytest.mark.browser
def test_import_into_an_existing_profile_replaces_its_login(sim, tmp_path, capfd):
    from pipeline.engines.qwen.browser import BrowserSession

    project = make_project(tmp_path, sim)
    config = load(project / "config.toml")
    with BrowserSession(config.browser, root=config.root) as session:
        session.new_page()  # a profile that exists and is logged out: it ignores state files
    assert (project / "profile" / "Default").exists()
    export = [{"name": "token", "value": make_token(), "domain": "127.0.0.1", "path": "/", "session": True}]
    source = import_file(project, export)
    os.chdir(project)
    code, said = login_in_process(capfd, "--import", str(source))
    assert code == 0, said
    assert "now also in the browser profile" in " ".join(said.split())
    (project / "state.json").unlink()  # the profile alone must now hold the login
    text = prompt(project, "imported", "Write about importing a login.")
    sent = qwenpipe_in_process("generate", "imported", cwd=project)
    assert sent.returncode == 42, sent.stderr
    assert [e["prompt"] for e in sim.sends()].count(text) == 1


def test_login_without_a_display_says_the_three_ways(tmp_path):
    (tmp_path / "config.toml").write_text('[browser]\nstorage_state = "keep/state.json"\n')
    env = {"DISPLAY": "", "WAYLAND_DISPLAY": "", "QWENPIPE_LOGIN_HEADLESS": ""}
    result = qwenpipe_in_process("login", cwd=tmp_path, env=env)
    assert result.returncode == 2
    message = result.stderr
    assert str(tmp_path / "keep" / "state.json") in message and "browser.storage_state" in message
    assert "qwenpipe login --import" in message
    assert "--cdp" in message and "browser.cdp_url" in message
    assert "xvfb" in message.lower() and "browser.headless = false" in message
    assert not (tmp_path / "keep").exists()


# -- login --import --------------------------------------------------------------------------------


def storage_state(token: str) -> dict:
    return {
        "cookies": [
            {
                "name": "token",
                "value": token,
                "domain": "chat.qwen.ai",
                "path": "/",
                "expires": time.time() + 7 * DAY,
                "httpOnly": False,
                "secure": True,
                "sameSite": "Lax",
            }
        ],
        "origins": [{"origin": "https://chat.qwen.ai", "localStorage": [{"name": "token", "value": token}]}],
    }


def cookie_export(token: str) -> list:
    """What Cookie-Editor / EditThisCookie export for chat.qwen.ai."""
    return [
        {
            "domain": ".qwen.ai",
            "expirationDate": time.time() + 7 * DAY,
            "hostOnly": False,
            "httpOnly": False,
            "name": "token",
            "path": "/",
            "sameSite": "no_restriction",
            "secure": True,
            "session": False,
            "storeId": "0",
            "value": token,
        },
        {"domain": "chat.qwen.ai", "name": "ssxmod_itna", "value": "abc", "path": "/", "session": True},
    ]


def login_in_process(capfd, *args) -> tuple[int, str]:
    """`qwenpipe login ...` in this process (no interpreter start): exit code and stderr."""
    code = run(["login", *args])
    return code, capfd.readouterr().err


def import_file(tmp_path, data, name="login.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize("shape", ["storage_state", "cookie_export"])
def test_import_writes_a_private_state_and_reports_the_expiry(tmp_path, capfd, shape):
    token = make_token()
    data = storage_state(token) if shape == "storage_state" else cookie_export(token)
    source = import_file(tmp_path, data)
    code, said = login_in_process(capfd, "--import", str(source))
    assert code == 0, said
    state = tmp_path / ".qwenpipe" / "state.json"
    assert f"saved in {state}" in " ".join(said.split())
    assert "expires" in said and "(in 6 days 23 h)" in said
    assert mode(state) == 0o600 and mode(state.parent) == 0o700
    saved = json.loads(state.read_text())
    token_cookie = next(c for c in saved["cookies"] if c["name"] == "token")
    assert token_cookie["value"] == token
    if shape == "cookie_export":
        assert token_cookie["sameSite"] == "None" and token_cookie["secure"] is True
        assert token_cookie["expires"] > time.time()
        session = next(c for c in saved["cookies"] if c["name"] == "ssxmod_itna")
        assert session["expires"] == -1 and session["sameSite"] == "Lax"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not JSON"),
        ({"hello": "world"}, "expected a Playwright storage state"),
        ([{"name": "token", "value": "x"}], "cookie #1 has no 'domain'"),
        (["token=abc"], "cookie #1 is not an object"),
        ([{"name": "sid", "value": "1", "domain": ".qwen.ai"}], "no `token` cookie"),
        ([], "holds no cookies"),
        (storage_state(make_token(time.time() - 8 * DAY)), "expired"),
    ],
)
def test_import_refuses_a_bad_file_naming_it(tmp_path, capfd, content, expected):
    source = import_file(tmp_path, content, "export.json")
    code, said = login_in_process(capfd, "--import", str(source))
    said = " ".join(said.split())  # the console wraps long lines
    assert code == 2
    assert str(source) in said and expected in said, said
    assert not (tmp_path / ".qwenpipe").exists(), "nothing may be written"


def test_import_of_a_missing_file_is_exit_2(tmp_path, capfd):
    code, said = login_in_process(capfd, "--import", str(tmp_path / "nope.json"))
    assert code == 2 and "nope.json" in said


# -- the expiry warning in status ------------------------------------------------------------------


def status_with_token(project, expires_in: float):
    state = project / ".qwenpipe" / "state.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    now = time.time()
    state.write_text(json.dumps(storage_state(make_token(now + expires_in - 7 * DAY))))
    return collect(open_workspace(load(project / "config.toml")), now=now)


def test_status_warns_when_the_login_expires_within_two_days(project):
    status = status_with_token(project, 1 * DAY + 4 * 3600 + 30)
    assert "the chat login expires in 1 day 4 h: run `qwenpipe login`" in status.warnings
    doc = status.to_json()
    assert doc["login"]["state_file"] == str(project / ".qwenpipe" / "state.json")
    assert doc["login"]["expires_at"] is not None
    assert "the chat login expires in 1 day 4 h: run `qwenpipe login`" in doc["warnings"]


def test_status_warns_when_the_login_has_expired(project):
    status = status_with_token(project, -3 * 3600 - 30)
    assert "the chat login expired 3 h 0 min ago: run `qwenpipe login`" in status.warnings


def test_status_is_quiet_about_a_login_with_days_left(project):
    status = status_with_token(project, 5 * DAY)
    assert not [w for w in status.warnings if "login" in w]


def test_status_without_a_saved_login_has_a_null_expiry(project):
    doc = collect(open_workspace(load(project / "config.toml"))).to_json()
    assert doc["login"] == {"state_file": str(project / ".qwenpipe" / "state.json"), "expires_at": None}
    assert not [w for w in doc["warnings"] if "login" in w]


def test_status_text_shows_the_login_line_and_the_warning(project):
    state = project / ".qwenpipe" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps(storage_state(make_token(time.time() - 6 * DAY))))  # 1 day left
    result = qwenpipe_in_process("status", cwd=project)
    assert result.returncode == 0
    assert "chat login: expires" in result.stdout
    assert "warning: the chat login expires in 23 h" in result.stderr


@pytest.mark.browser
def test_a_state_file_copied_onto_an_existing_profile_is_used(sim, tmp_path, monkeypatch):
    """The server case: log in on a desktop, copy the state file over; the profile already exists."""
    desktop = make_project(tmp_path / "desktop", sim)
    monkeypatch.setenv("QWENPIPE_LOGIN_HEADLESS", "1")
    config = load(desktop / "config.toml")
    run_login(config, all_accounts(config)[0], timeout=30, on_page=sign_in, say=lambda _m: None)
    server = make_project(tmp_path / "server", sim, router=False)
    prompt(server, "before", "Write about a server before its login.")
    assert (
        qwenpipe_in_process("generate", "before", cwd=server).returncode == 1
    )  # logged out: the profile is made
    assert (server / "profile").is_dir()
    (server / "state.json").write_bytes((desktop / "state.json").read_bytes())
    text = prompt(server, "after", "Write about a server after its login.")
    result = qwenpipe_in_process("generate", "after", cwd=server)
    assert result.returncode == 42, result.stderr
    assert [e["prompt"] for e in sim.sends()].count(text) == 1
