"""`qwenpipe generate` end to end: real processes, real Chromium, the simulator on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from sim_project import journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_at_once, qwenpipe_in_process, spawn

pytestmark = pytest.mark.browser


SIMULATOR = {"answer_seconds": 2.0, "thinking_seconds": 0.3, "url_delay": 0.2}  # conftest.py `sim`


def wait_for_done(project, slug, *, limit=40):
    codes = []
    for _ in range(limit):
        result = qwenpipe_in_process("generate", slug, cwd=project)
        codes.append(result.returncode)
        if result.returncode != 3:
            return codes, result
        time.sleep(0.5)
    raise AssertionError(f"never finished: {codes}")


def test_queued_then_working_then_done_with_one_send(sim, tmp_path):
    shape = "2026-08"  # the API's shapes are the engine's business: test_qwen_engine.py reads each
    # The answer is held one word short of its end until released: the second look finds it
    # still generating however slow the machine is.
    sim.set(api_shape=shape, answer_seconds=1.0, hold_answers=True)
    project = make_project(tmp_path, sim)
    text = prompt(project, "tea", f"Write an article about green tea ({shape}).")
    first = qwenpipe_in_process("generate", "tea", cwd=project)
    assert first.returncode == 42, first.stderr
    url = (project / "articles" / "tea.md.url").read_text().strip()
    assert url.startswith(sim.base_url + "/c/")
    working = qwenpipe_in_process("generate", "tea", cwd=project)
    assert working.returncode == 3, working.stderr
    assert not (project / "articles" / "tea.md").exists()
    sim.set(hold_answers=False)
    codes, last = wait_for_done(project, "tea")
    assert codes[-1] == 0 and set(codes[:-1]) <= {3}, codes
    assert last.stdout.strip() == str(project / "articles" / "tea.md")
    meta, body = read_article(project / "articles" / "tea.md")
    assert body == sim.expected_answer(text).strip()
    assert "\n## " in body and "\n- " in body, "markdown structure lost"
    assert meta["engine"] == "qwen" and meta["chat_url"] == url and meta["slug"] == "tea"
    assert [e["prompt"] for e in sim.sends()].count(text) == 1
    again = qwenpipe_in_process("generate", "tea", cwd=project)
    assert again.returncode == 0 and [e["prompt"] for e in sim.sends()].count(text) == 1


def test_sigkill_between_send_and_url_does_not_send_again(sim, tmp_path):
    sim.set(url_delay=4.0)  # the address changes 4 s after the site took the prompt
    project = make_project(tmp_path, sim)
    text = prompt(project, "crash", "Write about surviving crashes.")
    process = spawn("generate", "crash", cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(e["prompt"] == text for e in sim.sends()):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert any(e["prompt"] == text for e in sim.sends()), "the prompt never reached the simulator"
    assert not (project / "articles" / "crash.md.url").exists(), "killed too late: the URL was written"
    assert (project / "articles" / "crash.md.sending").exists()
    # Held short of its end: the run after the kill adopts the chat and finds it still writing.
    sim.set(url_delay=0.2, hold_answers=True)
    rerun = qwenpipe_in_process("generate", "crash", cwd=project)
    assert rerun.returncode == 3, rerun.stderr
    assert "not sending again" in rerun.stderr
    (sent,) = [e for e in sim.sends() if e["prompt"] == text]
    url = (project / "articles" / "crash.md.url").read_text().strip()
    assert url == f"{sim.base_url}/c/{sent['chat_id']}", (url, sent)
    sim.set(hold_answers=False)
    codes, _ = wait_for_done(project, "crash")
    assert codes[-1] == 0 and [e["prompt"] for e in sim.sends()].count(text) == 1
    assert "recovered" in [e["event"] for e in journal(project)]


def test_four_processes_at_once_send_once(sim, tmp_path):
    project = make_project(tmp_path, sim)
    text = prompt(project, "race", "Write about four processes racing.")
    sim.set(url_delay=3.0)  # the winner holds the send for 3 s: every other process starts within it
    results = qwenpipe_at_once("generate", "race", cwd=project, count=4)
    codes = sorted(code for code, _ in results)
    assert codes.count(42) == 1 and codes.count(3) == 3, results
    assert sum("in progress elsewhere" in err for _, err in results) == 3
    assert [e["prompt"] for e in sim.sends()].count(text) == 1


# Logged out at the send, with the router: tests/setup/test_login.py (the session types nothing).
@pytest.mark.parametrize(
    ("scenario", "per_prompt", "code"),
    [("bot_check", False, "bot_check"), ("quota", True, "quota")],
)
def test_hard_failure_at_send_falls_back_to_the_router(sim, tmp_path, scenario, per_prompt, code):
    project = make_project(tmp_path, sim)
    text = prompt(project, "fb", f"Write about fallbacks{f' [sim:{scenario}]' if per_prompt else ''}.")
    if not per_prompt:
        sim.set(scenario=scenario)
    result = qwenpipe_in_process("generate", "fb", cwd=project)
    sim.set(scenario="ok")
    assert result.returncode == 0, result.stderr
    meta, body = read_article(project / "articles" / "fb.md")
    assert meta["engine"] == "router" and meta["model"]
    assert body.strip()
    assert not [e for e in sim.sends() if e["prompt"] == text], "a refused prompt counted as sent"
    assert code in [e.get("code") for e in journal(project)]
    assert not (project / "articles" / "fb.md.sending").exists()
    from pipeline.store.protocol import DEFAULT_ACCOUNT
    from pipeline.wiring import open_sqlite

    with open_sqlite(project / "articles" / ".qwenpipe") as store:
        # The site took nothing, so the day's count (what qwen.max_sends_per_day limits) is 0.
        assert store.send_counts(0).total == 0
        if scenario == "quota":  # the chat is left alone for the hours the site names (data.num = 5)
            block = store.quota_block(DEFAULT_ACCOUNT, 0)
            assert block is not None
            assert block.until - block.since == pytest.approx(5 * 3600)


# A hard failure of the send: refused in words (the quota's reply, read: nothing sent), or a bot
# check the page left the chat for, its reply gone with the page (the send may be on the site).
HARD_AT_SEND = {"quota": "router.enabled = false", "bot_check": "its send may be on the site"}


@pytest.mark.parametrize("scenario", list(HARD_AT_SEND))
def test_hard_failure_without_router_is_exit_1(sim, tmp_path, scenario):
    project = make_project(tmp_path, sim, router=False)
    prompt(project, "nofb", f"Write about having no fallback [sim:{scenario}].")
    result = qwenpipe_in_process("generate", "nofb", cwd=project)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and not (project / "articles" / "nofb.md").exists()
    # The bot check's reply is read before its page leaves, or leaves with it (a race: both right).
    sending = (project / "articles" / "nofb.md.sending").exists()
    expected = HARD_AT_SEND["bot_check"] if sending else HARD_AT_SEND["quota"]
    assert expected in result.stderr, result.stderr
    assert sending is False or scenario == "bot_check", "only a send that may be on the site is looked for"


def poll_in_scenario(sim, tmp_path, slug: str, text: str, scenario: str):
    """(project, result): `generate SLUG` sent the prompt (exit 42), then the next `generate SLUG`
    polled its chat while the site showed `scenario` (back to "ok" after)."""
    project = make_project(tmp_path, sim)
    prompt(project, slug, text)
    assert qwenpipe_in_process("generate", slug, cwd=project).returncode == 42
    sim.set(scenario=scenario)
    result = qwenpipe_in_process("generate", slug, cwd=project)
    sim.set(scenario="ok")
    return project, result


def test_chat_gone_at_poll_is_looked_at_again_then_falls_back_once_lost(sim, tmp_path):
    routed = len(sim.router.chat_requests())  # the module's simulator: other tests' requests
    project, result = poll_in_scenario(
        sim, tmp_path, "gone", "Write about chats that vanish.", "chat_not_found"
    )
    # Sent moments ago: "not found" may be the site not showing a new chat yet. No router yet.
    assert result.returncode == 3 and "qwen.lost_chat_after" in result.stderr, result.stderr
    assert not (project / "articles" / "gone.md").exists() and len(sim.router.chat_requests()) == routed
    from dataclasses import replace

    from pipeline.config import load
    from pipeline.wiring import workspace as open_workspace

    with open_workspace(load(project / "config.toml")) as ws:  # the send, an hour older
        record = ws.store.article("gone")
        with ws.store.transaction() as tx:
            tx.put_article(replace(record, sent_at=record.sent_at - 3600, next_try=0.0))
    sim.set(scenario="chat_not_found")
    result = qwenpipe_in_process("generate", "gone", cwd=project)
    sim.set(scenario="ok")
    assert result.returncode == 0, result.stderr
    meta, _ = read_article(project / "articles" / "gone.md")
    assert meta["engine"] == "router" and "chat_url" not in meta  # the keys agree with the engine


def test_waf_at_poll_is_transient_exit_3(sim, tmp_path):
    project, result = poll_in_scenario(sim, tmp_path, "waf", "Write about web application firewalls.", "waf")
    assert result.returncode == 3, result.stderr
    assert "attempt 1 of 3" in result.stderr
    assert not (project / "articles" / "waf.md").exists()


SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ "  # rich's "dots" spinner frames


def test_wait_on_a_terminal_finishes_showing_each_progress_line_once(sim, tmp_path):
    from pty_helpers import screens, spawn

    sim.set(answer_seconds=3.0)
    project = make_project(tmp_path, sim)
    text = prompt(project, "live", "Write about one line that moves.")
    # How soon after the answer it finishes is a benchmark (bench/run_all.py), not a test.
    child, screen = spawn(["generate", "live", "--wait"], project)
    try:
        screen.drain(child, timeout=120)
        assert child.returncode == 0, screen.text()[-2000:]
        assert read_article(project / "articles" / "live.md")[1] == sim.expected_answer(text).strip()
        seen_progress = False
        for lines in screens(screen.raw):
            shown = [line.lstrip(SPINNER) for line in lines if line.strip()]
            assert len(shown) == len(set(shown)), f"a line shown twice: {shown}"
            progress = [line for line in shown if "live: " in line and "wrote" not in line]
            assert len(progress) <= 1, f"more than one progress line at once: {progress}"
            seen_progress = seen_progress or bool(progress)
        final = [line for line in lines if line.strip()]
        assert seen_progress, "no progress was shown"
        assert not any("thinking" in line or "writing:" in line for line in final), final
        assert any("live: wrote" in line for line in final), final
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(screen.fd)
