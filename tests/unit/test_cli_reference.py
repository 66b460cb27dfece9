"""docs/cli.md is every command's --help as the command line prints it (issue 29, item 7)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_the_commands_own_help():
    script = load_script()
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == script.reference(), (
        "docs/cli.md is stale: run .venv/bin/python scripts/cli_reference.py"
    )


def test_the_reference_has_every_command_and_its_options():
    from pipeline.cli.app import app

    text = load_script().reference()
    for info in app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        assert f"\n## qwenpipe {name}\n" in text, name
    assert "\n## qwenpipe store init\n" in text and "--cron-exit" in text
