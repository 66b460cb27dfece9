"""What qwenpipe does with an answer of the site nobody has seen yet (issue 37, item 3), with the
fake engines and the engine's pure readers: journalled where it was met, in doubt after the
click, transient before it, a hold for an unknown page; unknown fields ignored, a missing field
a clear error naming it. The browser's side is in tests/integration/test_unknown_answers_cli.py.
"""

from __future__ import annotations

import json

import pytest
from test_recovery_rules import Clock

from pipeline import redact
from pipeline.config import load
from pipeline.contract.step import Status, generate
from pipeline.contract.unknown import UNKNOWN_EVENT, unknown_since
from pipeline.engines.base import Code, HardError, TransientError
from pipeline.engines.qwen.api import (
    KNOWN_PHASES,
    KNOWN_STATUSES,
    ChatShapeError,
    chat_list_items,
    classify_api_error,
    missing_field,
    parse_chat,
)
from pipeline.engines.qwen.stream import parse_stream
from pipeline.engines.unknown import SEEN_CHARS, Where, seen, unknown
from pipeline.setup.doctor import OK, WARN, Report, check_unknown_answers

TEXT = "Write about tea."

# -- the engine's readers: what is unknown, what is not ------------------------------------------

# Every answer of the site's JSON the engine knows (docs/qwen-site.md), each a body.
KNOWN_BODIES = {
    "success": {"success": True, "data": {}},
    "bot check": {"ret": ["FAIL_SYS_USER_VALIDATE", "RGV587_ERROR::SM"], "data": {"url": "/punish?x"}},
    "parallel limited": {"success": False, "data": {"code": "ParallelLimited", "details": "busy"}},
    "chat in progress": {"success": False, "data": {"code": "CHAT_IN_PROGRESS", "details": "x"}},
    "in progress (older)": {
        "success": False,
        "data": {"code": "Bad_Request", "details": "The chat is in progress!"},
    },
    "stale headers": {"success": False, "data": {"code": "Bad_Request", "details": "version"}},
    "chat not found": {"success": False, "data": {"code": "CHAT_NOT_FOUND", "details": "gone"}},
    "rate limited": {"success": False, "data": {"code": "RateLimited", "num": 3}},
    "unauthorized": {"success": False, "data": {"code": "Unauthorized", "details": "401 Unauthorized"}},
}
# Answers nobody has reported: an unknown code in the site's shape, no code, another type.
UNKNOWN_BODIES = {
    "unknown code": {"success": False, "data": {"code": "Quantum_Flux", "details": "try the other door"}},
    "no code": {"success": False, "data": {}},
    "code at the top": {"success": False, "code": "Mystery"},
    "a list": [1, 2, 3],
    "a string": "<html>500</html>",
    "null": None,
}


@pytest.mark.parametrize("name", list(KNOWN_BODIES))
def test_every_known_answer_is_classified_as_it_was_and_is_not_unknown(name):
    error = classify_api_error(KNOWN_BODIES[name])
    assert error is None or error.unknown is None, name


@pytest.mark.parametrize("name", list(UNKNOWN_BODIES))
def test_every_unknown_api_answer_is_transient_and_carries_what_was_seen(name):
    error = classify_api_error(UNKNOWN_BODIES[name])
    assert isinstance(error, TransientError) and error.unknown is not None, name
    assert error.unknown.where == "", "its step says where (qwen/pages.py, Pages.using)"
    assert error.unknown.at(Where.CHAT_JSON).where == "chat_json"
    assert error.unknown.seen and len(error.unknown.seen) <= SEEN_CHARS
    if name == "unknown code":
        assert "Quantum_Flux" in error.unknown.seen


def test_what_is_seen_is_masked_and_cut():
    secret = "sk-unknown-answer-secret-0123456789"
    redact.register(secret)
    token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJl"
    body = json.dumps({"success": False, "data": {"code": "Odd", "details": f"key {secret} token {token}"}})
    line = seen(status=500, content_type="text/html", body=body + "x" * 5000, code="Odd")
    assert secret[:12] not in line and token not in line and redact.MASK in line
    assert len(line) <= SEEN_CHARS and line.startswith("HTTP 500, content-type text/html, code 'Odd'")
    error = classify_api_error({"success": False, "data": {"code": "Odd", "details": secret}})
    assert secret[:12] not in error.unknown.seen


def test_a_chat_list_without_its_list_or_an_item_without_its_id_is_an_error_naming_the_field():
    """Read as an empty page, a chat list without its `data` would say "never sent"."""
    for body, field in (
        ({"success": True}, "data"),
        ({"success": True, "data": {"items": []}}, "data"),
        ({"success": True, "data": [{"id": "a"}, {"title": "no id"}]}, "data[1].id"),
        ({"success": True, "data": [{"id": 7}]}, "data[0].id"),
    ):
        with pytest.raises(ChatShapeError) as failed:
            chat_list_items(body)
        assert failed.value.field == field
        error = missing_field(failed.value, "the chat list (page 1)", Where.CHAT_LIST, body)
        assert isinstance(error, TransientError) and error.code == Code.MISSING_FIELD
        assert f"the chat list (page 1) has no field {field}" in str(error)
        assert error.unknown.where == "chat_list" and field in error.unknown.seen


def test_a_chat_json_without_its_messages_names_the_field():
    with pytest.raises(ChatShapeError) as failed:
        parse_chat({"success": True, "data": {"id": "x"}})
    assert failed.value.field == "data.chat"
    with pytest.raises(ChatShapeError) as failed:
        parse_chat({"success": True, "data": {"chat": {"title": "t"}}})
    error = missing_field(failed.value, "chat abc's JSON", Where.CHAT_JSON)
    assert "chat abc's JSON has no field data.chat.messages" in str(error)


def test_unknown_fields_are_ignored():
    """A field nobody reported changes nothing the engine reads."""
    plain = {
        "success": True,
        "data": {
            "id": "c1",
            "title": "Tea",
            "chat": {
                "messages": [
                    {"id": "u", "role": "user", "content": TEXT, "timestamp": 1_800_000_000},
                    {
                        "id": "a",
                        "role": "assistant",
                        "parentId": "u",
                        "content_list": [{"phase": "answer", "content": "# Tea", "status": "finished"}],
                    },
                ]
            },
        },
    }
    extra = json.loads(json.dumps(plain))
    extra["novel"] = {"x": 1}
    extra["data"]["chat"]["sparkles"] = [1, 2]
    extra["data"]["chat"]["messages"][1]["mood"] = "cheerful"
    extra["data"]["chat"]["messages"][1]["content_list"][0]["glitter"] = True
    assert parse_chat(extra) == parse_chat(plain)
    assert chat_list_items({"data": [{"id": "a", "hue": 3}], "cursor": "z"})[0].chat_id == "a"
    delta = {"phase": "answer", "content": "# Tea", "status": "finished", "x": 1}
    read = parse_stream(f"data: {json.dumps({'choices': [{'delta': delta}], 'y': 2})}\n")
    assert read.answer == "# Tea" and read.finished and read.unknown == ""


def test_a_stream_names_the_first_phase_or_answer_status_nobody_reported():
    def frame(phase, status):
        return json.dumps({"choices": [{"delta": {"phase": phase, "content": "x", "status": status}}]})

    for phase in KNOWN_PHASES:
        for status in (*KNOWN_STATUSES, None):
            assert parse_stream(f"data: {frame(phase, status)}\n").unknown == "", (phase, status)
    assert parse_stream(f"data: {frame('hyperspace', 'typing')}\n").unknown == "phase 'hyperspace'"
    odd = parse_stream(f"data: {frame('answer', 'paused')}\n")
    assert odd.unknown == "status 'paused' in phase 'answer'" and not odd.finished


# -- the contract: what an unknown answer costs --------------------------------------------------


def events(workspace, name=None):
    found = list(workspace.journal.read(slug="tea"))
    return [e for e in found if e["event"] == name] if name else [e["event"] for e in found]


def counted(workspace) -> int:
    return workspace.store.send_counts(0).total


def after_click(where=Where.COMPLETION):
    """What the engine raises when the site answered the send with words nobody has reported:
    the completion left the browser (nothing_sent stays False)."""
    return unknown(
        TransientError("the chat API failed: Quantum_Flux", code=Code.API_ERROR), where, code="Quantum_Flux"
    )


def test_an_unknown_answer_after_the_click_is_in_doubt_counted_journalled_never_sent_again_at_once(
    project, workspace, engines, chat
):
    clock = Clock()
    chat.clock = clock
    (project / "prompts" / "tea.md").write_text(TEXT, encoding="utf-8")
    chat.send_error_after_naming = after_click()
    outcome = generate(workspace, "tea", engines, clock=clock)
    assert outcome.status is Status.WORKING and outcome.reason == "in_doubt", outcome.message
    assert chat.sends == 1 and counted(workspace) == 1
    assert workspace.article("tea").sending.exists() and not workspace.article("tea").url.exists()
    (journalled,) = events(workspace, UNKNOWN_EVENT)
    assert journalled["where"] == "completion" and "Quantum_Flux" in journalled["seen"]
    assert journalled["account"] == "default"
    assert "recovery_in_doubt" in events(workspace) and "transient" not in events(workspace)
    record = workspace.store.article("tea")
    assert record.last_error_code == "in_doubt" and record.attempts == 0, "no attempt counted: a doubt"

    chat.send_error_after_naming = None
    url = next(iter(chat.messages))
    chat.messages[url] = [TEXT]  # the site had taken it
    again = generate(workspace, "tea", engines, clock=clock)  # at once: its look waits
    assert again.status is Status.WORKING and chat.sends == 1
    clock.now += 3600  # its look is due: the chat is found, adopted, nothing sent again
    adopted = generate(workspace, "tea", engines, clock=clock)
    assert adopted.chat_url == url and chat.sends == 1 and counted(workspace) == 1
    assert workspace.article("tea").url.read_text().strip() == url


def test_an_unknown_answer_before_the_click_is_transient_with_backoff(project, workspace, engines, chat):
    clock = Clock()
    (project / "prompts" / "tea.md").write_text(TEXT, encoding="utf-8")
    before = after_click(Where.LOGIN_CHECK)
    before.nothing_sent = True  # the engine stopped before the prompt left the browser
    chat.send_error = before
    outcome = generate(workspace, "tea", engines, clock=clock)
    assert outcome.status is Status.WORKING and outcome.reason == "backoff", outcome.message
    assert counted(workspace) == 0 and not workspace.article("tea").sending.exists()
    assert [e["where"] for e in events(workspace, UNKNOWN_EVENT)] == ["login_check"]
    assert workspace.store.article("tea").attempts == 1  # counted toward qwen.max_attempts


def test_an_unknown_page_where_the_chat_should_be_holds_the_account_once(project, workspace, engines, chat):
    """A hold (that learns), not a strike at each run: the next runs leave the account alone."""
    clock = Clock()
    (project / "prompts" / "tea.md").write_text(TEXT, encoding="utf-8")
    page = HardError("an unknown page where the chat should be (/maze)", code=Code.BOT_CHECK)
    page.nothing_sent = True
    chat.send_error = unknown(page, Where.NEW_CHAT, url="/maze", body="title 'Hold on'")
    first = generate(workspace, "tea", engines, clock=clock, engine="qwen")
    assert first.status is Status.FAILED and first.chat_error == Code.BOT_CHECK
    held = workspace.chat_quota.held(clock.now, "default")
    assert held is not None and held.kind == "bot check"
    assert [e["where"] for e in events(workspace, UNKNOWN_EVENT)] == ["new_chat"]
    tries = len(chat.history)
    for minutes in (1, 5, 10):
        clock.now += 60 * minutes
        generate(workspace, "tea", engines, clock=clock, engine="qwen")
    assert len(chat.history) == tries, "the held account was tried again"
    assert events(workspace).count("hold") == 1 and counted(workspace) == 0


def test_an_unknown_answer_to_a_look_is_journalled_and_backs_off(project, workspace, engines, chat):
    clock = Clock()
    (project / "prompts" / "tea.md").write_text(TEXT, encoding="utf-8")
    assert generate(workspace, "tea", engines, clock=clock).status is Status.QUEUED
    chat.enqueue_check(after_click(Where.CHAT_JSON))
    outcome = generate(workspace, "tea", engines, clock=clock)
    assert outcome.status is Status.WORKING and outcome.reason == "backoff" and chat.sends == 1
    assert [e["where"] for e in events(workspace, UNKNOWN_EVENT)] == ["chat_json"]


def test_one_unknown_answer_is_journalled_once_however_many_handlers_it_passes(workspace):
    """An error re-raised through two engine calls (a proxy within a proxy) is one answer."""
    from pipeline.contract.unknown import JournalledChat, journal_unknown

    error = after_click()

    class Raising:
        def send(self):
            raise error

        def noticed(self):
            return []

    def note(err):
        journal_unknown(workspace.journal, "tea", "default", err)

    outer = JournalledChat(JournalledChat(Raising(), note, print), note, print)
    for _ in range(2):
        with pytest.raises(TransientError):
            outer.send()
    assert len(events(workspace, UNKNOWN_EVENT)) == 1
    journal_unknown(workspace.journal, "tea", "default", TransientError("known", code=Code.TIMEOUT))
    assert len(events(workspace, UNKNOWN_EVENT)) == 1, "a known failure is no unknown answer"


# -- doctor --------------------------------------------------------------------------------------


def test_doctor_reports_the_unknown_answers_of_the_last_day_as_a_warning(project, workspace):
    config = load(project / "config.toml")
    report = Report("test")
    check_unknown_answers(report, config, 1_800_000_000.0)
    assert report.checks == [], "no store yet: nothing to say, and none is made"
    workspace.journal.append("tea", "poll", engine="qwen")
    report = Report("test")
    check_unknown_answers(report, config, 1_800_000_000.0)
    assert [(c.name, c.status) for c in report.checks] == [("unknown answers", OK)]

    for where in ("completion", "completion", "chat_list"):
        workspace.journal.append(
            "tea", UNKNOWN_EVENT, engine="qwen", where=where, seen=f"code 'X' at {where}"
        )
    import time

    now = time.time()
    assert unknown_since(workspace.journal, now - 60).counts == {"chat_list": 1, "completion": 2}
    report = Report("test")
    check_unknown_answers(report, config, now)
    (check,) = report.checks
    assert check.status == WARN and "3 in the last day" in check.detail
    assert "2 at completion" in check.detail and "1 at chat_list" in check.detail
    assert "code 'X' at chat_list" in check.detail  # the newest, as seen
    report = Report("test")
    check_unknown_answers(report, config, now + 2 * 86400)  # a day later: none
    assert report.checks[0].status == OK


def chat_body(chat_id="c1", messages=None):
    messages = (
        [
            {"id": "u", "role": "user", "content": TEXT, "timestamp": 1_800_000_000},
            {
                "id": "a",
                "role": "assistant",
                "parentId": "u",
                "content_list": [{"phase": "answer", "content": "# Tea"}],
            },
        ]
        if messages is None
        else messages
    )
    return {"success": True, "data": {"id": chat_id, "chat": {"messages": messages}}}


def test_another_chats_json_is_never_this_chats():
    """The JSON of another chat would make another article's text this one's, or adopt a chat
    for a send it never got."""
    assert parse_chat(chat_body("c1"), "c1").first_user_text == TEXT
    assert parse_chat(chat_body(None), "c1").first_user_text == TEXT  # no id said: nothing to tell
    with pytest.raises(ChatShapeError) as failed:
        parse_chat(chat_body("c2"), "c1")
    assert failed.value.field == "data.id" and "chat c2's" in str(failed.value)


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ({"0": {"role": "user", "content": TEXT}}, "data.chat.messages"),  # another type
        ("u", "data.chat.messages"),
        ([{"role": "user", "content": TEXT}, "x"], "data.chat.messages[1]"),
        ([{"content": TEXT}], "data.chat.messages[0].role"),  # our message, its role dropped
        ([{"role": 7, "content": TEXT}], "data.chat.messages[0].role"),
    ],
)
def test_a_chat_whose_messages_cannot_be_read_is_no_empty_chat(messages, field):
    """Read as empty, such a chat would be the proof that the prompt never left: sent again."""
    with pytest.raises(ChatShapeError) as failed:
        parse_chat(chat_body("c1", messages), "c1")
    assert failed.value.field == field


def test_a_message_of_a_role_nobody_listed_is_read_past():
    system = {"id": "s", "role": "system", "content": "be brief"}
    user, reply = chat_body()["data"]["chat"]["messages"]
    view = parse_chat(chat_body("c1", [system, {**user, "parentId": "s"}, reply]), "c1")
    assert [turn.user_text for turn in view.turns] == [TEXT]


class FakeRoute:
    """A held completion request, as Playwright's route hands it over."""

    def __init__(self, url: str):
        self.request = type("Request", (), {"url": url, "method": "POST", "post_data": "{}"})()
        self.done = ""

    def abort(self):
        self.done = "aborted"

    def continue_(self):
        self.done = "let go"


def test_a_completion_naming_a_chat_no_site_makes_is_never_let_go():
    """A new chat answered without its id: the page names `undefined`. Such a chat could never
    be found again, so its completion is aborted (nothing sent) and the answer is unknown."""
    from pipeline.engines.qwen.hold import CompletionHold

    named = []
    for chat, let_go in (("undefined", False), ("null", False), ("0123456789abcdef-0123-4567", True)):
        hold = CompletionHold(named.append)
        route = FakeRoute(f"https://chat.qwen.ai/api/v2/chat/completions?chat_id={chat}")
        hold._handle(route)
        assert route.done == ("let go" if let_go else "aborted"), chat
        if not let_go:
            with pytest.raises(TransientError) as failed:
                hold.check()
            assert failed.value.nothing_sent and failed.value.unknown.where == "new_chat"
            assert chat in failed.value.unknown.seen
    assert named == ["0123456789abcdef-0123-4567"]


class FakePage:
    """What unknown_page reads of a page: its address, title, text and document status."""

    def __init__(self, url, title, status=200, text="Please hold on."):
        self.url, self._title, self._seen = url, title, {"text": text, "status": status}

    def title(self):
        return self._title

    def evaluate(self, _script):
        return self._seen


# (address, title, the document's status) -> held (an unknown page) or transient (the site failing)
PAGES = {
    "a widget at the new chat's address": ("https://chat.qwen.ai/", "One moment", 200, "held"),
    "a widget at the chat's address": ("https://chat.qwen.ai/c/abc", "One moment", 200, "held"),
    "a redirect to an unknown address": ("https://chat.qwen.ai/fuzz/1/moved", "", 404, "held"),
    "an unknown address answered 200": ("https://chat.qwen.ai/welcome", "Hi", 200, "held"),
    "the chat's address, HTTP 504": ("https://chat.qwen.ai/c/abc", "504 Gateway Timeout", 504, "transient"),
    "the chat's address, HTTP 429 untitled": ("https://chat.qwen.ai/c/abc", "", 429, "transient"),
    "a read's error page drawn by the app": ("https://chat.qwen.ai/", "409 Conflict", 200, "transient"),
}


@pytest.mark.parametrize("name", list(PAGES))
def test_an_unknown_page_holds_the_account_and_an_error_page_of_the_site_is_transient(name):
    from pipeline.engines.qwen.botcheck import unknown_page

    url, title, status, expected = PAGES[name]
    error = unknown_page(FakePage(url, title, status), "no composer after 4 s")
    assert error.unknown is not None and error.unknown.where == ""
    if expected == "held":
        assert isinstance(error, HardError) and error.code == Code.BOT_CHECK
        assert "unknown page where the chat should be" in str(error)
    else:
        assert isinstance(error, TransientError) and error.code == Code.NETWORK
        assert "HTTP 4" in str(error) or "HTTP 5" in str(error)


def test_what_the_engine_read_past_is_journalled_once_after_the_call(project, workspace, engines, chat):
    """An unknown phase in the chat's JSON fails nothing (only the answer phase is the article),
    but a user can send it in: journalled after the call that met it."""
    from pipeline.engines.unknown import UnknownAnswer

    clock = Clock()
    (project / "prompts" / "tea.md").write_text(TEXT, encoding="utf-8")
    assert generate(workspace, "tea", engines, clock=clock).status is Status.QUEUED
    chat.noticed_unknown.append(UnknownAnswer("chat_json", "phase 'fuzz_plan'"))
    assert generate(workspace, "tea", engines, clock=clock).status is Status.WORKING  # still writing
    (seen,) = events(workspace, UNKNOWN_EVENT)
    assert (seen["where"], seen["seen"], seen["account"]) == ("chat_json", "phase 'fuzz_plan'", "default")
    generate(workspace, "tea", engines, clock=clock)
    assert len(events(workspace, UNKNOWN_EVENT)) == 1


def test_a_chat_json_names_the_first_role_or_phase_nobody_reported():
    body = chat_body()
    assert parse_chat(body, "c1").unknown == ""
    body["data"]["chat"]["messages"][1]["content_list"].insert(0, {"phase": "fuzz_cite", "content": "x"})
    view = parse_chat(body, "c1")
    assert view.unknown == "phase 'fuzz_cite'" and view.turns[0].answer == "# Tea"
    other = chat_body()
    other["data"]["chat"]["messages"].append({"id": "t", "role": "tool", "parentId": "a"})
    assert parse_chat(other, "c1").unknown == "role 'tool'"


def test_a_foreign_reply_after_the_click_holds_the_account_and_leaves_the_send_in_doubt_not_routed(
    project, workspace, engines, chat, router
):
    """The send answered with an HTML 5xx that names no verification: the page left the chat (a
    bot check's kind: the account rests) and the site may have taken the prompt (in doubt). The
    router does not write it meanwhile: the chat may hold it, and that would pay twice."""
    clock = Clock()
    (project / "prompts" / "tea.md").write_text(TEXT, encoding="utf-8")
    reply = HardError(
        "the send was answered with text/html, not the site's stream or JSON", code=Code.BOT_CHECK
    )
    chat.send_error_after_naming = unknown(reply, Where.COMPLETION, status=503, content_type="text/html")
    outcome = generate(workspace, "tea", engines, clock=clock)
    assert outcome.status is Status.WORKING and outcome.reason == "in_doubt", outcome.message
    assert router.history == [] and counted(workspace) == 1
    held = workspace.chat_quota.held(clock.now, "default")
    assert held is not None and held.kind == "bot check"
    assert events(workspace).count("hold") == 1 and "hard" not in events(workspace)


def test_unknown_answers_on_looks_at_a_sent_chat_never_hand_it_to_the_router(
    project, workspace, engines, chat, router
):
    """Past qwen.max_attempts (3 here) of them the chat is still looked at, backing off: the chat
    may hold the answer, and the router writing it too would pay twice. Known failures still
    hand it over."""
    clock = Clock()
    (project / "prompts" / "tea.md").write_text(TEXT, encoding="utf-8")
    assert generate(workspace, "tea", engines, clock=clock).status is Status.QUEUED
    for _ in range(5):
        chat.enqueue_check(after_click(Where.CHAT_JSON))
        outcome = generate(workspace, "tea", engines, clock=clock)
        assert outcome.status is Status.WORKING and outcome.reason == "backoff", outcome.message
    assert router.history == [] and workspace.store.article("tea").attempts == 5
    chat.enqueue_check(TransientError("timed out", code=Code.TIMEOUT))
    assert generate(workspace, "tea", engines, clock=clock).engine == "router"
