"""What a cron setup needs beside the line (issue 27, items 10, 13, 14 and 15): the router key in a
private file, sane floors for waits and rates, PostgreSQL's driver named, init's .gitignore, the
repository's config.toml as init writes it, help without Typer's type names."""

from __future__ import annotations

import os
import sys

import pytest
from project_files import add_prompt
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

from pipeline.cli.app import app, run
from pipeline.config import SCHEMA, ConfigError, load, render_default_config
from pipeline.known_secrets import router_key
from pipeline.redact import MASK, mask

KEY = "sk-file-0123456789abcdefghij"


def key_file(folder, mode=0o600, text=KEY + "\n"):
    path = folder / "router.key"
    path.write_text(text)
    path.chmod(mode)
    return path


def with_key_file(project, value):
    (project / "config.toml").write_text(f'[router]\napi_key_file = "{value}"\n')
    return project / "config.toml"


def test_the_router_key_is_read_from_a_private_file_when_the_variable_is_unset(project, monkeypatch):
    key_file(project)
    config = load(with_key_file(project, "router.key"))  # relative to the config's folder
    assert config.router.api_key_file == str(project / "router.key")
    assert router_key(config.router, env={}) == KEY
    assert mask(f"error: {KEY}") == f"error: {MASK}", "a key read from the file is masked too"
    assert (
        router_key(config.router, env={"ROUTER_API_KEY": "sk-from-env-0123456789"})
        == "sk-from-env-0123456789"
    )


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666])
def test_a_key_file_others_may_read_is_refused_by_runs_that_use_it_and_a_warning_for_readers(project, mode):
    path = key_file(project, mode)
    config = load(with_key_file(project, path))  # loads: a command that only reads may run
    with pytest.raises(ConfigError) as refused:
        router_key(config.router, env={})
    assert f"mode {mode:04o}" in str(refused.value) and f"chmod 600 {path}" in str(refused.value)
    for reader in (["status"], ["status", "--json"], ["accounts"]):
        result = qwenpipe(*reader, cwd=project)
        assert result.returncode == 0, (reader, result.stderr)
        assert KEY not in result.stdout + result.stderr  # read to be masked, never shown
    warned = qwenpipe("status", cwd=project)
    assert (
        f"router.api_key_file: {path} has mode {mode:04o}" in warned.stderr and "chmod 600" in warned.stderr
    )
    for command in (["cycle"], ["generate", "tea"]):
        (project / "prompts" / "tea.md").write_text("Write about tea.\n")
        result = qwenpipe(*command, cwd=project)
        assert result.returncode == 2 and f"mode {mode:04o}" in result.stderr, (command, result.stderr)
    assert not list((project / "articles").glob("tea.md*"))  # refused before anything was sent


def test_a_missing_key_file_never_shows_the_value_a_fifo_never_hangs(project):
    with pytest.raises(ConfigError) as missing:
        load(with_key_file(project, KEY))  # the key pasted where its path belongs
    assert KEY not in str(missing.value) and "no such file" in str(missing.value)
    os.mkfifo(project / "fifo.key")
    with pytest.raises(ConfigError, match="a FIFO"):
        load(with_key_file(project, "fifo.key"))


def test_the_cron_command_reminds_of_the_key_file_and_prints_logrotate(project):
    result = qwenpipe("cron", cwd=project, env={"ROUTER_API_KEY": "sk-shell-0123456789"})
    assert result.returncode == 0
    assert "ROUTER_API_KEY is set in this shell, but cron runs without it" in result.stderr
    assert "router.api_key_file" in result.stderr and "copytruncate" in result.stdout
    key_file(project)
    with_key_file(project, "router.key")
    assert "api_key_file" not in qwenpipe("cron", cwd=project).stderr


FLOORS = {
    ("qwen", "api_reads_per_second"): 0.0001,
    ("qwen", "page_timeout"): 0.001,
    ("qwen", "answer_timeout"): 0.5,
    ("qwen", "bot_check_pause"): 0.0001,
    ("router", "timeout"): 0.01,
    ("router", "connect_timeout"): 0.001,
    ("store", "orphan_hours"): 0.0001,
}


@pytest.mark.parametrize(("where", "absurd"), list(FLOORS.items()))
def test_legal_but_absurd_waits_and_rates_are_refused_with_their_range(tmp_path, where, absurd):
    section, key = where
    (tmp_path / "config.toml").write_text(f"[{section}]\n{key} = {absurd}\n")
    with pytest.raises(ConfigError, match=rf"{section}\.{key} = {absurd} must be [\d.]+ to \d+"):
        load(tmp_path / "config.toml")


def test_every_rate_has_a_floor_of_at_least_one_read_a_second():
    spec = SCHEMA["qwen"]["api_reads_per_second"]
    assert spec.check(0.999) and not spec.check(1)


def test_a_postgresql_store_without_its_driver_is_exit_2_naming_the_extra(project, monkeypatch, capsys):
    (project / "config.toml").write_text('[store]\nurl = "postgresql://qwenpipe@127.0.0.1:9/none"\n')
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    for args in (["status"], ["cycle"], ["doctor"]):
        assert run(["--config", str(project / "config.toml"), *args]) == 2
        said = capsys.readouterr().err
        assert "pip install 'qwenpipe[postgres]'" in said and "Traceback" not in said, said


def test_init_writes_a_gitignore_for_the_login_and_the_store_once(tmp_path):
    assert qwenpipe("init", cwd=tmp_path).returncode == 0
    ignored = (tmp_path / ".gitignore").read_text()
    assert ".qwenpipe/" in ignored.splitlines() and "qwenpipe-cron.log" in ignored.splitlines()
    (tmp_path / ".gitignore").write_text("public/\n")  # the site's own: kept, ours added
    assert qwenpipe("init", "--force", cwd=tmp_path).returncode == 0
    assert qwenpipe("init", "--force", cwd=tmp_path).returncode == 0
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[0] == "public/" and lines.count(".qwenpipe/") == 1


def test_the_repository_config_is_what_init_writes():
    from pathlib import Path

    shipped = (Path(__file__).parents[2] / "config.toml").read_text(encoding="utf-8")
    assert shipped == render_default_config()


def test_no_help_shows_a_type_name_or_a_braced_argument():
    import typer.main

    group = typer.main.get_command(app)
    for name in group.commands:
        result = qwenpipe(name, "--help", cwd=".")
        assert result.returncode == 0, (name, result.stderr)
        usage = next(line for line in result.stdout.splitlines() if line.startswith("Usage:"))
        assert "{" not in usage and "list[" not in result.stdout, (name, result.stdout)


def test_publish_of_a_page_edited_by_hand_is_exit_1(project):
    (project / "config.toml").write_text('[publish]\ndir = "site"\n')
    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("+++\ntitle = 'Tea'\n+++\nBody.\n")
    assert qwenpipe("publish", "tea", cwd=project).returncode == 0
    (project / "site" / "tea.md").write_text("my own edit\n")
    held = qwenpipe("publish", "tea", cwd=project)
    assert held.returncode == 1 and "edited by hand" in held.stderr
    assert qwenpipe("publish", "--all", cwd=project).returncode == 1
