"""Answers that are not articles, end to end: rejected with the reason, the router takes over."""

from __future__ import annotations

import pytest
from sim_project import journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

pytestmark = pytest.mark.browser


# Answers complete once sent: the generate after the send finds the answer to check.
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.1}  # conftest.py `sim`


def run_until_settled(project, slug):
    for _ in range(30):
        result = qwenpipe_in_process("generate", slug, cwd=project)
        if result.returncode not in (3, 42):
            return result
    raise AssertionError("never settled")


@pytest.mark.parametrize(
    ("scenario", "code", "reason"),
    [  # a refusal: test_rejected_without_a_router; each check alone: tests/unit/test_checks_and_render.py
        ("short", "too_short", "fewer than article.min_words"),
        ("wrong_language", "wrong_language", "not article.language = 'en'"),
    ],
)
def test_rejected_answer_falls_back_to_the_router(sim, tmp_path, scenario, code, reason):
    project = make_project(tmp_path, sim, extra='[article]\nlanguage = "en"')
    prompt(project, "bad", f"Write an article about checks [sim:{scenario}].")
    result = run_until_settled(project, "bad")
    assert result.returncode == 0, result.stderr
    assert reason in result.stderr, result.stderr
    meta, body = read_article(project / "articles" / "bad.md")
    assert meta["engine"] == "router" and body
    rejected = (project / "articles" / "bad.md.rejected").read_text()
    assert f'code = "{code}"' in rejected and 'engine = "qwen"' in rejected
    assert f"rejected_{code}" in [e.get("code") for e in journal(project)]
    assert not list((project / "articles").glob(".qwenpipe-tmp-*"))


def test_chatter_is_stripped_and_the_article_kept(sim, tmp_path):
    project = make_project(tmp_path, sim)
    text = prompt(project, "chat", "Write an article about politeness [sim:chatter].")
    result = run_until_settled(project, "chat")
    assert result.returncode == 0, result.stderr
    meta, body = read_article(project / "articles" / "chat.md")
    assert meta["engine"] == "qwen"
    assert not body.startswith("Sure") and "Let me know" not in body
    assert body.startswith("# ")
    assert [e["prompt"] for e in sim.sends()].count(text) == 1


def test_rejected_without_a_router_is_exit_1_and_no_article(sim, tmp_path):
    project = make_project(tmp_path, sim, router=False)
    prompt(project, "nope", "Write an article about refusing [sim:refusal].")
    result = run_until_settled(project, "nope")
    assert result.returncode == 1 and "refusal" in result.stderr
    assert not (project / "articles" / "nope.md").exists()
    assert (project / "articles" / "nope.md.rejected").exists()
