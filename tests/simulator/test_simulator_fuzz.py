"""The simulator's fuzzing mode (pipeline/simulator/fuzz.py) over real HTTP, no browser: every
fault kind at every step its table names, what the site really did beside it, seeds, and the
option's checks."""

from __future__ import annotations

import http.client
import json
import os

import pytest
from test_simulator_http import frontend_headers, raw, send

from pipeline.errors import UsageProblem
from pipeline.simulator import Simulator, fuzz
from pipeline.simulator.options import SimulatorOptions

PROMPT = "Write an article about herons fishing at dawn"
FAST = {"answer_seconds": 0.2, "thinking_seconds": 0.05, "url_delay": 0.05, "stream": True}
KNOWN_CODES = {"CHAT_NOT_FOUND", "RateLimited", "Bad_Request", "Unauthorized", "CHAT_IN_PROGRESS"}
ACTIONS = ("new_chat", "completion", "stream", "delete")  # a second request needs a chat of its own
CASES = [(kind, step) for kind, fault in fuzz.FAULTS.items() for step in fault.steps]


@pytest.fixture(scope="module")
def fuzz_sim():
    with Simulator(**FAST).start() as running:
        yield running


@pytest.fixture
def site(fuzz_sim, monkeypatch):
    monkeypatch.setattr(fuzz, "SLOW_SECONDS", (0.1, 0.1))  # a slow answer, without the wait
    fuzz_sim.set(fuzz=None, fault="", fuzz_rate=fuzz.DEFAULT_RATE)
    return fuzz_sim


def frames(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("data:"):
            try:
                out.append(json.loads(line[5:]))
            except ValueError:
                out.append({"unreadable": line})
    return out


def delta(frame: dict) -> dict:
    try:
        change = frame["choices"][0]["delta"]
    except (KeyError, IndexError, TypeError):
        return {}
    return change if isinstance(change, dict) else {}


def finished(items: list[dict]) -> bool:
    return any(delta(f).get("phase") == "answer" and delta(f).get("status") == "finished" for f in items)


def completion_body(chat_id: str, prompt: str = PROMPT) -> dict:
    return {
        "chat_id": chat_id,
        "messages": [{"role": "user", "content": prompt}],
        "parent_id": None,
        "stream": True,
    }


def request_step(sim, step: str, chat_id: str) -> tuple[int, dict, str]:
    """One request of `step` as the page makes it."""
    if step == "new_chat":
        return raw(sim, "POST", "/api/v2/chats/new", {})
    if step in ("completion", "stream"):
        return raw(sim, "POST", f"/api/v2/chat/completions?chat_id={chat_id}", completion_body(chat_id))
    if step == "chat_json":
        return raw(sim, "GET", f"/api/v2/chats/{chat_id}")
    if step == "chat_list":
        return raw(sim, "GET", "/api/v2/chats/?page=1&exclude_project=true")
    if step == "login_check":
        return raw(sim, "GET", "/api/v2/users/status")
    if step == "delete":
        return raw(sim, "DELETE", f"/api/v2/chats/{chat_id}")
    if step == "chat_page":
        return raw(sim, "GET", f"/c/{chat_id}")
    raise AssertionError(f"no request for step {step}")


def made_chat(sim, sent: bool) -> str:
    """A chat of the site's: empty (to send into), or holding a sent prompt (to read or delete;
    its stream is left unread: the answer grows on the site all the same)."""
    _status, _, text = raw(sim, "POST", "/api/v2/chats/new", {})
    chat_id = json.loads(text)["data"]["id"]
    if sent:
        conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
        body = json.dumps(completion_body(chat_id, f"{PROMPT} (an earlier one)"))
        headers = {"Content-Type": "application/json", **frontend_headers(sim)}
        conn.request("POST", f"/api/v2/chat/completions?chat_id={chat_id}", body=body, headers=headers)
        assert conn.getresponse().status == 200
        conn.close()
    return chat_id


# What each kind does to the answer: (status, headers, text, the fault's record, the step) ->
# a failed expectation in words, or "". Every kind of the table must have one (the enumeration
# test below fails for a kind added without its check).
def _unknown_code(status, _headers, text, _record, _step):
    body = json.loads(text)
    code = body.get("data", {}).get("code")
    return (
        ""
        if status == 200 and body.get("success") is False and code not in KNOWN_CODES
        else f"{status} {text}"
    )


def _html(low: int, high: int):
    def check(status, headers, text, _record, _step):
        ok = (
            low <= status <= high
            and headers.get("Content-Type", "").startswith("text/html")
            and "<html" in text
        )
        return "" if ok else f"{status} {headers.get('Content-Type')} {text[:80]}"

    return check


def _widget(status, _headers, text, record, _step):
    return "" if status == 200 and record["detail"] in text and "<html" in text else f"{status} {text[:80]}"


def _redirect(status, headers, _text, record, _step):
    ok = (
        status == 302
        and headers.get("Location") == record["detail"]
        and record["detail"].startswith("/fuzz/")
    )
    return "" if ok else f"{status} {headers.get('Location')}"


def _body_change(prefix: str):
    def check(status, _headers, text, record, step):
        if step == "stream":
            return (
                ""
                if finished(frames(text)) or "dropped" in record["detail"] or "is now" in record["detail"]
                else text
            )
        json.loads(text)  # still JSON
        return "" if status == 200 and record["detail"].startswith(prefix) else f"{record['detail']!r}"

    return check


def _other_chat(status, _headers, text, record, _step):
    shown = json.loads(text)["data"]["id"]
    return "" if status == 200 and shown != record["chat_id"] else f"chat {shown} for {record['chat_id']}"


def _cut(_status, _headers, text, _record, _step):
    return "" if not finished(frames(text)) else "the stream still finished"


def _unknown_phase(_status, _headers, text, _record, _step):
    phases = {delta(f).get("phase") for f in frames(text)}
    return "" if any(str(p).startswith("fuzz_") for p in phases) and finished(frames(text)) else f"{phases}"


def _unknown_status(_status, _headers, text, _record, _step):
    statuses = {delta(f).get("status") for f in frames(text)} - {None, "typing", "finished"}
    return "" if statuses else "no unknown status"


def _duplicate(_status, _headers, text, _record, _step):
    items = [json.dumps(f, sort_keys=True) for f in frames(text)]
    return "" if any(a == b for a, b in zip(items, items[1:], strict=False)) else "no frame twice in a row"


def _reorder(_status, _headers, text, record, _step):
    return "" if "after the next" in record["detail"] and finished(frames(text)) else record["detail"]


def _slow(status, _headers, _text, record, _step):
    return (
        "" if record["detail"].startswith("0.1 s late") and status < 400 else f"{status} {record['detail']}"
    )


EXPECTED = {
    "unknown_code": _unknown_code,
    "unknown_code_taken": _unknown_code,
    "html_4xx": _html(400, 499),
    "html_5xx": _html(500, 599),
    "html_5xx_taken": _html(500, 599),
    "unknown_widget": _widget,
    "redirect": _redirect,
    "unknown_field": _body_change("added fuzz_"),
    "missing_field": _body_change("dropped ."),
    "wrong_type": _body_change("."),
    "other_chat": _other_chat,
    "cut_stream": _cut,
    "unknown_phase": _unknown_phase,
    "unknown_status": _unknown_status,
    "duplicate_frame": _duplicate,
    "reorder_frames": _reorder,
    "slow": _slow,
}


def test_every_fault_kind_has_its_check():
    assert set(EXPECTED) == set(fuzz.FAULTS)
    assert {step for _kind, step in CASES} == set(fuzz.STEPS)


@pytest.mark.parametrize(("kind", "step"), CASES, ids=[f"{step}:{kind}" for kind, step in CASES])
def test_a_forced_fault_comes_once_and_the_ledger_says_what_the_site_did(site, kind, step):
    chat_id = made_chat(site, sent=step in ("chat_json", "delete", "chat_page"))
    chats_before, sends_before = set(site.chat_ids()), len(site.ledger())
    site.set(fault=f"{step}:{kind}")

    status, headers, text = request_step(site, step, chat_id)

    met = site.faults()
    assert [(r["step"], r["kind"], r["forced"]) for r in met[-1:]] == [(step, kind, True)]
    record = met[-1]
    assert record["taken"] is fuzz.FAULTS[kind].taken
    problem = EXPECTED[kind](status, headers, text, record, step)
    assert not problem, f"{step}:{kind}: {problem}"
    # What the site really did, beside the fault.
    if step in ("completion", "stream"):
        entry = site.ledger()[sends_before]
        assert entry["accepted"] is fuzz.FAULTS[kind].taken, entry
        if step == "completion":
            assert entry.get("fault") == kind, entry
    if step == "new_chat":
        assert (len(set(site.chat_ids()) - chats_before) == 1) is fuzz.FAULTS[kind].taken
    if step == "delete":
        assert (chat_id not in site.chat_ids()) is fuzz.FAULTS[kind].taken
    # Once: the next request of the step is the site's own answer again.
    if step in ("completion", "stream"):
        made_chat(site, sent=True)  # a send whose answer and stream are the site's own
    else:
        again = made_chat(site, sent=True) if step in ACTIONS else chat_id
        assert request_step(site, step, again)[0] == 200
    assert len(site.faults()) == len(met)


def test_a_seed_gives_each_step_the_same_faults_whatever_the_order_of_the_steps(monkeypatch):
    monkeypatch.setattr(fuzz, "SLOW_SECONDS", (0.1, 0.1))

    def faults_met(order: list[str]) -> list[tuple]:
        with Simulator(**FAST, fuzz=11, fuzz_rate=0.5).start() as sim:
            for step in order:
                request_step(sim, step, "")
            return sorted((r["step"], r["kind"], r["detail"]) for r in sim.faults())

    interleaved = faults_met(["chat_list", "login_check"] * 12)
    grouped = faults_met(["chat_list"] * 12 + ["login_check"] * 12)
    assert interleaved == grouped
    assert 4 <= len(interleaved) <= 20, interleaved  # a rate of 0.5 over 24 requests
    assert len({kind for _step, kind, _detail in interleaved}) > 1


def test_without_a_seed_or_a_forced_fault_the_site_answers_as_itself(site):
    faults, sends = len(site.faults()), len(site.ledger())
    chat_id, _reply = send(site, PROMPT)
    for step in ("chat_json", "chat_list", "login_check", "chat_page"):
        assert request_step(site, step, chat_id)[0] == 200
    assert len(site.faults()) == faults
    assert [entry.get("fault") for entry in site.ledger()[sends:]] == [None]


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"fault": "completion:nothing"}, "--fault 'completion:nothing': no fault kind 'nothing'"),
        ({"fault": "upload:html_5xx"}, "no step 'upload'"),
        ({"fault": "stream:html_5xx"}, "html_5xx does not come at stream"),
        ({"fault": "completion:html_600"}, "no fault kind 'html_600'"),
        ({"fuzz_rate": 1.5}, "--fuzz-rate 1.5: choose a probability from 0 to 1"),
    ],
)
def test_a_bad_fuzz_option_is_one_clear_line_naming_it(given, words):
    with pytest.raises(UsageProblem) as refused:
        SimulatorOptions(**given).checked()
    assert words in str(refused.value)


def test_html_nnn_forces_that_status():
    assert fuzz.parse_forced("completion:html_500, chat_json:html_404") == [
        ("completion", "html_5xx", 500),
        ("chat_json", "html_4xx", 404),
    ]


FUZZ_RATE = 1.0  # for the fuzzed_sim fixture (tests/conftest.py): every request meets a fault


def test_the_fuzzed_sim_fixture_fuzzes_at_the_modules_rate_and_sim_turns_it_off(fuzzed_sim, monkeypatch):
    monkeypatch.setattr(fuzz, "SLOW_SECONDS", (0.1, 0.1))
    met = len(fuzzed_sim.faults())
    for _ in range(3):
        request_step(fuzzed_sim, "login_check", "")
    assert [f["step"] for f in fuzzed_sim.faults()[met:]] == ["login_check"] * 3
    assert fuzzed_sim.config()["fuzz"] == int(os.environ.get("QWENPIPE_FUZZ_SEED", "0"))


def test_the_sim_fixture_starts_with_fuzzing_off(sim):
    assert (sim.config()["fuzz"], sim.config()["fault"]) == (None, "")
