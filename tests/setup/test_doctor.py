"""`qwenpipe doctor` against the simulator: each check reported right, exit codes right."""

from __future__ import annotations

import json
import socket
import time

import pytest
from sim_project import make_project
from tests_cli_helpers import qwenpipe_in_process

from pipeline.accounts import all_accounts
from pipeline.config import load
from pipeline.setup.doctor import FAIL, OK, SKIP, WARN, Report, check_profile, check_router
from pipeline.simulator import Simulator
from pipeline.simulator.api import make_token

# Its projects launch their own browser (tests/sim_project.py):
# doctor checks the launch: the executable, the profile, the saved login.
OWN_BROWSER = True


@pytest.fixture
def locked_sim():
    with Simulator(port=0, require_login=True).start() as server:
        yield server


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lines(result) -> dict[str, str]:
    """doctor's text output: check name -> its line (and the fix line after it, if any)."""
    found, last = {}, None
    for line in result.stdout.splitlines():
        mark, _, rest = line.partition("  ")
        if mark.strip() in ("OK", "WARN", "FAIL", "-"):
            name = rest.strip().split("  ")[0].strip()
            found[name], last = line, name
        elif line.strip().startswith("fix:") and last:
            found[last] += "\n" + line.strip()
    return found


def doctor(project, code: int):
    """`qwenpipe doctor` in `project`, which must exit `code`: (its result, `lines` of it)."""
    result = qwenpipe_in_process("doctor", cwd=project)
    assert result.returncode == code, result.stdout + result.stderr
    return result, lines(result)


def import_login(project, sim) -> None:
    """A login made elsewhere for the simulator's host (a cookie export)."""
    export = [{"name": "token", "value": make_token(), "domain": "127.0.0.1", "path": "/", "session": True}]
    (project / "export.json").write_text(json.dumps(export))
    result = qwenpipe_in_process("login", "--import", "export.json", cwd=project)
    assert result.returncode == 0, result.stderr


@pytest.mark.browser
def test_healthy_setup_passes_every_check(locked_sim, tmp_path):
    project = make_project(tmp_path, locked_sim)
    import_login(project, locked_sim)  # the simulator requires a login: the imported one works
    result, found = doctor(project, 0)
    assert not [line for line in found.values() if line.startswith(("FAIL", "WARN"))], result.stdout
    assert found["config"].startswith("OK") and str(project / "config.toml") in found["config"]
    assert found["browser"].startswith("OK") and "Chromium" in found["browser"]
    assert found["profile"].startswith("OK") and found["saved login"].startswith("OK")
    assert "(mode 0600)" in found["saved login"] and "expires" in found["saved login"]
    assert found["login"].startswith("OK") and "users/status" in found["login"]
    assert found["page"].startswith("OK") and "'current' matched" in found["page"]
    for name in ("composer", "send_button", "login"):
        assert found[f"selector {name}"].startswith("OK"), found[f"selector {name}"]
    for name in ("user_turn", "assistant_turn", "answer", "copy_button"):
        assert "checked when an answer runs" in found[f"selector {name}"]
    assert found["router"].startswith("OK") and found["router model"].startswith("OK")
    assert found["articles"].startswith("OK")
    assert "all checks passed" in result.stdout
    assert not (project / "articles" / ".qwenpipe-doctor").exists()
    assert [p.name for p in project.iterdir() if p.name.startswith(".qwenpipe-doctor")] == []


@pytest.mark.browser
def test_logged_out_fails_the_login_check(locked_sim, tmp_path):
    project = make_project(tmp_path, locked_sim)
    result, found = doctor(project, 1)
    assert found["login"].startswith("FAIL") and "not logged in" in found["login"]
    assert "fix: run `qwenpipe login`" in found["login"]
    assert found["page"].startswith("-") and "needs a logged-in chat page" in found["page"]
    assert found["saved login"].startswith("WARN")
    assert found["router"].startswith("OK")


@pytest.mark.browser
def test_page_without_the_send_button_names_that_selector(sim, tmp_path):
    # The page "lacks" the send button as far as qwenpipe can tell: config.toml describes it wrongly.
    project = make_project(tmp_path, sim, extra='selectors = { send_button = "button.no-such-send" }')
    result, found = doctor(project, 1)
    assert found["login"].startswith("OK")
    assert found["page"].startswith("OK") and "'config' matched" in found["page"]
    assert found["selector send_button"].startswith("FAIL")
    assert "button.no-such-send: MISSING" in found["selector send_button"]
    assert "qwen.selectors.send_button" in found["selector send_button"]
    assert found["selector composer"].startswith("OK")
    assert found["config selectors"].startswith("WARN")
    assert "1 check(s) failed" in result.stdout


@pytest.mark.browser
def test_config_selectors_replace_the_built_in_ones(sim, tmp_path):
    project = make_project(tmp_path, sim, extra='selectors = { composer = "textarea.not-the-composer" }')
    result, found = doctor(project, 1)
    # No fallback to the built-in sets: the page has the current UI, but config.toml said otherwise.
    assert found["page"].startswith("FAIL") and "[qwen.selectors]" in found["page"]
    assert "the page is the built-in 'current' UI" in found["page"]
    assert found["selector composer"].startswith("FAIL")
    assert "textarea.not-the-composer: MISSING" in found["selector composer"]


@pytest.mark.browser
def test_json_report_field_by_field_with_an_unreachable_router(sim, tmp_path):
    port = closed_port()
    project = make_project(tmp_path, sim, extra='selectors = { send_button = "button.gone" }')
    config = project / "config.toml"
    config.write_text(config.read_text().replace(f"{sim.base_url}/v1", f"http://127.0.0.1:{port}/v1"))
    result = qwenpipe_in_process("doctor", "--json", cwd=project)
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert list(doc) == ["schema", "ok", "exit_code", "config", "counts", "checks"]
    assert doc["schema"] == 1 and doc["ok"] is False and doc["exit_code"] == 1
    assert doc["config"] == str(project / "config.toml")
    assert set(doc["counts"]) == {OK, WARN, FAIL, SKIP}
    assert doc["counts"][FAIL] == 2 and sum(doc["counts"].values()) == len(doc["checks"])
    checks = {c["name"]: c for c in doc["checks"]}
    for check in doc["checks"]:
        assert {"name", "status", "detail", "fix"} <= set(check)
        assert check["status"] in (OK, WARN, FAIL, SKIP)
        assert isinstance(check["detail"], str) and check["detail"]
        assert check["fix"] is None or isinstance(check["fix"], str)
    assert checks["browser"]["status"] == OK and checks["browser"]["version"].startswith("Chromium")
    assert checks["browser"]["path"]
    assert checks["page"]["ui"] == "config"
    send = checks["selector send_button"]
    assert send["status"] == FAIL and send["selector"] == "button.gone" and "qwen.selectors" in send["fix"]
    assert checks["selector composer"]["selector"] == "textarea.message-input-textarea"
    assert checks["selector stop_button"]["status"] in (OK, SKIP)
    router = checks["router"]
    assert router["status"] == FAIL and f"127.0.0.1:{port}" in router["detail"]
    assert router["fix"] == f"start the router, or fix router.base_url (now http://127.0.0.1:{port}/v1)"
    assert router["key_set"] is False and router["models_status"] is None
    assert checks["router model"]["status"] == SKIP and checks["router model"]["fix"] is None
    assert checks["login"]["status"] == OK and checks["config"]["status"] == OK
    assert checks["articles"]["status"] == OK
    assert not result.stderr.strip() or "checking" not in result.stderr


def test_bad_config_is_exit_2(tmp_path):
    (tmp_path / "config.toml").write_text("[qwen]\nno_such_key = 1\n")
    result = qwenpipe_in_process("doctor", cwd=tmp_path)
    assert result.returncode == 2 and "qwen.no_such_key" in result.stderr


# -- single checks, no browser ---------------------------------------------------------------------


def test_router_disabled_is_skipped_with_a_note(tmp_path):
    (tmp_path / "config.toml").write_text("[router]\nenabled = false\n")
    report = Report("x")
    check_router(report, load(tmp_path / "config.toml"))
    (check,) = report.checks
    assert check.status == SKIP and "router.enabled = false" in check.detail
    assert report.exit_code == 0


def test_profile_and_state_readable_by_others_fail_with_chmod(tmp_path):
    (tmp_path / "config.toml").write_text('[browser]\nprofile_dir = "p"\nstorage_state = "s.json"\n')
    (tmp_path / "p").mkdir(mode=0o755)
    (tmp_path / "p").chmod(0o755)
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"cookies": [{"name": "token", "value": make_token(), "domain": "x"}]}))
    state.chmod(0o644)
    report = Report("x")
    config = load(tmp_path / "config.toml")
    check_profile(report, config, time.time(), all_accounts(config)[0])
    profile, saved = report.checks
    assert profile.status == FAIL and profile.fix == f"chmod 700 {tmp_path / 'p'}"
    assert saved.status == FAIL and saved.fix == f"chmod 600 {state}"
    assert report.exit_code == 1


def test_state_expiring_soon_is_a_warning(tmp_path):
    (tmp_path / "config.toml").write_text('[browser]\nstorage_state = "s.json"\n')
    state = tmp_path / "s.json"
    soon = make_token(time.time() - 6 * 86400)  # a day left
    state.write_text(json.dumps({"cookies": [{"name": "token", "value": soon, "domain": "x"}]}))
    state.chmod(0o600)
    report = Report("x")
    config = load(tmp_path / "config.toml")
    check_profile(report, config, time.time(), all_accounts(config)[0])
    saved = report.checks[-1]
    assert saved.status == WARN and "expires" in saved.detail and saved.fix == "run `qwenpipe login`"
    assert report.exit_code == 0
