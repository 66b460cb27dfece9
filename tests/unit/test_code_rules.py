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


LONG = 40  # lines: a function longer than this says what it does in a docstring


def long_functions_without_docstring(tree: ast.Module, path: Path) -> list[str]:
    """Every function or method over LONG lines (its def to its last line) with no docstring."""
    return [
        f"{path}:{node.lineno}: {node.name} is {node.end_lineno - node.lineno + 1} lines and has no "
        "docstring: say in one what it does"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > LONG
        and ast.get_docstring(node) is None
    ]


def test_every_function_over_40_lines_has_a_docstring():
    problems = [line for path, tree in parsed() for line in long_functions_without_docstring(tree, path)]
    assert not problems, "\n".join(problems)


def test_the_docstring_rule_finds_a_long_function_without_one():
    body = "".join(f"    x{i} = {i}\n" for i in range(40))
    tree = ast.parse(f"def long():\n{body}\ndef short():\n    pass\n\ndef told():\n    '''Says.'''\n{body}")
    assert long_functions_without_docstring(tree, Path("x.py")) == [
        "x.py:1: long is 41 lines and has no docstring: say in one what it does"
    ]


TIMES = Path("pipeline/times.py")
CLOCK_FORMAT = "%Y-%m-%d %H:%M"


def clock_formats(tree: ast.Module, path: Path) -> list[str]:
    """Every `.strftime("%Y-%m-%d %H:%M")` outside pipeline/times.py: a moment as people read it
    is said by times.clock, once."""
    return [
        f"{path}:{node.lineno}: formats a local time itself: use pipeline.times.clock"
        for node in ast.walk(tree)
        if path != TIMES
        and isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "strftime"
        and any(isinstance(a, ast.Constant) and a.value == CLOCK_FORMAT for a in node.args)
    ]


def test_a_moment_is_formatted_for_people_in_one_place():
    problems = [line for path, tree in parsed() for line in clock_formats(tree, path)]
    assert not problems, "\n".join(problems)


def test_the_clock_rule_finds_a_second_formatter():
    tree = ast.parse('x = datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M")\n')
    assert clock_formats(tree, Path("pipeline/contract/quota.py")) == [
        "pipeline/contract/quota.py:1: formats a local time itself: use pipeline.times.clock"
    ]
    assert clock_formats(tree, TIMES) == []


REDACT = Path("pipeline/redact.py")


def _is_first_of_lines(node: ast.AST) -> bool:
    """`x.splitlines()[0]`, `(x.splitlines() or [...])[0]`, `x.split("\\n", 1)[0]`."""
    if not (
        isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 0
    ):
        return False
    inner = node.value.values if isinstance(node.value, ast.BoolOp) else [node.value]
    return any(
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and (
            call.func.attr == "splitlines"
            or call.func.attr == "split"
            and bool(call.args)
            and getattr(call.args[0], "value", None) == "\n"
        )
        for call in inner
    )


def first_lines(tree: ast.Module, path: Path) -> list[str]:
    """Every first line taken of a text outside pipeline/redact.py: redact.first_line takes it,
    masked and cut, for every message."""
    if path == REDACT:
        return []
    return [
        f"{path}:{node.lineno}: takes a first line itself: use pipeline.redact.first_line (masked and cut)"
        for node in ast.walk(tree)
        if _is_first_of_lines(node)
    ]


def test_a_first_line_is_taken_in_one_place():
    problems = [line for path, tree in parsed() for line in first_lines(tree, path)]
    assert not problems, "\n".join(problems)


def test_the_first_line_rule_finds_each_way_of_writing_one():
    tree = ast.parse(
        'a = str(err).strip().splitlines()[0]\nb = (t.splitlines() or ["x"])[0]\nc = t.split("\\n", 1)[0]\n'
    )
    assert [line.split(":")[1] for line in first_lines(tree, Path("x.py"))] == ["1", "2", "3"]
    assert first_lines(tree, REDACT) == []


def absolute_imports(tree: ast.Module, path: Path) -> list[str]:
    """Every import of pipeline by its full name (`from pipeline.x import y`, `import pipeline.x`)
    inside pipeline/: its modules import each other relatively (`from ..x import y`), one style."""
    found = []
    for node in ast.walk(tree):
        names = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level == 0
            else [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        if any(name == "pipeline" or name.startswith("pipeline.") for name in names):
            found.append(f"{path}:{node.lineno}: imports pipeline by its full name: import it relatively")
    return found


def test_pipeline_imports_itself_relatively():
    problems = [line for path, tree in parsed() for line in absolute_imports(tree, path)]
    assert not problems, "\n".join(problems)


def test_the_import_style_rule_finds_each_absolute_form():
    tree = ast.parse("from pipeline.config import load\nimport pipeline.files\nfrom . import x\nimport os\n")
    assert [line.split(":")[1] for line in absolute_imports(tree, Path("x.py"))] == ["1", "2"]


LONGEST_CLASS = 400  # lines: a class longer than this holds more than one idea; split it along its seams


def long_classes(tree: ast.Module, path: Path) -> list[str]:
    """Every class (nested ones too) over LONGEST_CLASS lines, its `class` line to its last."""
    return [
        f"{path}:{node.lineno}: class {node.name} is {node.end_lineno - node.lineno + 1} lines (at most "
        f"{LONGEST_CLASS}): split it along its seams into modules of one idea each"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > LONGEST_CLASS
    ]


def test_no_class_is_over_400_lines():
    problems = [line for path, tree in parsed() for line in long_classes(tree, path)]
    assert not problems, "\n".join(problems)


def test_the_class_rule_finds_a_long_class_and_counts_from_its_class_line():
    body = "".join(f"    x{i} = {i}\n" for i in range(LONGEST_CLASS - 1))
    tree = ast.parse(f"class Fits:\n{body}\nclass Long:\n{body}    y = 0\n")
    assert long_classes(tree, Path("x.py")) == [
        f"x.py:{LONGEST_CLASS + 2}: class Long is {LONGEST_CLASS + 1} lines (at most {LONGEST_CLASS}): "
        "split it along its seams into modules of one idea each"
    ]
