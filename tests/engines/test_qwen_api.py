"""qwen_api, qwen_selectors and the page rules of qwen_page on hand-made data (no browser)."""

from __future__ import annotations

import pytest
from fakes import page_state as dom  # a finished answer's page, with the changes a test makes

from pipeline.engines.base import HardError, QuotaSpent, TransientError
from pipeline.engines.qwen.api import (
    ChatShapeError,
    chat_id_from_url,
    chat_list_items,
    classify_api_error,
    is_logged_in_status,
    parse_chat,
)
from pipeline.engines.qwen.page import failure_in
from pipeline.engines.qwen.selectors import CURRENT, LEGACY, SelectorError, merge_overrides

CHAT_ID = "0f8e2b6a-1c3d-4e5f-9a7b-123456789abc"
ARTICLE = "# Title\n\n- one\n- two\n\n## More\n\n1. first\n2. second\n"


def user(mid, parent, text, ts):
    return {
        "id": mid,
        "role": "user",
        "parentId": parent,
        "childrenIds": [],
        "content": text,
        "timestamp": ts,
    }


def assistant(mid, parent, answer, ts, *, status="finished", search=False, error=None, top=None):
    parts = [{"phase": "thinking_summary", "content": "Let me think about lists.", "status": "finished"}]
    if search:
        parts.append({"phase": "web_search", "content": "searched: lists", "status": "finished"})
    if answer is not None:
        parts.append({"phase": "answer", "content": answer, "status": status})
    message = {
        "id": mid,
        "role": "assistant",
        "parentId": parent,
        "childrenIds": [],
        "timestamp": ts,
        "content_list": parts,
        "model": "qwen3-max",
        "error": error,
    }
    if top is not None:
        message["content"] = top
    return message


def link(messages):
    by_id = {m["id"]: m for m in messages}
    for m in messages:
        if m["parentId"]:
            by_id[m["parentId"]]["childrenIds"].append(m["id"])
    return messages


def shape_2026_06(messages, title="Lists, briefly", order=None):
    keyed = {m["id"]: m for m in (order or messages)}
    return {
        "success": True,
        "data": {
            "id": CHAT_ID,
            "title": title,
            "chat": {"history": {"messages": keyed, "currentId": messages[-1]["id"]}},
        },
    }


def shape_2026_08(messages, title="Lists, briefly"):
    return {
        "success": True,
        "data": {"id": CHAT_ID, "title": title, "chat": {"history": {"messages": {}}, "messages": messages}},
    }


def conversation(answer=ARTICLE, **kw):
    return link([user("u1", None, "Write about lists", 100), assistant("a1", "u1", answer, 101, **kw)])


def two_turns(first, first_answer, second, second_answer):
    """u1, a1, u2, a2: two turns linked one after the other, in time order."""
    return link(
        [
            user("u1", None, first, 100),
            assistant("a1", "u1", first_answer, 101),
            user("u2", "a1", second, 102),
            assistant("a2", "u2", second_answer, 103),
        ]
    )


# -- parse_chat ------------------------------------------------------------------------------


def test_2026_06_answer_comes_only_from_the_answer_phase():
    view = parse_chat(shape_2026_06(conversation()))
    assert view.title == "Lists, briefly"
    assert view.turns == [("Write about lists", ARTICLE, True, None)]
    assert view.model == "qwen3-max"


def test_2026_06_turns_follow_parent_links_not_dict_order():
    messages = two_turns("first prompt", "first answer", "second prompt", "second answer")
    shuffled = [messages[3], messages[0], messages[2], messages[1]]
    view = parse_chat(shape_2026_06(messages, order=shuffled))
    assert [t.user_text for t in view.turns] == ["first prompt", "second prompt"]
    assert [t.answer for t in view.turns] == ["first answer", "second answer"]


def test_2026_06_without_current_id_takes_the_newest_branch():
    messages = link(
        [
            user("u1", None, "prompt", 100),
            assistant("old", "u1", "old answer", 101),
            assistant("new", "u1", "regenerated answer", 105),
        ]
    )
    payload = shape_2026_06(messages)
    del payload["data"]["chat"]["history"]["currentId"]
    assert parse_chat(payload).turns[0].answer == "regenerated answer"


def test_2026_08_ignores_top_level_content_search_and_thinking():
    messages = conversation(search=True, top="Let me think about lists.searched: lists" + ARTICLE)
    view = parse_chat(shape_2026_08(messages))
    assert view.turns == [("Write about lists", ARTICLE, True, None)]


def test_2026_08_array_out_of_order_is_put_in_order():
    messages = two_turns("first", "A", "second", "B")
    view = parse_chat(shape_2026_08([messages[2], messages[3], messages[0], messages[1]]))
    assert [(t.user_text, t.answer) for t in view.turns] == [("first", "A"), ("second", "B")]


def test_typing_status_means_not_finished():
    view = parse_chat(shape_2026_08(conversation(answer="# Tit", status="typing")))
    assert view.turns[0].finished is False
    assert view.turns[0].answer == "# Tit"


def test_done_false_wins_over_a_finished_phase():
    messages = conversation()
    messages[1]["done"] = False
    assert parse_chat(shape_2026_08(messages)).turns[0].finished is False


def test_a_finished_thinking_phase_is_not_a_finished_answer():
    # Only the stream's last phase and status are stored: "finished" there ended the thinking.
    messages = conversation(answer="# Title\n\nThe answer so far")
    answer_part = messages[1]["content_list"][-1]
    del answer_part["status"]
    messages[1].update(phase="thinking_summary", status="finished")
    assert parse_chat(shape_2026_08(messages)).turns[0].finished is False
    messages[1].update(phase="answer")
    assert parse_chat(shape_2026_08(messages)).turns[0].finished is True


def test_the_chat_is_in_progress_is_a_transient_refusal():
    body = {"success": False, "data": {"code": "Bad_Request", "details": "The chat is in progress!"}}
    error = classify_api_error(body)
    assert isinstance(error, TransientError) and error.code == "chat_in_progress"


def test_thinking_only_has_no_answer_yet():
    messages = conversation(answer=None)
    messages[1]["status"] = "typing"
    turn = parse_chat(shape_2026_06(messages)).turns[0]
    assert turn.answer == "" and turn.finished is False


def test_user_turn_without_reply_yet():
    view = parse_chat(shape_2026_08([user("u1", None, "hello", 100)]))
    assert view.turns == [("hello", "", False, None)]
    assert view.first_user_text == "hello"


def test_error_on_the_message_is_reported():
    turn = parse_chat(shape_2026_08(conversation(error={"code": "Internal", "message": "boom"}))).turns[0]
    assert turn.error == "boom"


def test_new_chat_title_is_not_a_title():
    assert parse_chat(shape_2026_08(conversation(), title="New Chat")).real_title is None
    assert parse_chat(shape_2026_08(conversation())).real_title == "Lists, briefly"


def test_an_empty_new_chat_in_the_2026_08_shape_has_no_turns():
    assert parse_chat(shape_2026_08([])).turns == []


def test_unknown_shape_is_a_shape_error():
    with pytest.raises(ChatShapeError):
        parse_chat({"success": True, "data": {"id": CHAT_ID}})


@pytest.mark.parametrize("value", [664, 1.5, True, ["# Title"], {"text": "# Title"}])
@pytest.mark.parametrize("shape", [shape_2026_06, shape_2026_08])
def test_a_text_of_another_type_is_a_shape_error_never_the_article(shape, value):
    # Fuzz seed 2001 trial 2 (2 accounts): the answer's content came as an int (its length), and
    # the article said "664". Every text the readers take (the answer's parts, the top-level
    # content, the user's message) is a string or nothing yet.
    for index, role in ((1, "assistant"), (0, "user")):
        messages = conversation()
        part = messages[index]["content_list"][-1] if role == "assistant" else messages[index]
        part["content"] = value
        with pytest.raises(ChatShapeError) as shape_error:
            parse_chat(shape(messages))
        assert "content" in shape_error.value.field, (role, shape_error.value.field)
    messages = conversation()
    del messages[1]["content_list"]
    messages[1]["content"] = value
    with pytest.raises(ChatShapeError):
        parse_chat(shape(messages))


@pytest.mark.parametrize("shape", [shape_2026_06, shape_2026_08])
def test_a_finished_answer_without_its_text_is_a_shape_error_never_an_empty_answer(shape):
    # Fuzz seed 1500 trial 97: the stored answer part lost its `content`; read as an answer that
    # finished empty (hard: the router wrote an article the chat held). Each place the answer's
    # text lives: the answer phase's part, and the top-level content of a message without phases.
    def spoil(holder):
        del holder["content"]

    messages = conversation()
    spoil(messages[1]["content_list"][-1])
    with pytest.raises(ChatShapeError) as shape_error:
        parse_chat(shape(messages))
    assert "content" in shape_error.value.field
    messages = conversation()
    del messages[1]["content_list"]
    messages[1].update(status="finished", content=ARTICLE)
    spoil(messages[1])
    with pytest.raises(ChatShapeError):
        parse_chat(shape(messages))
    # An answer the site has not finished may have no text yet, and one that finished with null
    # (the site's empty answer: docs/qwen-site.md) or "" is empty: neither is a missing field.
    messages = conversation(status="typing")
    spoil(messages[1]["content_list"][-1])
    assert parse_chat(shape(messages)).turns[0].answer == ""
    messages = conversation()
    messages[1]["content_list"][-1]["content"] = None
    assert parse_chat(shape(messages)).turns[0] == ("Write about lists", "", True, None)
    assert parse_chat(shape(conversation(answer=""))).turns[0] == ("Write about lists", "", True, None)


def _phase_number(parts):
    parts[-1]["phase"] = 6


def _phase_gone(parts):
    del parts[-1]["phase"]


def _phase_unknown(parts):
    parts[-1]["phase"] = "answer_v2"


def _part_a_string(parts):
    parts[-1] = parts[-1]["content"]


# Each way the answer's place in a finished message can be lost: the answer part's phase of
# another type, gone, or named as nobody has reported; the part itself of another type; the
# parts' list of another type.
LOST = [_phase_number, _phase_gone, _phase_unknown, _part_a_string]


@pytest.mark.parametrize("lose", LOST, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("shape", [shape_2026_06, shape_2026_08])
def test_a_finished_answer_whose_part_cannot_be_placed_is_a_shape_error_never_an_empty_answer(shape, lose):
    # Fuzz seed 8100 trial 25: the answer part's `phase` came as a number. No part said "answer",
    # so the finished message read as an answer that finished empty (hard: the account held, and
    # the router wrote an article the chat held).
    messages = conversation()
    messages[1]["done"] = True
    lose(messages[1]["content_list"])
    with pytest.raises(ChatShapeError) as shape_error:
        parse_chat(shape(messages))
    assert shape_error.value.field == "content_list[].phase"
    # Still being written, the same parts conclude nothing: the answer is simply not there yet.
    messages = conversation(status="typing")
    messages[1]["done"] = False
    lose(messages[1]["content_list"])
    assert parse_chat(shape(messages)).turns[0].answer == ""


@pytest.mark.parametrize("value", ["# Title", 6, {"phase": "answer"}])
def test_a_finished_answers_parts_of_another_type_are_a_shape_error(value):
    messages = conversation()
    messages[1].update(done=True, content_list=value)
    with pytest.raises(ChatShapeError) as shape_error:
        parse_chat(shape_2026_06(messages))
    assert shape_error.value.field == "content_list"


def test_an_answer_that_really_finished_empty_still_reads_so():
    # The site's own empty answer (docs/qwen-site.md): the answer phase with null content, or
    # only known phases and no answer part at all.
    messages = conversation(answer=None)
    messages[1]["done"] = True
    assert parse_chat(shape_2026_08(messages)).turns[0] == ("Write about lists", "", True, None)
    messages = conversation()
    messages[1]["done"] = True
    messages[1]["content_list"][-1]["content"] = None
    assert parse_chat(shape_2026_08(messages)).turns[0] == ("Write about lists", "", True, None)


# -- classify_api_error ----------------------------------------------------------------------


def test_success_is_not_an_error():
    assert classify_api_error(shape_2026_08(conversation())) is None


def test_chat_not_found_is_hard():
    error = classify_api_error({"success": False, "data": {"code": "CHAT_NOT_FOUND", "details": "gone"}})
    assert isinstance(error, HardError) and error.code == "chat_not_found"


def test_rate_limited_is_quota_with_hours_as_seconds():
    error = classify_api_error({"success": False, "data": {"code": "RateLimited", "num": 4}})
    assert isinstance(error, QuotaSpent) and error.code == "quota"
    assert error.retry_after == 4 * 3600


def test_rate_limited_without_hours():
    error = classify_api_error({"success": False, "data": {"code": "RateLimited"}})
    assert isinstance(error, QuotaSpent) and error.retry_after is None


@pytest.mark.parametrize(
    "body",
    [
        {"success": False, "data": {"code": "FAIL_SYS_USER_VALIDATE"}},
        {"ret": ["RGV587_ERROR::SM::hold on"], "data": {}},
        {"success": False, "data": {"url": "https://chat.qwen.ai/punish?x=1"}},
    ],
)
def test_bot_check_bodies_are_hard(body):
    error = classify_api_error(body)
    assert isinstance(error, HardError) and error.code == "bot_check"


@pytest.mark.parametrize(
    "body",
    [
        {"success": False, "data": {"code": "Unauthorized", "details": "token expired"}},
        {"success": False, "data": {"code": "", "details": "You are not logged in"}},
    ],
)
def test_unauthorized_is_logged_out_with_the_fix(body):
    error = classify_api_error(body)
    assert isinstance(error, HardError) and error.code == "logged_out"
    assert "run `qwenpipe login`" in str(error)


def test_other_failures_are_transient():
    error = classify_api_error({"success": False, "data": {"code": "Busy", "details": "later"}})
    assert isinstance(error, TransientError) and not isinstance(error, HardError)


def test_users_status():
    assert is_logged_in_status({"success": True, "data": True}) is True
    assert is_logged_in_status({"success": True, "data": False}) is False
    assert is_logged_in_status({"success": False, "data": {"code": "Unauthorized"}}) is False
    assert is_logged_in_status("<html>") is None


def test_a_users_status_without_its_answer_says_nothing_not_logged_out():
    # The fuzzed site dropped `.data` (or sent it as another type): not "logged out" (a hard
    # failure, the article handed to the router), but nothing usable (issue 37).
    for body in ({"success": True}, {"success": True, "data": "true"}, {"success": True, "data": 1}):
        assert is_logged_in_status(body) is None, body


def test_chat_list_items_in_site_order():
    listing = {"success": True, "data": [{"id": "b", "title": "x"}, {"id": "a", "title": "y"}]}
    assert [item.chat_id for item in chat_list_items(listing)] == ["b", "a"]
    assert chat_list_items({"success": True, "data": []}) == []


@pytest.mark.parametrize(
    "url, expected",
    [
        (f"https://chat.qwen.ai/c/{CHAT_ID}", CHAT_ID),
        (f"http://127.0.0.1:5000/c/{CHAT_ID}?x=1", CHAT_ID),
        ("https://chat.qwen.ai/", None),
        ("https://chat.qwen.ai/c/local", None),
    ],
)
def test_chat_id_from_url(url, expected):
    assert chat_id_from_url(url) == expected


# -- selectors -------------------------------------------------------------------------------


def test_built_in_sets_current_first():
    assert merge_overrides({}) == (CURRENT, LEGACY)


def test_override_replaces_a_selector_by_name():
    (config,) = merge_overrides({"composer": "textarea.new-box"})
    assert config.name == "config"
    assert config.composer == "textarea.new-box"
    assert config.send_button == CURRENT.send_button


def test_unknown_override_names_the_key():
    with pytest.raises(SelectorError, match=r"qwen\.selectors\.composr"):
        merge_overrides({"composr": "textarea"})


# -- what a page shows -----------------------------------------------------------------------


def seen(url="https://chat.qwen.ai/", title="Qwen Chat", text="", waf=False, login=False):
    return {"url": url, "title": title, "text": text, "waf": waf, "login": login}


@pytest.mark.parametrize(
    "screen, kind, code",
    [
        (seen(url="https://chat.qwen.ai/auth?action=signin"), HardError, "logged_out"),
        (seen(login=True), HardError, "logged_out"),
        (seen(title="Verification"), HardError, "bot_check"),
        (
            seen(text="Please complete the operation to verify that you are a real person"),
            HardError,
            "bot_check",
        ),
        (seen(waf=True), TransientError, "waf"),
        (seen(text="You\u2019ve reached the upper limit for today\u2019s usage."), QuotaSpent, "quota"),
        (seen(text="Invalid input chat parent_id abc is not exist"), HardError, "chat_not_found"),
        (seen(text="Something went wrong. Try again"), TransientError, "error_banner"),
    ],
)
def test_failure_screens(screen, kind, code):
    error = failure_in(screen)
    assert isinstance(error, kind) and error.code == code


def test_a_normal_page_is_no_failure():
    assert failure_in(seen(text="New chat Ask Qwen")) is None


def test_dom_complete_only_with_every_signal():
    assert dom().busy_reason(CURRENT, 0) is None
    assert dom(assistant_turns=1).busy_reason(CURRENT, 1) == "waiting for the answer to start"
    assert dom(stop_visible=True).busy_reason(CURRENT, 0).startswith("writing")
    assert dom(send_disabled=True, composer_text="typed").busy_reason(CURRENT, 0) is not None
    assert dom(copy_button=False).busy_reason(CURRENT, 0) is not None
    assert dom(thinking_visible=True, skip_visible=True).busy_reason(CURRENT, 0) == "thinking"
    assert dom(thinking_visible=True, answer_present=True).busy_reason(CURRENT, 0) is None


def test_send_button_disabled_on_an_empty_composer_is_idle():
    assert dom(send_disabled=True).busy_reason(CURRENT, 0) is None
    assert dom(ui="legacy", copy_button=False, send_disabled=True).busy_reason(LEGACY, 0) is None
    assert dom(ui="legacy", send_disabled=True, composer_text="x").busy_reason(LEGACY, 0) is not None
