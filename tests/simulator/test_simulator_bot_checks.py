"""The bot check's later shapes in the simulator (pipeline/simulator/botchecks.py), over plain
HTTP: what each answers a send with, what the addresses it names show, and the ledger."""

from __future__ import annotations

import http.client
import json
import re
import uuid

import pytest

from pipeline.simulator import Simulator
from pipeline.simulator.chats import BX_V
from pipeline.simulator.options import SimulatorOptions
from pipeline.simulator.settings import SCENARIOS

PROMPT = "Write an article about owls hunting at night in the forest"


@pytest.fixture
def sim():
    with Simulator(answer_seconds=0.2, thinking_seconds=0.1, url_delay=0.1, stream=False).start() as running:
        yield running


def raw(sim, method: str, path: str, body=None) -> tuple[int, dict, str]:
    """One request as the page makes it (its headers), without following redirects."""
    headers = {
        "Content-Type": "application/json",
        "source": "web",
        "version": sim.store.snapshot().frontend_version,
        "bx-v": BX_V,
        "timezone": "GMT+0100",
        "x-request-id": str(uuid.uuid4()),
    }
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
    res = conn.getresponse()
    text = res.read().decode()
    conn.close()
    return res.status, {k.lower(): v for k, v in res.getheaders()}, text


def send(sim, prompt: str) -> tuple[int, dict, str]:
    _, _, made = raw(sim, "POST", "/api/v2/chats/new", {})
    chat_id = json.loads(made)["data"]["id"]
    body = {"chat_id": chat_id, "messages": [{"role": "user", "content": prompt}], "parent_id": None}
    return raw(sim, "POST", f"/api/v2/chat/completions?chat_id={chat_id}", body)


def ledger(sim) -> list[tuple[bool, str]]:
    return [(e["accepted"], e["scenario"]) for e in sim.ledger()]


@pytest.mark.parametrize("name", ["punish_page", "connect_puzzle", "qr_deny", "auth_redirect"])
def test_each_shape_is_a_scenario_of_its_own_and_per_prompt(name):
    assert name in SCENARIOS
    assert SimulatorOptions(scenario=name).checked().scenario == name  # qwenpipe simulate --scenario


def test_the_check_as_a_page_sends_the_browser_to_the_connect_puzzle(sim):
    status, headers, page = send(sim, f"{PROMPT} [sim:punish_page]")
    assert status == 200 and headers["content-type"].startswith("text/html")
    target = re.search(r'window\.location\.replace\("([^"]+)"\)', page).group(1)
    assert target.startswith("/_____tmd_____/punish?x5secdata=") and target.endswith("&action=captchaconnect")
    assert ledger(sim) == [(False, "punish_page")] and sim.sends() == []
    status, _, puzzle = raw(sim, "GET", target)
    assert status == 200 and "Please connect them in order" in puzzle and 'role="dialog"' in puzzle
    assert "nc_1_n1z" not in puzzle  # no slider handle


def test_the_connect_puzzle_comes_as_the_checks_json(sim):
    status, _, text = send(sim, f"{PROMPT} [sim:connect_puzzle]")
    body = json.loads(text)
    assert status == 200 and body["ret"][0] == "FAIL_SYS_USER_VALIDATE" and "success" not in body
    assert "action=captchaconnect" in body["data"]["url"]
    assert ledger(sim) == [(False, "connect_puzzle")]


def test_the_qr_deny_page_answers_the_send_itself(sim):
    sim.set(scenario="qr_deny")
    status, headers, page = send(sim, PROMPT)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "QR code" in page and "/_____tmd_____/punish?" in page
    assert ledger(sim) == [(False, "qr_deny")]


def test_the_send_redirected_under_auth_lands_on_a_page_that_is_not_the_sign_in(sim):
    status, headers, _ = send(sim, f"{PROMPT} [sim:auth_redirect]")
    assert status == 302 and headers["location"].startswith("/auth/verify?x5secdata=")
    status, _, page = raw(sim, "GET", headers["location"])
    assert status == 200 and "login-container" not in page and "Security verification" in page
    assert ledger(sim) == [(False, "auth_redirect")]


def test_a_check_after_the_send_takes_it_then_answers_everything_with_the_leaving_page(sim):
    status, _, text = send(sim, f"{PROMPT} [sim:punish_after_send]")
    assert status == 200 and json.loads(text)["success"] is True
    assert ledger(sim) == [(True, "punish_after_send")]
    for path in ("/", "/api/v2/chats/?page=1"):
        status, headers, page = raw(sim, "GET", path)
        assert headers["content-type"].startswith("text/html") and "action=captchaconnect" in page, path
    sim.set(solve_slider="")  # solving the check ends it
    status, headers, _ = raw(sim, "GET", "/api/v2/chats/?page=1")
    assert headers["content-type"] == "application/json"
