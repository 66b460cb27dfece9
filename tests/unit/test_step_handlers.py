"""The step is a loop over one handler per action (issue 29): each handler is a module of its
own, small, that never imports another handler; what follows it is a value handed back. A
reader follows a move to its handler by names (issue 40): handlers.py's table, its docstring and
each move's class say the same."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path

from pipeline.contract.phases import Action
from pipeline.contract.step import handlers
from pipeline.contract.step.moves import Ask, Move

HANDLER_LINES = 80


def handler_modules() -> dict[str, Path]:
    """Each handler's module and its file."""
    modules = (inspect.getmodule(handler) for handler in handlers.HANDLERS.values())
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


MOVE_KINDS = set(typing.get_args(Move)) - {Ask}  # Ask goes by its decision's action


def label(key: object) -> str:
    """A key of the table as its docstring names it."""
    if isinstance(key, Action):
        return f"Action.{key.name}"
    return key.__name__ if isinstance(key, type) else str(key)


def module_of(handler) -> str:
    return handler.__module__.rsplit(".", 1)[-1]


def test_every_action_and_every_move_kind_has_exactly_one_handler():
    assert set(handlers.HANDLERS) == set(Action) | MOVE_KINDS | {handlers.SEND_TURN}
    for key, handler in handlers.HANDLERS.items():  # one function, `handle` of its own module
        assert handler.__name__ == "handle", label(key)
        assert inspect.getmodule(handler).handle is handler, label(key)


def test_the_tables_docstring_maps_each_key_to_its_handlers_module():
    rows = re.findall(r"^    (\S+) +(\w+)\.py ", handlers.__doc__, re.MULTILINE)
    listed = [key for key, _ in rows]
    assert len(listed) == len(set(listed)), (
        f"listed twice: {sorted(k for k in listed if listed.count(k) > 1)}"
    )
    assert dict(rows) == {label(key): module_of(handler) for key, handler in handlers.HANDLERS.items()}


def test_each_move_names_its_handlers_module():
    for kind in MOVE_KINDS:
        named = f"Handler: {module_of(handlers.HANDLERS[kind])}.py."
        assert named in kind.__doc__, f"{kind.__name__}'s docstring does not say {named!r}"


def test_no_handler_module_is_over_80_lines_nor_imports_another_handler():
    modules = handler_modules()
    assert len(modules) >= 15, sorted(modules)
    for name, path in modules.items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines <= HANDLER_LINES, f"{name} is {lines} lines"
        others = imported(path) & (set(modules) - {name})
        assert not others, f"{name} imports the handlers {sorted(others)}"
