"""The simulator with several accounts (`--accounts a,b,c`), over real HTTP (no browser): each
token names its account, each account has its own chats, chat list and quota, another account's
chat is CHAT_NOT_FOUND (and counted as an affinity violation), and the ledger names the sender."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from test_simulator_http import FAST, PROMPT, get_json, post_json, raw

from pipeline.errors import UsageProblem
from pipeline.setup.login import parse_login_file
from pipeline.simulator import Simulator
from pipeline.simulator.__main__ import parse_args
from pipeline.simulator.api import make_token, token_payload
from pipeline.simulator.chats import DAY, not_found_body
from pipeline.simulator.options import SimulatorOptions


@pytest.fixture
def sim():
    with Simulator(**FAST, accounts=("a", "b", "c")).start() as running:
        yield running


def token_of(sim, account: str) -> str:
    return sim.login_state(account)["cookies"][0]["value"]


def as_(sim, account: str) -> dict:
    """The headers a page of `account` sends (its cookie and its Bearer header)."""
    token = token_of(sim, account)
    return {"Cookie": f"token={token}", "Authorization": f"Bearer {token}"}


def send_as(sim, headers: dict, prompt: str = PROMPT, chat_id: str | None = None, parent_id=None):
    """What the page does for one account: make a chat (unless given), post the message."""
    if chat_id is None:
        made = post_json(sim, "/api/v2/chats/new", headers=headers)
        assert made["success"], made
        chat_id = made["data"]["id"]
    body = {"chat_id": chat_id, "messages": [{"role": "user", "content": prompt}], "parent_id": parent_id}
    return chat_id, post_json(sim, f"/api/v2/chat/completions?chat_id={chat_id}", body, headers)


def logged_in(sim, headers: dict) -> bool:
    return get_json(sim, "/api/v2/users/status", headers)["data"] is True


# -- tokens and sign-in --------------------------------------------------------------------------
def test_a_login_token_names_its_account_and_requests_are_answered_for_it(sim):
    headers = as_(sim, "b")
    assert token_payload(token_of(sim, "b"))["id"] == "b"
    assert logged_in(sim, headers)
    user = get_json(sim, "/api/v1/auths/", headers)["data"]
    assert (user["id"], user["email"]) == ("b", "b@example.com")


@pytest.mark.parametrize(
    "token",
    [
        None,
        make_token(account="zed"),  # an account the run does not have
        make_token(),  # the anonymous user of a run without accounts
        make_token(time.time() - 8 * DAY, account="a"),  # expired
        "not-a-jwt",
    ],
    ids=["no token", "unknown account", "anonymous token", "expired", "garbage"],
)
def test_no_unknown_or_expired_token_is_logged_out_on_pages_and_the_api(sim, token):
    headers = {"Cookie": f"token={token}", "Authorization": f"Bearer {token}"} if token else {}
    assert not logged_in(sim, headers)
    status, page_headers, _ = raw(sim, "GET", "/", headers=headers)
    assert (status, page_headers["Location"]) == (302, "/auth?action=signin")
    assert post_json(sim, "/api/v2/chats/new", headers=headers)["data"]["code"] == "Unauthorized"
    assert get_json(sim, "/api/v2/chats/?page=1", headers)["data"]["code"] == "Unauthorized"


def test_sign_in_maps_the_emails_local_part_to_its_account_and_refuses_others(sim):
    status, headers, text = raw(
        sim, "POST", "/api/v1/auths/signin", {"email": "C@example.com", "password": "x"}
    )
    token = json.loads(text)["data"]["token"]
    assert token_payload(token)["id"] == "c"
    assert f"token={token}" in headers["Set-Cookie"]
    assert logged_in(sim, {"Cookie": f"token={token}"})
    refused = post_json(sim, "/api/v1/auths/signin", {"email": "mallory@example.com", "password": "x"})
    assert refused["success"] is False and "token" not in refused["data"]


def test_a_token_renewed_near_its_end_stays_the_same_accounts():
    with Simulator(**FAST, accounts=("a", "b"), renew_hours=24).start() as sim:
        old = make_token(time.time() - 160 * 3600, hours=168, account="b")  # 8 h left
        renewed = get_json(sim, "/api/v1/auths/", {"Cookie": f"token={old}"})["data"]["token"]
        assert token_payload(renewed)["id"] == "b" and renewed != old
        assert logged_in(sim, {"Cookie": f"token={renewed}"})


def test_with_the_auth_header_required_another_accounts_cookie_is_not_enough():
    with Simulator(**FAST, accounts=("a", "b"), require_auth_header=True).start() as sim:
        cookie_only = {"Cookie": f"token={token_of(sim, 'a')}"}
        assert get_json(sim, "/api/v2/chats/?page=1", cookie_only)["data"]["code"] == "Unauthorized"
        assert get_json(sim, "/api/v2/chats/?page=1", as_(sim, "a"))["success"] is True


# -- chats belong to their account ---------------------------------------------------------------
def test_another_accounts_chat_answers_chat_not_found_exactly_like_a_missing_chat(sim):
    a, b = as_(sim, "a"), as_(sim, "b")
    chat_id, reply = send_as(sim, a)
    assert reply["success"] is True
    missing = "0" * 8 + "-0000-4000-8000-" + "0" * 12
    assert get_json(sim, f"/api/v2/chats/{chat_id}", b) == not_found_body(chat_id)
    assert get_json(sim, f"/api/v2/chats/{missing}", b) == not_found_body(missing)
    _, into = send_as(sim, b, "a second turn from the wrong account", chat_id, reply["data"]["message_id"])
    assert into == not_found_body(reply["data"]["message_id"])
    assert post_json(sim, f"/api/v2/chats/{chat_id}/stop", headers=b)["success"] is False
    assert get_json(sim, f"/api/v2/chats/{chat_id}", a)["success"] is True  # its own account reads it
    report = sim.account_report()
    assert (report["a"]["affinity_violations"], report["b"]["affinity_violations"]) == (0, 3)
    health = get_json(sim, "/sim/health")
    assert health["affinity_violations"] == 3 and health["accounts"]["b"]["affinity_violations"] == 3
    assert [e["account"] for e in sim.ledger()] == ["a", "b"]
    assert [e["accepted"] for e in sim.ledger()] == [True, False]


def test_each_account_lists_only_its_own_chats(sim):
    a, b = as_(sim, "a"), as_(sim, "b")
    first, _ = send_as(sim, a, "first of a")
    second, _ = send_as(sim, a, "second of a")
    of_b, _ = send_as(sim, b, "one of b")
    assert [c["id"] for c in get_json(sim, "/api/v2/chats/?page=1", a)["data"]] == [second, first]
    assert [c["id"] for c in get_json(sim, "/api/v2/chats/?page=1", b)["data"]] == [of_b]
    assert get_json(sim, "/api/v2/chats/?page=1", as_(sim, "c"))["data"] == []
    assert sim.affinity_violations() == 0


def test_the_ledger_names_the_account_of_each_prompt_and_none_when_logged_out(sim):
    send_as(sim, as_(sim, "c"), "from c")
    send_as(sim, as_(sim, "a"), "from a")
    body = {"messages": [{"role": "user", "content": "from nobody"}]}
    post_json(sim, "/api/v2/chat/completions?chat_id=x", body)
    entries = [(e["prompt"], e["account"], e["accepted"]) for e in get_json(sim, "/sim/ledger")]
    assert entries == [("from c", "c", True), ("from a", "a", True), ("from nobody", None, False)]


def test_a_run_without_accounts_is_one_anonymous_account_as_before(tmp_path):
    with Simulator(**FAST).start() as sim:
        _, reply = send_as(sim, {})
        assert reply["success"] is True
        assert [e["account"] for e in sim.ledger()] == [""]
        assert logged_in(sim, {}) and sim.affinity_violations() == 0
        assert imported(sim.login_state(), tmp_path)  # no name: the anonymous user's login
        with pytest.raises(ValueError, match="no account 'a'"):
            sim.login_state("a")


# -- quota ---------------------------------------------------------------------------------------
def test_quota_is_per_account_per_day_then_rate_limited_with_the_hours_to_the_next_day():
    with Simulator(**FAST, accounts=("a", "b"), quota=2).start() as sim:
        a, b = as_(sim, "a"), as_(sim, "b")
        assert [send_as(sim, a, f"a {n}")[1]["success"] for n in range(2)] == [True, True]
        _, spent = send_as(sim, a, "a 3")
        hours_left = math.ceil((DAY - time.time() % DAY) / 3600)
        assert spent["data"]["code"] == "RateLimited"
        assert spent["data"]["num"] in (hours_left, hours_left - 1)  # the hour may turn meanwhile
        assert send_as(sim, b, "b 1")[1]["success"] is True  # b has its own quota
        refused = sim.ledger()[2]
        assert (refused["account"], refused["accepted"], refused["scenario"]) == ("a", False, "quota")
        assert sim.account_report()["a"]["sends_today"] == 2
        sim.set(clock_offset=DAY)  # the next (simulated) day: a may send again
        assert send_as(sim, a, "a next day")[1]["success"] is True


def test_sim_config_sets_an_accounts_quota_logs_it_out_and_clears(sim):
    a, b = as_(sim, "a"), as_(sim, "b")
    post_json(sim, "/sim/config", {"account_quotas": {"b": 1}})
    assert send_as(sim, b, "b 1")[1]["success"] is True
    assert send_as(sim, b, "b 2")[1]["data"]["code"] == "RateLimited"
    assert send_as(sim, a, "a 1")[1]["success"] is True  # no quota for a

    post_json(sim, "/sim/config", {"log_out": "a"})
    assert not logged_in(sim, a)  # every token a held is revoked
    assert logged_in(sim, b)
    assert logged_in(sim, as_(sim, "a"))  # a new login works

    send_as(sim, b, "peeking", chat_id=sim.ledger()[2]["chat_id"])  # a's chat: a violation
    assert sim.affinity_violations() == 1
    post_json(sim, "/sim/config", {"clear_accounts": True})
    assert sim.affinity_violations() == 0 and sim.config()["account_quotas"] == {}
    assert send_as(sim, b, "b again")[1]["success"] is True


def test_sim_config_refuses_an_account_the_run_does_not_have(sim):
    for change in ({"account_quotas": {"zed": 1}}, {"log_out": "zed"}):
        status, _, text = raw(sim, "POST", "/sim/config", change)
        assert status == 400 and "no account 'zed' (the accounts are: a, b, c)" in json.loads(text)["error"]


# -- login_state and the options -----------------------------------------------------------------
def imported(state: dict, folder: Path) -> dict:
    """The state as `qwenpipe login --import` reads it (UsageProblem if it would refuse it)."""
    path = folder / "state.json"
    path.write_text(json.dumps(state))
    return parse_login_file(path)


def test_login_state_is_a_storage_state_login_import_takes_signed_in_as_that_account(sim, tmp_path):
    state = imported(sim.login_state("c"), tmp_path)
    (cookie,) = state["cookies"]
    (origin,) = state["origins"]
    assert (cookie["name"], cookie["domain"], origin["origin"]) == ("token", "127.0.0.1", sim.base_url)
    assert origin["localStorage"] == [{"name": "token", "value": cookie["value"]}]
    assert logged_in(sim, {"Cookie": f"token={cookie['value']}"})
    served = get_json(sim, "/sim/login-state?account=c")
    assert token_payload(served["cookies"][0]["value"])["id"] == "c"
    with pytest.raises(ValueError, match="no account 'zed'"):
        sim.login_state("zed")


def test_accounts_and_quota_options_parse_and_bad_names_are_refused_naming_the_option():
    options = parse_args(["--accounts", "main, spare,b-2", "--quota", "3"])
    assert options.checked().account_names() == ("main", "spare", "b-2") and options.quota == 3
    assert SimulatorOptions().account_names() == ()
    for accounts, fault in (("a,Main", "'Main' is not an account name"), ("a,a", "a name is given twice")):
        with pytest.raises(UsageProblem, match=fault):
            SimulatorOptions(accounts=accounts).checked()
    with pytest.raises(UsageProblem, match="--quota -1"):
        SimulatorOptions(quota=-1).checked()


# -- one real browser ------------------------------------------------------------------------------
@pytest.mark.browser
def test_in_a_browser_each_context_is_its_account_and_another_accounts_chat_shows_not_found():
    from pipeline.engines.qwen.browser import playwright_driver

    args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with (
        Simulator(**FAST, accounts=("a", "b")).start() as sim,
        playwright_driver() as p,
    ):
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        try:
            page_a = browser.new_context(storage_state=sim.login_state("a")).new_page()
            page_a.goto(sim.base_url + "/")
            page_a.fill("textarea.message-input-textarea", PROMPT)
            page_a.click('button[aria-label="Send"]')
            page_a.wait_for_url("**/c/*", timeout=5000)
            page_a.wait_for_selector(
                ".qwen-chat-message-assistant .copy-response-button", state="attached", timeout=10000
            )

            page_b = browser.new_context(storage_state=sim.login_state("b")).new_page()
            page_b.goto(page_a.url)
            banner = page_b.wait_for_selector(".chat-error-banner", state="visible", timeout=5000)
            assert "is not exist" in banner.inner_text()
            assert [(e["account"], e["accepted"]) for e in sim.ledger()] == [("a", True)]
            assert sim.account_report()["b"]["affinity_violations"] >= 1

            stranger = browser.new_context().new_page()
            stranger.goto(sim.base_url + "/")
            assert "/auth" in stranger.url  # no token: logged out
            stranger.fill(".login-email", "mallory@example.com")
            stranger.fill(".login-password", "x")
            stranger.click(".login-button")
            stranger.wait_for_selector(".login-error:has-text('Sign in failed')", timeout=5000)
        finally:
            browser.close()


# -- the slider and empty answers (late 2026) ------------------------------------------------------
def test_the_slider_refuses_one_accounts_sends_until_it_is_slid_and_the_ledger_says_so(sim):
    from pipeline.engines.qwen.api import classify_api_error

    sim.set(slider_accounts=["a"])
    _, refused = send_as(sim, as_(sim, "a"), "Write about the slider.")
    assert "success" not in refused and refused["ret"][0] == "FAIL_SYS_USER_VALIDATE"
    assert refused["data"]["url"].startswith("/_____tmd_____/punish?x5secdata=")
    error = classify_api_error(refused)
    assert error.code == "bot_check" and "/_____tmd_____/punish?" in str(error)
    _, taken = send_as(sim, as_(sim, "b"), "Write about the other account.")
    assert taken["success"] is True
    assert [(e["account"], e["accepted"], e["scenario"]) for e in sim.ledger()] == [
        ("a", False, "slider"),
        ("b", True, "ok"),
    ]
    assert sim.account_report()["a"]["sends_today"] == 0
    status, _, page = raw(sim, "GET", refused["data"]["url"])
    assert status == 200 and 'id="nc_1_n1z"' in page
    assert raw(sim, "POST", "/_____tmd_____/slide", {}, as_(sim, "a"))[0] == 200  # the user slid it
    assert send_as(sim, as_(sim, "a"), "Write about after the slider.")[1]["success"] is True


def test_the_slider_for_every_account_and_its_end_from_the_config(sim):
    sim.set(scenario="slider")
    assert "ret" in send_as(sim, as_(sim, "c"))[1]
    sim.set(solve_slider="c")
    assert send_as(sim, as_(sim, "c"))[1]["success"] is True
    assert "ret" in send_as(sim, as_(sim, "b"))[1]  # b did not slide
    sim.set(scenario="ok")
    with pytest.raises(ValueError, match="no account 'zed'"):
        sim.set(slider_accounts=["zed"])


def test_empty_answers_finish_with_null_content_for_one_account(sim):
    sim.set(empty_accounts=["a"], answer_seconds=0.0, thinking_seconds=0.0)
    chat_a, _ = send_as(sim, as_(sim, "a"), "Write about nothing.")
    chat_b, _ = send_as(sim, as_(sim, "b"), "Write about something.")
    time.sleep(0.5)
    empty = get_json(sim, f"/api/v2/chats/{chat_a}", as_(sim, "a"))["data"]["chat"]["messages"][-1]
    full = get_json(sim, f"/api/v2/chats/{chat_b}", as_(sim, "b"))["data"]["chat"]["messages"][-1]
    answer = [p for p in empty["content_list"] if p["phase"] == "answer"][0]
    assert (empty["content"], answer["content"], answer["status"]) == (None, None, "finished")
    assert full["content"]


def test_slider_and_empty_answer_options_name_accounts_of_the_run():
    options = parse_args(
        ["--accounts", "a,b", "--slider-accounts", "a", "--empty-accounts", "b", "--empty-answers"]
    )
    checked = options.checked()
    assert checked.account_names("slider_accounts") == ("a",) and checked.empty_answers
    with pytest.raises(UsageProblem, match="--slider-accounts 'z': 'z' is not one of --accounts"):
        SimulatorOptions(accounts="a", slider_accounts="z").checked()
    assert "slider" in parse_args(["--scenario", "slider"]).checked().scenario


# -- deleting a chat (issue 26, item 6) ----------------------------------------------------------
def delete_as(sim, headers: dict, chat_id: str, extra: dict | None = None) -> dict:
    status, _, text = raw(sim, "DELETE", f"/api/v2/chats/{chat_id}", headers={**headers, **(extra or {})})
    assert status == 200, text
    return json.loads(text)


def test_a_deleted_chat_leaves_its_accounts_list_and_reads_as_not_found(sim):
    a = as_(sim, "a")
    chat_id, _ = send_as(sim, a)
    assert delete_as(sim, a, chat_id) == {"success": True, "data": {"status": True}}
    assert get_json(sim, f"/api/v2/chats/{chat_id}", a) == not_found_body(chat_id)
    assert chat_id not in [c["id"] for c in get_json(sim, "/api/v2/chats/?page=1", a)["data"]]
    assert sim.deleted_chats() == [chat_id] and sim.requests()["chat_delete"] == 1
    assert delete_as(sim, a, chat_id) == not_found_body(chat_id)  # gone: nothing to delete again
    assert sim.deleted_chats() == [chat_id]


def test_only_the_account_that_made_a_chat_can_delete_it(sim):
    chat_id, _ = send_as(sim, as_(sim, "a"))
    assert delete_as(sim, as_(sim, "b"), chat_id) == not_found_body(chat_id)
    assert sim.deleted_chats() == [] and chat_id in sim.chat_ids()
    assert sim.account_report()["b"]["affinity_violations"] == 1


def test_a_delete_needs_the_frontends_headers_like_every_api_call(sim):
    a = as_(sim, "a")
    chat_id, _ = send_as(sim, a)
    refused = delete_as(sim, a, chat_id, {"version": "0.0.1"})
    assert refused["data"]["code"] == "Bad_Request" and chat_id in sim.chat_ids()
    assert [(m, p) for m, p, _ in sim.header_refusals()] == [("DELETE", f"/api/v2/chats/{chat_id}")]


def test_failing_deletes_fail_the_next_ones_then_deletes_go_through(sim):
    a = as_(sim, "a")
    chat_id, _ = send_as(sim, a)
    sim.set(failing_deletes=1)
    failed = delete_as(sim, a, chat_id)
    assert failed["success"] is False and chat_id in sim.chat_ids() and sim.deleted_chats() == []
    assert delete_as(sim, a, chat_id)["success"] is True and sim.deleted_chats() == [chat_id]
    with pytest.raises(ValueError, match="failing_deletes must be a count"):
        sim.set(failing_deletes=-1)
