"""The tests' own ways of running qwenpipe: one spawn of `python -m pipeline` (issue 29, item 5),
its environment, and the in-process run's refusal of a crash point."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest
from tests_cli_helpers import CRASH_AT, command_env, qwenpipe, qwenpipe_in_process, spawn

TESTS = Path(__file__).resolve().parent.parent
HELPERS = TESTS / "tests_cli_helpers.py"


def starts_the_command(node: ast.AST) -> bool:
    """A list or tuple literal holding "-m" then "pipeline": an argv of `python -m pipeline`."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return False
    words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    return any(a == "-m" and b == "pipeline" for a, b in zip(words, words[1:], strict=False))


def test_only_the_helpers_spell_out_python_m_pipeline():
    spellers = sorted(
        f"{path.relative_to(TESTS)}:{node.lineno}"
        for path in TESTS.rglob("*.py")
        if path != HELPERS
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if starts_the_command(node)
    )
    assert spellers == [], f"start qwenpipe with tests_cli_helpers.spawn / qwenpipe: {spellers}"
    assert any(starts_the_command(node) for node in ast.walk(ast.parse(HELPERS.read_text()))), (
        "the check no longer sees the helper's own argv"
    )


def test_the_command_env_adds_no_color_and_removes_what_is_none(monkeypatch):
    monkeypatch.setenv("QWENPIPE_CONFIG", "/elsewhere/config.toml")
    monkeypatch.setenv("NO_COLOR", "")
    env = command_env({"QWENPIPE_CONFIG": None, "COLUMNS": "99", "NOT_SET_ANYWHERE": None})
    assert env["NO_COLOR"] == "1" and env["COLUMNS"] == "99"
    assert "QWENPIPE_CONFIG" not in env and "NOT_SET_ANYWHERE" not in env
    assert command_env({"NO_COLOR": None}).get("NO_COLOR") is None
    assert os.environ["QWENPIPE_CONFIG"] == "/elsewhere/config.toml", "the test's own environment changed"


def test_a_spawned_command_runs_in_its_folder_with_that_environment(tmp_path):
    process = spawn("--version", cwd=tmp_path, env={"NO_COLOR": None}, stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0 and out.strip(), out
    done = qwenpipe("--version", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, out)


def test_an_in_process_run_refuses_a_crash_point_but_not_its_removal(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=CRASH_AT):
        qwenpipe_in_process("--version", cwd=tmp_path, env={CRASH_AT: "before_send"})
    monkeypatch.setenv(CRASH_AT, "before_send")
    with pytest.raises(ValueError, match=CRASH_AT):
        qwenpipe_in_process("--version", cwd=tmp_path)
    done = qwenpipe_in_process("--version", cwd=tmp_path, env={CRASH_AT: None})
    assert done.returncode == 0 and os.environ[CRASH_AT] == "before_send"
