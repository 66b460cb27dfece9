"""Attach to the user's own, running Chromium over CDP: log in through it, generate through it,
and leave it running."""

from __future__ import annotations

import json
import stat

import browser_helpers
import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

from pipeline.simulator import Simulator

pytestmark = pytest.mark.browser


@pytest.fixture
def users_chromium(tmp_path):
    """A Chromium the way a user starts it for attaching; killed at the end, whatever happened."""
    with browser_helpers.users_chromium(tmp_path / "users-profile") as started:
        yield started


def sign_in_in_the_users_browser(cdp_url: str, base_url: str) -> None:
    """The user signs in by hand in their own browser (here: through CDP, then let go)."""
    from pipeline.engines.qwen.browser import playwright_driver

    with playwright_driver() as playwright:
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
    # The answer is complete once sent: the generate after the send collects it.
    with Simulator(port=0, require_login=True, answer_seconds=0.0, thinking_seconds=0.0).start() as sim:
        project = make_project(tmp_path / "project", sim)

        refused = qwenpipe_in_process("--cdp", cdp, "login", cwd=project)
        assert refused.returncode == 1 and "is not signed in" in refused.stderr, refused.stderr
        assert not (project / "state.json").exists()

        sign_in_in_the_users_browser(cdp, sim.base_url)
        saved = qwenpipe_in_process("--cdp", cdp, "login", cwd=project)
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
            result = qwenpipe_in_process("--cdp", cdp, "generate", "attached", cwd=project)
            codes.append(result.returncode)
            if result.returncode not in (3, 42):
                break
        assert codes[0] == 42 and codes[-1] == 0, (codes, result.stderr)
        meta, body = read_article(project / "articles" / "attached.md")
        assert body == sim.expected_answer(text).strip()
        assert meta["engine"] == "qwen" and meta["chat_url"].startswith(sim.base_url + "/c/")
        assert [e["prompt"] for e in sim.sends()].count(text) == 1
    assert proc.poll() is None, "qwenpipe closed a browser it did not start"
