"""The command line as users and cron see it: real processes, exit codes, stdout vs stderr."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from project_files import add_prompt, snapshot
from tests_cli_helpers import qwenpipe_in_process as qwenpipe


def test_init_writes_config_and_refuses_to_overwrite(tmp_path):
    first = qwenpipe("init", cwd=tmp_path)
    assert first.returncode == 0 and (tmp_path / "config.toml").exists()
    (tmp_path / "config.toml").write_text("# mine\n")
    second = qwenpipe("init", cwd=tmp_path)
    assert second.returncode == 2 and "--force" in second.stderr
    assert (tmp_path / "config.toml").read_text() == "# mine\n"
    third = qwenpipe("init", "--force", cwd=tmp_path)
    assert third.returncode == 0 and "[qwen]" in (tmp_path / "config.toml").read_text()


def test_bad_config_is_exit_2_with_one_line_and_no_traceback(project):
    (project / "config.toml").write_text("[qwen]\npoll_interval = -5\n")
    add_prompt(project, "tea")
    before = snapshot(project)
    result = qwenpipe("generate", "tea", cwd=project)
    assert result.returncode == 2
    assert "qwen.poll_interval = -5" in result.stderr and "config.toml" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert snapshot(project) == before


def test_config_option_and_env_var(project, tmp_path):
    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("done")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_option = qwenpipe("--config", str(project / "config.toml"), "generate", "tea", cwd=elsewhere)
    assert by_option.returncode == 0 and by_option.stdout.strip().endswith("tea.md")
    by_env = qwenpipe("generate", "tea", cwd=elsewhere, env={"QWENPIPE_CONFIG": str(project / "config.toml")})
    assert by_env.returncode == 0
    missing = qwenpipe("--config", str(elsewhere / "nope.toml"), "generate", "tea", cwd=elsewhere)
    assert missing.returncode == 2 and "nope.toml" in missing.stderr


@pytest.mark.parametrize("slug", ["../x", "/abs/path", "two words"])
def test_bad_slug_is_exit_2(project, slug):
    before = snapshot(project)
    result = qwenpipe("generate", slug, cwd=project)
    assert result.returncode == 2 and "invalid slug" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(project) == before


def test_bad_prompt_is_exit_2(project):
    (project / "prompts" / "tea.md").write_bytes(b"\xff\xfe")
    result = qwenpipe("generate", "tea", cwd=project)
    assert result.returncode == 2 and "not UTF-8" in result.stderr and "prompts/tea.md" in result.stderr


def test_unknown_option_and_engine_are_exit_2(project):
    add_prompt(project, "tea")
    assert qwenpipe("generate", "tea", "--bogus", cwd=project).returncode == 2
    result = qwenpipe("generate", "tea", "--engine", "gpt", cwd=project)
    assert result.returncode == 2 and "--engine 'gpt'" in result.stderr


def test_done_article_is_exit_0_and_prints_its_path(project):
    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("done")
    result = qwenpipe("generate", "tea", cwd=project)
    assert result.returncode == 0 and result.stdout.strip() == str(project / "articles" / "tea.md")


def test_dead_letter_is_exit_1_and_replay_clears_it(project):
    add_prompt(project, "tea")
    (project / "articles" / "tea.md.failed").write_text('reason = "bot_check"\nlast_error = "bot check"\n')
    result = qwenpipe("generate", "tea", cwd=project)
    assert result.returncode == 1 and "qwenpipe replay tea" in result.stderr
    replayed = qwenpipe("replay", "tea", cwd=project)
    assert replayed.returncode == 0 and not (project / "articles" / "tea.md.failed").exists()
    assert qwenpipe("replay", "tea", cwd=project).returncode == 2


def test_replay_all_failed_reports_a_bad_name_and_replays_the_rest(project):
    dead = 'reason = "bot_check"\nlast_error = "bot check"\n'
    for name in ("a-tea", "Bad Name", "z-tea"):
        (project / "articles" / f"{name}.md.failed").write_text(dead)
    result = qwenpipe("replay", "--all-failed", cwd=project)
    assert result.returncode == 1, result.stderr
    assert "Bad Name: not replayed: invalid slug" in result.stderr
    assert "2 of 3 replayed" in result.stderr and "Traceback" not in result.stderr
    assert not (project / "articles" / "a-tea.md.failed").exists()
    assert not (project / "articles" / "z-tea.md.failed").exists()
    assert (project / "articles" / "Bad Name.md.failed").exists()


def test_fast_path_for_a_done_article_matches_the_full_cli(project, capfd):
    from pipeline.cli.app import run
    from pipeline.entry import already_done

    add_prompt(project, "tea")
    done = project / "articles" / "tea.md"
    done.write_text("done")
    fast = qwenpipe("generate", "tea", cwd=project)
    assert run(["generate", "tea"]) == 0
    full = capfd.readouterr()
    assert fast.returncode == 0 and fast.stdout == full.out and fast.stdout.strip() == str(done)
    assert "already done" in fast.stderr and "already done" in full.err
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d "  # off a terminal, both say when
    assert re.match(stamp + ".*already done", fast.stderr) and re.match(stamp + ".*already done", full.err)
    config = str(project / "config.toml")
    assert already_done(["--config", config, "generate", "tea"]) == str(done)
    assert already_done(["generate", "tea", "--config", config]) == str(done)
    for other in (
        ["generate", "tea", "--wait"],
        ["generate", "other"],
        ["cycle"],
        ["generate", "../x"],
        ["generate", "tea", "extra"],
        ["--config", str(project / "nope.toml"), "generate", "tea"],
    ):
        assert already_done(other) is None, other


def test_status_json_is_answered_without_typer_and_matches_the_full_cli(project, capfd):
    from pipeline.cli.app import run

    add_prompt(project, "tea")
    add_prompt(project, "coffee", "")  # invalid: a warning on stderr too
    (project / "articles" / "tea.md").write_text("done")
    probe = (
        "import sys\nfrom pipeline import entry\n"
        "sys.argv = ['qwenpipe', 'status', '--json', '--sort', 'slug']\n"
        "try:\n    entry.main()\nexcept SystemExit as done:\n"
        '    sys.stderr.write(f\'{done.code} {"typer" in sys.modules} {"rich.table" in sys.modules}\\n\')\n'
    )
    fast = subprocess.run(
        [sys.executable, "-c", probe], cwd=project, capture_output=True, text=True, timeout=60
    )
    assert fast.stderr.splitlines()[-1] == "0 False False", fast.stderr
    assert run(["status", "--json", "--sort", "slug"]) == 0
    full = capfd.readouterr()
    fast_doc, full_doc = json.loads(fast.stdout), json.loads(full.out)
    fast_doc.pop("generated_at"), full_doc.pop("generated_at")
    assert fast_doc == full_doc and [a["slug"] for a in fast_doc["articles"]] == ["coffee", "tea"]
    assert [line.split(" ", 1)[1] for line in fast.stderr.splitlines()[:-1]] == [
        line.split(" ", 1)[1] for line in full.err.splitlines()
    ]


def entry_point(
    project, *argv: str, also: tuple[str, ...] = (), later: float = 0.0
) -> subprocess.CompletedProcess:
    """The console script run with `argv`; its last stderr line is `EXIT [heavy modules it loaded]`
    (`also`: more modules, by exact name, to report if loaded; `later`: its clock that many
    seconds on, so the files just written are older than status_cache.RACY)."""
    probe = (
        f"import sys, time\nclock = time.time\ntime.time = lambda: clock() + {later!r}\n"
        "from pipeline import entry\n"
        f"sys.argv = ['qwenpipe', *{list(argv)!r}]\n"
        "try:\n    entry.main()\nexcept SystemExit as done:\n"
        "    heavy = ('typer', 'rich', 'httpx', 'playwright', 'pydantic')\n"
        "    loaded = sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith("
        f"'pipeline.engines.qwen.b') or m in {also!r})\n"
        "    sys.stderr.write(f'{int(done.code)} {loaded}\\n')\n"
    )
    command = [sys.executable, "-c", probe]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=60)


def test_a_no_op_cycle_loads_neither_typer_rich_httpx_nor_the_browser_and_says_what_the_cli_says(
    project, capfd
):
    from pipeline.cli.app import run

    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("done")
    fast = entry_point(project, "cycle", "--config", str(project / "config.toml"))
    assert fast.stderr.splitlines()[-1] == "0 []", fast.stderr
    assert run(["cycle"]) == 0
    said, full = fast.stderr.splitlines()[-2], capfd.readouterr().err.strip()
    seconds = re.compile(r"^\S+ |\d+\.\d s")  # the time of day and the cycle's duration differ
    assert seconds.sub("", said) == seconds.sub("", full) == "cycle: 1 done (no browser, , exit 0)"


def test_a_warm_status_json_loads_neither_openssl_nor_the_prompt_rules(project):
    """A warm `status --json` shows its kept document: what only the rows' making or other commands
    use stays unimported (start-up is most of its cost: issue 39 item 2, docs/performance.md)."""
    add_prompt(project, "tea")
    add_prompt(project, "coffee")
    (project / "articles" / "tea.md").write_text("done")
    from pipeline.wiring import open_sqlite

    open_sqlite(project / "articles" / ".qwenpipe").close()  # the store, as after any cycle
    argv = ("status", "--json", "--config", str(project / "config.toml"))
    unused = ("hashlib", "_hashlib", "pipeline.contract.prompts")
    assert entry_point(project, *argv, later=60).returncode == 0  # the document made and kept
    warm = entry_point(project, *argv, also=unused, later=60)
    assert warm.stderr.splitlines()[-1] == "0 []", warm.stderr


def test_a_cycle_that_cannot_run_is_the_same_exit_2_line_without_typer(project, capfd):
    from pipeline.cli.app import run

    (project / "config.toml").write_text("[qwen]\npoll_interval = -5\n")
    fast = entry_point(project, "cycle")
    assert fast.stderr.splitlines()[-1] == "2 []", fast.stderr
    assert run(["cycle"]) == 2
    assert fast.stderr.splitlines()[0].split(" ", 1)[1] == capfd.readouterr().err.strip().split(" ", 1)[1]


def test_status_json_loads_neither_rich_httpx_nor_the_browser(project):
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "")  # invalid: a warning said on stderr
    fast = entry_point(project, "status", "--json")
    assert fast.stderr.splitlines()[-1] == "0 []", fast.stderr
    assert "warning:" in fast.stderr and json.loads(fast.stdout)["totals"]["invalid"] == 1


PLAIN_QUERY = {"state_filter": [], "pattern": [], "sort": "state"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["status", "--json"], (None, {**PLAIN_QUERY})),
        (
            ["-c", "a.toml", "status", "tea-*", "--json", "--state", "done", "--state=failed", "--sort=age"],
            ("a.toml", {"state_filter": ["done", "failed"], "pattern": ["tea-*"], "sort": "age"}),
        ),
        (
            ["status", "--json", "--config=b.toml"],
            ("b.toml", {"state_filter": [], "pattern": [], "sort": "state"}),
        ),
        (["status"], None),
        (["status", "--json", "--watch"], None),
        (["--cdp", "http://x", "status", "--json"], None),
        (["status", "a", "b", "--json"], (None, {**PLAIN_QUERY, "pattern": ["a", "b"]})),
        (["--json", "status"], None),
        (["--sort", "age", "status", "--json"], None),
        (["status", "--json", "--sort"], None),
        (["show", "tea", "--json"], None),
    ],
)
def test_only_an_exact_status_json_call_takes_the_fast_path(argv, expected):
    from pipeline.entry import status_json_query

    assert status_json_query(argv) == expected


def test_a_bad_status_json_call_is_the_full_clis_one_line_error(project):
    bad = qwenpipe("status", "--json", "--sort", "sideways", cwd=project)
    assert bad.returncode == 2 and bad.stdout == "", bad
    assert bad.stderr.strip().endswith("--sort 'sideways': choose one of state, age, slug"), bad.stderr
    assert "Traceback" not in bad.stderr


# -- the face is honest under test: one behaviour, no hidden import cycle, exit codes from the enum


def _broken_core(*_args, **_kwargs):
    raise RuntimeError("the core broke")


def test_an_unexpected_error_is_one_line_naming_it_and_qwenpipe_debug_without_traceback(
    project, monkeypatch, capfd
):
    from pipeline.cli import app as cli
    from pipeline.contract import step as contract

    add_prompt(project, "tea")
    monkeypatch.delenv("QWENPIPE_DEBUG", raising=False)
    monkeypatch.setattr(contract, "generate", _broken_core)
    assert cli.run(["generate", "tea"]) == 1
    said = capfd.readouterr()
    lines = [line for line in said.err.splitlines() if line.strip()]
    assert len(lines) == 1, said.err
    assert "qwenpipe: internal error: RuntimeError: the core broke" in lines[0]
    assert "QWENPIPE_DEBUG=1" in lines[0] and "Traceback" not in said.err and said.out == ""
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0), "the run's watchdog is still armed"


def test_qwenpipe_debug_lets_an_unexpected_error_through_with_its_traceback(project, monkeypatch):
    from pipeline.cli import app as cli
    from pipeline.contract import step as contract

    add_prompt(project, "tea")
    monkeypatch.setenv("QWENPIPE_DEBUG", "1")
    monkeypatch.setattr(contract, "generate", _broken_core)
    with pytest.raises(RuntimeError, match="the core broke"):
        cli.run(["generate", "tea"])


def test_qwenpipe_debug_prints_the_traceback_from_the_console_script(project):
    import subprocess
    import sys

    add_prompt(project, "tea")
    script = (
        "import sys\nfrom pipeline.cli import app as cli\nfrom pipeline.contract import step as contract\n"
        "def broken(*a, **k):\n    raise RuntimeError('the core broke')\n"
        "contract.generate = broken\nsys.argv = ['qwenpipe', 'generate', 'tea']\ncli.main()\n"
    )
    for debug, traceback in (("", False), ("1", True)):
        env = {**os.environ, "NO_COLOR": "1", "QWENPIPE_DEBUG": debug}
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=project, capture_output=True, text=True, env=env, timeout=60
        )
        assert result.returncode == 1 and "the core broke" in result.stderr, result.stderr
        assert ("Traceback" in result.stderr) is traceback, result.stderr
        assert ("internal error" in result.stderr) is not traceback, result.stderr


def test_the_command_modules_share_their_helpers_without_importing_the_cli():
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from pipeline.cli import contract, cron, dashboard, log, prompts, setup, simulate, status, store\n"
        "assert 'pipeline.cli.app' not in sys.modules, 'a command module imported pipeline.cli.app'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_cycle_and_doctor_exit_codes_are_the_exit_code_enum():
    from pipeline.batch.cycle import CycleReport
    from pipeline.exitcodes import ExitCode
    from pipeline.setup.doctor import FAIL, Report

    report = CycleReport()
    assert type(report.exit_code) is ExitCode and report.exit_code is ExitCode.DONE
    report.sent.append("tea")
    assert report.exit_code is ExitCode.QUEUED
    report.busy_owner = "pid 1"
    assert report.exit_code is ExitCode.WORKING
    doctor = Report(config="config.toml")
    assert doctor.exit_code is ExitCode.DONE
    doctor.add("config", FAIL, "broken")
    assert doctor.exit_code is ExitCode.FAILED
