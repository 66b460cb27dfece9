"""The router key never leaves the process, through the real CLI against the simulator's router.

The simulator's `echo_key` router quotes the presented key back in its 401 body, as some real
routers do. The key is 200 characters long: error text is cut to 200 characters, so a mask
applied after the cut would miss it (171 characters of such a key used to reach stderr, the
journal, the state file and `doctor --json`).
"""

from __future__ import annotations

import json
import string

import pytest
from sim_project import make_project, prompt
from tests_cli_helpers import qwenpipe

from pipeline.redact import MASK, MIN_PREFIX

pytestmark = pytest.mark.browser

KEY = (("Kq4" + string.ascii_letters + string.digits + "-_") * 4)[:200]
PASTED = "sk-or-v1-0a1b2c3d4e5f60718293a4b5c6d7e8f9"


# Logged out: the cycle's chat attempt fails hard at once and falls back to the router.
SIMULATOR = {"scenario": "logged_out", "answer_seconds": 1.0, "url_delay": 0.1}  # conftest.py `sim`


def prefixes_found(text: str, key: str = KEY) -> bool:
    """Every prefix of MIN_PREFIX+ characters starts with the first MIN_PREFIX ones."""
    return key[:MIN_PREFIX] in text


def test_an_echoed_200_char_key_appears_nowhere_the_cli_writes(sim, tmp_path):
    sim.set(router_scenario="echo_key", router_fail_times=1000)
    project = make_project(tmp_path, sim)
    config = project / "config.toml"
    config.write_text(config.read_text().replace("max_attempts = 3", "max_attempts = 2"))
    prompt(project, "tea", "Write an article about green tea.")
    env = {"ROUTER_API_KEY": KEY}

    runs = {
        "generate --engine router": qwenpipe("generate", "tea", "--engine", "router", cwd=project, env=env),
        "cycle": qwenpipe("cycle", cwd=project, env=env),
        "doctor --json": qwenpipe("doctor", "--json", cwd=project, env=env),
        "status --json": qwenpipe("status", "--json", cwd=project, env=env),
        "show tea": qwenpipe("show", "tea", cwd=project, env=env),
    }

    # The router really was handed the key and really echoed it: the leak was there to be made.
    chats = sim.router.chat_requests()
    assert len(chats) == 2 and all(request["status"] == 401 for request in chats)
    assert runs["generate --engine router"].returncode == 1
    assert runs["cycle"].returncode == 1
    assert MASK in runs["generate --engine router"].stderr and MASK in runs["cycle"].stderr
    failed = project / "articles" / "tea.md.failed"
    assert failed.is_file(), runs["cycle"].stderr
    doctor = json.loads(runs["doctor --json"].stdout)
    assert any(MASK in (check.get("detail") or "") + json.dumps(check) for check in doctor["checks"])
    status = json.loads(runs["status --json"].stdout)
    assert MASK in status["articles"][0]["last_error"]

    for name, run in runs.items():
        assert not prefixes_found(run.stdout), f"{name} stdout: {run.stdout}"
        assert not prefixes_found(run.stderr), f"{name} stderr: {run.stderr}"
    written = [p for p in (project / "articles").rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"qwenpipe.db", "tea.md.failed"} <= names, names
    for path in written:
        assert not prefixes_found(path.read_text(encoding="utf-8", errors="replace")), path


def test_a_key_pasted_into_api_key_env_is_exit_2_and_never_printed(sim, tmp_path):
    project = make_project(tmp_path, sim)
    config = project / "config.toml"
    config.write_text(config.read_text() + f'api_key_env = "{PASTED}"\n')
    prompt(project, "tea", "Write an article about green tea.")
    (project / "articles" / "tea.md").write_text("+++\n+++\n\ndone\n")  # the fast entry point's case

    commands = (["generate", "tea"], ["cycle"], ["status", "--json"], ["doctor", "--json"], ["show", "tea"])
    for command in commands:
        run = qwenpipe(*command, cwd=project)
        assert run.returncode == 2, (command, run.stderr)
        assert "router.api_key_env" in run.stderr and "NAME of an environment variable" in run.stderr
        assert PASTED[:MIN_PREFIX] not in run.stdout + run.stderr, (command, run.stderr)
        assert "Traceback" not in run.stderr
    init = qwenpipe("init", cwd=project)  # the config exists: refused, and the key is not quoted
    assert init.returncode == 2 and PASTED[:MIN_PREFIX] not in init.stdout + init.stderr
