"""The site as public clients saw it in late 2026 (shared/reference/qwen-chat.md, "Late 2026"):
`qwenpipe generate` in real Chromium against the simulator, which gains each behaviour as a
setting. One simulator for the module; each test sets what it needs and the fixture resets it."""

from __future__ import annotations

import json
import time

import pytest
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe

from pipeline.simulator import Simulator
from pipeline.simulator.api import make_token

pytestmark = pytest.mark.browser

RESET = {
    "scenario": "ok",
    "answer_seconds": 0.6,
    "thinking_seconds": 0.2,
    "url_delay": 0.1,
    "hold_answers": False,
    "require_auth_header": False,
}


@pytest.fixture(scope="module")
def sim():
    with Simulator(port=0, answer_seconds=0.6, thinking_seconds=0.2, url_delay=0.1).start() as server:
        yield server


@pytest.fixture
def site(sim):
    sim.set(**RESET)
    yield sim
    sim.set(**RESET)


def save_login(project, sim) -> str:
    """A saved login as `qwenpipe login` writes it: the token cookie and localStorage.token."""
    token = make_token()
    host = sim.base_url.split("//")[1].split(":")[0]
    state = {
        "cookies": [{"name": "token", "value": token, "domain": host, "path": "/", "expires": -1}],
        "origins": [{"origin": sim.base_url, "localStorage": [{"name": "token", "value": token}]}],
    }
    (project / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return token


def generate_until_done(project, slug, *, limit=40):
    codes = []
    for _ in range(limit):
        result = qwenpipe("generate", slug, cwd=project)
        codes.append(result.returncode)
        if result.returncode not in (3, 42):
            return codes, result
        time.sleep(0.3)
    raise AssertionError(f"never finished: {codes}")


def sends_of(sim, text):
    return [e for e in sim.ledger() if e["prompt"] == text]


# -- item 2: the site's own auth header ------------------------------------------------------


def test_api_reads_carry_the_saved_token_as_a_bearer_header(site, tmp_path):
    # The site refuses every API call that lacks `Authorization: Bearer <localStorage.token>`:
    # the login check, the chat's JSON and the chat list all have to send it.
    site.set(require_auth_header=True)
    project = make_project(tmp_path, site, router=False)
    save_login(project, site)
    text = prompt(project, "bearer", "Write an article about bearer tokens.")

    codes, last = generate_until_done(project, "bearer")

    assert codes[0] == 42 and last.returncode == 0, (codes, last.stderr)
    _, body = read_article(project / "articles" / "bearer.md")
    assert body == site.expected_answer(text).strip()
    assert [e["accepted"] for e in sends_of(site, text)] == [True]
