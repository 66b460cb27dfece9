"""`qwenpipe login --account NAME [--import FILE]`: one account's login, in that account's files;
which account a bare `login` means; and the login refresh of one account."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest
from sim_project import add_accounts, make_project, sign_in_as

from pipeline.accounts import account_named
from pipeline.cli.app import run
from pipeline.config import load
from pipeline.setup.login import run_login
from pipeline.signin.refresh import LoginRefresh
from pipeline.signin.saved import state_token_expiry
from pipeline.simulator import Simulator
from pipeline.simulator.api import make_token, token_payload

# Its projects launch their own browser (tests/sim_project.py):
# each account's profile and saved login.
OWN_BROWSER = True

HOUR = 3600


@pytest.fixture(scope="module")
def sim():
    with Simulator(port=0, accounts=("a", "b"), answer_seconds=0.5, thinking_seconds=0.1).start() as server:
        yield server


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def login(capfd, project, *args) -> tuple[int, str]:
    """`qwenpipe --config PROJECT/config.toml login ...` in this process: exit code and stderr."""
    code = run(["--config", str(project / "config.toml"), "login", *args])
    return code, " ".join(capfd.readouterr().err.split())


def saved_account(path) -> str:
    """The account the token saved in a state file names."""
    state = json.loads(path.read_text())
    return token_payload(state["cookies"][0]["value"])["id"]


def test_login_imports_into_the_named_accounts_own_state_file_only(sim, tmp_path, capfd):
    project = make_project(tmp_path, sim)
    states = add_accounts(project, ["a", "b"])
    source = tmp_path / "b.json"
    source.write_text(json.dumps(sim.login_state("b")))
    code, said = login(capfd, project, "--account", "b", "--import", str(source))
    assert code == 0, said
    assert f"saved in {states['b']} (mode 0600, accounts.b.storage_state)" in said
    assert saved_account(states["b"]) == "b"
    assert mode(states["b"]) == 0o600 and mode(states["b"].parent) == 0o700
    assert not states["a"].exists() and not (project / "state.json").exists()


def test_login_without_account_asks_for_one_naming_them_when_there_are_several(sim, tmp_path, capfd):
    project = make_project(tmp_path, sim)
    add_accounts(project, ["main", "spare"])
    source = tmp_path / "login.json"
    source.write_text(json.dumps(sim.login_state("a")))
    code, said = login(capfd, project, "--import", str(source))
    assert code == 2
    assert "has 2 accounts (main, spare): name the one to sign in with --account NAME" in said
    assert not (project / ".qwenpipe").exists()


def test_login_with_an_unknown_account_is_exit_2_naming_the_accounts(sim, tmp_path, capfd):
    project = make_project(tmp_path, sim)
    add_accounts(project, ["main", "spare"])
    code, said = login(capfd, project, "--account", "zed", "--import", str(tmp_path / "nothing.json"))
    assert code == 2
    assert "no account 'zed' (the accounts are: main, spare)" in said
    assert not (project / ".qwenpipe").exists()


def test_login_without_account_uses_the_one_table_there_is_or_the_default_account(sim, tmp_path, capfd):
    source = tmp_path / "login.json"
    source.write_text(json.dumps(sim.login_state("a")))
    one = make_project(tmp_path / "one", sim)
    (state,) = add_accounts(one, ["a"]).values()
    assert login(capfd, one, "--import", str(source))[0] == 0
    assert saved_account(state) == "a" and not (one / "state.json").exists()

    plain = make_project(tmp_path / "plain", sim)  # no tables: [browser]'s state is `default`'s
    code, said = login(capfd, plain, "--account", "default", "--import", str(source))
    assert code == 0 and "(mode 0600, browser.storage_state)" in said
    assert (plain / "state.json").is_file()


@pytest.mark.browser
def test_login_signs_one_account_in_its_own_profile_and_an_import_then_reaches_that_profile(
    sim, tmp_path, capfd, monkeypatch
):
    project = make_project(tmp_path, sim)
    states = add_accounts(project, ["a", "b"])
    config = load(project / "config.toml")
    b = account_named(config, "b")
    monkeypatch.setenv("QWENPIPE_LOGIN_HEADLESS", "1")

    result = run_login(config, b, timeout=30, on_page=sign_in_as("b@example.com"), say=lambda _m: None)
    assert result.state_path == states["b"] and saved_account(states["b"]) == "b"
    assert mode(b.profile_dir) == 0o700 and (b.profile_dir / "Default").exists()
    assert not states["a"].exists() and not (project / "profile").exists()

    source = tmp_path / "again.json"
    source.write_text(json.dumps(sim.login_state("b")))
    code, said = login(capfd, project, "--account", "b", "--import", str(source))
    assert code == 0, said
    assert f"its cookies are now also in the browser profile {b.profile_dir}" in said


@pytest.mark.browser
def test_the_login_refresh_of_one_account_renews_that_accounts_state_only(sim, tmp_path):
    from browser_helpers import chromium_executable

    from pipeline.engines.qwen.browser import playwright_driver

    project = make_project(tmp_path, sim, extra="")
    states = add_accounts(project, ["a", "b"])
    config = load(project / "config.toml")
    ending = make_token(time.time() - 167 * HOUR, hours=168, account="b")  # an hour left
    state = {
        "cookies": [{"name": "token", "value": ending, "domain": "127.0.0.1", "path": "/", "expires": -1}],
        "origins": [{"origin": sim.base_url, "localStorage": [{"name": "token", "value": ending}]}],
    }
    states["b"].parent.mkdir(parents=True)
    states["b"].write_text(json.dumps(state))
    said = []
    refresh = LoginRefresh(config, say=said.append, account=account_named(config, "b"))
    with playwright_driver() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=["--no-sandbox"])
        try:
            page = browser.new_context(storage_state=str(states["b"])).new_page()
            page.goto(sim.base_url + "/")
            refresh(page)
        finally:
            browser.close()
    assert state_token_expiry(states["b"]) > time.time() + 100 * HOUR, said
    assert saved_account(states["b"]) == "b" and mode(states["b"]) == 0o600
    assert f"the chat login was renewed: {states['b']}" in said[0]
    assert not states["a"].exists() and not (project / "state.json").exists()
