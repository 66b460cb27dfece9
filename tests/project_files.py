"""Helpers that make project files for tests (importable from any test folder)."""

from __future__ import annotations

from pathlib import Path


def write_config(folder: Path, text: str = "") -> Path:
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def add_prompt(project: Path, slug: str, text: str = "Write about tea.", meta: str = "") -> Path:
    path = project / "prompts" / f"{slug}.md"
    path.write_text((f"+++\n{meta}\n+++\n" if meta else "") + text, encoding="utf-8")
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` with its bytes: to assert that nothing changed."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
