"""`status` and `show` say what is true: invalid prompts, a logged-out chat, what is shown and when."""

from __future__ import annotations

import io
import json
import os
import re
import signal

from project_files import add_prompt
from pty_helpers import spawn
from rich.console import Console
from tests_cli_helpers import qwenpipe_in_process

from pipeline.batch.dashboard import rich_status
from pipeline.batch.status import collect
from pipeline.contract.step import generate


def test_show_caps_a_huge_journal_field_and_says_how_much_was_cut(project, workspace):
    add_prompt(project, "tea")
    huge = "x" * 1_000_000
    workspace.journal.append("tea", "hard", engine="qwen", error=huge, code="network")
    result = qwenpipe_in_process("show", "tea", cwd=project)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout) < 20_000
    assert "998,010 more characters cut" in result.stdout  # "[network] " + 1,000,000 - 2,000


def test_status_shows_bad_names_and_bad_prompts_as_invalid_with_the_fix(project):
    add_prompt(project, "tea")
    add_prompt(project, "My_Post")
    add_prompt(project, "with space")
    add_prompt(project, "broken", meta="title = ")
    add_prompt(project, "empty", "   \n")
    result = qwenpipe_in_process("status", "--json", cwd=project)
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

    table = qwenpipe_in_process("status", cwd=project)
    assert re.search(r"^My_Post +invalid ", table.stdout, re.M), table.stdout
    assert table.stderr.count("invalid prompt: ") == 4


THREE_TURNS = "One.\n=== next turn ===\nTwo.\n=== next turn ===\nThree."


def render_at(status, width: int) -> list[str]:
    """The dashboard as a terminal of `width` columns shows it (consoles soft-wrap, like out())."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, soft_wrap=True, force_terminal=True, color_system=None)
    console.print(rich_status(status, warnings=True, width=width))
    return buffer.getvalue().splitlines()


def test_the_table_keeps_its_columns_at_80_columns_and_wraps_the_footer_at_words(
    project, workspace, engines, chat
):
    add_prompt(project, "tea", THREE_TURNS)
    add_prompt(project, "a-rather-long-slug-for-a-narrow-terminal", "Write about width.")
    generate(workspace, "tea", engines)
    generate(workspace, "tea", engines)
    chat.last_turn_complete.append(False)
    generate(workspace, "tea", engines)  # the chat is at turn 2 of 3: the widest state there is
    widened = collect(workspace)
    assert any(row.turns for row in widened.rows)
    narrow = collect(workspace, pattern="a-*")  # the same batch without the multi-turn row
    with_turns, without = render_at(widened, 80), render_at(narrow, 80)
    for lines in (with_turns, without):
        assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    header = next(line for line in with_turns if line.strip().startswith("SLUG"))
    assert header == next(line for line in without if line.strip().startswith("SLUG")), "columns moved"
    assert header.split() == ["SLUG", "STATE", "AGE", "NEXT", "TRY", "LAST", "ERROR"]
    assert re.search(r"^ ?tea +generating 2/3 ", "\n".join(with_turns), re.M), "\n".join(with_turns)
    said = " ".join(" ".join(with_turns).split())
    for warning in widened.warnings:
        assert f"warning: {warning}" in said, f"cut: {warning}"


def test_a_filtered_status_says_how_many_are_shown_of_how_many(project):
    for slug in ("apple", "banana", "cherry", "date", "elder", "fig", "grape"):
        add_prompt(project, slug, f"Write about {slug}.")
    result = qwenpipe_in_process("status", "b*", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "1 shown of 7 (slugs matching 'b*')" in result.stdout
    assert "all 7 articles: pending 7" in result.stdout
    whole = qwenpipe_in_process("status", cwd=project).stdout
    assert "shown of" not in whole and "\n7 articles: pending 7" in whole


def test_watch_at_80_columns_says_when_it_was_refreshed(project):
    add_prompt(project, "tea")
    child, screen = spawn(["status", "--watch", "--interval", "1"], project, columns=80, rows=24)
    try:
        assert screen.wait_for(r"refreshed \d\d:\d\d:\d\d, every 1 s"), screen.text()
        first = re.findall(r"refreshed (\d\d:\d\d:\d\d)", screen.text())[-1]
        assert screen.wait_for(rf"refreshed (?!{first})\d\d:\d\d:\d\d", timeout=15), "the time never moved"
        child.send_signal(signal.SIGINT)
        screen.drain(child, timeout=60)  # a loaded machine: how soon is not the point
        assert child.returncode == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(screen.fd)
