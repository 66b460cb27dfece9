"""Attach to the user's own, running Chromium over CDP: log in through it, generate through it,
and leave it running."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time
import urllib.request

import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe

from pipeline.browser import launch_args
from pipeline.simulator import Simulator

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def users_chromium(tmp_path):
    """A Chromium the way a user starts it for attaching; killed at the end, whatever happened."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    port = free_port()
    args = [
        CHROMIUM,
        f"--remote-debugging-port={port}",
        "--headless",
        "--no-sandbox",
        f"--user-data-dir={tmp_path / 'users-profile'}",
        *launch_args(),
        "about:blank",
    ]
    proc = subprocess.Popen(
        dict.fromkeys(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/json/version", timeout=2) as answer:
                json.loads(answer.read())
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"Chromium did not open its debugging port {port}")
            time.sleep(0.2)
    yield proc, url
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=10)


def sign_in_in_the_users_browser(cdp_url: str, base_url: str) -> None:
    """The user signs in by hand in their own browser (here: through CDP, then let go)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(cdp_url)
        # The user's browser holds other sites' logins too: none of them may end up in our file.
        browser.contexts[0].add_cookies(
            [{"name": "SID", "value": "another-site-secret", "domain": ".example.com", "path": "/"}]
        )
        page = browser.contexts[0].new_page()
        page.goto(f"{base_url}/auth?action=signin")
        page.fill("input[type=email]", "writer@example.com")
        page.fill("input[type=password]", "secret")
        page.click("button.login-button")
        page.wait_for_url(f"{base_url}/")
        page.close()
        # Leaving the `with` disconnects; the browser keeps running.


def test_login_and_generate_through_the_users_browser(users_chromium, tmp_path):
    proc, cdp = users_chromium
    with Simulator(port=0, require_login=True, answer_seconds=1.0, thinking_seconds=0.2).start() as sim:
        project = make_project(tmp_path / "project", sim)

        refused = qwenpipe("--cdp", cdp, "login", cwd=project)
        assert refused.returncode == 1 and "is not signed in" in refused.stderr, refused.stderr
        assert not (project / "state.json").exists()

        sign_in_in_the_users_browser(cdp, sim.base_url)
        saved = qwenpipe("--cdp", cdp, "login", cwd=project)
        assert saved.returncode == 0, saved.stderr
        state = project / "state.json"
        assert stat.S_IMODE(state.stat().st_mode) == 0o600
        cookies = json.loads(state.read_text())["cookies"]
        assert "expires" in saved.stderr and any(c["name"] == "token" for c in cookies)
        assert {c["domain"] for c in cookies} == {"127.0.0.1"}, "another site's cookies were saved"
        assert not (project / "profile").exists(), "attached: no profile of ours is made"

        text = prompt(project, "attached", "Write an article about attaching to a browser.")
        codes = []
        for _ in range(60):
            result = qwenpipe("--cdp", cdp, "generate", "attached", cwd=project)
            codes.append(result.returncode)
            if result.returncode not in (3, 42):
                break
            time.sleep(0.5)
        assert codes[0] == 42 and codes[-1] == 0, (codes, result.stderr)
        meta, body = read_article(project / "articles" / "attached.md")
        assert body == sim.expected_answer(text).strip()
        assert meta["engine"] == "qwen" and meta["chat_url"].startswith(sim.base_url + "/c/")
        assert [e["prompt"] for e in sim.sends()].count(text) == 1
    assert proc.poll() is None, "qwenpipe closed a browser it did not start"
