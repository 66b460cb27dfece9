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
