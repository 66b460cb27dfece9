"""Answer checks (refusal, length, language, chatter) and the article's front matter extras."""

from __future__ import annotations

import tomllib
from datetime import datetime

import pytest
from fakes import answer
from project_files import add_prompt

from pipeline.config import Article
from pipeline.contract.checks import check_answer, detect_language, tidy
from pipeline.contract.prompts import Prompt
from pipeline.contract.render import description, render_article
from pipeline.contract.step import Status, generate
from pipeline.engines.base import Answer

DEFAULTS = Article(min_words=50)
LONG = "# Tea\n\n" + " ".join(["Green tea is brewed with water that is not boiling, for a short time."] * 8)
SPANISH = "# Té\n\n" + " ".join(
    ["El té verde se prepara con agua que no está hirviendo y por poco tiempo."] * 8
)


def front(text: str) -> tuple[dict, str]:
    head, body = text[4:].split("\n+++\n", 1)
    return tomllib.loads(head), body.strip()


@pytest.mark.parametrize(
    "refusal",
    [
        "I'm sorry, but I can't help with that request.",
        "Lo siento, pero no puedo ayudar con eso.",
        "抱歉，我无法帮助你完成这个请求。",
        "I’m sorry, but I can’t help with that.",
    ],
)
def test_refusals_in_several_languages(refusal):
    verdict = check_answer(refusal, DEFAULTS)
    assert verdict.code == "refusal" and "refusal" in verdict.problem


def test_extra_refusal_phrases_from_settings():
    verdict = check_answer(
        LONG.replace("# Tea", "# Tea\n\nAs a policy I decline topics."),
        DEFAULTS.replace(refusal_phrases=["as a policy i decline"]),
    )
    assert verdict.code == "refusal"


def test_too_short():
    verdict = check_answer("# Tea\n\nShort.\nVery.\nDone.", DEFAULTS)
    assert verdict.code == "too_short" and "article.min_words = 50" in verdict.problem
    assert check_answer("# Tea\n\nShort.", DEFAULTS.replace(min_words=0)).problem is None


def test_language_heuristic():
    assert detect_language(LONG) == "en" and detect_language(SPANISH) == "es"
    assert detect_language("这是一个关于绿茶的文章。" * 10) == "zh"
    assert detect_language("short") is None
    verdict = check_answer(SPANISH, DEFAULTS.replace(language="en"))
    assert verdict.code == "wrong_language" and "'es'" in verdict.problem
    assert check_answer(LONG, DEFAULTS.replace(language="en")).problem is None


def test_chatter_and_a_wrapping_fence_are_stripped():
    wrapped = (
        f"Sure! Here is your article:\n\n```markdown\n{LONG}\n```\n\nLet me know if you want any changes!"
    )
    assert tidy(wrapped) == LONG
    assert tidy("Certainly!\nHere's the article you asked for:\n" + LONG + "\n\nI hope this helps.") == LONG
    assert tidy(wrapped, strip_chatter=False) == wrapped.strip()
    inner_fence = LONG + "\n\n```python\nprint(1)\n```"
    assert tidy(inner_fence) == inner_fence, "a code block inside the article is not a wrapper"


def prompt_with(meta=None, text="Write about tea."):
    return Prompt(slug="tea", path=None, text=text, meta=meta or {})


def test_title_rules_and_strip_title():
    when = datetime(2026, 11, 29, 12, 0)
    meta, body = front(render_article(prompt_with(), Answer(LONG, "qwen"), chat_url=None, when=when))
    assert meta["title"] == "Tea" and body.startswith("# Tea")
    meta, body = front(
        render_article(prompt_with(), Answer(LONG, "qwen"), chat_url=None, when=when, strip_title=True)
    )
    assert meta["title"] == "Tea" and not body.startswith("#")
    no_heading = "Green tea, simply.\n\nIt is brewed cool."
    meta, body = front(render_article(prompt_with(), Answer(no_heading, "qwen"), chat_url=None, when=when))
    assert meta["title"] == "Green tea, simply." and body.startswith("Green tea")
    meta, body = front(
        render_article(
            prompt_with({"title": "Mine"}), Answer(LONG, "qwen"), chat_url=None, when=when, strip_title=True
        )
    )
    assert meta["title"] == "Mine" and body.startswith("# Tea"), "a heading unlike the title stays"


def test_front_matter_extras_field_by_field():
    text = "# Tea\n\n**Green tea** is [lovely](http://x) and calm. " + "word " * 395 + "\n\n## More\n\nText."
    meta, _ = front(
        render_article(
            prompt_with({"tags": ["a"]}),
            Answer(text, "router", model="m/1"),
            chat_url="https://chat.qwen.ai/c/x",
            when=datetime(2026, 1, 2, 3, 4, 5),
        )
    )
    assert meta["word_count"] == len(text.split()) - 2  # neither heading marker (# and ##) is a word
    assert meta["reading_time"] == 3
    assert meta["model"] == "m/1" and meta["engine"] == "router" and meta["turns"] == 1
    assert meta["description"].startswith("Green tea is lovely and calm.")
    assert len(meta["description"]) <= 160 and meta["description"].endswith("…")
    assert meta["tags"] == ["a"] and meta["slug"] == "tea" and len(meta["prompt_sha256"]) == 64
    assert list(meta)[:5] == ["title", "slug", "date", "description", "engine"]


def test_description_skips_headings_lists_and_code():
    md = "# T\n\n- a list\n\n```\ncode\n```\n\nThe first real paragraph\nwraps here.\n\nSecond."
    assert description(md) == "The first real paragraph wraps here."


def test_rejected_chat_answer_is_kept_beside_and_the_router_writes_the_article(
    project, workspace, engines, chat, router
):
    (project / "config.toml").write_text("[qwen]\npoll_interval = 0\n[article]\nmin_words = 20\n")
    from pipeline.config import load
    from pipeline.contract.workspace import Engines
    from pipeline.wiring import workspace as open_workspace

    ws = open_workspace(load(project / "config.toml"))
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    add_prompt(project, "tea")
    generate(ws, "tea", eng)
    chat.enqueue_check(answer("I'm sorry, but I can't help with that."))
    outcome = generate(ws, "tea", eng)
    assert outcome.status is Status.DONE and outcome.engine == "router"
    rejected = (project / "articles" / "tea.md.rejected").read_text()
    meta, body = front(rejected)
    assert meta["code"] == "refusal" and meta["engine"] == "qwen" and body.startswith("I'm sorry")
    assert "rejected_refusal" in [e.get("code") for e in ws.journal.read()]


def test_prompt_front_matter_overrides_the_checks(project, workspace, engines, chat, router):
    add_prompt(project, "tea", meta="[article]\nmin_words = 500")
    generate(workspace, "tea", engines)
    chat.enqueue_check(answer())
    router.enqueue(Answer("# Short\n\nStill short.", "router"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.FAILED and "article.min_words = 500" in outcome.message
    assert not (project / "articles" / "tea.md").exists()
    meta, _ = front((project / "articles" / "tea.md.rejected").read_text())
    assert meta["engine"] == "router"


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ("[article]\nmin_words = 'x'", "article.min_words"),
        ("[article]\nlanguage = 'klingon'", "article.language"),
        ("[article]\nbogus = 1", "unknown key article.bogus"),
        ("article = 3", "must be a table"),
    ],
)
def test_bad_article_settings_in_a_prompt_are_exit_2(project, workspace, engines, meta, message):
    from pipeline.errors import UsageProblem

    add_prompt(project, "tea", meta=meta)
    with pytest.raises(UsageProblem, match=message):
        generate(workspace, "tea", engines)
