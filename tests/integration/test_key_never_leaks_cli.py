"""The router key never leaves the process, through the real CLI against the simulator's router.

The simulator's `echo_key` router quotes the presented key back in its 401 body, as some real
routers do. The key is 200 characters long: error text is cut to 200 characters, so a mask
applied after the cut would miss it (171 characters of such a key used to reach stderr, the
journal, the state file and `doctor --json`).
"""

from __future__ import annotations

import base64
import json
import string
from urllib.parse import quote

import pytest
from sim_project import make_project, prompt
from tests_cli_helpers import qwenpipe_in_process

from pipeline.redact import MASK, MIN_PREFIX

pytestmark = pytest.mark.browser

KEY = (("Kq4" + string.ascii_letters + string.digits + "-_") * 4)[:200]
PASTED = "sk-or-v1-0a1b2c3d4e5f60718293a4b5c6d7e8f9"


# Logged out: the cycle's chat attempt fails hard at once and falls back to the router.
SIMULATOR = {"scenario": "logged_out", "answer_seconds": 1.0, "url_delay": 0.1}  # conftest.py `sim`


@pytest.fixture(autouse=True)
def fresh_router(sim):
    """The module's router back to its defaults, its ledger empty (sim resets the site only)."""
    sim.router.reset()


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
        "generate --engine router": qwenpipe_in_process(
            "generate", "tea", "--engine", "router", cwd=project, env=env
        ),
        "cycle": qwenpipe_in_process("cycle", cwd=project, env=env),
        "doctor --json": qwenpipe_in_process("doctor", "--json", cwd=project, env=env),
        "status --json": qwenpipe_in_process("status", "--json", cwd=project, env=env),
        "show tea": qwenpipe_in_process("show", "tea", cwd=project, env=env),
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
        run = qwenpipe_in_process(*command, cwd=project)
        assert run.returncode == 2, (command, run.stderr)
        assert "router.api_key_env" in run.stderr and "NAME of an environment variable" in run.stderr
        assert PASTED[:MIN_PREFIX] not in run.stdout + run.stderr, (command, run.stderr)
        assert "Traceback" not in run.stderr
    init = qwenpipe_in_process("init", cwd=project)  # the config exists: refused, and the key is not quoted
    assert init.returncode == 2 and PASTED[:MIN_PREFIX] not in init.stdout + init.stderr


# A key with characters URL encoding escapes: an echo URL-encoded is the key cut at each of them.
ODD_KEY = "Zk7+Qw/Ertyu=Iop+Asdfg/Hjkl=Zxcvb+Nm12/3456=7890+Poiuy/Trewq=Lkjhg"


def key_pieces(key: str) -> set[str]:
    """Every 8 characters in a row of the key as it is, URL-encoded or base64-encoded (in the
    three alignments): any of them found is a piece of the key leaked."""
    encoded = [key, quote(key, safe="")]
    for shift in range(3):
        whole = (shift + len(key)) // 3 * 4
        encoded.append(base64.b64encode(b"\0" * shift + key.encode()).decode()[4 if shift else 0 : whole])
    return {form[at : at + MIN_PREFIX] for form in encoded for at in range(len(form) - MIN_PREFIX + 1)}


def leaked(text: str, pieces: set[str]) -> list[str]:
    return sorted(piece for piece in pieces if piece in text)


@pytest.mark.parametrize("form", ["from_second", "last12", "middle", "urlencoded", "base64"])
def test_a_key_echoed_in_part_or_encoded_appears_nowhere_the_cli_writes(sim, tmp_path, form):
    sim.set(router_scenario="echo_key", router_fail_times=1000, router_echo_form=form)
    project = make_project(tmp_path, sim)
    prompt(project, "tea", "Write an article about green tea.")
    env = {"ROUTER_API_KEY": ODD_KEY}
    runs = {
        "generate": qwenpipe_in_process("generate", "tea", "--engine", "router", cwd=project, env=env),
        "status --json": qwenpipe_in_process("status", "--json", cwd=project, env=env),
        "status": qwenpipe_in_process("status", cwd=project, env=env),
        "show tea": qwenpipe_in_process("show", "tea", cwd=project, env=env),
        "log": qwenpipe_in_process("log", cwd=project, env=env),
        "doctor --json": qwenpipe_in_process("doctor", "--json", cwd=project, env=env),
    }
    # The router really echoed that form of the key: the leak was there to be made.
    assert [r["status"] for r in sim.router.chat_requests()] == [401]
    assert runs["generate"].returncode == 1 and MASK in runs["generate"].stderr, runs["generate"].stderr
    assert MASK in json.loads(runs["status --json"].stdout)["articles"][0]["last_error"]
    pieces = key_pieces(ODD_KEY)
    for name, run in runs.items():
        assert "Traceback" not in run.stderr, (name, run.stderr)
        assert not leaked(run.stdout + run.stderr, pieces), f"{name}: {run.stdout}{run.stderr}"
    written = [p for p in (project / "articles").rglob("*") if p.is_file()]
    assert "qwenpipe.db" in {p.name for p in written}
    for path in written:
        assert not leaked(path.read_text(encoding="utf-8", errors="replace"), pieces), path


def test_a_router_answer_that_holds_the_key_is_rejected_never_written(sim, tmp_path):
    sim.set(router_scenario="answer_key")
    project = make_project(tmp_path, sim)
    prompt(project, "tea", "Write an article about green tea.")
    env = {"ROUTER_API_KEY": ODD_KEY}
    run = qwenpipe_in_process("generate", "tea", "--engine", "router", cwd=project, env=env)
    assert [r["status"] for r in sim.router.chat_requests()] == [200]
    assert run.returncode == 1, run.stderr
    assert "answer rejected: the answer holds the router key" in run.stderr
    assert not (project / "articles" / "tea.md").exists()
    kept = (project / "articles" / "tea.md.rejected").read_text()
    assert "requested with the API key [REDACTED]" in kept  # the answer kept beside, masked
    pieces = key_pieces(ODD_KEY)
    assert not leaked(run.stdout + run.stderr, pieces)
    for path in (p for p in (project / "articles").rglob("*") if p.is_file()):
        assert not leaked(path.read_text(encoding="utf-8", errors="replace"), pieces), path
