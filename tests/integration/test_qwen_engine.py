"""QwenEngine in real headless Chromium against the simulator: one browser for the whole file."""

from __future__ import annotations

import json
import os
import socket
import stat
import time
import uuid

import pytest
from browser_helpers import browser_config, page_tabs, users_chromium
from sockets import devtools_clients

from pipeline.config import Qwen
from pipeline.engines.base import Answer, Generating, HardError, QuotaSpent, TransientError
from pipeline.engines.qwen.browser import BrowserSession, playwright_driver
from pipeline.engines.qwen.engine import QwenEngine
from pipeline.engines.qwen.steady import API_STABLE_SECONDS

pytestmark = pytest.mark.browser

THINKING_SECONDS = 0.3
ANSWER_SECONDS = 1.5


SIMULATOR = {"answer_seconds": ANSWER_SECONDS, "thinking_seconds": THINKING_SECONDS, "url_delay": 0.2}


@pytest.fixture(scope="module", autouse=True)
def launches_at_start():
    """Browsers launched before this module's first test: an autouse fixture of the module's
    scope comes before the module's shared `session` (tests/integration/conftest.py)."""
    return BrowserSession.launches


def prompt(topic: str = "tea", token: str = "") -> str:
    return f"Write a short article about {topic} {uuid.uuid4().hex[:8]}. {token}".strip()


def sends_of(sim, text: str) -> list[dict]:
    return [entry for entry in sim.sends() if entry["prompt"] == text]


def ledger_of(sim, text: str) -> list[dict]:
    return [entry for entry in sim.ledger() if entry["prompt"] == text]


def check_until_done(engine, url: str, seconds: float = 20) -> tuple[Answer, list]:
    """check() again and again like cron would, keeping what it said before the Answer."""
    said, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = engine.check(url)
        if isinstance(result, Answer):
            return result, said
        said.append(result)
        time.sleep(0.3)
    raise AssertionError(f"no answer after {seconds} s: {said[-3:]}")


# -- the happy path --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "api_shape, ui",
    [("2026-08", "current"), ("2026-06", "current"), ("2026-08", "legacy"), ("2026-06", "legacy")],
)
def test_send_then_generating_then_the_raw_markdown(sim, engine, api_shape, ui):
    # Held one word short of its end until released: the first look finds it generating however
    # slow the machine is.
    sim.set(api_shape=api_shape, ui=ui, hold_answers=True)
    text = prompt(f"{api_shape} {ui}")
    url = engine.send(text)
    assert url.startswith(f"{sim.base_url}/c/")
    assert isinstance(engine.check(url), Generating)
    sim.set(hold_answers=False)

    answer, said = check_until_done(engine, url)

    assert all(isinstance(r, Generating) for r in said)
    assert answer.markdown == sim.expected_answer(text)
    assert answer.engine == "qwen" and answer.extra["source"] == "api" and answer.extra["ui"] == ui
    assert answer.title and answer.title != "New Chat"
    assert len(sends_of(sim, text)) == 1


def test_markdown_keeps_headings_and_lists(sim, engine):
    text = prompt("lists")
    answer = engine.wait(engine.send(text), timeout=20)
    expected = sim.expected_answer(text)
    assert answer.markdown == expected
    assert any(line.startswith("#") for line in expected.splitlines())
    assert any(line.lstrip().startswith(("- ", "* ", "1. ")) for line in expected.splitlines())


def test_wait_looks_until_the_site_finishes_the_answer_then_reads_it_without_long_pauses(
    sim, engine, monkeypatch
):
    # Held at its end (no growing time) until the first progress report: the simulator marks the
    # answer finished at that moment, whatever the speed of the machine (the send returns
    # url_delay after the site took it: the stream's FINISH_LAG is over by then). What wait()
    # asks of the page is recorded: once the site says finished, its reads come
    # API_STABLE_SECONDS apart at most (the pause decided before aside), never a second or a
    # poll interval.
    from playwright.sync_api import Page

    from pipeline.simulator.chats import FINISH_LAG

    sim.set(hold_answers=True, answer_seconds=0.0, thinking_seconds=0.0, url_delay=2 * FINISH_LAG)
    text = prompt("waiting")
    url = engine.send(text)
    pauses: list[float] = []  # seconds, each pause the wait asked the page for
    finished_at: list[int] = []  # pauses asked for before the simulator finished the answer
    progress: list[str] = []
    real_pause = Page.wait_for_timeout

    def pause(page, milliseconds):
        pauses.append(milliseconds / 1000)
        return real_pause(page, milliseconds)

    def report(line: str) -> None:
        progress.append(line)
        if not finished_at:
            finished_at.append(len(pauses))
            sim.set(hold_answers=False)

    monkeypatch.setattr(Page, "wait_for_timeout", pause)
    answer = engine.wait(url, timeout=30, on_progress=report)
    assert answer.markdown == sim.expected_answer(text)
    assert answer.extra["source"] == "stream"  # read on the page that sent it, as it ended
    assert finished_at, "wait() returned before the simulator finished the answer"
    after = pauses[finished_at[0] + 1 :]  # the first one was decided on a look before the finish
    assert max(after, default=0) <= API_STABLE_SECONDS, (after, pauses)
    assert len(sends_of(sim, text)) == 1


def test_wait_on_the_chats_own_page_reports_progress_and_looks_until_the_answer_is_done(sim, engine, session):
    # Another engine (another run) waits: no page of the send's to read the stream on, so the
    # chat's own page is watched. Held until the first progress line, which finishes it: a wait
    # that gave up at its first "still generating", or said nothing, would time out here.
    sim.set(hold_answers=True, answer_seconds=0.0, thinking_seconds=0.0)
    text = prompt("waited for elsewhere")
    url = engine.send(text)
    progress: list[str] = []

    def report(line: str) -> None:
        progress.append(line)
        sim.set(hold_answers=False)

    other = QwenEngine(Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=15), session)
    answer = other.wait(url, timeout=30, on_progress=report)
    assert answer.markdown == sim.expected_answer(text) and answer.extra["source"] == "api"
    assert progress and progress[0] != "complete"
    assert len(sends_of(sim, text)) == 1


@pytest.mark.parametrize("ui", ["current", "legacy"])
def test_an_answer_still_thinking_is_generating_never_an_empty_answer(sim, engine, ui):
    # No text yet and not stored as finished: still thinking (the legacy page shows no stop
    # button). Only an answer the site stored as finished with no text is an empty answer.
    sim.set(ui=ui, thinking_seconds=600.0)
    url = engine.send(prompt(f"long thought {ui}"))
    assert isinstance(engine.check(url), Generating)


def test_a_phase_nobody_reported_in_the_chat_json_is_noticed_by_a_check(sim, engine, session):
    # The chat's JSON (as the page loads it and as we read it) carries a phase nobody has
    # reported: the answer is read all the same, and the engine hands the phase over.
    text = prompt("a tool spoke")
    url = engine.send(text)
    engine.wait(url, timeout=30)

    def with_a_tool(route):
        reply = route.fetch()
        body = reply.json()
        answer = body["data"]["chat"]["messages"][-1]
        answer["content_list"].insert(0, {"phase": "fuzz_cite", "content": "x"})
        route.fulfill(response=reply, body=json.dumps(body))

    chat_json = f"**/api/v2/chats/{url.rsplit('/', 1)[1]}*"
    other = QwenEngine(Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=15), session)
    session.context.route(chat_json, with_a_tool)
    try:
        answer = check_until_done(other, url)[0]
    finally:
        session.context.unroute(chat_json, with_a_tool)
    assert answer.markdown == sim.expected_answer(text)
    noticed = other.noticed()
    assert [found.where for found in noticed] == ["chat_json"] and "fuzz_cite" in noticed[0].seen


def test_find_chats_finds_every_chat_of_a_prompt_only_with_the_sites_creation_time(sim, engine):
    first, second = prompt("first"), prompt("second")
    before = int(time.time())  # the site stamps whole seconds
    first_url, second_url = engine.send(first), engine.send(second)
    again_url = engine.send(first)
    found = engine.find_chats(first)
    assert [chat.url for chat in found] == [again_url, first_url]  # newest first
    assert all(before <= chat.created <= time.time() for chat in found), found
    assert [chat.url for chat in engine.find_chats("  " + second + "\n")] == [second_url]
    assert engine.find_chats(prompt("never sent")) == []
    assert len(sends_of(sim, first)) == 2 and len(sends_of(sim, second)) == 1


# -- failures: classified, and nothing typed when the session is not usable ------------------


@pytest.mark.parametrize("scenario", ["logged_out", "bot_check"])
def test_unusable_session_is_hard_and_sends_nothing(sim, engine, scenario):
    sim.set(scenario=scenario)
    text = prompt(scenario)
    with pytest.raises(HardError) as caught:
        engine.send(text)
    assert caught.value.code == scenario
    if scenario == "logged_out":
        assert "run `qwenpipe login`" in str(caught.value)
    assert ledger_of(sim, text) == []  # not even a refused attempt: nothing was typed
    assert caught.value.nothing_sent  # stopped before the click: provably no send to recover
    with pytest.raises(HardError):  # and the engine's own login check says so
        engine.check_login()


def test_bot_check_after_the_send_is_hard(sim, engine):
    # The app follows the refusal to /punish while the engine is reading the page.
    text = prompt("verify me", "[sim:bot_check]")
    with pytest.raises(HardError) as caught:
        engine.send(text)
    assert caught.value.code == "bot_check"
    assert sends_of(sim, text) == []


def test_a_send_that_fails_after_the_click_may_have_sent(sim, session):
    # The site takes the prompt but the address never shows the chat within page_timeout: the
    # error must not say "nothing sent" (the contract would send again: a second send).
    sim.set(url_delay=4)
    text = prompt("slow address")
    quick = QwenEngine(Qwen(base_url=sim.base_url, page_timeout=1), session)
    with pytest.raises(TransientError) as caught:
        quick.send(text)
    assert caught.value.code == "no_chat_url"
    assert not caught.value.nothing_sent
    assert len(sends_of(sim, text)) == 1  # it was sent indeed


def test_a_site_that_stays_in_progress_is_clicked_busy_clicks_times_then_given_up(sim, engine):
    # Every click meets "The chat is in progress!" (a refusal that takes nothing): clicked again
    # after a pause, BUSY_CLICKS clicks in all, then a transient failure that sent nothing. A
    # click not counted would click on until the site gave in (here its fourth refusal is its last).
    from pipeline.engines.qwen.refusals import BUSY_CLICKS

    sim.set(in_progress_sends=BUSY_CLICKS + 1)
    text = prompt("busy")
    with pytest.raises(TransientError) as caught:
        engine.send(text)
    assert caught.value.code == "chat_in_progress" and caught.value.nothing_sent
    assert [entry["accepted"] for entry in ledger_of(sim, text)] == [False] * BUSY_CLICKS


def test_a_page_that_leaves_the_app_after_the_click_is_an_unknown_page(sim, session):
    # The app replaced in place after the click (no navigation, no failure screen) and no chat
    # address: not "no chat address yet" (a transient wait), an unknown page that holds the account.
    from pipeline.engines.qwen.selectors import CURRENT

    script = (
        "<script>document.addEventListener('click', (e) => { if (e.target.closest("
        + json.dumps(CURRENT.send_button)
        + ")) setTimeout(() => { document.body.innerHTML = '<p>Something new</p>'; }, 50); }, true);"
        "</script>"
    )

    def with_script(route):
        page = route.fetch()
        route.fulfill(response=page, body=page.text().replace("</head>", script + "</head>", 1))

    sim.set(url_delay=4)
    front = sim.base_url + "/"
    session.context.route(front, with_script)
    try:
        with pytest.raises(HardError) as caught:
            QwenEngine(Qwen(base_url=sim.base_url, page_timeout=1.5), session).send(prompt("replaced"))
    finally:
        session.context.unroute(front, with_script)
    assert caught.value.code == "bot_check" and "left the app after the click" in str(caught.value)


def test_a_site_that_never_answers_is_a_short_transient_error(session):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        base_url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        qwen = Qwen(base_url=base_url, page_timeout=1)
        with pytest.raises(TransientError) as caught:
            QwenEngine(qwen, session).send(prompt("silence"))
    assert caught.value.code == "timeout"
    assert "Traceback" not in str(caught.value) and len(str(caught.value)) < 300


def test_quota_is_quota_spent_with_the_sites_hours_to_wait(sim, engine):
    sim.set(scenario="quota")
    text = prompt("quota")
    with pytest.raises(QuotaSpent) as spent:
        engine.send(text)
    assert sends_of(sim, text) == []
    assert spent.value.retry_after == 5 * 3600  # the API body's data.num, in hours
    assert spent.value.nothing_sent  # the reply to the send refused it: no send to count


def test_quota_named_in_the_prompt(sim, engine):
    text = prompt("quota", "[sim:quota]")
    with pytest.raises(QuotaSpent) as spent:
        engine.send(text)
    assert spent.value.retry_after == 5 * 3600


def test_a_refused_send_is_read_from_the_api_when_the_toast_is_already_gone(sim, engine):
    sim.set(toast_seconds=0)  # the toast disappears before any look at the page
    text = prompt("quota", "[sim:quota]")
    started = time.monotonic()
    with pytest.raises(QuotaSpent) as spent:
        engine.send(text)
    assert spent.value.retry_after == 5 * 3600
    # Not a timeout waiting for a chat address that will never come.
    assert time.monotonic() - started < engine.page_timeout


def test_waf_is_transient(sim, engine):
    url = engine.send(prompt("before the firewall"))
    sim.set(scenario="waf")
    text = prompt("waf")
    with pytest.raises(TransientError) as caught:
        engine.send(text)
    assert caught.value.code == "waf" and not isinstance(caught.value, HardError)
    with pytest.raises(TransientError, match="firewall"):
        engine.check(url)
    assert ledger_of(sim, text) == []


def test_chat_not_found_is_hard(sim, engine):
    url = engine.send(prompt("soon gone"))
    sim.set(scenario="chat_not_found")
    with pytest.raises(HardError) as caught:
        engine.check(url)
    assert caught.value.code == "chat_not_found"


def test_unknown_chat_id_is_not_found(sim, engine):
    with pytest.raises(HardError) as caught:
        engine.check(f"{sim.base_url}/c/{uuid.uuid4()}")
    assert caught.value.code == "chat_not_found"


def test_error_banner_mid_answer_is_transient_never_an_answer(sim, engine):
    url = engine.send(prompt("broken", "[sim:error_banner]"))
    deadline = time.monotonic() + 20
    with pytest.raises(TransientError) as caught:  # noqa: PT012 - the loop is the point
        while time.monotonic() < deadline:
            assert isinstance(engine.check(url), Generating)
            time.sleep(0.3)
    assert not isinstance(caught.value, HardError)


def test_slow_answer_is_never_taken_half_done(sim, engine):
    text = prompt("slowly", "[sim:slow]")
    url = engine.send(text)
    for _ in range(2):
        result = engine.check(url)
        assert isinstance(result, Generating), result
    with pytest.raises(TransientError, match="timed out"):
        engine.wait(url, timeout=2)


def test_one_browser_for_the_whole_file(sim, engine, session, launches_at_start):
    engine.check_login()
    assert session.started
    assert BrowserSession.launches - launches_at_start == 1


# -- other browsers: a saved login in a new profile, and attaching to the user's own Chrome -----


def test_storage_state_logs_a_new_profile_in(sim, tmp_path):
    from pipeline.simulator.api import make_token

    qwen = Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=15)
    host = sim.base_url.split("//")[1].split(":")[0]
    token = make_token()
    (tmp_path / "state.json").write_text(
        json.dumps(
            {
                "cookies": [{"name": "token", "value": token, "domain": host, "path": "/", "expires": -1}],
                "origins": [{"origin": sim.base_url, "localStorage": [{"name": "token", "value": token}]}],
            }
        )
    )
    sim.set(require_login=True)
    try:
        with QwenEngine(qwen, browser_config(tmp_path)) as logged_in:
            logged_in.check_login()
        with (
            QwenEngine(qwen, browser_config(tmp_path / "other")) as stranger,
            pytest.raises(HardError, match="qwenpipe login"),
        ):
            stranger.check_login()
    finally:
        sim.set(require_login=False)
    assert stat.S_IMODE(os.stat(tmp_path / "profile").st_mode) == 0o700


@pytest.fixture
def users_chrome(tmp_path):
    """A Chromium the 'user' started with a debugging port, as `browser.cdp_url` expects."""
    with users_chromium(tmp_path / "u") as started:
        yield started


def test_attached_chrome_is_used_and_left_running(sim, tmp_path, users_chrome):
    proc, endpoint = users_chrome
    qwen = Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=15)
    launches = BrowserSession.launches
    text = prompt("attached")
    with QwenEngine(qwen, browser_config(tmp_path, cdp_url=endpoint)) as attached:
        answer = attached.wait(attached.send(text), timeout=20)
    assert answer.markdown == sim.expected_answer(text)
    assert BrowserSession.launches == launches  # attached, not launched
    assert proc.poll() is None  # the user's browser still runs
    assert page_tabs(endpoint) == ["about:blank"]  # ours are closed, theirs kept


def test_each_attach_drops_its_connection_as_it_closes_while_the_driver_lives_on(sim, tmp_path, users_chrome):
    # A process that holds its Playwright driver across sessions (a cycle's thread, a doctor run,
    # the suite's in-process commands): each attached session's DevTools connection used to stay
    # open as long as the driver, and the browser worked for every one of them at each new page.
    proc, endpoint = users_chrome
    qwen = Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=15)
    left = []
    with playwright_driver():
        for _ in range(3):
            with QwenEngine(qwen, browser_config(tmp_path, cdp_url=endpoint)) as attached:
                attached.check_login()
                during = devtools_clients(endpoint)
            left.append(devtools_clients(endpoint))
            assert left[-1] < during  # its DevTools socket went (the driver's HTTP keep-alive may stay)
    assert left == [left[0]] * 3  # nothing piles up from one session to the next
    assert proc.poll() is None  # disconnected, never closed: the user's browser still runs
    assert page_tabs(endpoint) == ["about:blank"]


def failing_context(self, browser) -> None:
    """An account's context the browser refuses (a proxy it rejects, a browser going away)."""
    from playwright.sync_api import Error as PlaywrightError

    raise PlaywrightError("Browser.newContext: the context could not be made")


def test_a_start_that_fails_after_attaching_lets_go_of_what_it_took(tmp_path, users_chrome, monkeypatch):
    # The context failed after connect_over_cdp (a poll thread attached to the cycle's browser):
    # the connection used to stay open as long as the driver.
    proc, endpoint = users_chrome
    monkeypatch.setattr(BrowserSession, "_open_account_context", failing_context)
    left = []
    with playwright_driver():
        for _ in range(3):
            session = BrowserSession(browser_config(tmp_path, cdp_url=endpoint), shared_browser=True)
            with pytest.raises(HardError, match="the browser did not start"):
                session.new_page()
            left.append(devtools_clients(endpoint))
    assert left == [left[0]] * 3  # nothing piles up (the driver's HTTP keep-alive may stay)
    assert proc.poll() is None  # the browser we attached to runs on


def test_a_start_that_fails_after_taking_the_shared_browser_lets_it_go(tmp_path, monkeypatch):
    # The context failed after the thread's shared browser was taken: that browser used to count
    # a user that would never close, and ran until the thread's driver stopped.
    from pipeline.engines.qwen.browser import _BROWSER

    monkeypatch.setattr(BrowserSession, "_open_account_context", failing_context)
    session = BrowserSession(browser_config(tmp_path), shared_browser=True)
    with pytest.raises(HardError, match="the browser did not start"):
        session.new_page()
    assert session.launched == 1  # it was started, and then
    assert _BROWSER._users == 0 and _BROWSER._browser is None  # closed: nobody holds it


def test_a_browser_that_died_is_started_again(sim, tmp_path):
    qwen = Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=15)
    with BrowserSession(browser_config(tmp_path)) as own:
        engine = QwenEngine(qwen, own)
        engine.check_login()
        launches = BrowserSession.launches
        own.context.close()  # as if Chromium crashed between two articles of a cycle
        engine.check_login()
        assert BrowserSession.launches == launches + 1


def checked_elsewhere(sim, session, url: str, seconds: float = 20):
    """What another run's checks (a fresh page of the chat, no stream to read) say, looked at
    until it is no longer Generating; what such a check raises is raised."""
    other = QwenEngine(Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=15), session)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen = other.check(url)
        if not isinstance(seen, Generating):
            return seen
        time.sleep(0.3)
    raise AssertionError(f"still generating after {seconds} s: {seen.progress}")


def test_a_check_elsewhere_of_an_answer_the_site_ended_with_an_error_is_never_an_answer(sim, engine, session):
    # The page's banner and the chat's JSON (the turn's error) each say it: a transient failure,
    # and the half answer before the error is never taken.
    url = engine.send(prompt("cut short", "[sim:error_banner]"))
    with pytest.raises(TransientError) as caught:
        checked_elsewhere(sim, session, url)
    assert caught.value.code in ("error_banner", "answer_error")


def test_a_check_elsewhere_of_an_answer_finished_with_no_text_is_an_empty_answer(sim, engine, session):
    # Stored as finished with no text (an account past its real limit): never an article.
    from pipeline.engines.base import EmptyAnswer

    sim.set(empty_answers=True)
    url = engine.send(prompt("nothing to say"))
    with pytest.raises(EmptyAnswer):
        checked_elsewhere(sim, session, url)


def test_a_wait_on_the_sending_page_never_takes_a_stream_cut_short(sim, engine):
    # The stream ends before its last frame (no `finished`): the words so far are never the
    # article; a transient failure, and the chat's own page is read again later.
    sim.set(fault="stream:cut_stream")
    url = engine.send(prompt("cut stream"))
    with pytest.raises(TransientError) as caught:
        engine.wait(url, timeout=20)
    assert caught.value.code == "cut_short"
