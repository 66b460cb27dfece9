"""Command-line inputs and small consistencies: `cron --every` with hours, shell completion, help
without `<bool>`, the simulator's one set of options, one word count, `turns` of a done article,
one `router:` prefix, `init` making prompts/, and file line numbers in front matter errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

from pipeline.cli.app import app, run
from pipeline.config import load
from pipeline.contract.prompts import split_front_matter
from pipeline.errors import UsageProblem
from pipeline.setup.doctor import FAIL, OK, Report, check_prompts
from pipeline.simulator import Simulator
from pipeline.simulator.__main__ import parse_args
from pipeline.simulator.options import SimulatorOptions

# -- cron --every --------------------------------------------------------------------------------


def cron_field(text: str, size: int) -> set[int]:
    """The values a crontab field (`*`, `*/n`, `a-b/n`, `a,b`, `n`) matches out of 0..size-1."""
    found: set[int] = set()
    for part in text.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            low, high = 0, size - 1
        elif "-" in span:
            low, high = map(int, span.split("-"))
        else:
            low = high = int(span)
        found |= set(range(low, high + 1, int(step or 1)))
    return found


def firing_minutes(crontab: list[str]) -> list[int]:
    """Every minute of a day (0..1439) at which any of these crontab lines starts `cycle`."""
    minutes = set()
    for line in crontab:
        minute, hour, day, month, weekday, *_ = line.split()
        assert (day, month, weekday) == ("*", "*", "*"), line
        minutes |= {h * 60 + m for h in cron_field(hour, 24) for m in cron_field(minute, 60)}
    return sorted(minutes)


def cron_output(capfd, *args) -> tuple[int, str, str]:
    code = run(["cron", *args])
    captured = capfd.readouterr()
    return code, captured.out, " ".join(captured.err.split())


@pytest.mark.parametrize(
    ("every", "minutes"),
    [
        ("5", 5),
        ("5m", 5),
        ("30", 30),
        ("45", 45),
        ("8m", 8),
        ("90m", 90),
        ("1h30m", 90),
        ("2h", 120),
        ("3h", 180),
        ("12h", 720),
        ("24h", 1440),
    ],
)
def test_cron_every_takes_minutes_and_hours_and_fires_evenly(tmp_path, capfd, every, minutes):
    code, printed, said = cron_output(capfd, "--every", every)
    assert code == 0, said
    crontab = [
        line
        for line in printed.splitlines()
        if line.rstrip().endswith("cycle --cron-exit >> " + str(tmp_path / "qwenpipe-cron.log") + " 2>&1")
    ]
    assert crontab, printed
    assert firing_minutes(crontab) == list(range(0, 1440, minutes)), crontab
    assert f"OnUnitActiveSec={minutes}min" in printed
    spoken = f"{minutes // 60} hour" if minutes % 60 == 0 else f"{minutes} minute"
    assert f"Description=Run qwenpipe cycle every {spoken}" in printed


@pytest.mark.parametrize(
    ("every", "message"),
    [
        ("0", "choose 1 minute to 24 hours"),
        ("25h", "choose 1 minute to 24 hours"),
        ("90h", "choose 1 minute to 24 hours"),
        ("7h", "cron cannot run every 420 minutes evenly"),
        ("5h", "e.g. 288m or 6h"),
        ("soon", "give minutes (5, 90m) or hours (2h, 1h30m)"),
        ("10s", "give minutes"),
    ],
)
def test_cron_every_refuses_what_cron_cannot_run_evenly(tmp_path, capfd, every, message):
    code, printed, said = cron_output(capfd, "--every", every)
    assert code == 2 and message in said, said
    assert printed == ""


def test_cron_every_under_an_hour_keeps_the_old_lines_and_says_when_gaps_differ(tmp_path, capfd):
    code, printed, said = cron_output(capfd, "--every", "7")
    assert code == 0 and "*/7 * * * *" in printed
    assert "one gap an hour is 4 minute(s)" in said and "--every 6 or 8" in said
    code, printed, said = cron_output(capfd, "--every", "10")
    assert code == 0 and "*/10 * * * *" in printed and "gap" not in said


# -- shell completion and help -------------------------------------------------------------------


def test_shell_completion_can_be_shown_installed_and_completes(tmp_path):
    # Typer guesses the shell from the process tree (shellingham), which a test runner's workers
    # do not always show; its own switch makes it take the shell named on the command line.
    env = {"SHELL": "/bin/bash", "HOME": str(tmp_path), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = qwenpipe("--show-completion", "bash", cwd=tmp_path, env=env)
    assert shown.returncode == 0 and "_QWENPIPE_COMPLETE=complete_bash" in shown.stdout, shown.stderr
    installed = qwenpipe("--install-completion", "bash", cwd=tmp_path, env=env)
    assert installed.returncode == 0, installed.stderr
    assert "qwenpipe.sh" in (tmp_path / ".bashrc").read_text()
    completing = {"_QWENPIPE_COMPLETE": "complete_bash", "COMP_CWORD": "3"}
    words = qwenpipe(cwd=tmp_path, env={**completing, "COMP_WORDS": "qwenpipe simulate --scenario bot"})
    assert words.stdout.split() == ["bot_check"], words
    commands = qwenpipe(cwd=tmp_path, env={**completing, "COMP_CWORD": "1", "COMP_WORDS": "qwenpipe ge"})
    assert commands.stdout.split() == ["generate"], commands


def all_commands() -> list[list[str]]:
    import typer.main

    group = typer.main.get_command(app)
    return [[], *([name] for name in group.commands)]


@pytest.mark.parametrize("command", all_commands(), ids=lambda c: " ".join(c) or "qwenpipe")
def test_no_help_shows_bool_as_a_metavar(tmp_path, command):
    result = qwenpipe(*command, "--help", cwd=tmp_path, env={"COLUMNS": "120"}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout and "BOOLEAN" not in result.stdout, result.stdout


# -- the simulator's command lines ---------------------------------------------------------------


def typer_simulate_defaults() -> dict:
    import typer.main

    command = typer.main.get_command(app).commands["simulate"]
    return {param.name: param.default for param in command.params if param.name != "help"}


def test_both_simulator_command_lines_have_the_same_options_and_defaults():
    defaults = SimulatorOptions()
    assert parse_args([]) == defaults
    from_typer = typer_simulate_defaults()
    assert set(from_typer) == set(vars(defaults))
    for name, value in vars(defaults).items():
        assert from_typer[name] == value, name
    assert defaults.port == 8765
    assert parse_args(["--answer-seconds", "4", "--require-login"]) == SimulatorOptions(
        answer_seconds=4.0, require_login=True
    )


@pytest.fixture
def busy_port():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def simulator_module(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pipeline.simulator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_simulate_on_a_port_in_use_is_exit_2_with_the_reason(tmp_path, busy_port):
    for result in (
        qwenpipe("simulate", "--port", str(busy_port), cwd=tmp_path, timeout=60),
        simulator_module("--port", str(busy_port), cwd=tmp_path),
    ):
        said = " ".join(result.stderr.split())
        assert result.returncode == 2, said
        assert f"127.0.0.1:{busy_port} is in use" in said and "--port 0" in said
        assert "internal error" not in said and "Traceback" not in said


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--scenario", "nonsense"], "nonsense"),
        (["--api-shape", "2020-01"], "2020-01"),
        (["--answer-seconds", "nan"], "--answer-seconds nan: choose 0 to 3600 seconds"),
        (["--port", "70000"], "--port 70000: choose 1 to 65535"),
    ],
)
def test_simulate_with_a_bad_option_is_exit_2_on_both_command_lines(tmp_path, args, reason):
    for result in (
        qwenpipe("simulate", *args, cwd=tmp_path, timeout=60),
        simulator_module(*args, cwd=tmp_path),
    ):
        said = " ".join(result.stderr.split())
        assert result.returncode == 2, said
        assert reason in said and "internal error" not in said, said


def test_options_check_names_the_choices():
    with pytest.raises(UsageProblem, match="--scenario 'nonsense': choose one of ok, logged_out"):
        SimulatorOptions(scenario="nonsense").checked()


def test_held_answers_stay_generating_until_released():
    with Simulator(port=0, answer_seconds=0.1, thinking_seconds=0.0, url_delay=0.0).start() as sim:
        sim.set(hold_answers=True)
        chat = sim.store.new_chat()
        sim.store.send(chat, "Write about holding.", None, gate=None)
        time.sleep(0.3)  # three times the answer's length
        held = sim.store.chat_view(chat)["messages"][-1]
        assert held["done"] is False and held["finished"] is False and held["answer"]
        sim.set(hold_answers=False)
        released = sim.store.chat_view(chat)["messages"][-1]
        assert released["done"] is True
        assert released["answer"] == sim.expected_answer("Write about holding.")


# -- one word count, turns, one router prefix ----------------------------------------------------


MARKDOWN_PROMPT = "# Tea notes\n\nWrite about **green tea**, [its history](http://example.com/x) - and more."


def test_generate_says_the_word_count_the_front_matter_holds_and_min_words_uses(sim, tmp_path):
    project = make_project(tmp_path, sim)
    prompt(project, "tea", MARKDOWN_PROMPT)
    result = qwenpipe("generate", "--engine", "router", "tea", cwd=project)
    assert result.returncode == 0, result.stderr
    meta, _ = read_article(project / "articles" / "tea.md")
    assert f"({meta['word_count']} words, router)" in result.stderr, (meta["word_count"], result.stderr)
    strict = make_project(tmp_path / "strict", sim, extra="")
    (strict / "config.toml").write_text(
        (strict / "config.toml").read_text() + f"[article]\nmin_words = {meta['word_count'] + 1}\n"
    )
    prompt(strict, "tea", MARKDOWN_PROMPT)
    rejected = qwenpipe("generate", "--engine", "router", "tea", cwd=strict)
    said = " ".join(rejected.stderr.split())
    assert f"the answer has {meta['word_count']} words, fewer than article.min_words" in said, said


def test_status_json_gives_the_turns_of_a_finished_multi_turn_article(sim, tmp_path):
    project = make_project(tmp_path, sim)
    prompt(project, "three", "Outline tea.\n=== next turn ===\nWrite it.\n=== next turn ===\nPolish it.")
    prompt(project, "one", "Write about coffee.")
    for slug in ("three", "one"):
        assert qwenpipe("generate", "--engine", "router", slug, cwd=project).returncode == 0
    shown = qwenpipe("status", "--json", cwd=project)
    rows = {row["slug"]: row for row in json.loads(shown.stdout)["articles"]}
    assert rows["three"]["state"] == "done" and rows["three"]["turns"] == 3
    assert rows["one"]["turns"] is None
    assert read_article(project / "articles" / "three.md")[0]["turns"] == 3


def test_a_router_error_names_the_router_once(sim, tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    project = make_project(tmp_path, sim)
    config = project / "config.toml"
    config.write_text(config.read_text().replace(f"{sim.base_url}/v1", f"http://127.0.0.1:{port}/v1"))
    prompt(project, "tea", "Write about tea.")
    result = qwenpipe("generate", "--engine", "router", "tea", cwd=project)
    assert result.returncode == 1
    assert "router: cannot reach" in result.stderr
    assert "router: router" not in result.stderr, result.stderr


# -- init, doctor, front matter, login --timeout -------------------------------------------------


def test_init_makes_the_prompts_folder_so_cycle_can_run(tmp_path):
    made = qwenpipe("init", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "prompts").is_dir()
    assert f"made {tmp_path / 'prompts'}" in " ".join(made.stderr.split())
    assert qwenpipe("cycle", cwd=tmp_path).returncode == 0


def test_doctor_checks_the_prompts_folder(tmp_path):
    report = Report("test")
    check_prompts(report, load())
    check = report.checks[-1]
    assert check.name == "prompts" and check.status == FAIL
    assert str(tmp_path / "prompts") in check.detail and "mkdir -p" in check.fix
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "tea.md").write_text("Write about tea.")
    report = Report("test")
    check_prompts(report, load())
    assert report.checks[-1].status == OK and "1 prompt(s)" in report.checks[-1].detail


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('+++\ntitle = "Tea"\ntags = [\n  "a",\n  oops\n]\n+++\nWrite.', "at line 5,"),
        ('+++\ntitle = "Tea\n+++\nWrite.', "at line 2,"),
        ("+++\n\n\ntitle = \n+++\nWrite.", "at line 4,"),
        ("+++\ntags = [\n+++\nWrite.", "at line 3, the closing `+++`"),
    ],
)
def test_a_front_matter_toml_error_names_the_file_line(tmp_path, text, line):
    with pytest.raises(UsageProblem, match="front matter is not valid TOML") as info:
        split_front_matter(text, tmp_path / "tea.md")
    assert line in str(info.value), str(info.value)


@pytest.mark.parametrize("timeout", ["nan", "inf", "0", "-5"])
def test_login_timeout_must_be_a_real_number_of_seconds(tmp_path, capfd, timeout):
    code = run(["login", "--timeout", timeout])
    said = capfd.readouterr().err
    assert code == 2 and f"--timeout {float(timeout)}: must be more than 0" in said, said
