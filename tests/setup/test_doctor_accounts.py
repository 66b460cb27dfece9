"""`qwenpipe doctor` with several accounts: each account's profile, saved login and login are
checked under its own name, a disabled account is reported as one."""

from __future__ import annotations

import json
import time

import pytest
from sim_project import add_accounts, make_project
from tests_cli_helpers import qwenpipe_in_process

from pipeline.accounts import all_accounts
from pipeline.config import load
from pipeline.setup.doctor import FAIL, OK, SKIP, WARN, Report, check_profile
from pipeline.simulator import Simulator
from pipeline.simulator.api import make_token

# Its projects launch their own browser (tests/sim_project.py):
# each account's saved login, loaded by a launch.
OWN_BROWSER = True

DAY = 86400


def saved_login(path, token: str, mode: int = 0o600) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(json.dumps({"cookies": [{"name": "token", "value": token, "domain": "127.0.0.1"}]}))
    path.chmod(mode)


def test_each_accounts_profile_and_saved_login_are_checked_under_its_name(tmp_path):
    (tmp_path / "config.toml").write_text("")
    states = add_accounts(tmp_path, ["fine", "open", "soon", "gone"])
    add_accounts(tmp_path, ["off"], enabled=False)
    saved_login(states["fine"], make_token())
    saved_login(states["open"], make_token(), mode=0o644)
    (tmp_path / ".qwenpipe" / "accounts" / "open" / "profile").mkdir(mode=0o755)
    (tmp_path / ".qwenpipe" / "accounts" / "open" / "profile").chmod(0o755)
    saved_login(states["soon"], make_token(time.time() - 6 * DAY))  # a day left
    saved_login(states["gone"], make_token(time.time() - 8 * DAY))  # expired a day ago
    config = load(tmp_path / "config.toml")
    report = Report("x")
    for account in all_accounts(config):
        check_profile(report, config, time.time(), account)
    checks = {c.name: c for c in report.checks}

    assert (
        checks["profile (fine)"].status == OK
        and "made from the saved login" in checks["profile (fine)"].detail
    )
    assert checks["saved login (fine)"].status == OK and "(mode 0600)" in checks["saved login (fine)"].detail
    profile_dir = tmp_path / ".qwenpipe" / "accounts" / "open" / "profile"
    assert (checks["profile (open)"].status, checks["profile (open)"].fix) == (
        FAIL,
        f"chmod 700 {profile_dir}",
    )
    assert (checks["saved login (open)"].status, checks["saved login (open)"].fix) == (
        FAIL,
        f"chmod 600 {states['open']}",
    )
    for name, when in (("soon", "expires"), ("gone", "expired")):
        check = checks[f"saved login ({name})"]
        assert check.status == WARN and when in check.detail, check
        assert check.fix == f"run `qwenpipe login --account {name}`"
    off = checks["account (off)"]
    assert off.status == SKIP and "disabled (enabled = false in [accounts.off])" in off.detail
    assert checks["saved login (off)"].status == WARN  # its files are still checked
    assert "accounts.off.storage_state" in checks["saved login (off)"].detail
    assert "profile" not in checks and "saved login" not in checks  # no [browser] account besides


@pytest.mark.browser
def test_doctor_checks_each_enabled_accounts_login_and_names_the_one_to_sign_in(tmp_path):
    with Simulator(port=0, accounts=("a", "b")).start() as sim:
        project = make_project(tmp_path, sim)
        add_accounts(project, ["a", "b"])
        add_accounts(project, ["c"], enabled=False)
        (project / "a.json").write_text(json.dumps(sim.login_state("a")))
        imported = qwenpipe_in_process("login", "--account", "a", "--import", "a.json", cwd=project)
        assert imported.returncode == 0, imported.stderr
        result = qwenpipe_in_process("doctor", "--json", cwd=project, timeout=180)
    assert result.returncode == 1, result.stdout + result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["login (a)"]["status"] == OK and "users/status" in checks["login (a)"]["detail"]
    assert checks["login (b)"]["status"] == FAIL and "not logged in" in checks["login (b)"]["detail"]
    assert checks["login (b)"]["fix"] == "run `qwenpipe login --account b`"
    assert checks["account (c)"]["status"] == SKIP and "login (c)" not in checks
    assert checks["page"]["status"] == OK  # the selectors, checked once on a's page
    assert checks["selector composer"]["status"] == OK
    assert [c["name"] for c in json.loads(result.stdout)["checks"]].count("page") == 1
