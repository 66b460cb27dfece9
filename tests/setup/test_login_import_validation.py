"""`login --import` refuses what it cannot use (exit 2, the reason, nothing saved), and `status`
and `doctor` never crash on a saved state, however hostile its content."""

from __future__ import annotations

import base64
import json
import time

import pytest
from sim_project import make_project
from tests_cli_helpers import qwenpipe_in_process

from pipeline.accounts import all_accounts
from pipeline.cli.app import run
from pipeline.config import load
from pipeline.setup.doctor import Report, check_profile
from pipeline.simulator.api import make_token

DAY = 86400


def token_with_exp(exp) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'id': 'u', 'exp': exp})}.c2ln"


def cookie(token: str, **extra) -> dict:
    return {"name": "token", "value": token, "domain": "chat.qwen.ai", "path": "/", **extra}


def state(cookies: list, origins: list | None = None) -> dict:
    return {"cookies": cookies, "origins": origins or []}


def import_in_process(tmp_path, capfd, content) -> tuple[int, str]:
    source = tmp_path / "export.json"
    source.write_text(content if isinstance(content, str) else json.dumps(content))
    code = run(["login", "--import", str(source)])
    return code, " ".join(capfd.readouterr().err.split())


GOOD = make_token()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (state([cookie(token_with_exp(1e30))]), "login token's `exp` (1e+30) is not a time"),
        (state([cookie(token_with_exp(-1e30))]), "login token's `exp` (-1e+30) is not a time"),
        (state([cookie(token_with_exp(float("inf")))]), "is not a time"),
        ([cookie(token_with_exp(1e30), session=True)], "login token's `exp` (1e+30) is not a time"),
        (state([cookie(GOOD, expires=1e30)]), "cookie #1 (token) has expires = 1e+30"),
        (state([cookie(GOOD, expires="tomorrow")]), "has expires = 'tomorrow'"),
        ([cookie(GOOD, expirationDate=1e300)], "has expirationDate = 1e+300"),
        (
            state([cookie(GOOD)], [{"origin": "https://chat.qwen.ai", "localStorage": ["token"]}]),
            'origin #1\'s localStorage entry #1 is not a {"name": string, "value": string} pair',
        ),
        (
            state([cookie(GOOD)], [{"origin": "https://chat.qwen.ai", "localStorage": [{"name": "token"}]}]),
            "localStorage entry #1 is not a",
        ),
        (
            state([cookie(GOOD)], [{"origin": "https://x", "localStorage": [{"name": 1, "value": "v"}]}]),
            "localStorage entry #1 is not a",
        ),
        (state([cookie(GOOD)], [{"origin": "https://x", "localStorage": {"token": GOOD}}]), "not a list"),
        (state([cookie(GOOD)], ["https://chat.qwen.ai"]), "origin #1 is not an object"),
        ([[cookie(GOOD)]], "cookie #1 is not an object"),
        ([state([cookie(GOOD)])], "cookie #1 has no 'name'"),
        ("[" * 100_000, "not JSON"),
    ],
)
def test_import_refuses_a_file_it_cannot_use_and_saves_nothing(tmp_path, capfd, content, reason):
    code, said = import_in_process(tmp_path, capfd, content)
    assert code == 2, said
    assert "export.json" in said and reason in said, said
    assert "internal error" not in said
    assert not (tmp_path / ".qwenpipe").exists(), "nothing may be saved"


def test_import_still_takes_a_good_state_with_local_storage(tmp_path, capfd):
    good = state(
        [cookie(GOOD, expires=time.time() + DAY)],
        [{"origin": "https://chat.qwen.ai", "localStorage": [{"name": "token", "value": GOOD}]}],
    )
    code, said = import_in_process(tmp_path, capfd, good)
    assert code == 0, said
    assert (tmp_path / ".qwenpipe" / "state.json").is_file()


HOSTILE_STATES = {
    "a JSON list": "[]",
    "a list of numbers": "[1, 2, 3]",
    "a string": '"hello"',
    "cookies not a list": '{"cookies": "token", "origins": 5}',
    "entries of the wrong kind": json.dumps(
        {
            "cookies": [1, "token", {"name": "token"}, {"name": "token", "value": 7}],
            "origins": [
                5,
                "x",
                {"localStorage": ["token", {"name": "token"}, {"name": "token", "value": 3}]},
            ],
        }
    ),
    "a token expiring in 1e30": json.dumps(state([cookie(token_with_exp(1e30))])),
    "a token expiring in -1e30": json.dumps(state([cookie(token_with_exp(-1e30))])),
    "a token whose exp is a word": json.dumps(state([cookie(token_with_exp("soon"))])),
    "a token that is not a JWT": json.dumps(state([cookie("e30.bm90IGpzb24.x")])),
    "nested too deep": "[" * 100_000,
    "not UTF-8": b"\xff\xfe{".decode("latin-1"),
}


@pytest.fixture
def hostile(tmp_path, request):
    (tmp_path / "prompts").mkdir()
    (tmp_path / ".qwenpipe").mkdir(mode=0o700)
    saved = tmp_path / ".qwenpipe" / "state.json"
    saved.write_text(HOSTILE_STATES[request.param], encoding="latin-1")
    saved.chmod(0o600)
    return tmp_path


@pytest.mark.parametrize("hostile", list(HOSTILE_STATES), indirect=True)
def test_status_never_crashes_on_a_saved_state(hostile):
    shown = qwenpipe_in_process("status", cwd=hostile)
    assert shown.returncode == 0, shown.stderr
    as_json = qwenpipe_in_process("status", "--json", cwd=hostile)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["login"]["expires_at"] is None


@pytest.mark.parametrize(("kind", "said"), [("fifo", "a FIFO"), ("folder", "a folder, not a file")])
def test_status_does_not_hang_on_a_saved_state_that_is_not_a_file(tmp_path, kind, said):
    import os

    (tmp_path / "prompts").mkdir()
    (tmp_path / ".qwenpipe").mkdir(mode=0o700)
    saved = tmp_path / ".qwenpipe" / "state.json"
    os.mkfifo(saved) if kind == "fifo" else saved.mkdir()
    shown = qwenpipe_in_process("status", "--json", cwd=tmp_path, timeout=30)
    assert shown.returncode == 2, shown.stderr  # refused at load: the path guard (config.check_paths)
    assert "browser.storage_state" in shown.stderr and said in shown.stderr, shown.stderr


@pytest.mark.parametrize("hostile", list(HOSTILE_STATES), indirect=True)
def test_doctor_reads_any_saved_state_without_crashing(hostile):
    report = Report("test")
    config = load()
    check_profile(report, config, time.time(), all_accounts(config)[0])
    login = next(c for c in report.checks if c.name == "saved login")
    assert login.status == "ok" and "token expiry not readable" in login.detail


@pytest.mark.browser
@pytest.mark.parametrize("content", ["[1, 2]", HOSTILE_STATES["entries of the wrong kind"]])
def test_doctor_with_a_hostile_saved_state_reports_instead_of_crashing(sim, tmp_path, content):
    project = make_project(tmp_path, sim, own_browser=True)  # doctor reads the saved login of a launch
    (project / "state.json").write_text(content)
    (project / "state.json").chmod(0o600)
    result = qwenpipe_in_process("doctor", "--json", cwd=project)
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["saved login"]["expires_at"] is None
    assert "login" in checks


@pytest.mark.parametrize("kind", ["fifo", "folder", "/dev/zero", "too large"])
def test_import_reads_only_a_regular_file_of_bounded_size_without_hanging(tmp_path, kind):
    """A FIFO used to hang the import, /dev/zero to eat all memory: refused at once, exit 2."""
    import os

    from pipeline.signin.saved import MAX_LOGIN_FILE_BYTES

    (tmp_path / "prompts").mkdir()
    source = tmp_path / "export.json"
    if kind == "fifo":
        os.mkfifo(source)
    elif kind == "folder":
        source.mkdir()
    elif kind == "/dev/zero":
        source = "/dev/zero"
    else:  # a valid state, padded past the cap: refused before it is parsed
        padding = " " * MAX_LOGIN_FILE_BYTES
        source.write_text(json.dumps(state([cookie(GOOD)])) + padding)
    result = qwenpipe_in_process("login", "--import", str(source), cwd=tmp_path, timeout=30)
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said
    assert f"{source}" in said and "Traceback" not in said
    expected = {
        "fifo": "is a FIFO",
        "folder": "is a directory",
        "/dev/zero": "is a device",
        "too large": "larger than",
    }
    assert expected[kind] in said, said
    assert not (tmp_path / ".qwenpipe" / "state.json").exists()


@pytest.mark.parametrize(
    ("setting", "target"),
    [
        ('[browser]\nstorage_state = "config.toml"\n', "config.toml"),
        ('[browser]\nstorage_state = "prompts/tea.md"\n', "prompts/tea.md"),
        ('[browser]\nstorage_state = "articles/.qwenpipe/qwenpipe.db"\n', "articles/.qwenpipe/qwenpipe.db"),
        (
            '[accounts.main]\nstorage_state = "one.json"\n[accounts.spare]\nstorage_state = "one.json"\n',
            "one.json",
        ),
    ],
    ids=["config", "prompt", "store", "shared"],
)
def test_import_never_writes_over_the_projects_own_files_or_another_accounts_login(tmp_path, setting, target):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "tea.md").write_text("Write about tea.\n")
    (tmp_path / "articles" / ".qwenpipe").mkdir(parents=True)
    (tmp_path / "articles" / ".qwenpipe" / "qwenpipe.db").write_text("the store\n")
    (tmp_path / "config.toml").write_text(setting)
    if target == "one.json":
        (tmp_path / target).write_text("main's login\n")
    before = (tmp_path / target).read_text()
    source = tmp_path / "export.json"
    source.write_text(json.dumps(state([cookie(GOOD)])))
    account = ["--account", "spare"] if target == "one.json" else []
    result = qwenpipe_in_process("login", *account, "--import", str(source), cwd=tmp_path)
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said
    assert "storage_state" in said and "of its own" in said and "Traceback" not in said, said
    assert (tmp_path / target).read_text() == before
