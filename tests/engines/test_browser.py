"""Finding a browser and the switches it starts with (no browser is started here)."""

from __future__ import annotations

import base64
import json
import os
import stat
from types import SimpleNamespace

import pytest

from pipeline.config import Browser
from pipeline.engines.qwen import browser
from pipeline.engines.qwen.browser import (
    BrowserNotFound,
    find_executable,
    launch_args,
    load_storage_state,
)
from pipeline.engines.qwen.tokens import jwt_expiry
from pipeline.signin.saved import state_token_expiry


def fake_executable(folder, name):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


NO_BUNDLED = SimpleNamespace(executable_path="/nonexistent/ms-playwright/chrome")


@pytest.fixture
def empty_path(tmp_path, monkeypatch):
    folder = tmp_path / "empty-bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


def test_configured_executable_is_used(tmp_path, empty_path):
    exe = fake_executable(tmp_path / "opt", "my-chrome")
    path, description = find_executable(str(exe), chromium=NO_BUNDLED)
    assert path == str(exe)
    assert "browser.executable" in description


def test_configured_missing_path_names_the_key_and_path(tmp_path, empty_path):
    missing = tmp_path / "nope" / "chrome"
    with pytest.raises(BrowserNotFound) as caught:
        find_executable(str(missing), chromium=NO_BUNDLED)
    assert "browser.executable" in str(caught.value)
    assert str(missing) in str(caught.value)


def test_configured_file_that_is_not_executable_is_refused(tmp_path, empty_path):
    plain = tmp_path / "chrome"
    plain.write_text("")
    plain.chmod(0o644)
    if os.access(plain, os.X_OK):  # root may execute anything it likes on some systems
        pytest.skip("this user can execute any file")
    with pytest.raises(BrowserNotFound, match="browser.executable"):
        find_executable(str(plain), chromium=NO_BUNDLED)


def test_bundled_chromium_when_installed(tmp_path, empty_path):
    bundled = fake_executable(tmp_path / "ms-playwright", "chrome")
    path, description = find_executable("", chromium=SimpleNamespace(executable_path=str(bundled)))
    assert path is None  # None = let Playwright use its own
    assert "Playwright" in description


def test_path_search_in_order(tmp_path, monkeypatch):
    first, second = tmp_path / "bin1", tmp_path / "bin2"
    fake_executable(first, "google-chrome")
    chromium = fake_executable(second, "chromium")
    monkeypatch.setenv("PATH", f"{first}{os.pathsep}{second}")
    path, description = find_executable("", chromium=NO_BUNDLED)
    assert path == str(chromium)  # chromium is preferred to google-chrome wherever it sits
    assert "chromium on PATH" in description


def test_path_search_finds_google_chrome_stable(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    chrome = fake_executable(folder, "google-chrome-stable")
    monkeypatch.setenv("PATH", str(folder))
    assert find_executable("", chromium=NO_BUNDLED)[0] == str(chrome)


def test_nothing_found_says_what_to_install(empty_path):
    with pytest.raises(BrowserNotFound) as caught:
        find_executable("", chromium=NO_BUNDLED)
    assert "apt-get install -y chromium" in str(caught.value)
    assert "browser.executable" in str(caught.value)
    assert caught.value.code == "browser_not_found"


def test_launch_args_as_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    args = launch_args(["--lang=en-US"])
    for switch in (
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-gpu",
        "--no-sandbox",
    ):
        assert switch in args
    assert args[-1] == "--lang=en-US"


def test_launch_args_not_root_keep_the_sandbox(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "--no-sandbox" not in launch_args([])


def test_user_args_are_not_repeated(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert launch_args(["--disable-gpu"]).count("--disable-gpu") == 1


class RecordingContext:
    def __init__(self):
        self.cookies, self.scripts = [], []

    def add_cookies(self, cookies):
        self.cookies.extend(cookies)

    def add_init_script(self, script):
        self.scripts.append(script)


def test_storage_state_loads_cookies_and_local_storage(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps(
            {
                "cookies": [
                    {
                        "name": "token",
                        "value": "jwt",
                        "domain": ".qwen.ai",
                        "path": "/",
                        "expires": -1,
                        "httpOnly": False,
                        "secure": True,
                        "sameSite": "Lax",
                    }
                ],
                "origins": [
                    {"origin": "https://chat.qwen.ai", "localStorage": [{"name": "token", "value": "jwt"}]}
                ],
            }
        )
    )
    context = RecordingContext()
    assert load_storage_state(context, state) is True
    assert [c["name"] for c in context.cookies] == ["token"]
    (script,) = context.scripts
    assert '"https://chat.qwen.ai"' in script and '"token": "jwt"' in script
    assert "getItem(k) === null" in script  # never overwrites a token the site refreshed


def test_unreadable_storage_state_is_skipped(tmp_path):
    bad = tmp_path / "state.json"
    bad.write_text("{not json")
    assert load_storage_state(RecordingContext(), bad) is False


def test_session_is_lazy_and_counts_nothing_until_used(tmp_path):
    before = browser.BrowserSession.launches
    with browser.BrowserSession(Browser(profile_dir=str(tmp_path / "p")), root=tmp_path) as session:
        assert not session.started
    assert browser.BrowserSession.launches == before
    assert not (tmp_path / "p").exists()


def fake_jwt(exp: int) -> str:
    part = base64.urlsafe_b64encode(json.dumps({"id": "u", "exp": exp}).encode()).rstrip(b"=").decode()
    return f"eyJhbGciOiJIUzI1NiJ9.{part}.sig"


def test_token_expiry_is_read_from_the_state_file(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps(
            {
                "cookies": [
                    {"name": "token", "value": fake_jwt(1_900_000_000), "domain": ".qwen.ai", "path": "/"}
                ],
                "origins": [
                    {"origin": "https://chat.qwen.ai", "localStorage": [{"name": "token", "value": "junk"}]}
                ],
            }
        )
    )
    assert state_token_expiry(state) == 1_900_000_000
    assert jwt_expiry("not-a-jwt") is None
    assert state_token_expiry(tmp_path / "missing.json") is None
