"""`status` and `show` say what is true: invalid prompts, a logged-out chat, what is shown and when."""

from __future__ import annotations

import json
import re

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


def test_status_shows_bad_names_and_bad_prompts_as_invalid_with_the_fix(project):
    add_prompt(project, "tea")
    add_prompt(project, "My_Post")
    add_prompt(project, "with space")
    add_prompt(project, "broken", meta="title = ")
    add_prompt(project, "empty", "   \n")
    result = qwenpipe("status", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    rows = {row["slug"]: row for row in document["articles"]}
    assert rows["tea"]["state"] == "pending"
    for slug in ("My_Post", "with space", "broken", "empty"):
        assert rows[slug]["state"] == "invalid", rows[slug]
    assert "rename it to" in rows["My_Post"]["last_error"]
    assert rows["My_Post"]["last_error"].endswith("prompts/my_post.md")
    assert rows["with space"]["last_error"].endswith("prompts/with-space.md")
    assert "front matter is not valid TOML" in rows["broken"]["last_error"]
    assert "the prompt is empty" in rows["empty"]["last_error"]
    assert document["totals"]["invalid"] == 4 and document["totals"]["pending"] == 1
    assert sum(1 for w in document["warnings"] if w.startswith("invalid prompt: ")) == 4

    table = qwenpipe("status", cwd=project)
    assert re.search(r"^My_Post +invalid ", table.stdout, re.M), table.stdout
    assert table.stderr.count("invalid prompt: ") == 4
