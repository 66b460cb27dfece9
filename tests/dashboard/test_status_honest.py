"""`status` and `show` say what is true: invalid prompts, a logged-out chat, what is shown and when."""

from __future__ import annotations

from project_files import add_prompt
from tests_cli_helpers import qwenpipe

from pipeline.journal import Journal


def test_show_caps_a_huge_journal_field_and_says_how_much_was_cut(project):
    add_prompt(project, "tea")
    huge = "x" * 1_000_000
    Journal(project / "articles" / ".qwenpipe" / "journal.jsonl").append(
        "tea", "hard", engine="qwen", error=huge, code="network"
    )
    result = qwenpipe("show", "tea", cwd=project)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout) < 20_000
    assert "998,010 more characters cut" in result.stdout  # "[network] " + 1,000,000 - 2,000
