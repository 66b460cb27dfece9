"""What a cycle tells cron: its summary, its warnings and the time on every line."""

from __future__ import annotations

import re

from project_files import add_prompt
from tests_cli_helpers import qwenpipe

ISO_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d \S")


def test_cycle_lines_off_a_terminal_start_with_an_iso_time(project):
    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("+++\ntitle = 'Tea'\n+++\n# Tea\n")
    result = qwenpipe("cycle", cwd=project)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and all(ISO_LINE.match(line) for line in lines), result.stderr
    assert " cycle: 1 done" in lines[-1]


def test_cycle_names_each_invalid_prompt_once_and_sends_the_rest(project, chat, router):
    from pipeline.config import load
    from pipeline.cycle import run_cycle
    from pipeline.workspace import Engines, Workspace

    ws = Workspace(load(project / "config.toml"))
    add_prompt(project, "tea")
    add_prompt(project, "My_Post")
    add_prompt(project, "broken", meta="title = ")
    lines: list[str] = []
    engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    report = run_cycle(ws, engines, say=lines.append)
    assert report.sent == ["tea"] and chat.sends == 1
    assert sorted(report.invalid) == ["My_Post", "broken"] and report.exit_code == 1
    named = [line for line in lines if line.startswith("invalid prompt: ")]
    assert len(named) == 2, lines
    assert any("My_Post" in line and "rename it to" in line for line in named)
    assert any("broken.md" in line and "not valid TOML" in line for line in named)
    assert not any("skipped" in line for line in lines), lines
    assert "2 invalid" in report.summary()
