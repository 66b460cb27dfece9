"""Notifications through Apprise ([notify] urls) to a real loopback webhook (Apprise's json://):
one message per event that needs a person, each told once, never a secret in one; a webhook
that fails holds up nothing, and what it missed is delivered by the next cycle."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from accounts_project import accounts_project
from fakes import took_nothing
from project_files import add_prompt

from pipeline.batch.cycle import run_cycle
from pipeline.batch.status import collect
from pipeline.engines.base import HardError

NOW = 1_800_000_000.0
KEY = "sk-planted-router-key-0123456789abcdef"
# A login token's shape: a JWT (header.payload.signature).
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJpZCI6InVzZXIiLCJleHAiOjE5MDAwMDAwMDB9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"


class Webhook:
    """An HTTP server on 127.0.0.1 that keeps each JSON body posted to it (Apprise's json://),
    answering `status`."""

    def __init__(self):
        self.received: list[dict] = []
        self.status = 200
        self.attempts = 0  # POSTs answered, whatever the status
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                hook.attempts += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if hook.status == 200:
                    hook.received.append(json.loads(body))
                self.send_response(hook.status)
                self.end_headers()

            def log_message(self, *_args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def titles(self) -> list[str]:
        return [message["title"] for message in self.received]


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


def closed_port_url() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"json://127.0.0.1:{port}/hook"  # nothing listens there any more


def setup(project, urls: list[str], extra: str = "", monkeypatch=None):
    listed = ", ".join(json.dumps(url) for url in urls)
    return accounts_project(
        project,
        "[qwen]\npoll_interval = 0\nmax_attempts = 1\n[article]\nmin_words = 0\n"
        f"[notify]\nurls = [{listed}]\n{extra}",
    )


def cycle(ws, engines, at: float = NOW):
    said: list[str] = []
    report = run_cycle(ws, engines(), say=said.append, clock=lambda: at)
    return report, said


def test_a_dead_letter_and_the_failing_router_are_told_once_without_secrets_after_the_webhook_recovers(
    project, webhook, monkeypatch
):
    monkeypatch.setenv("ROUTER_API_KEY", KEY)  # registered by the workspace, as in a real run
    ws, chats, router, engines = setup(project, [webhook.url])
    chats["default"].send_error = took_nothing(
        HardError(f"the chat refused the session {JWT}", code="chat_refused")
    )
    router.enqueue(HardError(f"router: HTTP 401: invalid key {KEY}", code="router_failed"))
    add_prompt(project, "tea")
    webhook.status = 500
    report, said = cycle(ws, engines)
    assert report.exit_code == 1 and (project / "articles" / "tea.md.failed").exists()  # the cycle went on
    # Not held up: the failing URL was tried once for the two messages, not again in this cycle.
    assert webhook.attempts == 1
    assert any(line.startswith("notify: 2 message(s) not delivered") for line in said), said
    assert webhook.received == []
    warning = [w for w in collect(ws, NOW).warnings if "notification(s) not delivered" in w]
    assert warning and warning[0].startswith("2 notification(s) not delivered yet"), warning

    webhook.status = 200
    cycle(ws, engines, NOW + 60)  # nothing new happened: what was owed is delivered
    assert sorted(webhook.titles()) == ["qwenpipe: tea dead-lettered", "qwenpipe: the router is failing"]
    assert [m["type"] for m in webhook.received] == ["failure", "failure"]  # a person must act
    bodies = json.dumps(webhook.received)
    assert KEY[:8] not in bodies
    assert KEY[-8:] not in bodies
    assert JWT[:20] not in bodies
    assert "[REDACTED]" in bodies and "qwenpipe replay tea" in bodies
    assert not [w for w in collect(ws, NOW + 60).warnings if "notification" in w]

    cycle(ws, engines, NOW + 120)  # nothing new: nothing told twice
    assert len(webhook.received) == 2


def test_a_bot_check_is_told_once_per_hold(project, webhook):
    from test_holds import slider

    ws, chats, _router, engines = setup(project, [webhook.url], "[router]\nenabled = false\n")
    chats["default"].send_error = slider()
    add_prompt(project, "tea")
    cycle(ws, engines)
    bot_checks = [m for m in webhook.received if m["title"] == "qwenpipe: bot check on account default"]
    assert len(bot_checks) == 1 and "qwenpipe login --account default" in bot_checks[0]["message"]
    assert bot_checks[0]["type"] == "warning"  # the account waits on its own
    told = len(webhook.received)  # and tea's dead letter: no router to write it
    add_prompt(project, "milk", "Write about milk.")
    cycle(ws, engines, NOW + 60)  # the same hold (milk waits for it): not told again
    assert len(webhook.received) == told


def test_logged_out_is_told_once_until_a_cycle_finds_the_chat_logged_in(project, webhook):
    ws, chats, _router, engines = setup(project, [webhook.url])
    chat = chats["default"]
    chat.send_error = took_nothing(HardError("not logged in", code="logged_out"))
    add_prompt(project, "tea")
    assert cycle(ws, engines)[0].exit_code == 0  # the router wrote it
    assert webhook.titles() == ["qwenpipe: the chat is logged out"]
    assert "qwenpipe login" in webhook.received[0]["message"]
    add_prompt(project, "milk", "Write about milk.")
    cycle(ws, engines, NOW + 60)
    assert len(webhook.received) == 1
    chat.send_error = None
    add_prompt(project, "oolong", "Write about oolong.")
    assert cycle(ws, engines, NOW + 120)[0].sent == ["oolong"]  # logged in again
    chat.send_error = took_nothing(HardError("not logged in", code="logged_out"))
    add_prompt(project, "sencha", "Write about sencha.")
    cycle(ws, engines, NOW + 180)
    assert webhook.titles() == ["qwenpipe: the chat is logged out"] * 2


def test_the_daily_summary_is_sent_once_a_day_and_a_dead_url_is_owed_alone(project, webhook):
    dead = closed_port_url()
    ws, _chats, _router, engines = setup(
        project, [dead, webhook.url], "daily_summary = true\nsummary_hour = 0\n"
    )
    add_prompt(project, "tea")
    add_prompt(project, "milk", "Write about milk.")
    (project / "articles" / "milk.md.failed").write_text('reason = "x"\n')
    now = time.time()  # sends are counted by the journal's wall-clock times
    report, said = cycle(ws, engines, now)
    assert report.sent == ["tea"]
    [summary] = webhook.received
    assert summary["title"].startswith("qwenpipe: summary of ") and summary["type"] == "info"
    text = summary["message"]
    assert "articles done: 0" in text and "sent yesterday: default 0" in text
    assert "1 generating" in text and "1 dead" in text
    assert any("notify: 1 message(s) not delivered (json://...:" in line for line in said), said
    cycle(ws, engines, now + 1)  # the same day: no second summary; the dead URL still owed one
    assert len(webhook.received) == 1
    assert any("1 notification(s) not delivered yet" in w for w in collect(ws, now + 1).warnings)
    cycle(ws, engines, now + 86400)
    assert len(webhook.received) == 2 and "sent yesterday: default 1" in webhook.received[1]["message"]


def test_urls_without_apprise_installed_are_exit_2_naming_the_extra(project, monkeypatch, capsys):
    from pipeline.cli.running import exit_code_of
    from pipeline.config import load

    (project / "config.toml").write_text('[notify]\nurls = ["json://127.0.0.1:9/hook"]\n')
    monkeypatch.setitem(sys.modules, "apprise", None)  # as if it were not installed
    assert exit_code_of(lambda: load(project / "config.toml") and 0) == 2
    assert "notify.urls needs apprise, which is not installed here: pip install 'qwenpipe[notify]'" in (
        capsys.readouterr().err
    )
    (project / "config.toml").write_text('[metrics]\ntextfile = "qwenpipe.prom"\n')
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    assert exit_code_of(lambda: load(project / "config.toml") and 0) == 2
    assert "pip install 'qwenpipe[metrics]'" in capsys.readouterr().err
