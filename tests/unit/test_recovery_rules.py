"""Recovery after a crash, honest send counts and front matter ownership, with the fake engines."""

from __future__ import annotations

import time
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


# -- 6: a send that never reached the site is not a send ------------------------------------------


def no_router(project):
    from pipeline.config import load
    from pipeline.workspace import Workspace

    (project / "config.toml").write_text(
        "[qwen]\npoll_interval = 0\nmax_attempts = 5\nmax_sends_per_day = 1\n"
        "[router]\nenabled = false\n[article]\nmin_words = 0\n"
    )
    return Workspace(load(project / "config.toml"))


def logged_out_before_typing() -> HardError:
    err = HardError("not logged in to the chat site: run `qwenpipe login`", code="logged_out")
    err.nothing_sent = True
    return err


def test_a_send_refused_before_typing_counts_no_send_and_leaves_no_marker(project, chat):
    from pipeline.quota import sends_today
    from pipeline.workspace import Engines

    ws = no_router(project)
    eng = Engines(ws.config, chat_factory=lambda _c: chat)
    add_prompt(project, "tea")
    for _ in range(2):
        chat.send_error = logged_out_before_typing()
        assert generate(ws, "tea", eng).status is Status.FAILED
        assert not (project / "articles" / "tea.md.sending").exists()
    assert sends_today(ws.journal, time.time()) == 0
    assert events(ws).count("unsent") == 2
    chat.send_error = None  # logged in again: the daily limit of 1 is still whole
    outcome = generate(ws, "tea", eng)
    assert outcome.status is Status.QUEUED and chat.sends == 1
    assert "find_chat" not in [h[0] for h in chat.history], "looked for a chat that was never sent"


def test_a_failure_after_the_click_still_counts_and_keeps_the_marker(project, chat):
    from pipeline.quota import sends_today
    from pipeline.workspace import Engines

    ws = no_router(project)
    eng = Engines(ws.config, chat_factory=lambda _c: chat)
    add_prompt(project, "tea")
    chat.send_error = HardError("no chat address appeared", code="no_chat_url")  # nothing_sent unset
    assert generate(ws, "tea", eng).status is Status.FAILED
    assert (project / "articles" / "tea.md.sending").exists(), "the send may have reached the site"
    assert sends_today(ws.journal, time.time()) == 1


def test_an_unsent_send_gives_its_place_in_the_cycle_budget_back(project, workspace, engines, chat):
    from pipeline.quota import SendBudget

    budget = SendBudget(1)
    add_prompt(project, "tea")
    chat.send_error = logged_out_before_typing()
    assert generate(workspace, "tea", engines, budget=budget).engine == "router"  # it went on
    assert budget.used == 0
    add_prompt(project, "coffee", "Write about coffee.")
    chat.send_error = None
    assert generate(workspace, "coffee", engines, budget=budget).status is Status.QUEUED


def test_the_journal_index_takes_back_only_the_unsent_send(project, workspace):
    from pipeline.journal_index import JournalIndex

    journal = workspace.journal
    journal.append("a", "sending", engine="qwen")
    journal.append("b", "sending", engine="qwen")
    journal.append("b", "unsent", engine="qwen", code="logged_out")
    journal.append("b", "unsent", engine="qwen", code="logged_out")  # a stray second one takes nothing
    index = JournalIndex.beside(journal).refresh()
    assert index.sends_since(0) == 1
    assert index.summary("a").sends == 1 and index.summary("b").sends == 0
    again = JournalIndex.beside(journal).refresh()  # from the saved index
    assert again.sends_since(0) == 1
