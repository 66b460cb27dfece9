"""The generate contract with a fake engine: every branch, every exit status, the lock, the marker."""

from __future__ import annotations

import tomllib

import pytest
from fakes import answer, took_nothing
from project_files import add_prompt, snapshot

from pipeline.contract.step import Status, generate, replay
from pipeline.engines.base import Generating, HardError, QuotaSpent, TransientError
from pipeline.errors import UsageProblem
from pipeline.files import FileLock


def events(workspace, slug=None):
    return [e["event"] for e in workspace.journal.read(slug=slug)]


def front_matter(path):
    text = path.read_text(encoding="utf-8")
    assert text.startswith("+++\n")
    head, body = text[4:].split("\n+++\n", 1)
    return tomllib.loads(head), body


def test_first_run_sends_once_and_writes_the_url(project, workspace, engines, chat):
    add_prompt(project, "tea")
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.QUEUED and outcome.sent
    url_file = project / "articles" / "tea.md.url"
    assert url_file.read_text() == chat.known_chats["Write about tea."] + "\n"
    assert not (project / "articles" / "tea.md.sending").exists()
    assert [h[0] for h in chat.history] == ["send"]
    assert events(workspace) == ["sending", "sent"]


def test_finishing_commits_the_record_and_the_done_event_in_one_store_step(
    project, workspace, engines, chat, monkeypatch
):
    # Each store transaction is a commit (an fsync under synchronous = FULL): a cycle finishing 200
    # articles pays it per article, so the record and its event share one.
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(answer())
    store, steps = workspace.store, []
    transaction = store.transaction
    monkeypatch.setattr(store, "transaction", lambda: steps.append(1) or transaction())
    assert generate(workspace, "tea", engines).status is Status.DONE
    assert len(steps) == 1
    assert workspace.store.article("tea").progress == "done" and events(workspace)[-1] == "done"


def test_second_run_polls_and_never_sends_again(project, workspace, engines, chat):
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(Generating("thinking"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.WORKING and "thinking" in outcome.message
    assert chat.sends == 1
    assert not (project / "articles" / "tea.md").exists()


def test_complete_answer_writes_the_article_with_front_matter(project, workspace, engines, chat):
    add_prompt(project, "tea", meta='title = "Tea"\ntags = ["drinks"]')
    generate(workspace, "tea", engines)
    chat.enqueue_check(answer("# Ignored Heading\n\nBody.\n\n- a\n- b\n"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.DONE
    meta, body = front_matter(project / "articles" / "tea.md")
    assert meta["title"] == "Tea" and meta["tags"] == ["drinks"] and meta["slug"] == "tea"
    assert meta["engine"] == "qwen" and meta["chat_url"].startswith("https://chat.qwen.ai/c/")
    assert len(meta["prompt_sha256"]) == 64 and meta["date"]
    assert body.strip() == "# Ignored Heading\n\nBody.\n\n- a\n- b"
    assert events(workspace)[-1] == "done"


def test_a_prompt_edited_after_the_send_is_noticed_and_the_article_says_which_it_answers(
    project, workspace, engines, chat
):
    import hashlib

    add_prompt(project, "tea", "Write about green tea.")
    generate(workspace, "tea", engines)
    sent_hash = hashlib.sha256(b"Write about green tea.").hexdigest()
    add_prompt(project, "tea", "Write about black tea.", meta='title = "Tea, edited"')
    chat.enqueue_check(answer("# Green tea\n\nAbout green tea.\n"))
    said = []
    outcome = generate(workspace, "tea", engines, say=said.append)
    assert outcome.status is Status.DONE and chat.sends == 1  # what was paid for is kept
    meta, _ = front_matter(project / "articles" / "tea.md")
    assert meta["prompt_sha256"] == sent_hash and meta["prompt_edited_after_send"] is True
    assert meta["title"] == "Tea, edited"  # the front matter is the current one
    assert any("edited after it was sent" in line and "replay tea --fresh" in line for line in said), said
    assert list(workspace.journal.read(slug="tea"))[-1].get("prompt_edited_after_send") is True


def test_a_front_matter_edit_alone_is_not_a_prompt_edit(project, workspace, engines, chat):
    add_prompt(project, "tea", "Write about green tea.")
    generate(workspace, "tea", engines)
    add_prompt(project, "tea", "Write about green tea.", meta='title = "Green tea"')
    chat.enqueue_check(answer())
    generate(workspace, "tea", engines)
    meta, _ = front_matter(project / "articles" / "tea.md")
    assert "prompt_edited_after_send" not in meta and meta["title"] == "Green tea"


def test_title_falls_back_to_the_first_heading(project, workspace, engines, chat):
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(answer("# Green Tea Guide\n\nBody."))
    generate(workspace, "tea", engines)
    meta, _ = front_matter(project / "articles" / "tea.md")
    assert meta["title"] == "Green Tea Guide"


def test_done_article_is_left_alone(project, workspace, engines, chat):
    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("done")
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.DONE and chat.history == []
    assert (project / "articles" / "tea.md").read_text() == "done"


def test_locked_article_is_in_progress_elsewhere(project, workspace, engines, chat):
    add_prompt(project, "tea")
    with FileLock(workspace.article("tea").lock, purpose="generate tea"):
        outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.WORKING and "elsewhere" in outcome.message
    assert "pid" in outcome.message and chat.history == []


def test_marker_without_url_finds_the_chat_instead_of_sending(project, workspace, engines, chat):
    add_prompt(project, "tea")
    chat.crash_after_send = KeyboardInterrupt()  # the process dies after clicking send
    with pytest.raises(KeyboardInterrupt):
        generate(workspace, "tea", engines)
    assert (project / "articles" / "tea.md.sending").exists()
    assert not (project / "articles" / "tea.md.url").exists()
    chat.crash_after_send = None
    chat.enqueue_check(Generating("writing"))
    outcome = generate(workspace, "tea", engines)
    assert chat.sends == 1, "the prompt was sent a second time"
    assert outcome.status is Status.WORKING
    assert ("user_messages", outcome.chat_url) in chat.history  # the chat the send named
    assert (project / "articles" / "tea.md.url").exists()
    assert not (project / "articles" / "tea.md.sending").exists()
    assert "recovered" in events(workspace)


def test_marker_whose_chat_is_not_found_sends_once_more_only_when_lost(project, workspace, engines, chat):
    add_prompt(project, "tea")
    (project / "articles" / "tea.md.sending").write_text("{}")
    now = [1_800_000_000.0]
    outcome = generate(workspace, "tea", engines, clock=lambda: now[0])
    assert outcome.status is Status.WORKING and chat.sends == 0  # in doubt: the list may lag
    now[0] += workspace.config.qwen.lost_chat_after
    outcome = generate(workspace, "tea", engines, clock=lambda: now[0])
    assert outcome.status is Status.QUEUED and chat.sends == 1
    assert events(workspace)[:5] == [
        "recovering",
        "recovery_in_doubt",
        "recovering",
        "recovery_lost",
        "unsent",
    ]


def test_transient_failure_counts_attempts_then_turns_hard(project, workspace, engines, chat, router):
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(TransientError("WAF page", code="waf"), TransientError("timeout"))
    assert generate(workspace, "tea", engines).status is Status.WORKING
    assert generate(workspace, "tea", engines).status is Status.WORKING
    chat.enqueue_check(TransientError("banner"))
    outcome = generate(workspace, "tea", engines)  # third in a row with max_attempts = 3
    assert outcome.status is Status.DONE and outcome.engine == "router"
    meta, _ = front_matter(project / "articles" / "tea.md")
    assert meta["engine"] == "router" and meta["model"] == "test/model"
    assert "too_many_attempts" in [e.get("code") for e in workspace.journal.read()]
    assert chat.sends == 1


def test_a_successful_poll_resets_the_transient_count(project, workspace, engines, chat):
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(
        TransientError("x"), TransientError("x"), Generating(), TransientError("x"), TransientError("x")
    )
    statuses = [generate(workspace, "tea", engines).status for _ in range(5)]
    assert statuses == [Status.WORKING] * 5


def test_hard_failure_at_poll_falls_back_to_the_router(project, workspace, engines, chat, router):
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(HardError("chat gone", code="chat_deleted"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.DONE and router.history == ["Write about tea."]


def test_hard_failure_at_send_falls_back_and_keeps_the_marker_clean(
    project, workspace, engines, chat, router
):
    add_prompt(project, "tea")
    chat.send_error = took_nothing(HardError("logged out: run `qwenpipe login`", code="logged_out"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.DONE
    assert not (project / "articles" / "tea.md.sending").exists()


def test_hard_failure_without_fallback_is_exit_1_then_dead_letter(project, workspace, engines, chat):
    (project / "config.toml").write_text(
        "[qwen]\npoll_interval = 0\nmax_attempts = 2\n[router]\nenabled = false\n"
    )
    from pipeline.config import load
    from pipeline.contract.workspace import Engines
    from pipeline.wiring import router_engine
    from pipeline.wiring import workspace as open_workspace

    ws = open_workspace(load(project / "config.toml"))
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=router_engine)
    add_prompt(project, "tea")
    chat.send_error = HardError("the site refused", code="refused")  # no hold: tried again
    chat.send_error.nothing_sent = True  # refused in words: provably not sent, nothing to recover
    first = generate(ws, "tea", eng)
    assert first.status is Status.FAILED and "1 of 2" in first.message
    second = generate(ws, "tea", eng)
    assert second.status is Status.FAILED and "dead-lettered" in second.message
    failed = tomllib.loads((project / "articles" / "tea.md.failed").read_text())
    assert failed["reason"] == "refused" and failed["attempts"] == 2 and failed["engine"] == "qwen"
    assert "the site refused" in failed["last_error"] and len(failed["errors"]) == 2
    sends_before = len([h for h in chat.history if h[0] == "send"])
    third = generate(ws, "tea", eng)
    assert third.status is Status.FAILED and "replay" in third.message
    assert len([h for h in chat.history if h[0] == "send"]) == sends_before, "a dead letter was retried"
    message = replay(ws, "tea")
    assert "sends it" in message and not (project / "articles" / "tea.md.failed").exists()
    assert events(ws)[-1] == "replay"


def test_router_failure_too_is_exit_1_with_both_messages(project, workspace, engines, chat, router):
    add_prompt(project, "tea")
    chat.send_error = took_nothing(HardError("bot check", code="bot_check"))
    router.enqueue(HardError("router: HTTP 401 invalid_api_key: Invalid API key", code="router_auth"))
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.FAILED
    assert "bot check" in outcome.message and "Invalid API key" in outcome.message


def test_quota_spent_stops_sends_for_every_article(project, workspace, engines, chat, router):
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    chat.send_error = took_nothing(QuotaSpent("daily usage limit reached", retry_after=5 * 3600))
    assert generate(workspace, "tea", engines).status is Status.DONE
    chat.send_error = None
    outcome = generate(workspace, "coffee", engines)
    assert outcome.status is Status.DONE and outcome.engine == "router"
    assert chat.sends == 0, "a prompt went to the chat while its quota was spent"
    assert "quota" in events(workspace)


def test_engine_router_by_hand_skips_the_chat(project, workspace, engines, chat, router):
    add_prompt(project, "tea")
    outcome = generate(workspace, "tea", engines, engine="router")
    assert outcome.status is Status.DONE and chat.history == []


def test_engine_qwen_never_falls_back(project, workspace, engines, chat, router):
    add_prompt(project, "tea")
    chat.send_error = HardError("bot check", code="bot_check")
    outcome = generate(workspace, "tea", engines, engine="qwen")
    assert outcome.status is Status.FAILED and router.history == []


def test_wait_sends_then_stays_until_complete(project, workspace, engines, chat):
    add_prompt(project, "tea")
    chat.enqueue_check(Generating("thinking"), Generating("writing"), answer())
    seen = []
    outcome = generate(workspace, "tea", engines, wait=True, say=seen.append)
    assert outcome.status is Status.DONE and chat.sends == 1
    assert any("writing" in line for line in seen)


def with_poll_interval(project, chat, router, seconds: int):
    """(workspace, engines, now, clock) for the prompt "tea" with [qwen] poll_interval = `seconds`:
    Engines over the fakes, and a clock that reads now[0], which the test moves on."""
    from pipeline.config import load
    from pipeline.contract.workspace import Engines
    from pipeline.wiring import workspace as open_workspace

    (project / "config.toml").write_text(f"[qwen]\npoll_interval = {seconds}\n")
    ws = open_workspace(load(project / "config.toml"))
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    add_prompt(project, "tea")
    now = [1_000_000.0]
    return ws, eng, now, lambda: now[0]


def test_polls_are_spaced_by_poll_interval(project, chat, router):
    ws, eng, now, clock = with_poll_interval(project, chat, router, 60)
    assert generate(ws, "tea", eng, clock=clock).status is Status.QUEUED
    now[0] += 30
    outcome = generate(ws, "tea", eng, clock=clock)
    assert outcome.status is Status.WORKING and "next look in 30 s" in outcome.message
    assert [h[0] for h in chat.history] == ["send"], "polled before poll_interval"
    now[0] += 31
    generate(ws, "tea", eng, clock=clock)
    assert [h[0] for h in chat.history] == ["send", "check"]


def test_backoff_after_transient_failure(project, chat, router):
    ws, eng, now, clock = with_poll_interval(project, chat, router, 10)
    generate(ws, "tea", eng, clock=clock)
    now[0] += 10
    chat.enqueue_check(TransientError("x"), TransientError("y"))
    generate(ws, "tea", eng, clock=clock)  # attempt 1: next try in 10 s
    now[0] += 10
    generate(ws, "tea", eng, clock=clock)  # attempt 2: next try in 20 s
    now[0] += 15
    outcome = generate(ws, "tea", eng, clock=clock)
    assert "retrying after" in outcome.message
    assert len([h for h in chat.history if h[0] == "check"]) == 2


@pytest.mark.parametrize("slug", ["../x", "/etc/passwd", "has space", "UPPER", "", ".hidden", "a/b", "-dash"])
def test_bad_slugs_are_refused_and_nothing_is_written(project, workspace, engines, chat, slug):
    before = snapshot(project)
    with pytest.raises(UsageProblem, match="invalid slug"):
        generate(workspace, slug, engines)
    assert snapshot(project) == before and chat.history == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"+++\ntitle = 'x'\n+++\n   \n", "empty"),
        (b"\xff\xfe bad bytes", "not UTF-8"),
        (b"+++\ntitle = \n+++\nhello", "front matter is not valid TOML"),
        (b"+++\ntitle = 'x'\nhello", "never closed"),
    ],
)
def test_bad_prompt_files_are_refused_and_nothing_is_written(
    project, workspace, engines, chat, content, message
):
    (project / "prompts" / "tea.md").write_bytes(content)
    before = snapshot(project)
    with pytest.raises(UsageProblem, match=message) as info:
        generate(workspace, "tea", engines)
    assert "tea.md" in str(info.value)
    assert snapshot(project) == before and chat.history == []


def test_missing_prompt_is_refused(project, workspace, engines):
    with pytest.raises(UsageProblem, match="does not exist"):
        generate(workspace, "nothing", engines)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://evil.example/c/0123456789abcdef0123456789", "not on qwen.base_url"),
        ("https://chat.qwen.ai/settings", "not a chat URL"),
        ("https://chat.qwen.ai/c/local", "not a chat URL"),
        ("https://chat.qwen.ai/c/0123456789abcdef01234\nhttps://chat.qwen.ai/c/x", "expected one line"),
        ("file:///etc/passwd", "not on qwen.base_url"),
    ],
)
def test_bad_url_sidecar_is_refused_not_opened(project, workspace, engines, chat, url, message):
    add_prompt(project, "tea")
    (project / "articles" / "tea.md.url").write_text(url + "\n")
    before = snapshot(project)
    with pytest.raises(UsageProblem, match=message):
        generate(workspace, "tea", engines)
    assert chat.history == [] and snapshot(project) == before


def test_replay_of_an_article_that_is_not_dead_lettered_is_refused(project, workspace):
    with pytest.raises(UsageProblem, match="not dead-lettered"):
        replay(workspace, "tea")


def test_journal_events_have_the_documented_fields(project, workspace, engines, chat):
    add_prompt(project, "tea")
    generate(workspace, "tea", engines)
    sent = list(workspace.journal.read())[-1]
    assert {"time", "ts", "slug", "event", "pid", "engine", "chat_url", "duration"} <= set(sent)


def test_a_busy_browser_is_in_progress_elsewhere_and_costs_nothing(project, workspace, engines, chat):
    from pipeline.engines.base import EngineBusy

    add_prompt(project, "tea")
    chat.prepare_error = EngineBusy("the browser profile is in use by pid 123 (cycle)")
    outcome = generate(workspace, "tea", engines)
    assert outcome.status is Status.WORKING and outcome.reason == "locked" and "pid 123" in outcome.message
    assert chat.sends == 0 and not (project / "articles" / "tea.md.sending").exists()
    assert "sending" not in events(workspace)
    from pipeline.contract.article import ArticleState

    assert ArticleState.load(workspace.store, workspace.article("tea")).attempts == 0
    chat.prepare_error = None
    generate(workspace, "tea", engines)
    url = (project / "articles" / "tea.md.url").read_text().strip()
    chat.enqueue_check(EngineBusy("busy again"))
    assert generate(workspace, "tea", engines).reason == "locked"
    assert (project / "articles" / "tea.md.url").read_text().strip() == url


def test_a_store_held_by_another_process_is_in_progress_and_never_a_second_send(
    project, workspace, engines, chat
):
    import sqlite3

    add_prompt(project, "tea")
    store = workspace.store
    store._conn.execute("PRAGMA busy_timeout = 50")  # the 5 s of a real run, shortened
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's step, held
    try:
        outcome = generate(workspace, "tea", engines)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert outcome.status is Status.WORKING and outcome.reason == "store_busy", outcome
    assert "another process holds the store" in outcome.message
    assert [call for call in chat.history if call[0] == "send"] == []
    assert generate(workspace, "tea", engines).status is Status.QUEUED
    assert [call[0] for call in chat.history].count("send") == 1


def model_project(folder, chat, router, qwen: str):
    """A project whose [qwen] table holds `qwen` (besides no poll spacing), with the fakes."""
    from project_files import write_config

    from pipeline.config import load
    from pipeline.contract.workspace import Engines
    from pipeline.wiring import workspace as open_workspace

    write_config(folder, f"[qwen]\npoll_interval = 0\n{qwen}\n[article]\nmin_words = 0\n")
    (folder / "prompts").mkdir()
    (folder / "articles").mkdir()
    workspace = open_workspace(load(folder / "config.toml"))
    engines = Engines(workspace.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    return workspace, engines


def test_the_chat_choice_is_config_then_the_prompt_qwen_table(tmp_path, chat, router):
    from pipeline.engines.base import ChatChoice

    workspace, engines = model_project(tmp_path, chat, router, 'model = "Qwen3.6-Plus"\nthinking = "on"')
    add_prompt(tmp_path, "plain")
    add_prompt(tmp_path, "max", meta='[qwen]\nmodel = "Qwen3.7-Max"\nweb_search = true')

    generate(workspace, "plain", engines)
    generate(workspace, "max", engines)

    assert chat.choices == [
        ChatChoice(model="Qwen3.6-Plus", thinking="on", web_search=False),
        ChatChoice(model="Qwen3.7-Max", thinking="on", web_search=True),
    ]


def test_an_answer_from_another_model_falls_back_and_is_never_the_article(tmp_path, chat, router):
    from dataclasses import replace

    workspace, engines = model_project(tmp_path, chat, router, 'model = "Qwen3.7-Max"')
    add_prompt(tmp_path, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(replace(answer(), model="qwen3.5-flash"))

    outcome = generate(workspace, "tea", engines)

    meta, _ = front_matter(tmp_path / "articles" / "tea.md")
    assert outcome.status is Status.DONE and meta["engine"] == "router"
    hard = [e for e in workspace.journal.read(slug="tea") if e["event"] == "hard"]
    assert [e["code"] for e in hard] == ["wrong_model"]


def test_the_model_asked_for_is_the_article_model(tmp_path, chat, router):
    from dataclasses import replace

    workspace, engines = model_project(tmp_path, chat, router, 'model = "Qwen3.7-Max"')
    add_prompt(tmp_path, "tea")
    generate(workspace, "tea", engines)
    chat.enqueue_check(replace(answer(), model="qwen3.7-max"))

    assert generate(workspace, "tea", engines).status is Status.DONE
    assert front_matter(tmp_path / "articles" / "tea.md")[0]["model"] == "qwen3.7-max"


def test_a_symlinked_article_is_refused_by_generate_and_replay_before_anything_changes(
    project, workspace, engines, chat, outside
):
    """A symlink among an article's files, even to a good file, is refused before anything is
    read, sent or changed: generate does not call it done, replay does not bring it back."""
    from pipeline.files import UnsafeFile

    add_prompt(project, "tea")
    (project / "articles" / "tea.md").symlink_to(outside)
    (project / "articles" / "tea.md.failed").write_text('reason = "refused"\n')
    before = snapshot(project / "articles")
    with pytest.raises(UnsafeFile, match=r"tea\.md is a symlink"):
        generate(workspace, "tea", engines)
    with pytest.raises(UnsafeFile, match=r"tea\.md is a symlink"):
        replay(workspace, "tea")
    assert snapshot(project / "articles") == before and chat.history == []
    assert list(workspace.journal.read(slug="tea")) == []
