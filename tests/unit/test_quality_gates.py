"""Quality gates beside the answer checks: max_words, min_headings, forbidden phrases."""

from __future__ import annotations

import tomllib

import pytest
from fakes import answer
from project_files import add_prompt

from pipeline.config import Article, ConfigError, validate
from pipeline.contract.checks import FORBIDDEN, check_answer, count_headings
from pipeline.contract.step import Status, generate
from pipeline.engines.base import Answer

SECTIONS = "# Tea\n\nIntro words here.\n\n## Brewing\n\nHot water.\n\n## Storing\n\nDry jar.\n"


def verdict(markdown: str, **settings):
    return check_answer(markdown, Article(**{"min_words": 0, **settings}))


def test_gates_are_off_by_default():
    assert verdict(SECTIONS * 40).problem is None


def test_max_words_rejects_a_longer_answer_and_names_the_key():
    result = verdict(SECTIONS, max_words=5)
    assert result.code == "too_long" and "article.max_words = 5" in result.problem
    assert verdict(SECTIONS, max_words=100).problem is None


def test_min_headings_counts_level_two_and_deeper_outside_code():
    assert count_headings(SECTIONS) == 2
    assert count_headings("# Only a title\n\n```\n## not a heading\n```\n#hashtag\n") == 0
    result = verdict(SECTIONS, min_headings=3)
    assert result.code == "few_headings" and "article.min_headings = 3" in result.problem
    assert verdict(SECTIONS, min_headings=2).problem is None


@pytest.mark.parametrize("phrase", ["[Your Name]", "Lorem ipsum", "As an AI language model"])
def test_built_in_forbidden_phrases_reject_anywhere_in_the_answer(phrase):
    result = verdict(SECTIONS + f"\nWritten by {phrase} dolor sit amet.\n")
    assert result.code == "forbidden" and phrase.lower() in result.problem.lower()


def test_forbidden_extends_the_built_in_list():
    text = SECTIONS + "\nCall ACME  Corp today.\n"
    assert verdict(text).problem is None
    result = verdict(text, forbidden=["acme corp"])
    assert result.code == "forbidden" and "acme corp" in result.problem
    assert verdict(SECTIONS + "lorem ipsum", forbidden=["other"]).code == "forbidden"  # still built in
    assert "lorem ipsum" in FORBIDDEN


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"max_words": -1}, "article.max_words = -1 must be 0 to"),
        ({"min_headings": "2"}, "article.min_headings = '2' must be an integer"),
        ({"forbidden": [""]}, "article.forbidden = [''] entries must be non-empty strings"),
        ({"forbidden": "lorem"}, "article.forbidden = 'lorem' must be a list"),
    ],
)
def test_bad_gate_settings_are_refused_naming_the_key(table, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate({"article": table}, "config.toml")


def test_a_failing_gate_goes_through_the_rejection_path_and_the_router_takes_over(
    project, workspace, engines, chat, router
):
    add_prompt(project, "tea", meta="[article]\nmin_headings = 1")  # overridden per prompt
    generate(workspace, "tea", engines)
    chat.enqueue_check(answer())  # one H1, no ## heading
    router.enqueue(Answer(SECTIONS, "router"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.DONE and outcome.engine == "router"  # the router's turn
    rejected = (project / "articles" / "tea.md.rejected").read_text()
    head = tomllib.loads(rejected[4:].split("\n+++\n", 1)[0])
    assert head["code"] == "few_headings" and "article.min_headings = 1" in head["reason"]
    assert "rejected_few_headings" in [e.get("code") for e in workspace.journal.read()]
