"""batch.scan's reading of the folders' names: the prompts folder's own notes are no prompt."""

from __future__ import annotations

from pipeline.batch.scan import scan


def test_the_prompts_folders_readme_in_any_case_is_not_a_prompt(tmp_path):
    prompts, articles = tmp_path / "prompts", tmp_path / "articles"
    prompts.mkdir()
    articles.mkdir()
    for name in ("README.md", "readme.md", "ReadMe.md", "readme2.md", "read-me.md", "tea.md"):
        (prompts / name).write_text("Write.")
    assert sorted(view.slug for view in scan(prompts, articles)) == ["read-me", "readme2", "tea"]
