"""The chat.qwen.ai simulator over real HTTP (no browser), plus one browser smoke test."""

from __future__ import annotations

import http.client
import json
import time
import uuid
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import pytest
from sim_project import finish_answer

from pipeline.simulator import Simulator, answers
from pipeline.simulator.api import make_token
from pipeline.simulator.chats import BX_V

PROMPT = "Write an article about owls hunting at night in the forest"
# These tests read the site's JSON over plain HTTP: a send answers its ids as JSON (stream=False);
# the stream the page reads has tests of its own below.
FAST = {"answer_seconds": 0.4, "thinking_seconds": 0.1, "url_delay": 0.1, "stream": False}


@pytest.fixture
def sim():
    with Simulator(**FAST).start() as running:
        yield running


# -- small HTTP helpers ----------------------------------------------------------------------------
def frontend_headers(sim) -> dict:
    """What the site's frontend sends with every API call: its build, bx-v, its time zone and a
    fresh request id (a header given as None in a request leaves it out)."""
    return {
        "source": "web",
        "version": sim.store.snapshot().frontend_version,
        "bx-v": BX_V,
        "timezone": "GMT+0100",
        "x-request-id": str(uuid.uuid4()),
    }


def raw(sim, method: str, path: str, body=None, headers=None) -> tuple[int, dict, str]:
    """One request without following redirects: (status, headers, text)."""
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    data = json.dumps(body).encode() if body is not None else None
    sent = {"Content-Type": "application/json", **frontend_headers(sim), **(headers or {})}
    conn.request(method, path, body=data, headers={k: v for k, v in sent.items() if v is not None})
    res = conn.getresponse()
    text = res.read().decode()
    conn.close()
    return res.status, dict(res.getheaders()), text


def get_json(sim, path: str, headers=None):
    status, _, text = raw(sim, "GET", path, headers=headers)
    assert status == 200, text
    return json.loads(text)


def post_json(sim, path: str, body=None, headers=None):
    status, _, text = raw(sim, "POST", path, body or {}, headers)
    assert status == 200, text
    return json.loads(text)


def send(sim, prompt: str, chat_id: str | None = None, parent_id: str | None = None) -> tuple[str, dict]:
    """What the page does: make a chat (unless given), then post the message to it."""
    if chat_id is None:
        chat_id = post_json(sim, "/api/v2/chats/new")["data"]["id"]
    body = {
        "chat_id": chat_id,
        "messages": [{"role": "user", "content": prompt}],
        "parent_id": parent_id,
        "stream": True,
    }
    status, _, text = raw(sim, "POST", f"/api/v2/chat/completions?chat_id={chat_id}", body)
    assert status == 200
    return chat_id, (json.loads(text) if text.lstrip().startswith("{") else {"html": text})


def assistant(body: dict) -> dict:
    """The last assistant message of a chat body, in either shape."""
    chat = body["data"]["chat"]
    messages = chat["messages"] if chat.get("messages") else list(chat["history"]["messages"].values())
    return [m for m in messages if m["role"] == "assistant"][-1]


def answer_item(message: dict) -> dict | None:
    return next((i for i in message["content_list"] if i["phase"] == "answer"), None)


def wait_for(predicate, timeout: float = 5.0, step: float = 0.03):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not met in time")


def finished(sim, chat_id: str) -> dict:
    def check():
        body = get_json(sim, f"/api/v2/chats/{chat_id}")
        item = answer_item(assistant(body))
        return body if item and item["status"] == "finished" else None

    return wait_for(check)


# -- API shapes and the timeline -------------------------------------------------------------------
def test_2026_08_shape_and_timeline(sim):
    # Slow enough that a loaded machine still sees the thinking phase and a partial answer.
    sim.set(thinking_seconds=1.5, answer_seconds=2.0)
    try:
        _timeline(sim)
    finally:
        sim.set(**FAST)


def _timeline(sim):
    chat_id, reply = send(sim, PROMPT)
    assert reply["success"] and reply["data"]["chat_id"] == chat_id
    expected = sim.expected_answer(PROMPT)
    first = get_json(sim, f"/api/v2/chats/{chat_id}")
    assert first["data"]["title"] == "New Chat"
    assert first["data"]["chat"]["history"]["messages"] == {}
    msg = assistant(first)
    assert msg["done"] is False and msg["content"] == ""
    assert [i["phase"] for i in msg["content_list"]] == ["thinking_summary"]  # still thinking

    def partial():
        m = assistant(get_json(sim, f"/api/v2/chats/{chat_id}"))
        return m if 0 < len(m["content"]) < len(expected) else None

    m = wait_for(partial)
    assert expected.startswith(m["content"]) and answer_item(m)["status"] == "typing"
    assert [i["phase"] for i in m["content_list"]] == ["thinking_summary", "web_search", "answer"]

    final = finished(sim, chat_id)
    m = assistant(final)
    assert m["done"] is True and m["content"] == expected and answer_item(m)["content"] == expected
    assert isinstance(m["timestamp"], int) and m["timestamp"] > 1_600_000_000
    title = final["data"]["title"]
    assert title not in ("New Chat", PROMPT) and 1 < len(title.split()) <= 5


def test_2026_06_shape(sim):
    sim.set(api_shape="2026-06")
    chat_id, _ = send(sim, PROMPT)
    body = finished(sim, chat_id)
    history = body["data"]["chat"]["history"]
    assert "messages" not in body["data"]["chat"]
    by_id = history["messages"]
    current = by_id[history["currentId"]]
    assert current["role"] == "assistant" and current["content"] == ""
    user = by_id[current["parentId"]]
    assert user["role"] == "user" and user["content"] == PROMPT and user["childrenIds"] == [current["id"]]
    assert [i["phase"] for i in current["content_list"]] == ["thinking_summary", "answer"]
    assert answer_item(current)["content"] == sim.expected_answer(PROMPT)


def test_done_flag_comes_before_status_finished(sim):
    chat_id, _ = send(sim, PROMPT)

    def done_but_typing():
        m = assistant(get_json(sim, f"/api/v2/chats/{chat_id}"))
        item = answer_item(m)
        return m["done"] and item["status"] == "typing"

    assert wait_for(done_but_typing, step=0.02)


def test_follow_up_turns_and_busy_chat(sim):
    # The first answer runs until the test ends it: "too early" is early however slow the machine
    # (with FAST's half second, a loaded CI machine sent it after the answer had finished).
    sim.set(answer_seconds=120.0)
    chat_id, reply = send(sim, PROMPT)
    sim.set(answer_seconds=FAST["answer_seconds"])
    first_answer_id = reply["data"]["message_id"]
    _, busy = send(sim, "Too early", chat_id, first_answer_id)
    assert busy["success"] is False and busy["data"]["details"] == "The chat is in progress!"
    finish_answer(sim, f"{sim.base_url}/c/{chat_id}")
    finished(sim, chat_id)
    _, wrong = send(sim, "Wrong parent", chat_id, "not-a-message")
    assert wrong["data"]["code"] == "CHAT_NOT_FOUND"
    follow = "Now write a second part about barn owls"
    _, ok = send(sim, follow, chat_id, first_answer_id)
    assert ok["success"]
    body = finished(sim, chat_id)
    second = assistant(body)["content"]
    assert second == sim.expected_answer(follow, turn=2)
    assert "turn 2" in second and "barn owls" in second
    turns = [(e["turn"], e["accepted"]) for e in sim.ledger()]
    assert turns == [(1, True), (2, False), (2, False), (2, True)]
    assert len(sim.sends()) == 2


def test_chat_list_pages_newest_first(sim):
    ids = [post_json(sim, "/api/v2/chats/new")["data"]["id"] for _ in range(12)]
    page1 = get_json(sim, "/api/v2/chats/?page=1&exclude_project=true")["data"]
    page2 = get_json(sim, "/api/v2/chats/?page=2&exclude_project=true")["data"]
    assert [c["id"] for c in page1 + page2] == ids[::-1]
    assert len(page1) == 10 and {"id", "title", "created_at", "updated_at", "chat_type"} <= set(page1[0])
    assert get_json(sim, "/api/v2/chats/?page=3")["data"] == []
    assert sorted(sim.chat_ids()) == sorted(ids)


# -- the ledger ------------------------------------------------------------------------------------
def test_ledger_over_http_and_file(tmp_path):
    path = tmp_path / "ledger.json"
    with Simulator(ledger_path=path, **FAST).start() as sim:
        assert json.loads(path.read_text()) == []
        chat_id, _ = send(sim, PROMPT)
        entries = get_json(sim, "/sim/ledger")
        assert entries == sim.ledger() == json.loads(path.read_text())
        entry = entries[0]
        assert (entry["chat_id"], entry["prompt"], entry["turn"]) == (chat_id, PROMPT, 1)
        assert (
            entry["accepted"] is True and entry["scenario"] == "ok" and abs(entry["time"] - time.time()) < 5
        )


# -- scenarios -------------------------------------------------------------------------------------
def test_quota_refuses_the_send(sim):
    sim.set(scenario="quota")
    _, reply = send(sim, PROMPT)
    assert reply == {
        "success": False,
        "data": {
            "code": "RateLimited",
            "details": "You've reached the upper limit for today's usage.",
            "num": 5,
        },
    }
    assert [e["accepted"] for e in sim.ledger()] == [False] and sim.sends() == []


def test_bot_check(sim):
    sim.set(scenario="bot_check")
    body = get_json(sim, "/api/v2/users/status")
    assert body["data"] == {
        "code": "FAIL_SYS_USER_VALIDATE",
        "details": "RGV587_ERROR",
        "url": "/punish?x5step=1",
    }
    status, _, page = raw(sim, "GET", "/")
    assert status == 200 and "<title>Verification</title>" in page
    assert "Please complete the operation to verify that you are a real person" in page
    send(sim, PROMPT, chat_id="0f2b3c4d-1111-2222-3333-444455556666")  # chats/new is blocked too
    assert sim.ledger()[0]["accepted"] is False and sim.ledger()[0]["scenario"] == "bot_check"


def test_logged_out(sim):
    sim.set(scenario="logged_out")
    assert get_json(sim, "/api/v2/users/status") == {"success": True, "data": False}
    assert get_json(sim, "/api/v2/chats/?page=1")["data"] == {"code": "Unauthorized"}
    status, headers, _ = raw(sim, "GET", "/c/0f2b3c4d-1111-2222-3333-444455556666")
    assert status == 302 and headers["Location"] == "/auth?action=signin"
    status, _, page = raw(sim, "GET", "/auth?action=signin")
    assert status == 200 and "login-container" in page and "login-button" in page


def test_require_login_uses_the_token_cookie():
    with Simulator(require_login=True, **FAST).start() as sim:
        assert raw(sim, "GET", "/")[0] == 302
        status, headers, text = raw(sim, "POST", "/api/v1/auths/signin", {"email": "a@b.c", "password": "x"})
        token = json.loads(text)["data"]["token"]
        assert "token=" in headers["Set-Cookie"] and "Max-Age=604800" in headers["Set-Cookie"]
        cookie = {"Cookie": f"token={token}"}
        assert raw(sim, "GET", "/", headers=cookie)[0] == 200
        assert get_json(sim, "/api/v2/users/status", cookie)["data"] is True
        expired = {"Cookie": f"token={make_token(time.time() - 8 * 86400)}"}
        assert raw(sim, "GET", "/", headers=expired)[0] == 302
        assert get_json(sim, "/api/v2/users/status", {"Authorization": f"Bearer {token}"})["data"] is True


def test_a_token_near_its_end_is_renewed_on_auths_and_on_page_load():
    with Simulator(require_login=True, token_hours=10, renew_hours=2, **FAST).start() as sim:
        soon = make_token(time.time() - 9 * 3600, hours=10)  # an hour left: inside the window
        status, headers, text = raw(sim, "GET", "/api/v1/auths/", headers={"Cookie": f"token={soon}"})
        body = json.loads(text)["data"]
        assert body["token"] != soon and body["expires_at"] > time.time() + 9.9 * 3600
        assert f"token={body['token']}" in headers["Set-Cookie"] and "Max-Age=36000" in headers["Set-Cookie"]
        status, headers, _ = raw(sim, "GET", "/", headers={"Authorization": f"Bearer {soon}"})
        assert status == 200 and "token=" in headers.get("Set-Cookie", "")

        far = make_token(hours=10)
        status, headers, text = raw(sim, "GET", "/api/v1/auths/", headers={"Cookie": f"token={far}"})
        assert json.loads(text)["data"]["token"] == far and "Set-Cookie" not in headers
        assert "Set-Cookie" not in raw(sim, "GET", "/", headers={"Cookie": f"token={far}"})[1]

        sim.set(renew_hours=0)  # a site that never renews
        status, headers, text = raw(sim, "GET", "/api/v1/auths/", headers={"Cookie": f"token={soon}"})
        assert json.loads(text)["data"]["token"] == soon and "Set-Cookie" not in headers
        assert get_json(sim, "/api/v1/auths/") == {"success": False, "data": {"code": "Unauthorized"}}


def test_waf_after_sending(sim):
    chat_id, _ = send(sim, PROMPT)
    sim.set(scenario="waf")
    for path in ("/", f"/c/{chat_id}", f"/api/v2/chats/{chat_id}", "/api/v2/users/status"):
        status, _, text = raw(sim, "GET", path)
        assert status == 200 and "aliyun_waf_aa" in text and "app.js" not in text
    sim.set(scenario="ok")
    assert get_json(sim, f"/api/v2/chats/{chat_id}")["success"] is True


def test_chat_not_found(sim):
    chat_id, _ = send(sim, PROMPT)
    sim.set(scenario="chat_not_found")
    body = get_json(sim, f"/api/v2/chats/{chat_id}")
    assert body == {
        "success": False,
        "data": {"code": "CHAT_NOT_FOUND", "details": f"Invalid input chat parent_id {chat_id} is not exist"},
    }
    sim.set(scenario="ok")
    assert (
        get_json(sim, "/api/v2/chats/0f2b3c4d-1111-2222-3333-444455556666")["data"]["code"]
        == "CHAT_NOT_FOUND"
    )


def test_error_banner_stores_a_cut_short_answer_as_done(sim):
    sim.set(scenario="error_banner")
    chat_id, _ = send(sim, PROMPT)
    m = assistant(finished(sim, chat_id))
    full = sim.expected_answer(PROMPT)
    assert m["done"] is True and m["error"]["details"] == "Something went wrong, please try again later."
    assert full.startswith(m["content"]) and 0.3 * len(full) < len(m["content"]) < 0.7 * len(full)


def test_slow_scenario(sim):
    sim.set(scenario="slow")
    chat_id, _ = send(sim, PROMPT)
    time.sleep(0.5)
    m = assistant(get_json(sim, f"/api/v2/chats/{chat_id}"))
    assert m["done"] is False and len(m["content"]) < 0.05 * len(sim.expected_answer(PROMPT))


@pytest.mark.parametrize(
    "name, check",
    [
        ("refusal", lambda text: text == answers.REFUSAL),
        ("short", lambda text: len(text.splitlines()) == 3 and len(text) < 80),
        (
            "chatter",
            lambda text: (
                text.startswith("Sure! Here is your article:\n\n# ")
                and text.endswith("\n\nLet me know if you want any changes!")
            ),
        ),
        ("wrong_language", lambda text: "Puntos clave" in text and text.startswith("# ")),
    ],
)
def test_content_scenarios_per_prompt(sim, name, check):
    prompt = f"{PROMPT} [sim:{name}]"
    chat_id, _ = send(sim, prompt)
    text = assistant(finished(sim, chat_id))["content"]
    assert text == sim.expected_answer(prompt) and check(text)
    assert sim.ledger()[0]["scenario"] == name


def test_per_prompt_overrides_the_run_scenario(sim):
    _, reply = send(sim, f"{PROMPT} [sim:quota]")
    assert reply["data"]["code"] == "RateLimited"
    lost, _ = send(sim, f"{PROMPT} [sim:chat_not_found]")
    assert get_json(sim, f"/api/v2/chats/{lost}")["data"]["code"] == "CHAT_NOT_FOUND"
    fine, _ = send(sim, PROMPT)
    assert get_json(sim, f"/api/v2/chats/{fine}")["success"] is True
    assert [e["accepted"] for e in sim.ledger()] == [False, True, True]


# -- answers, settings, pages ----------------------------------------------------------------------
def test_answers_are_deterministic_and_prompt_dependent(sim):
    a = sim.expected_answer(PROMPT)
    assert a == sim.expected_answer(PROMPT) == answers.expected_answer(PROMPT)
    assert a != sim.expected_answer("Explain how tides work on distant moons")
    lines = a.splitlines()
    assert lines[0].startswith("# ") and any(x.startswith("## ") for x in lines)
    assert any(x.startswith("- ") for x in lines) and any(x.startswith("1. ") for x in lines)
    assert "```python" in a and "owls hunting at night" in a
    assert "turn 3" in sim.expected_answer(PROMPT, turn=3) and "turn" not in a.split("\n\n")[1]
    assert answers.chat_title(PROMPT) != PROMPT


def test_config_over_http_and_set(sim):
    assert get_json(sim, "/sim/health")["ok"] is True
    assert (
        post_json(sim, "/sim/config", {"api_shape": "2026-06", "answer_seconds": 0.3})["api_shape"]
        == "2026-06"
    )
    chat_id, _ = send(sim, PROMPT)
    assert "currentId" in finished(sim, chat_id)["data"]["chat"]["history"]
    status, _, text = raw(sim, "POST", "/sim/config", {"bogus": 1})
    assert status == 400 and "bogus" in text
    with pytest.raises(ValueError):
        sim.set(scenario="nope")


def test_pages_and_static(sim):
    status, _, page = raw(sim, "GET", "/")
    assert status == 200 and '"ui": "live-2026-08"' in page and "/static/app.js" in page
    sim.set(ui="legacy", url_delay=1.5)
    assert '"ui": "legacy", "url_delay": 1.5' in raw(sim, "GET", "/c/local")[2]
    # The page's settling time is chats.PAGE_SETTLE, handed to app.js (its one definition).
    from pipeline.simulator.chats import PAGE_SETTLE

    assert (
        f'"settle_ms": {round(PAGE_SETTLE * 1000)}' in page
        and "CFG.settle_ms" in raw(sim, "GET", "/static/app.js")[2]
    )
    for name in ("app.js", "view.js", "markdown.js", "app.css"):
        assert raw(sim, "GET", f"/static/{name}")[0] == 200
    assert raw(sim, "GET", "/static/../server.py")[0] == 404
    assert raw(sim, "GET", "/nowhere")[0] == 404


def test_router_paths_are_dispatched(sim):
    # The router simulator is another module; whatever it answers, it must not be the chat app.
    status, _, text = raw(sim, "GET", "/api/health")
    assert status in (200, 401, 404) and "app.js" not in text


# -- one real browser ------------------------------------------------------------------------------
@pytest.mark.browser
def test_browser_current_ui_smoke():
    from pipeline.engines.qwen.browser import playwright_driver

    args = [
        "--no-sandbox",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-gpu",
    ]
    with (
        Simulator(answer_seconds=0.8, thinking_seconds=0.3, url_delay=0.3).start() as sim,
        playwright_driver() as p,
    ):
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        try:
            page = browser.new_page()
            page.goto(sim.base_url + "/")
            page.fill("textarea.message-input-textarea", PROMPT)
            page.click('button[aria-label="Send"]')
            page.wait_for_url("**/c/*", timeout=5000)
            chat_id = urlsplit(page.url).path.split("/")[-1]
            assert chat_id in sim.chat_ids()
            page.wait_for_selector('[aria-label="Stop"]', state="visible", timeout=3000)
            page.wait_for_selector(
                ".qwen-chat-message-assistant .copy-response-button", state="attached", timeout=10000
            )
            assert not page.is_visible('[aria-label="Stop"]')
            html = page.inner_html(".qwen-chat-message-assistant .phase-answer .qwen-markdown")
            assert "<h1>" in html and "<li>" in html and "<pre>" in html
            assert [e["prompt"] for e in sim.sends()] == [PROMPT]
        finally:
            browser.close()


# -- the autumn-2026 site: only the frontend's own headers are answered ------------------------------
BAD_REQUEST = {"success": False, "data": {"code": "Bad_Request", "details": "Bad_Request"}}


@pytest.mark.parametrize(
    "missing",
    [
        {"version": None},
        {"version": "0.0.1"},
        {"x-request-id": None},
        {"x-request-id": "not-a-uuid"},
        {"source": None},
        {"bx-v": None},
        {"timezone": None},
    ],
    ids=["no-version", "old-version", "no-request-id", "bad-request-id", "no-source", "no-bx-v", "no-tz"],
)
def test_a_call_without_the_frontends_headers_is_bad_request(sim, missing):
    assert get_json(sim, "/api/v2/users/status", missing) == BAD_REQUEST
    assert get_json(sim, "/api/v2/chats/?page=1", missing) == BAD_REQUEST
    assert len(sim.header_refusals()) == 2
    assert get_json(sim, "/api/v2/users/status") == {"success": True, "data": True}


def test_a_request_id_is_good_once(sim):
    once = frontend_headers(sim)
    assert get_json(sim, "/api/v2/users/status", once)["success"] is True
    assert get_json(sim, "/api/v2/users/status", once) == BAD_REQUEST


def test_a_send_without_the_headers_is_refused_and_in_the_ledger(sim):
    chat_id = post_json(sim, "/api/v2/chats/new")["data"]["id"]
    body = {"stream": True, "chat_id": chat_id, "messages": [{"role": "user", "content": PROMPT}]}
    reply = post_json(sim, f"/api/v2/chat/completions?chat_id={chat_id}", body, {"version": None})
    assert reply == BAD_REQUEST
    assert sim.sends() == []
    assert [entry["scenario"] for entry in sim.ledger()] == ["bad_request"]


def test_a_frontend_release_makes_the_old_build_stale(sim):
    old = sim.store.snapshot().frontend_version
    new = sim.release_frontend()
    assert new != old
    assert get_json(sim, "/api/v2/users/status", {"version": old}) == BAD_REQUEST
    assert get_json(sim, "/api/v2/users/status")["data"] is True  # the new build
    assert f'"version": "{new}"' in raw(sim, "GET", "/")[2]  # pages served now carry the new one


def test_each_run_has_a_build_of_its_own():
    builds = set()
    for _ in range(4):
        with Simulator(**FAST).start() as one:
            builds.add(one.store.snapshot().frontend_version)
    assert len(builds) > 1


def test_strict_headers_can_be_turned_off():
    with Simulator(strict_headers=False, **FAST).start() as lax:
        assert get_json(lax, "/api/v2/users/status", {"version": None, "x-request-id": None})["data"] is True


# -- the completion's stream -------------------------------------------------------------------------
def sse_frames(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def test_a_send_is_answered_with_the_answer_as_a_stream():
    with Simulator(**{**FAST, "stream": True}).start() as sim:
        chat_id = post_json(sim, "/api/v2/chats/new")["data"]["id"]
        body = {"stream": True, "chat_id": chat_id, "messages": [{"role": "user", "content": PROMPT}]}
        status, headers, text = raw(sim, "POST", f"/api/v2/chat/completions?chat_id={chat_id}", body)
        assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
        frames = sse_frames(text)
        created = frames[0]["response.created"]
        assert created["chat_id"] == chat_id and created["model"]
        deltas = [f["choices"][0]["delta"] for f in frames[1:]]
        answer = "".join(d["content"] for d in deltas if d["phase"] == "answer")
        assert answer == sim.expected_answer(PROMPT)
        # "finished" in the thinking phase ends only the thinking; the last frame ends the answer.
        thinking_end = [
            i for i, d in enumerate(deltas) if d["phase"] != "answer" and d["status"] == "finished"
        ]
        assert thinking_end and thinking_end[0] < len(deltas) - 1
        assert deltas[-1] == {"role": "assistant", "content": "", "phase": "answer", "status": "finished"}
        # The chat's JSON, read afterwards, holds the same answer.
        stored = assistant(get_json(sim, f"/api/v2/chats/{chat_id}"))
        assert answer_item(stored)["content"] == answer


def test_an_answer_cut_short_ends_its_stream_with_the_error():
    with Simulator(**{**FAST, "stream": True}).start() as sim:
        chat_id = post_json(sim, "/api/v2/chats/new")["data"]["id"]
        text = f"{PROMPT} [sim:error_banner]"
        body = {"stream": True, "chat_id": chat_id, "messages": [{"role": "user", "content": text}]}
        frames = sse_frames(raw(sim, "POST", f"/api/v2/chat/completions?chat_id={chat_id}", body)[2])
        assert "error" in frames[-1]
        assert not any(
            f.get("choices", [{}])[0].get("delta", {}).get("status") == "finished"
            and f["choices"][0]["delta"]["phase"] == "answer"
            for f in frames
            if "choices" in f
        )


# -- chats the site took but does not show (yet) ---------------------------------------------------
def listed(sim) -> list[str]:
    return [c["id"] for c in get_json(sim, "/api/v2/chats/?page=1&exclude_project=true")["data"]]


def test_read_after_write_lag_hides_a_new_chat_until_the_sites_clock_passes_it(sim):
    sim.set(read_lag=600.0)
    chat_id, _ = send(sim, PROMPT)
    assert [e["prompt"] for e in sim.ledger()] == [PROMPT], "the site took the prompt"
    assert get_json(sim, f"/api/v2/chats/{chat_id}")["data"]["code"] == "CHAT_NOT_FOUND"
    assert chat_id not in listed(sim)
    sim.set(clock_offset=601.0)  # the test moves the site's clock: no waiting
    assert get_json(sim, f"/api/v2/chats/{chat_id}")["success"] is True
    assert chat_id in listed(sim)


def test_a_vanished_chat_is_never_shown_though_its_prompt_was_taken(sim):
    sim.set(vanish_chats=True)
    chat_id, _ = send(sim, PROMPT)
    sim.set(vanish_chats=False)
    kept, _ = send(sim, PROMPT + " again")
    sim.set(clock_offset=86400.0)
    assert get_json(sim, f"/api/v2/chats/{chat_id}")["data"]["code"] == "CHAT_NOT_FOUND"
    assert listed(sim) == [kept]
    assert [e["prompt"] for e in sim.ledger()] == [PROMPT, PROMPT + " again"]


@pytest.mark.parametrize("bad", [-1.0, "soon", True])
def test_read_lag_must_be_seconds(sim, bad):
    with pytest.raises(ValueError, match="read_lag"):
        sim.set(read_lag=bad)


# -- the site's clock: the Date header, and when a chat last changed -------------------------------
def test_the_date_header_is_the_sites_clock(sim):
    sim.set(clock_offset=-3600.0)
    _, headers, _ = raw(sim, "GET", "/api/v2/chats/?page=1&exclude_project=true")
    assert abs(parsedate_to_datetime(headers["Date"]).timestamp() - (time.time() - 3600)) < 5


def test_updated_at_is_the_answers_last_stored_change_and_keeps_its_stamp_when_the_clock_moves(sim):
    sim.set(answer_seconds=1.2, clock_offset=-120.0)
    chat_id, _ = send(sim, PROMPT)
    sent_at = assistant(get_json(sim, f"/api/v2/chats/{chat_id}"))["timestamp"]
    body = finished(sim, chat_id)
    assert body["data"]["updated_at"] > sent_at  # the answer ended a whole second after the send
    sim.set(clock_offset=0.0)
    again = get_json(sim, f"/api/v2/chats/{chat_id}")["data"]
    assert again["updated_at"] == body["data"]["updated_at"] < time.time() - 100
    listed_item = get_json(sim, "/api/v2/chats/?page=1&exclude_project=true")["data"][0]
    assert listed_item["updated_at"] == again["updated_at"]


def test_finish_early_says_finished_while_the_text_still_grows_and_stamps_each_change(sim):
    sim.set(answer_seconds=20.0, finish_early=600.0)
    chat_id, _ = send(sim, PROMPT)

    def read():
        return assistant(get_json(sim, f"/api/v2/chats/{chat_id}"))

    first = wait_for(lambda: (m := read())["content"] and m)
    assert first["done"] is True and answer_item(first)["status"] == "finished"
    later = wait_for(lambda: len((m := read())["content"]) > len(first["content"]) and m)
    assert later["content"].startswith(first["content"])  # the text moved under "finished"
    now = time.time()
    assert now - 3 <= get_json(sim, f"/api/v2/chats/{chat_id}")["data"]["updated_at"] <= now + 1
