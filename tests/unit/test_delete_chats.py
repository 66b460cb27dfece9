"""qwen.delete_chats with fake engines (issue 26, item 6): with "after_collect" each chat is deleted
from its own account once its article is written; a failed delete stays pending, never fails the
article, and a later run tries it again; a deleted chat is never looked at again."""

from __future__ import annotations

import pytest
from accounts_project import accounts_project
from fakes import answer
from project_files import add_prompt, write_config

from pipeline.batch.cycle import run_cycle
from pipeline.config import ConfigError, load
from pipeline.contract.step import Status, generate
from pipeline.engines.base import EngineBusy, HardError, TransientError

NOW = 1_800_000_000.0


def setup(project, delete: str = "after_collect", tables: str = "", extra: str = ""):
    return accounts_project(
        project,
        f'[qwen]\npoll_interval = 0\nmax_attempts = 3\ndelete_chats = "{delete}"\n{extra}'
        f"[article]\nmin_words = 0\n{tables}",
    )


def events(ws, slug):
    return [e.event for e in ws.store.events(slug)]


def calls(chat, kind):
    return [args for name, *args in chat.history if name == kind]


def written(ws, chat, slug="tea"):
    """Send `slug` and collect its answer: (the chat's URL, the outcome of the collecting step)."""
    add_prompt(ws.config.root, slug, f"Write about {slug}.")
    assert generate(ws, slug, ENGINES[0](), clock=lambda: NOW).status is Status.QUEUED
    url = (ws.config.root / "articles" / f"{slug}.md.url").read_text().strip()
    chat.enqueue_check(answer())
    return url, generate(ws, slug, ENGINES[0](), clock=lambda: NOW + 60)


ENGINES: list = []


@pytest.fixture
def site(project):
    ws, chats, router, engines = setup(project)
    ENGINES[:] = [engines]
    return ws, chats["default"], router


def test_after_collect_deletes_the_chat_once_the_article_is_written_and_keeps_the_url(site):
    ws, chat, _ = site
    url, outcome = written(ws, chat)
    assert outcome.status is Status.DONE and outcome.engine == "qwen"
    assert chat.deleted == [url]
    assert [name for name, *_ in chat.history][-2:] == ["check", "delete_chat"]  # after the article
    articles = ws.config.root / "articles"
    assert (articles / "tea.md").exists() and (articles / "tea.md.url").read_text().strip() == url
    (record,) = ws.store.chat_deletions("tea")
    assert not record.pending and record.account == "default" and record.chat_url == url
    assert events(ws, "tea")[-2:] == ["done", "chat_deleted"]


def test_never_deletes_nothing_and_records_nothing(project):
    ws, chats, _, engines = setup(project, delete="never")
    ENGINES[:] = [engines]
    chat = chats["default"]
    _, outcome = written(ws, chat)
    assert outcome.status is Status.DONE
    assert calls(chat, "delete_chat") == [] and ws.store.chat_deletions() == []


def test_a_failed_delete_leaves_the_article_done_and_the_next_generate_deletes_it(site):
    ws, chat, _ = site
    chat.delete_errors.append(TransientError("the chat API failed: internal_error", code="api_error"))
    url, outcome = written(ws, chat)
    assert outcome.status is Status.DONE and (ws.config.root / "articles" / "tea.md").exists()
    (record,) = ws.store.chat_deletions("tea", pending=True)
    assert record.tries == 1 and "internal_error" in record.last_error
    assert events(ws, "tea")[-2:] == ["done", "delete_failed"]

    again = generate(ws, "tea", ENGINES[0](), clock=lambda: NOW + 120)  # a done article: exit 0
    assert again.status is Status.DONE and "already done" in again.message
    assert chat.deleted == [url] and ws.store.chat_deletions(pending=True) == []
    assert events(ws, "tea")[-1] == "chat_deleted"
    generate(ws, "tea", ENGINES[0](), clock=lambda: NOW + 180)
    assert len(calls(chat, "delete_chat")) == 2  # nothing pending: nothing asked of the site


def test_a_busy_browser_or_a_logged_out_account_leaves_the_delete_pending(site):
    ws, chat, _ = site
    chat.delete_errors.append(EngineBusy("the browser profile is in use by a cycle"))
    _, outcome = written(ws, chat)
    assert outcome.status is Status.DONE
    (record,) = ws.store.chat_deletions(pending=True)
    assert record.tries == 0  # nothing was tried
    chat.delete_errors.append(HardError("not logged in to the chat site", code="logged_out"))
    assert generate(ws, "tea", ENGINES[0](), clock=lambda: NOW + 120).status is Status.DONE
    (record,) = ws.store.chat_deletions(pending=True)
    assert record.tries == 1 and "logged in" in record.last_error


def test_a_cycle_deletes_chats_whose_delete_failed_before_it_not_those_it_just_tried(site):
    ws, chat, _ = site
    chat.delete_errors.append(TransientError("the site is down", code="network"))
    chat.delete_errors.append(TransientError("the site is down", code="network"))
    add_prompt(ws.config.root, "tea", "Write about tea.")
    assert run_cycle(ws, ENGINES[0](), clock=lambda: NOW).sent == ["tea"]
    chat.enqueue_check(answer())
    first = run_cycle(ws, ENGINES[0](), clock=lambda: NOW + 60)
    assert first.finished == ["tea"] and first.exit_code == 0
    assert len(calls(chat, "delete_chat")) == 1  # tried once, when written: not again in this cycle
    second = run_cycle(ws, ENGINES[0](), clock=lambda: NOW + 120)  # fails again: still pending
    assert second.exit_code == 0 and ws.store.chat_deletions(pending=True)[0].tries == 2
    third = run_cycle(ws, ENGINES[0](), clock=lambda: NOW + 180)
    assert third.exit_code == 0 and "1 chat(s) of earlier articles deleted" in third.summary()
    assert ws.store.chat_deletions(pending=True) == [] and len(chat.deleted) == 1


def test_a_deleted_chat_is_never_looked_at_again(site):
    ws, chat, router = site
    url, _ = written(ws, chat)
    (ws.config.root / "articles" / "tea.md").unlink()  # the user wants it written again
    looks = len(calls(chat, "check"))
    outcome = generate(ws, "tea", ENGINES[0](), clock=lambda: NOW + 120)
    assert len(calls(chat, "check")) == looks and calls(chat, "wait") == []  # never opened
    assert outcome.status is Status.DONE and outcome.engine == "router"  # as for a chat gone
    assert "deleted" in [e for e in ws.store.events("tea") if e.event == "hard"][-1].fields["error"]
    (record,) = ws.store.chat_deletions("tea")
    assert not record.pending  # the router's article does not make the deleted chat due again
    assert calls(chat, "delete_chat") == [[url]]


def test_a_multi_turn_chat_is_deleted_after_its_last_turn_is_written(site):
    ws, chat, _ = site
    add_prompt(ws.config.root, "duo", "Write about tea.\n=== next turn ===\nNow shorter.")
    assert generate(ws, "duo", ENGINES[0](), clock=lambda: NOW).status is Status.QUEUED
    queued = generate(ws, "duo", ENGINES[0](), clock=lambda: NOW + 60)  # turn 1 complete: turn 2
    assert queued.status is Status.QUEUED and "turn 2" in queued.message
    assert calls(chat, "delete_chat") == []
    done = generate(ws, "duo", ENGINES[0](), clock=lambda: NOW + 120)
    assert done.status is Status.DONE
    assert [name for name, *_ in chat.history][-2:] == ["read_turns", "delete_chat"]
    assert len(chat.deleted) == 1


def test_each_chat_is_deleted_from_the_account_that_made_it(project):
    tables = (
        '[accounts.a]\nprofile_dir = ".qwenpipe/accounts/a/profile"\n'
        'storage_state = ".qwenpipe/accounts/a/state.json"\n'
        '[accounts.b]\nprofile_dir = ".qwenpipe/accounts/b/profile"\n'
        'storage_state = ".qwenpipe/accounts/b/state.json"\n'
    )
    ws, chats, _, engines = setup(project, tables=tables)
    ENGINES[:] = [engines]
    add_prompt(project, "tea", "Write about tea.")
    assert generate(ws, "tea", engines(), clock=lambda: NOW, account="b").status is Status.QUEUED
    chats["b"].enqueue_check(answer())
    assert generate(ws, "tea", engines(), clock=lambda: NOW + 60).status is Status.DONE
    assert len(chats["b"].deleted) == 1 and calls(chats["a"], "delete_chat") == []
    assert ws.store.chat_deletions()[0].account == "b"


def test_an_account_held_by_a_bot_check_is_left_alone_its_delete_pending(site):
    ws, chat, _ = site
    add_prompt(ws.config.root, "tea", "Write about tea.")
    assert generate(ws, "tea", ENGINES[0](), clock=lambda: NOW).status is Status.QUEUED
    ws.chat_quota.hold(NOW, "bot_check", "the slider", "default", bot_check_pause=6)
    chat.enqueue_check(answer())
    assert generate(ws, "tea", ENGINES[0](), clock=lambda: NOW + 60).status is Status.DONE
    assert calls(chat, "delete_chat") == [] and len(ws.store.chat_deletions(pending=True)) == 1
    generate(ws, "tea", ENGINES[0](), clock=lambda: NOW + 7 * 3600)  # the hold is over
    assert len(chat.deleted) == 1


@pytest.mark.parametrize("value", ['"always"', "true", '""'])
def test_delete_chats_takes_never_or_after_collect_only(tmp_path, value):
    path = write_config(tmp_path, f"[qwen]\ndelete_chats = {value}\n")
    wanted = r"qwen\.delete_chats.*(must be one of 'never', 'after_collect'|string)"
    with pytest.raises(ConfigError, match=wanted):
        load(path)


def test_delete_chats_defaults_to_never(tmp_path):
    assert load(write_config(tmp_path, "")).qwen.delete_chats == "never"


def test_a_cycle_never_collects_or_polls_a_deleted_chat(site):
    ws, chat, router = site
    url, _ = written(ws, chat)
    add_prompt(ws.config.root, "milk", "Write about milk.")
    assert run_cycle(ws, ENGINES[0](), clock=lambda: NOW + 100).sent == ["milk"]
    (ws.config.root / "articles" / "tea.md").unlink()
    looks = len(calls(chat, "check"))
    report = run_cycle(ws, ENGINES[0](), clock=lambda: NOW + 200)
    assert all(url not in urls for urls in chat.collect_calls) and chat.collect_calls  # milk's was
    assert len(calls(chat, "check")) == looks + 1  # milk's page only
    assert "tea" in report.finished and router.history  # the router wrote tea again


def test_replay_of_an_article_whose_chat_was_deleted_says_it_is_not_read_again(site):
    from pipeline.contract.step import replay

    ws, chat, _ = site
    written(ws, chat)
    articles = ws.config.root / "articles"
    (articles / "tea.md").unlink()
    (articles / "tea.md.failed").write_text('reason = "router_failed"\n')
    message = replay(ws, "tea")
    assert "its chat was deleted" in message and "polls its chat" not in message
