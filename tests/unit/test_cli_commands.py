"""Commands are added one way (issue 40, item 4): each is a module-level function of its cli
module, and app.py's COMMANDS (and GROUPS) is the one list that adds them, in help order."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import typer.main

from pipeline.cli import app as cli

CLI = Path(cli.__file__).parent


def adds_a_command(node: ast.AST) -> bool:
    """A call or decorator that adds a command to a Typer app: `x.command(...)`, `x.add_typer(...)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr
        in (
            "command",
            "add_typer",
        )
    )


def test_no_cli_module_adds_a_command_but_app_py_from_its_list():
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.name != "register", f"{path.name}:{node.lineno}: a register() function"
                adding = [d for d in node.decorator_list if adds_a_command(d)]
                assert not adding, f"{path.name}:{node.lineno}: {node.name} is added by a decorator"
        calls = [node for node in ast.walk(tree) if adds_a_command(node)]
        if path.name == "app.py":  # the one loop over COMMANDS and GROUPS
            adder = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_add_commands")
            assert all(adder.lineno <= c.lineno <= adder.end_lineno for c in calls)
        else:
            assert not calls, f"{path.name}:{calls[0].lineno} adds a command"


def test_every_command_is_in_the_list_a_module_level_function_of_a_cli_module():
    listed = [*cli.COMMANDS, *(sub for _, _, subs in cli.GROUPS for sub in subs)]
    known = [(info.name, info.callback) for info in cli.app.registered_commands]
    known += [
        (info.name, info.callback)
        for group in cli.app.registered_groups
        for info in group.typer_instance.registered_commands
    ]
    assert known == listed
    for name, command in listed:
        module = sys.modules[command.__module__]
        assert module.__name__.startswith("pipeline.cli."), name
        assert getattr(module, command.__qualname__, None) is command, f"{name}: not a module-level function"


def test_help_lists_the_commands_in_the_lists_order():
    root = typer.main.get_command(cli.app)
    ctx = root.make_context("qwenpipe", ["--help"], resilient_parsing=True)
    expected = [name for name, _ in cli.COMMANDS] + [name for name, _, _ in cli.GROUPS]
    assert root.list_commands(ctx) == expected
