"""`status --watch` in a real pseudo-terminal: it redraws, shows a change on disk, and Ctrl-C is exit 0."""

from __future__ import annotations

import os
import re
import signal
import time

from project_files import add_prompt
from pty_helpers import spawn


def test_watch_redraws_shows_a_new_article_and_exits_0_on_ctrl_c(project):
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    child, screen = spawn(["status", "--watch", "--interval", "0.5"], project, columns=160, rows=40)
    try:
        assert screen.wait_for(r"2 articles:\s+pending 2"), screen.text()
        assert "\x1b[" in screen.raw.decode(), "a terminal gets colour"
        assert "the last 14 days" in screen.text(), "40 rows: room for the fortnight's chart too"
        seen = len(screen.text())
        assert screen.wait_for(r"2 articles:", after=seen), "no second refresh"

        (project / "articles" / "tea.md").write_text("+++\ntitle = 'Tea'\n+++\n# Tea\n")
        seen = len(screen.text())
        assert screen.wait_for(r"tea\s+done", after=seen), screen.text()[seen:]
        assert re.search(r"done 1", screen.text()[seen:])

        child.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60  # a loaded machine: how soon is not the point
        while child.poll() is None and time.monotonic() < deadline:
            screen.pump(0.1)
        assert child.returncode == 0, screen.text()[-2000:]
        assert "Traceback" not in screen.text() and "interrupted" not in screen.text()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(screen.fd)
