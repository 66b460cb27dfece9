"""Engine error codes are written once, as members of engines/base.Code, and keep their strings."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pipeline
from pipeline.engines.base import ACCOUNT_REFUSALS, Code, HardError

ROOT = Path(pipeline.__file__).parent


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _is_error(node: ast.ClassDef) -> bool:
    """An engine error class (EngineError and its kin): its `code` is an error code."""
    names = [node.name] + [getattr(base, "id", getattr(base, "attr", "")) for base in node.bases]
    return any(name.endswith(("Error", "Busy", "Spent")) for name in names)


def _code_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each error code written as a string rather than a Code member."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "code" and _literal(node.value):
            found.append((node.value.lineno, f"code={node.value.value!r}"))
        elif isinstance(node, ast.Compare) and any(
            isinstance(side, ast.Attribute) and side.attr == "code" for side in (node.left, *node.comparators)
        ):
            for side in (node.left, *node.comparators):
                values = side.elts if isinstance(side, (ast.Tuple, ast.Set, ast.List)) else [side]
                found += [(node.lineno, f"compared with {v.value!r}") for v in values if _literal(v)]
        elif isinstance(node, ast.ClassDef) and _is_error(node):
            for statement in node.body:
                targets = getattr(statement, "targets", [getattr(statement, "target", None)])
                value = getattr(statement, "value", None)
                if any(isinstance(t, ast.Name) and t.id == "code" for t in targets) and _literal(value):
                    found.append((statement.lineno, f"{node.name}.code = {value.value!r}"))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "RouterFailure"
            and len(node.args) > 1
            and _literal(node.args[1])
        ):
            found.append((node.lineno, f"RouterFailure(..., {node.args[1].value!r})"))
    return sorted(found)


def test_no_error_code_is_written_as_a_string_outside_the_enum():
    problems = [
        f"pipeline/{path.relative_to(ROOT)}:{line}: {what}: use engines.base.Code"
        for path in sorted(ROOT.rglob("*.py"))
        if "simulator" not in path.parts  # the site's own codes ("Not_Login"), not ours
        for line, what in _code_literals(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not problems, "\n".join(problems)


def test_the_check_finds_each_way_a_code_was_written(tmp_path):
    source = (
        "class Gone(HardError):\n    code = 'gone'\n"
        "raise HardError('x', code='logged_out')\n"
        "if err.code == 'bot_check' or err.code in ('quota', Code.WAF): pass\n"
        "RouterFailure('m', 'router_auth', False)\n"
    )
    assert _code_literals(ast.parse(source)) == [
        (2, "Gone.code = 'gone'"),
        (3, "code='logged_out'"),
        (4, "compared with 'bot_check'"),
        (4, "compared with 'quota'"),
        (5, "RouterFailure(..., 'router_auth')"),
    ]


def test_the_codes_are_the_strings_the_journal_and_the_stores_always_held():
    assert len({code.value for code in Code}) == len(Code)
    assert (Code.LOGGED_OUT, Code.BOT_CHECK, Code.QUOTA, Code.ROUTER_FAILED) == (
        "logged_out",
        "bot_check",
        "quota",
        "router_failed",
    )
    assert {"logged_out", "bot_check", "quota"} == ACCOUNT_REFUSALS
    err = HardError("not logged in", code=Code.LOGGED_OUT)
    assert json.dumps({"code": err.code}) == '{"code": "logged_out"}' and err.code in {"logged_out"}
