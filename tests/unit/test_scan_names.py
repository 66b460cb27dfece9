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


def test_the_collector_runs_again_after_a_scan_even_when_it_fails(tmp_path, monkeypatch):
    """scan (and status) pause the garbage collector while they build their objects
    (scan.no_collections): it is on again after them, after a failure too, and stays off when
    it was off before."""
    import gc

    import pytest

    from pipeline.batch import scan as batch

    prompts, articles = tmp_path / "prompts", tmp_path / "articles"
    prompts.mkdir()
    articles.mkdir()
    (prompts / "tea.md").write_text("Write.")
    seen = []
    real = batch._scan

    def watched(*args):
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(batch, "_scan", watched)
    assert [v.slug for v in scan(prompts, articles)] == ["tea"] and seen == [False] and gc.isenabled()

    def failing(*args):
        raise OSError("the folder went away")

    monkeypatch.setattr(batch, "_scan", failing)
    with pytest.raises(OSError):
        scan(prompts, articles)
    assert gc.isenabled()
    gc.disable()
    try:
        with batch.no_collections():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
