"""The step is a loop over one handler per action (issue 29): each handler is a module of its
own, small, that never imports another handler; what follows it is a value handed back."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from pipeline.contract import step
from pipeline.contract.phases import Action

HANDLER_LINES = 80


def handler_modules() -> dict[str, Path]:
    """Each handler's module and its file."""
    modules = (inspect.getmodule(handler) for handler in step.HANDLERS.values())
    return {module.__name__: Path(inspect.getfile(module)) for module in modules}


def imported(path: Path) -> set[str]:
    """The modules of the step's package a module imports (`from .x import y`, `from . import x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(f"pipeline.contract.step.{node.module}")
            else:
                found.update(f"pipeline.contract.step.{alias.name}" for alias in node.names)
    return found


def test_every_action_has_a_handler():
    assert set(Action) <= set(step.HANDLERS)


def test_no_handler_module_is_over_80_lines_nor_imports_another_handler():
    modules = handler_modules()
    assert len(modules) >= 15, sorted(modules)
    for name, path in modules.items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines <= HANDLER_LINES, f"{name} is {lines} lines"
        others = imported(path) & (set(modules) - {name})
        assert not others, f"{name} imports the handlers {sorted(others)}"
