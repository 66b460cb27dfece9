"""Rules of how pipeline/ is written, read from the source with ast (no tool beyond Python):
each walks every module, so a new one is held to them too."""

from __future__ import annotations

import ast
from pathlib import Path

import pipeline

ROOT = Path(pipeline.__file__).parent


def parsed() -> list[tuple[Path, ast.Module]]:
    """Every module of pipeline/, parsed, by its path from the repository."""
    return [
        (path.relative_to(ROOT.parent), ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for path in sorted(ROOT.rglob("*.py"))
    ]


def enum_values_compared_as_strings(tree: ast.Module, path: Path) -> list[str]:
    """`x.value == "done"` (or !=, in): an enum compared by its text, which a renamed member
    or a typo turns into a silent False; compare the members (`x is Status.DONE`)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        by_value = any(isinstance(side, ast.Attribute) and side.attr == "value" for side in sides)
        texts = any(
            isinstance(side, ast.Constant)
            and isinstance(side.value, str)
            or isinstance(side, (ast.Tuple, ast.List, ast.Set))
            and any(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in side.elts)
            for side in sides
        )
        if by_value and texts:
            found.append(f"{path}:{node.lineno}: an enum's .value compared with text: compare the members")
    return found


def test_no_enum_is_compared_by_its_text():
    problems = [line for path, tree in parsed() for line in enum_values_compared_as_strings(tree, path)]
    assert not problems, "\n".join(problems)


def test_the_enum_rule_finds_a_comparison_by_text():
    tree = ast.parse('if outcome.status.value == "done":\n    pass\nif s.value in ("a", "b"):\n    pass\n')
    assert enum_values_compared_as_strings(tree, Path("x.py")) == [
        "x.py:1: an enum's .value compared with text: compare the members",
        "x.py:3: an enum's .value compared with text: compare the members",
    ]

