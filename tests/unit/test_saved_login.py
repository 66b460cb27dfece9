"""The login is what the browser holds: saved back after a run, never an older one over a newer
one (pipeline/engines/qwen/saved_login.py), and described by its session, not its access token."""

from __future__ import annotations

import base64
import json
import os
import stat

from pipeline.engines.qwen.saved_login import Loaded, held_session, save_back
from pipeline.engines.qwen.tokens import token_expiry

NOW = 1_790_000_000


def jwt(exp: int, **claims) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256'})}.{part({'exp': exp, **claims})}.sig"


def state(session_exp: int | None, access_exp: int = NOW + 900) -> dict:
    """A storage state as the late-2026 site leaves it: the session in the `token` cookie, an
    access token of 900 s in localStorage."""
    cookies = (
        [] if session_exp is None else [{"name": "token", "value": jwt(session_exp), "expires": session_exp}]
    )
    storage = [{"name": "token", "value": jwt(access_exp)}]
    return {"cookies": cookies, "origins": [{"origin": "https://chat.qwen.ai", "localStorage": storage}]}


class Context:
    """What save_back asks of a browser context: its storage state."""

    def __init__(self, held: dict):
        self.held = held

    def storage_state(self) -> dict:
        return self.held


def saved(path) -> dict:
    return json.loads(path.read_text())


def test_the_login_is_described_by_its_session_not_its_short_access_token():
    held = state(session_exp=NOW + 30 * 86400, access_exp=NOW + 900)
    assert token_expiry(held) == NOW + 30 * 86400
    held = state(session_exp=NOW + 3600, access_exp=NOW + 7 * 86400)  # even when the other lives longer
    assert token_expiry(held) == NOW + 3600


def test_what_the_context_holds_is_saved_back_over_the_file_it_was_opened_from(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state(NOW + 86400)))
    loaded = Loaded.of(path)
    renewed = state(NOW + 30 * 86400)  # the page renewed: a new session
    assert save_back(Context(renewed), loaded)
    assert saved(path) == renewed
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_newer_login_another_run_saved_meanwhile_is_never_overwritten_with_an_older_one(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state(NOW + 86400)))
    loaded = Loaded.of(path)
    newer = state(NOW + 40 * 86400)
    path.write_text(json.dumps(newer) + "\n")  # another run (or `qwenpipe login`) saved after we loaded
    assert not save_back(Context(state(NOW + 30 * 86400)), loaded)
    assert saved(path) == newer


def test_an_older_login_another_run_saved_meanwhile_gives_way_to_ours(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state(NOW + 86400)))
    loaded = Loaded.of(path)
    path.write_text(json.dumps(state(NOW + 2 * 86400)) + "\n")
    ours = state(NOW + 30 * 86400)
    assert save_back(Context(ours), loaded)
    assert held_session(path) == NOW + 30 * 86400


def test_a_context_that_holds_no_session_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "state.json"
    before = json.dumps(state(NOW + 86400))
    path.write_text(before)
    assert not save_back(Context(state(None)), Loaded.of(path))
    assert path.read_text() == before


def test_a_login_file_replaced_by_a_symlink_is_not_followed(tmp_path):
    path, target = tmp_path / "state.json", tmp_path / "elsewhere.json"
    path.write_text(json.dumps(state(NOW + 86400)))
    loaded = Loaded.of(path)
    path.unlink()
    target.write_text("keep")
    path.symlink_to(target)
    assert not save_back(Context(state(NOW + 30 * 86400)), loaded)
    assert target.read_text() == "keep" and path.is_symlink()


def test_a_login_whose_session_did_not_change_leaves_the_file_untouched(tmp_path):
    path = tmp_path / "state.json"
    before = state(NOW + 86400)
    path.write_text(json.dumps(before))
    mtime = path.stat().st_mtime_ns
    held = {
        **before,
        "origins": [{"origin": "https://chat.qwen.ai", "localStorage": [{"name": "x", "value": "y"}]}],
    }
    assert not save_back(Context(held), Loaded.of(path))
    assert saved(path) == before and path.stat().st_mtime_ns == mtime
