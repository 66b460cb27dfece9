"""`qwenpipe store init` through the real command line, against a real PostgreSQL server."""

from __future__ import annotations

import socket

import pytest
from project_files import write_config
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

from pipeline.exitcodes import ExitCode
from pipeline.store.pg_schema import SCHEMA_VERSION


def _project(tmp_path, url: str):
    (tmp_path / "prompts").mkdir()
    write_config(tmp_path, f'[store]\nurl = "{url}"\n')
    return tmp_path


def test_store_init_creates_the_schema_then_says_there_is_nothing_to_do(tmp_path, postgres_server):
    project = _project(tmp_path, postgres_server.new_database())
    first = qwenpipe("store", "init", cwd=project)
    assert first.returncode == ExitCode.DONE, first.stderr
    assert f"no schema -> schema version {SCHEMA_VERSION}" in first.stderr
    again = qwenpipe("store", "init", cwd=project)
    assert again.returncode == ExitCode.DONE
    assert f"already at schema version {SCHEMA_VERSION}; nothing to do" in again.stderr


def test_store_init_on_an_unreachable_server_is_try_later_in_one_line(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    project = _project(tmp_path, f"postgresql://qwen@127.0.0.1:{port}/batch")
    result = qwenpipe("store", "init", cwd=project)
    assert result.returncode == ExitCode.WORKING, result.stderr
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://qwen:hunter2@db.example/batch",
        "postgresql://qwen@db.example/batch?password=hunter2",
        "postgresql://db.example/batch?sslmode=require&password=hunter2",
        "postgres://db.example/batch?PassWord=hunter2",
        "postgresql://db.example/batch?pass%77ord=hunter2",  # percent-encoded, as libpq decodes it
        "postgresql:///batch?host=/run/postgresql&password=hunter2",
    ],
)
@pytest.mark.parametrize("command", [("store", "init"), ("doctor",), ("status",), ("generate", "tea")])
def test_a_password_in_store_url_is_refused_without_showing_it(tmp_path, url, command):
    project = _project(tmp_path, url)
    (project / "prompts" / "tea.md").write_text("Write about tea.\n")
    result = qwenpipe(*command, cwd=project)
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert "store.url holds a password" in result.stderr and "PGPASSWORD" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_store_init_without_a_url_reports_the_sqlite_store(tmp_path):
    project = _project(tmp_path, "")
    result = qwenpipe("store", "init", cwd=project)
    assert result.returncode == ExitCode.DONE, result.stderr
    assert "qwenpipe.db (SQLite): at schema version" in result.stderr
