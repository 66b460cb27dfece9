"""Recovery after a crash, honest send counts and front matter ownership, with the fake engines."""

from __future__ import annotations

import tomllib

from fakes import answer
from project_files import add_prompt

from pipeline.contract import Status, generate
from pipeline.engines.base import HardError


def front_matter(path):
    text = path.read_text(encoding="utf-8")
    head, _body = text[4:].split("\n+++\n", 1)
    return tomllib.loads(head)


def events(workspace, slug=None):
    return [e["event"] for e in workspace.journal.read(slug=slug)]


# -- 12: keys qwenpipe owns ----------------------------------------------------------------------


def test_a_router_article_never_carries_the_prompts_own_chat_url(project, workspace, engines):
    add_prompt(project, "tea", meta='chat_url = "https://example.com/c/mine"\nmodel = "mine"\nauthor = "Ann"')
    outcome = generate(workspace, "tea", engines, engine="router")
    assert outcome.status is Status.DONE and outcome.engine == "router"
    meta = front_matter(project / "articles" / "tea.md")
    assert "chat_url" not in meta and meta["engine"] == "router" and meta["model"] == "test/model"
    assert meta["author"] == "Ann", "the prompt's own keys still pass through"


def test_a_router_article_after_a_failed_chat_does_not_name_the_chat(project, workspace, engines, chat):
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(HardError("chat gone", code="chat_not_found"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.DONE and outcome.engine == "router"
    meta = front_matter(project / "articles" / "tea.md")
    assert meta["engine"] == "router" and "chat_url" not in meta


def test_a_chat_article_without_a_model_does_not_take_the_prompts_model(project, workspace, engines, chat):
    add_prompt(project, "tea", meta='model = "not-the-chat"\nprompt_sha256 = "forged"')
    generate(workspace, "tea", engines)
    chat.enqueue_check(answer())
    assert generate(workspace, "tea", engines).status is Status.DONE
    meta = front_matter(project / "articles" / "tea.md")
    assert meta["engine"] == "qwen" and "model" not in meta
    assert meta["prompt_sha256"] != "forged" and len(meta["prompt_sha256"]) == 64
