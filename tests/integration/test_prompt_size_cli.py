"""qwen.max_prompt_bytes through the command line: a prompt whose chat request would be over the
limit is exit 2 from `generate` and invalid in `cycle`, with nothing sent and no browser started."""

from __future__ import annotations

import json

import pytest
from sim_project import make_project, prompt
from tests_cli_helpers import qwenpipe_in_process

pytestmark = pytest.mark.browser

LIMIT = 5000


def fake_browser(folder):
    """A `browser.executable` that only leaves a mark when started: no mark, no browser."""
    mark = folder / "browser-started"
    script = folder / "fake-chromium"
    script.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n", encoding="utf-8")
    script.chmod(0o755)
    return script, mark


def project_with_limit(tmp_path, sim):
    project = make_project(tmp_path, sim, extra=f"max_prompt_bytes = {LIMIT}")
    script, mark = fake_browser(tmp_path)
    config = project / "config.toml"
    config.write_text(
        config.read_text().replace("[browser]\n", f'[browser]\nexecutable = "{script}"\n'), encoding="utf-8"
    )
    return project, mark


def test_generate_refuses_a_prompt_over_the_limit_before_any_browser(sim, tmp_path):
    project, mark = project_with_limit(tmp_path, sim)
    # 4,750 bytes in the file; its quotes and line breaks are escaped in the request: over 5,000.
    prompt(project, "big", 'Write about "tea".\n' * 250)
    before = len(sim.store.ledger())
    result = qwenpipe_in_process("generate", "big", "--wait", cwd=project)
    assert result.returncode == 2, result.stderr
    assert "qwen.max_prompt_bytes = 5,000" in result.stderr and "bytes" in result.stderr
    assert "big.md" in result.stderr and "Traceback" not in result.stderr
    assert len(sim.store.ledger()) == before, "something reached the site"
    assert not mark.exists(), "a browser was started"
    assert sorted(p.name for p in (project / "articles").iterdir() if not p.name.startswith(".")) == []


def test_a_later_turn_over_the_limit_refuses_the_whole_prompt_unsent(sim, tmp_path):
    project, mark = project_with_limit(tmp_path, sim)
    prompt(project, "turns", "Outline an article on tea.\n=== next turn ===\n" + "Longer. " * 800)
    before = len(sim.store.ledger())
    result = qwenpipe_in_process("generate", "turns", cwd=project)
    assert result.returncode == 2, result.stderr
    assert "turn 2 of 2" in result.stderr and "qwen.max_prompt_bytes = 5,000" in result.stderr
    assert len(sim.store.ledger()) == before and not mark.exists()


def test_cycle_counts_it_invalid_sends_the_others_and_needs_no_browser_for_it(sim, tmp_path):
    project, mark = project_with_limit(tmp_path, sim)
    prompt(project, "big", "x" * 6000)
    before = len(sim.store.ledger())
    result = qwenpipe_in_process("cycle", cwd=project)
    assert result.returncode == 1, result.stderr  # an invalid prompt: exit 1 until it is fixed
    assert "big" in result.stderr and "qwen.max_prompt_bytes = 5,000" in result.stderr
    assert len(sim.store.ledger()) == before and not mark.exists()
    status = json.loads(qwenpipe_in_process("status", "--json", cwd=project).stdout)
    row = next(a for a in status["articles"] if a["slug"] == "big")
    assert row["state"] == "invalid" and "max_prompt_bytes" in json.dumps(row)


def test_cycle_sends_the_small_prompt_beside_the_big_one(sim, tmp_path):
    project = make_project(tmp_path, sim, extra=f"max_prompt_bytes = {LIMIT}")
    prompt(project, "big", "x" * 6000)
    small = prompt(project, "small", "Write an article about green tea.")
    result = qwenpipe_in_process("cycle", cwd=project)
    assert result.returncode == 1, result.stderr
    assert (project / "articles" / "small.md.url").exists()
    assert not (project / "articles" / "big.md.url").exists()
    sent = [e["prompt"] for e in sim.store.ledger()]
    assert small in sent and "x" * 6000 not in sent
