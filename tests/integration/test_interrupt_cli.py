"""Ctrl-C during `generate --wait` on a real terminal, against the simulator and real Chromium."""

from __future__ import annotations

import os
import signal

import pytest
from pty_helpers import spawn
from sim_project import make_project, prompt

pytestmark = pytest.mark.browser


# The answer takes far longer than the test: it is interrupted while the chat still writes.
SIMULATOR = {"answer_seconds": 600.0, "thinking_seconds": 0.3, "url_delay": 0.2}  # conftest.py `sim`


def test_ctrl_c_after_the_send_leaves_quietly_says_sent_and_how_to_resume(sim, tmp_path):
    project = make_project(tmp_path, sim)
    text = prompt(project, "tea", "Write about tea and patience.")
    child, screen = spawn(["generate", "tea", "--wait"], project)
    try:
        url_file = project / "articles" / "tea.md.url"
        assert screen.wait_for(r"tea: writing: \d", timeout=60), screen.text()[-2000:]
        assert url_file.exists(), "the chat is writing, so the URL is on disk"
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        screen.drain(child)
        shown = screen.text()
        assert child.returncode == 130, shown[-2000:]
        assert "Future exception" not in shown and "Connection closed" not in shown, shown[-2000:]
        assert "Traceback" not in shown, shown[-2000:]
        assert "tea was sent" in shown and "`qwenpipe generate tea --wait`" in shown, shown[-2000:]
        assert url_file.exists() and not (project / "articles" / "tea.md.sending").exists()
        assert [entry["prompt"] for entry in sim.sends()].count(text) == 1
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        os.close(screen.fd)
