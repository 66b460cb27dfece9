"""The README names what users can type: every command with each of its options in the commands
table, every simulator scenario, page shape (`--ui`) and API shape (issue 38, item 6). A new
option or scenario that the README forgets fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main

from pipeline.cli.app import app
from pipeline.simulator.settings import API_SHAPES, SCENARIOS, UIS

README = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
TABLE = README.split("## Commands", 1)[1].split("\n\n", 2)[1]
SIMULATOR = README.split("## The simulator", 1)[1].split("\n## ", 1)[0]
# Options every command has, or that the table's prose covers for all commands.
COMMON = {"--config", "--help"}


def commands() -> dict[str, list[str]]:
    group = typer.main.get_command(app)
    found: dict[str, list[str]] = {}

    def walk(command, prefix: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            if getattr(sub, "hidden", False):
                continue
            full = f"{prefix} {name}".strip()
            if getattr(sub, "commands", None):
                walk(sub, full)
                continue
            found[full] = [
                opt for param in sub.params for opt in getattr(param, "opts", []) if opt.startswith("--")
            ]

    walk(group, "")
    return found


@pytest.mark.parametrize("command", sorted(commands()))
def test_the_commands_table_names_each_command_and_its_options(command):
    rows = [line for line in TABLE.splitlines() if line.startswith(f"| `qwenpipe {command}")]
    assert rows, f"README's commands table has no row for `qwenpipe {command}`"
    row = " ".join(rows)
    if command == "simulate":  # its two dozen options: its own section and docs/cli.md
        assert "docs/cli.md" in README and "## The simulator" in README
        return
    missing = [opt for opt in commands()[command] if opt not in COMMON and not re.search(rf"{opt}\b", row)]
    assert not missing, f"`qwenpipe {command}`: README's commands table lacks {missing}"


@pytest.mark.parametrize("name", [*SCENARIOS, *UIS, *API_SHAPES])
def test_the_simulator_section_names_each_scenario_and_shape(name):
    named = re.findall(r"`([^`]+)`", SIMULATOR)
    words = {word for span in named for word in re.split(r"[\s|,\[\]]+", span)}
    assert name in words, f"README's simulator section does not name `{name}`"
