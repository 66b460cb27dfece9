from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes import FakeChat, FakeRouter

from pipeline.config import load
from pipeline.workspace import Engines, Workspace


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No test reads the developer's config or key, and every test runs in its own folder."""
    monkeypatch.delenv("QWENPIPE_CONFIG", raising=False)
    monkeypatch.delenv("ROUTER_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)


def write_config(folder: Path, text: str = "") -> Path:
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder: config.toml (no poll spacing), prompts/, articles/."""
    write_config(tmp_path, "[qwen]\npoll_interval = 0\nmax_attempts = 3\n[article]\nmin_words = 0\n")
    (tmp_path / "prompts").mkdir()
    (tmp_path / "articles").mkdir()
    return tmp_path


def add_prompt(project: Path, slug: str, text: str = "Write about tea.", meta: str = "") -> Path:
    path = project / "prompts" / f"{slug}.md"
    path.write_text((f"+++\n{meta}\n+++\n" if meta else "") + text, encoding="utf-8")
    return path


@pytest.fixture
def workspace(project) -> Workspace:
    return Workspace(load(project / "config.toml"))


@pytest.fixture
def chat() -> FakeChat:
    return FakeChat()


@pytest.fixture
def router() -> FakeRouter:
    return FakeRouter()


@pytest.fixture
def engines(workspace, chat, router) -> Engines:
    return Engines(workspace.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` with its bytes: to assert that nothing changed."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


os.environ.setdefault("NO_COLOR", "1")
