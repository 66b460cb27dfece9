"""A run that hangs is stopped by qwen.run_timeout, safely, so cron never piles up behind it."""

from __future__ import annotations

import socket
import threading

import pytest
from tests_cli_helpers import qwenpipe

pytestmark = pytest.mark.browser


@pytest.fixture
def silent_server():
    """Accepts connections and never answers a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    for conn in held:
        conn.close()
    server.close()


def test_a_hung_cycle_is_stopped_and_the_next_one_is_not_blocked(tmp_path, silent_server):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "tea.md").write_text("Write about tea.")
    (tmp_path / "config.toml").write_text(
        f'[qwen]\nbase_url = "{silent_server}"\npage_timeout = 600\nrun_timeout = 4\n'
        '[router]\nenabled = false\n[browser]\nprofile_dir = "profile"\n'
    )
    # The page would wait 600 s on the silent server; the helper's own 120 s timeout would
    # fail the test long before that, so finishing at all with this message is the watchdog's doing.
    result = qwenpipe("cycle", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert "ran longer than 4 s (qwen.run_timeout)" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "articles" / "tea.md.url").exists()
    again = qwenpipe("cycle", cwd=tmp_path)
    assert "another cycle is running" not in again.stderr
