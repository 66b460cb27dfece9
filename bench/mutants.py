"""The mutation check of the safety lines (issue 29, part 6): kept outside CI, run by hand.

    .venv/bin/python bench/mutants.py [--list] [--only PATTERN] [--jobs N] [--max N] [--timeout S]
                                      [--no-clean] [--tests PATH ...] [--results PATH [--resume]]
                                      [--summary]

It changes one safety line at a time and runs the tests that should notice: a mutant the tests
pass with is a survivor, a line no test holds in place. The target is 0 survivors (or each one
explained as equivalent). The safety lines:

- the step (`pipeline/contract/step.py`, and the modules it may be split into: step/*.py,
  steps/*.py, handlers*.py, and any module of the contract it imports that is not in NOT_STEP):
  every statement that writes a file, the store, a crash point, a lease check, a marker, a
  budget, and the conditions around them (selected by what the statement does, SAFETY, not by
  its line or function, so it follows the code when it moves);
- `pipeline/contract/phases.py`: every rule of the decision table;
- the stores (`pipeline/store/sql.py`, `sqlite.py`, `postgres.py`): the step, intent, lease and
  send-count paths, their SQL conditions included;
- `pipeline/redact.py`: all of it;
- the chat engine's send, observe and judge paths (`pipeline/engines/qwen/sending.py`,
  `observing.py`, `judging.py`): all of them, held by the engine's own browser tests.
- the collector (`pipeline/engines/qwen/collect.py`, `steady.py`): when one read, or the
  stability reads, take an answer from a chat's JSON; all of it.
- the closing of a page (`pipeline/engines/qwen/closing.py`): all of it.

The mutations: negate a condition, drop a statement (a call, a `with` block, a raise, a guard),
swap two consecutive writes, replace a comparison operator (in Python and in SQL), return early.
Besides them, the mutants issue 29 names (NAMED below) are always listed first and must be
killed; one whose anchor text is no longer found is reported MISSING (update its anchor).

Each worker copies the repository's files (`git ls-files`) into a temporary folder once, then
for each mutant writes the changed file there, runs its group's tests there (PYTHONPATH points
at the copy, so the CLI subprocesses the integration tests start run the mutant too), and puts
the file back. Before the mutants, each group's tests run once unchanged: they must pass (else
every mutant would look killed), and their time sets the timeout (3x + 60 s unless --timeout).

The engine's and the collector's tests run the mutated code in their own process (the engine
itself, or the CLI in-process), so for those groups (TRACED) the clean run also maps each test
to the functions of the package it runs (bench/mutants_trace.py, a pytest plugin) and each
test's time; a mutant then runs only the tests that run its function, the fastest first, with
-x. A mutant whose function no test runs is "not covered", a survivor decided without running
anything. The map is kept beside the results (PATH.map.json) with a digest of the files it was
made from, and made again when they change.
The selection is sound: a test that never calls the function runs the same with the mutant.

--results PATH appends each decided mutant to PATH as a JSON line as soon as it is decided, so a
run stopped at any point loses at most the mutants in progress; --resume skips the mutants PATH
already decides (killed, survived, timeout, not covered) and reports them with the new ones;
--summary prints the report of PATH without running anything.

Not run by the tests, nor by CI. Exit 0 when nothing survived or timed out, 1 otherwise.
Why not mutmut: mutmut 3 first runs the whole suite to map tests to functions (hours of CPU
here), runs the mutant in-process through trampolines (our CLI tests' subprocesses would not
see it), and has no statement swaps or SQL mutations; the named mutants need anchors anyway.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# -- what is mutated, and the tests that must notice ------------------------------------------


@dataclass(frozen=True)
class Target:
    group: str
    files: tuple[str, ...]  # globs under the repository
    functions: tuple[str, ...] = ("*",)  # qualified names (fnmatch): Class.method, function
    safety_only: bool = False  # only statements matching SAFETY, and the conditions around them


STEP_FILES = (
    "pipeline/contract/step.py",
    "pipeline/contract/step_*.py",
    "pipeline/contract/step/*.py",
    "pipeline/contract/steps/*.py",
    "pipeline/contract/handlers.py",
    "pipeline/contract/handlers/*.py",
    "follow-imports:",  # and every module of the contract the step imports that is none of these:
)
# The contract's modules that are not the step (what it was split from may add any other name).
NOT_STEP = {
    "pipeline/contract/__init__.py",
    "pipeline/contract/article.py",
    "pipeline/contract/checks.py",
    "pipeline/contract/cleanup.py",
    "pipeline/contract/hosts.py",
    "pipeline/contract/journal.py",
    "pipeline/contract/phases.py",
    "pipeline/contract/prompts.py",
    "pipeline/contract/quota.py",
    "pipeline/contract/render.py",
    "pipeline/contract/rotation.py",
    "pipeline/contract/upgrade.py",
    "pipeline/contract/workspace.py",
}
STORE_FUNCTIONS = (
    "SQLStore.send_counts",
    "SQLStore.sends",
    "SQLStore.first_sends",
    "SQLStore.articles",
    "SQLStore.claim_lease",
    "SQLStore.renew_lease",
    "SQLStore.release_lease",
    "SQLStore.lease",
    "SQLTransaction.record_intent",
    "SQLTransaction.record_sent",
    "SQLTransaction.name_chat",
    "SQLTransaction.withdraw_intent",
    "SQLTransaction.forget_sends",
    "SQLTransaction.check_lease",
    "SQLTransaction.put_finished",
    "SQLTransaction.changes_one",
    "SQLTransaction._send",
    "read_article",
    "open_intent",
    "SQLiteStore.transaction",
    "SQLiteTransaction._insert_unique",
    "PostgresStore.transaction",
    "PostgresTransaction._insert_unique",
)
TARGETS = (
    Target("step", STEP_FILES, safety_only=True),
    Target("phases", ("pipeline/contract/phases.py",)),
    Target(
        "stores",
        ("pipeline/store/sql.py", "pipeline/store/sqlite.py", "pipeline/store/postgres.py"),
        STORE_FUNCTIONS,
    ),
    Target("redact", ("pipeline/redact.py",)),
    # The chat engine's send, observe and judge paths (issue 40, part 5): every statement.
    Target(
        "engine",
        (
            "pipeline/engines/qwen/sending.py",
            "pipeline/engines/qwen/observing.py",
            "pipeline/engines/qwen/judging.py",
        ),
    ),
    # The collector: when one read, or the stability reads, take an answer from a chat's JSON
    # (a wrong rule here writes an unfinished answer as the article).
    Target("collect", ("pipeline/engines/qwen/collect.py", "pipeline/engines/qwen/steady.py")),
    # Every page of ours is closed here: a close that waits for good hangs a cron command.
    Target("closing", ("pipeline/engines/qwen/closing.py",)),
)
# Per group, in the order they run (pytest -x: the fast ones first stop a killed mutant early).
TESTS = {
    "step": (
        "tests/unit/test_step*.py",
        "tests/unit/test_recovery_rules.py",
        "tests/unit/test_intents.py",
        "tests/unit/test_leases.py",
        "tests/unit/test_contract.py",
        "tests/unit/test_multi_turn.py",
        # what the step's handlers also do: holds, chat deletion, clock jumps, accounts, answer
        # checks, the store handed in (a first run without them left 23 of 57 mutants alive)
        "tests/unit/test_holds.py",
        "tests/unit/test_delete_chats.py",
        "tests/unit/test_clock_jumps.py",
        "tests/unit/test_accounts_contract.py",
        "tests/unit/test_quality_gates.py",
        "tests/unit/test_small_frictions.py",
        "tests/unit/test_store_handed_in.py",
        "tests/model",
        "tests/integration/test_recovery_cli.py",
        "tests/integration/test_intents_cli.py",
        "tests/integration/test_shared_batch.py",
    ),
    "phases": (
        "tests/unit/test_phases.py",
        "tests/unit/test_clock_jumps.py",
        "tests/unit/test_contract.py",
        "tests/model",
    ),
    "stores": ("tests/store",),
    "redact": ("tests/unit/test_redact*.py", "tests/integration/test_key_never_leaks_cli.py"),
    "engine": (
        "tests/engines/test_steadiness.py",
        # judging.py's and sending.py's rules on fakes of the real types (no browser)
        "tests/engines/test_judging_and_sending_rules.py",
        # observing's rules on hand-made pages and a clock of the test's: its timing rules exact
        "tests/engines/test_observing_rules.py",
        "tests/integration/test_qwen_multi_turn.py",
        "tests/integration/test_qwen_engine.py",
        # the completion held until its chat is on record: the send's other way to send nothing
        "tests/integration/test_completion_hold.py",
    ),
    "collect": (
        "tests/engines/test_steadiness.py",
        "tests/engines/test_finished_long_ago.py",
        "tests/engines/test_collect.py",
        "tests/integration/test_collect_cli.py",
        "tests/integration/test_autumn_2026_cli.py",
        "tests/integration/test_late_autumn_2026_cli.py",
        "tests/integration/test_fuzz_findings_cli.py",
    ),
    "closing": ("tests/engines/test_closing.py", "tests/integration/test_page_closing.py"),
}

# The groups whose tests run the mutated code in the tests' own process: a map test -> functions
# made there is complete, and each mutant runs only the tests that reach its function.
TRACED = {"engine", "collect", "closing"}
# What a verdict of a previous run (--results) that --resume takes as decided.
DECIDED = {"killed", "survived", "timeout", "not covered"}

# What makes a statement of the step a safety line: it writes a file, the store, the journal's
# step, a marker or the state; it is a crash point, a lease check, the budget; or it masks.
SAFETY = re.compile(
    r"crashpoint\(|lease\b[\w.]*\.(check|claim|release)\(|atomic_write\(|files\.remove\(|"
    r"\.transaction\(\)|record_intent\(|record_sent\(|record_finished\(|withdraw_intent\(|forget_sends\(|"
    r"name_chat\(|give_back\(|unsent\(|put_finished\(|\.save\(\)|budget\.(take|give_back)\(|"
    r"deleted_chat\(|dead_letter\(|mask|chat_quota\.(block|hold)\(|\.check\(\)"
)


@dataclass(frozen=True)
class Named:
    """A mutant the issue names: in the function whose source holds `within`, the text matching
    `old` (a regex, exactly once) becomes `new` (re.sub syntax)."""

    name: str
    group: str
    files: tuple[str, ...]
    within: str
    old: str
    new: str
    why: str


NAMED = (
    Named(
        "named:url-before-crashpoint",
        "step",
        STEP_FILES,
        'crash("after_send")',
        r"(?P<crash>[ \t]*[\w.]*crash\(\"after_send\"\)\n)(?P<between>(?:[ \t]*#.*\n)*)"
        r"(?P<url>[ \t]*files\.atomic_write\([\w.]*\.url, \w+ \+ \"\\n\"\)\n)",
        r"\g<between>\g<url>\g<crash>",
        "the URL written on the other side of the after_send crash point: a kill there no longer "
        "leaves the interrupted send that recovery must answer",
    ),
    Named(
        "named:no-lease-check-before-click",
        "step",
        STEP_FILES,
        'crash("before_send")',
        r"[\w.]*lease\.check\(\)",
        "pass",
        "the lease is not checked just before the click: a host that lost it still sends",
    ),
    Named(
        "named:send-counts-count-unsent",
        "stores",
        ("pipeline/store/sql.py",),
        "def send_counts(",
        r"next != \?\)",
        "next != ? OR 1 = 1)",
        "send_counts counts a send that its next step says was never taken (unsent)",
    ),
    Named(
        "named:marker-removed-before-url",
        "step",
        STEP_FILES,
        'crash("after_send")',
        r"(?P<url>[ \t]*files\.atomic_write\([\w.]*\.url, \w+ \+ \"\\n\"\)\n)"
        r"(?P<marker>[ \t]*files\.remove\([\w.]*\.sending\)\n)",
        r"\g<marker>\g<url>",
        "(not one of the issue's three) the intent marker goes before the URL is on disk: a kill "
        "between leaves neither, and the next run sends again (a real double send)",
    ),
)


# -- mutants -----------------------------------------------------------------------------------


@dataclass
class Mutant:
    id: str
    group: str
    path: str  # relative to the repository
    function: str
    line: int
    what: str
    source: str  # the whole mutated file
    original: str
    why: str = ""
    missing: bool = False  # a named mutant whose anchor is gone
    shape: str = ""  # its function's tree: two mutants with one shape are one mutant

    def diff(self) -> str:
        lines = difflib.unified_diff(
            self.original.splitlines(keepends=True),
            self.source.splitlines(keepends=True),
            f"a/{self.path}",
            f"b/{self.path}",
            n=1,
        )
        return "".join(lines)


class Source:
    """A file's text with ast positions (UTF-8 byte columns) turned into string offsets."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.tree = ast.parse(text)

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode()[:col].decode())

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def edit(self, start: int, end: int, new: str) -> str:
        return self.text[:start] + new + self.text[end:]


def functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function and method, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")


def own_statements(func: ast.AST):
    """The statements of `func`'s body at any depth, not those of functions nested in it."""
    stack = [func]
    while stack:
        node = stack.pop()
        for name in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(node, name, []) or []:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if isinstance(child, ast.stmt):
                    yield child
                stack.append(child)


def blocks(func: ast.AST):
    """Every statement list in `func` (its body, each if/with/try/for body...)."""
    stack = [func]
    while stack:
        node = stack.pop()
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.append(child)


COMPARE_SWAPS = {
    "<": "<=",
    "<=": "<",
    ">": ">=",
    ">=": ">",
    "==": "!=",
    "!=": "==",
    "is not": "is",
    "is": "is not",
    "not in": "in",
    "in": "not in",
}
COMPARE_TOKEN = re.compile(r"is\s+not|not\s+in|==|!=|<=|>=|<|>|\bis\b|\bin\b")
SQL_SWAPS = {"<=": "<", ">=": ">", "<": "<=", ">": ">=", "!=": "=", "=": "!=", "IS NULL": "IS NOT NULL"}
SQL_TOKEN = re.compile(r"(?<=\w )(IS NOT NULL|IS NULL|<=|>=|!=|=|<|>)(?= )")


def droppable(stmt: ast.stmt) -> bool:
    """A statement whose removal leaves valid code that still runs: a call, a with block, a raise,
    a write to an attribute or item, a guard (an if without else that returns or raises)."""
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Call)
    if isinstance(stmt, (ast.With, ast.Raise, ast.AugAssign)):
        return True
    if isinstance(stmt, ast.Assign):
        return all(
            isinstance(t, (ast.Attribute, ast.Subscript, ast.Tuple)) for t in stmt.targets
        ) and not any(
            isinstance(t, ast.Tuple) and any(isinstance(e, ast.Name) for e in t.elts) for t in stmt.targets
        )
    if isinstance(stmt, ast.If):
        return not stmt.orelse and isinstance(stmt.body[-1], (ast.Return, ast.Raise))
    return False


def names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def mutants_of(path: str, text: str, target: Target) -> list[Mutant]:
    src = Source(text)
    found: list[Mutant] = []

    made: set[str] = {text}

    def add(qual: str, node: ast.AST, what: str, new_text: str) -> None:
        if new_text in made:  # the original, or a mutant already made another way
            return
        made.add(new_text)
        start, end = here
        form = shape(new_text, start, end + len(new_text) - len(text))
        if form is None:
            return
        n = sum(1 for m in found if m.function == qual and m.what.split(":")[0] == what.split(":")[0])
        kind = what.split(":")[0].replace(" ", "-")
        mid = f"{target.group}:{Path(path).name}:{qual}:{kind}:{n + 1}"
        found.append(Mutant(mid, target.group, path, qual, node.lineno, what, new_text, text, shape=form))

    def safe(node: ast.AST) -> bool:
        return not target.safety_only or bool(SAFETY.search(src.segment(node)))

    def guarded(stmt: ast.If | ast.While) -> bool:  # a condition around a safety line
        if not target.safety_only:
            return True
        return safe(stmt.test) or any(safe(s) for s in stmt.body if not isinstance(s, (ast.If, ast.While)))

    def short(node: ast.AST) -> str:
        first = src.segment(node).strip().splitlines()[0]
        return first if len(first) <= 70 else first[:67] + "..."

    here = (0, 0)
    for qual, func in functions(src.tree):
        if not any(fnmatch.fnmatchcase(qual, p) for p in target.functions):
            continue
        here = (src.starts[func.lineno - 1], src.span(func)[1])
        statements = list(own_statements(func))
        # negate a condition; replace a comparison operator in it
        for stmt in statements:
            if isinstance(stmt, (ast.If, ast.While)) and guarded(stmt):
                start, end = src.span(stmt.test)
                add(
                    qual,
                    stmt,
                    f"negate: {short(stmt.test)}",
                    src.edit(start, end, f"not ({src.segment(stmt.test)})"),
                )
        conditions = [s.test for s in statements if isinstance(s, (ast.If, ast.While)) and guarded(s)]
        negated = {id(c) for c in conditions}  # `not (a is b)` is `a is not b`: made once
        if not target.safety_only:  # every comparison of the function, returns and assignments too
            conditions = [func]
        seen: set[int] = set()
        for cond in conditions:
            for cmp in ast.walk(cond):
                if not isinstance(cmp, ast.Compare) or id(cmp) in seen:
                    continue
                seen.add(id(cmp))
                operands = [cmp.left, *cmp.comparators]
                for left, right in zip(operands, operands[1:], strict=False):
                    gap_start, gap_end = src.span(left)[1], src.span(right)[0]
                    match = COMPARE_TOKEN.search(src.text, gap_start, gap_end)
                    if not match:
                        continue
                    op = re.sub(r"\s+", " ", match.group())
                    if id(cmp) in negated and len(cmp.ops) == 1 and op not in ("<", "<=", ">", ">="):
                        continue
                    new = src.edit(match.start(), match.end(), COMPARE_SWAPS[op])
                    add(qual, cmp, f"compare: {op} -> {COMPARE_SWAPS[op]} in {short(cmp)}", new)
        # drop a statement
        for stmt in statements:
            if droppable(stmt) and safe(stmt):
                start, end = src.span(stmt)
                add(qual, stmt, f"drop: {short(stmt)}", src.edit(start, end, "pass"))
        # swap two consecutive writes
        for body in blocks(func):
            for first, second in zip(body, body[1:], strict=False):
                if not (droppable(first) and droppable(second)) or isinstance(first, ast.If):
                    continue
                if isinstance(second, ast.If) or not (safe(first) and safe(second)):
                    continue
                if names(first, ast.Store) & names(second, ast.Load):
                    continue
                a, b = src.span(first), src.span(second)
                swapped = src.text[b[0] : b[1]] + src.text[a[1] : b[0]] + src.text[a[0] : a[1]]
                add(qual, first, f"swap: {short(first)} <-> {short(second)}", src.edit(a[0], b[1], swapped))
        # return early: a procedure returns before doing anything
        returns = func.returns
        procedure = (
            returns is None or (isinstance(returns, ast.Constant) and returns.value is None)
        ) and not any(isinstance(s, ast.Return) and s.value is not None for s in statements)
        boolean = isinstance(returns, ast.Name) and returns.id == "bool"
        if (procedure or boolean) and (not target.safety_only or any(safe(s) for s in statements)):
            body = func.body
            first = body[1] if len(body) > 1 and is_docstring(body[0]) else body[0]
            if not (len(body) == 1 and is_docstring(body[0])):
                indent = " " * first.col_offset
                at = src.starts[first.lineno - 1]
                for value in ("",) if procedure else (" True", " False"):
                    add(
                        qual,
                        first,
                        f"return early:{value or ' None'}",
                        src.edit(at, at, f"{indent}return{value}\n"),
                    )
        # replace a comparison in the SQL of a store
        if target.group == "stores":
            for node in ast.walk(func):
                literal_node = isinstance(node, ast.Constant) and isinstance(node.value, str)
                if not (literal_node or isinstance(node, ast.JoinedStr)):
                    continue
                start, end = src.span(node)
                literal = src.text[start:end]
                where = re.search(r"WHERE|_where\(|where\(", literal)
                if not where and not in_where_call(func, node):
                    continue
                for match in SQL_TOKEN.finditer(literal, where.start() if where else 0):
                    op = match.group()
                    new = src.edit(start + match.start(), start + match.end(), SQL_SWAPS[op])
                    add(qual, node, f"sql: {op} -> {SQL_SWAPS[op]} in {short(node)}", new)
    return found


def shape(text: str, start: int, end: int) -> str | None:
    """The tree of the function at text[start:end], comments and layout aside (what tells two
    mutants apart); None when the mutated code does not parse."""
    try:
        return ast.dump(ast.parse(textwrap.dedent(text[start:end])))
    except SyntaxError:  # a string whose lines start further left than the def: the whole file
        try:
            return ast.dump(ast.parse(text))
        except SyntaxError:
            return None


def is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def in_where_call(func: ast.AST, literal: ast.AST) -> bool:
    """Whether `literal` is the condition handed to a `_where(...)`/`where(...)` call."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("_where", "where")
        and any(a is literal for a in node.args)
        for node in ast.walk(func)
    )


def named_mutant(named: Named) -> Mutant:
    for path in expand(named.files):
        text = (ROOT / path).read_text()
        src = Source(text)
        holders = [(q, f) for q, f in functions(src.tree) if named.within in src.segment(f)]
        for qual, func in sorted(holders, key=lambda h: len(src.segment(h[1]))):  # the innermost first
            at, end = src.starts[func.lineno - 1], src.span(func)[1]
            matches = list(re.finditer(named.old, text[at:end]))
            if len(matches) != 1:
                continue
            match = matches[0]
            new_text = text[: at + match.start()] + match.expand(named.new) + text[at + match.end() :]
            line = text.count("\n", 0, at + match.start()) + 1
            form = shape(new_text, at, end + len(new_text) - len(text)) or ""
            return Mutant(
                named.name,
                named.group,
                path,
                qual,
                line,
                named.why,
                new_text,
                text,
                why=named.why,
                shape=form,
            )
    return Mutant(
        named.name,
        named.group,
        "?",
        "?",
        0,
        f"MISSING: anchor {named.within!r} / {named.old!r}",
        "",
        "",
        missing=True,
    )


def expand(globs: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for pattern in globs:
        if pattern == "follow-imports:":
            found.extend(p for p in imported_contract_modules(found) if p not in found)
            continue
        for path in sorted(ROOT.glob(pattern)):
            rel = str(path.relative_to(ROOT))
            if rel not in found and (path.is_dir() or path.suffix == ".py"):
                found.append(rel)
    return found


def imported_contract_modules(roots: list[str]) -> list[str]:
    """The modules of pipeline/contract (but NOT_STEP) that `roots` import, directly or not: the
    step's own modules, whatever the split named them."""
    todo, seen = [r for r in roots if r.endswith(".py")], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        package = Path(path).parent
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.parent
            module = (node.module or "").replace(".", "/")
            if not node.level:
                base, module = Path(), module
            stems = [module] if module else []
            stems += [f"{module}/{a.name}" if module else a.name for a in node.names]
            for stem in stems:
                for candidate in (base / f"{stem}.py", base / stem / "__init__.py"):
                    rel = str(candidate)
                    if (
                        rel.startswith("pipeline/contract/")
                        and (ROOT / rel).is_file()
                        and rel not in NOT_STEP
                    ):
                        todo.append(rel)
    return sorted(seen - set(roots))


def all_mutants() -> list[Mutant]:
    """The named mutants, then each target's; one mutant per distinct code (the same tree, comments
    and layout aside, is made once: a named one before a generic one)."""
    mutants = [named_mutant(n) for n in NAMED]
    made = {(m.path, m.function, m.shape) for m in mutants if not m.missing}
    for target in TARGETS:
        for path in expand(target.files):
            for m in mutants_of(path, (ROOT / path).read_text(), target):
                key = (m.path, m.function, m.shape)
                if key not in made:
                    made.add(key)
                    mutants.append(m)
    return mutants


# -- running -------------------------------------------------------------------------------------


@dataclass
class Result:
    mutant: Mutant
    verdict: str  # killed, survived, timeout
    seconds: float
    tail: str = ""
    caught_by: str = ""  # the first test that failed


@dataclass
class Worker:
    """A copy of the repository the mutants are applied to, one at a time."""

    folder: Path
    env: dict = field(default_factory=dict)
    proc: subprocess.Popen | None = None  # the test run going on, if any
    stopping: bool = False

    @classmethod
    def make(cls) -> Worker:
        folder = Path(tempfile.mkdtemp(prefix="qwenpipe-mutants-"))
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        for rel in filter(None, listed.split("\0")):
            source = ROOT / rel
            if source.is_file() and not source.is_symlink():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, folder / rel)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH", "")]))
        return cls(folder, env)

    def check_imports_copy(self) -> None:
        """The copy's package is the one a test's subprocess imports, not the installed one."""
        where = subprocess.run(
            [sys.executable, "-c", "import pipeline; print(pipeline.__file__)"],
            cwd=tempfile.gettempdir(),
            env=self.env,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not where.startswith(str(self.folder)):
            raise SystemExit(
                f"mutants: a subprocess imports pipeline from {where}, not the copy {self.folder}"
            )

    def run(
        self, tests: list[str], timeout: float, mutant: Mutant | None = None, trace_to: Path | None = None
    ) -> Result:
        """Run `tests` (paths or node ids, in this order) with `mutant` applied; `trace_to`: also
        map each test to the package's functions it runs, into that file (mutants_trace.py)."""
        target = self.folder / mutant.path if mutant else None
        if self.stopping:
            return Result(mutant, "stopped", 0.0)
        if mutant:
            target.write_text(mutant.source)
            self.forget_bytecode(target)
        started = time.monotonic()
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header"]
        env = self.env
        if trace_to is not None:
            cmd += ["-p", "mutants_trace"]
            env = dict(
                self.env,
                PYTHONPATH=os.pathsep.join([str(self.folder / "bench"), self.env["PYTHONPATH"]]),
                MUTANTS_TRACE_ROOT=str(self.folder / "pipeline") + os.sep,
                MUTANTS_TRACE_OUT=str(trace_to),
            )
        proc = subprocess.Popen(
            [*cmd, *tests],
            cwd=self.folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: a timeout ends the browsers it started too
        )
        self.proc = proc
        if self.stopping:  # stop() came between the check and the start
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, _ = proc.communicate(timeout=timeout)
            verdict = "survived" if proc.returncode == 0 else "killed"
            if proc.returncode in (4, 5):  # usage error, no tests collected: not a verdict
                verdict = "error"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            verdict = "timeout"
        finally:
            if mutant and not self.stopping:  # stopping: the copy is removed anyway
                target.write_text(mutant.original)
                self.forget_bytecode(target)
        tail = "\n".join(out.strip().splitlines()[-3:])
        failed = re.search(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", out, re.MULTILINE)
        return Result(mutant, verdict, time.monotonic() - started, tail, failed.group(1) if failed else "")

    @staticmethod
    def forget_bytecode(path: Path) -> None:
        # A .pyc knows its source by mtime (whole seconds) and size: a mutant and the original,
        # written in the same second with the same size, would share a stale one.
        for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)

    def stop(self) -> None:
        """End the test run going on (Ctrl-C), browsers and all; start no other."""
        self.stopping = True
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def tests_of(group: str) -> list[str]:
    tests = expand(TESTS[group])
    if not tests:
        raise SystemExit(f"mutants: no tests found for group {group!r} ({', '.join(TESTS[group])})")
    return tests


# -- the map test -> functions of a TRACED group ----------------------------------------------


def sources_digest() -> str:
    """What a map depends on: the package's and the tests' files (a change in either may change
    which test runs which function)."""
    digest = hashlib.sha256()
    for pattern in ("pipeline/**/*.py", "tests/**/*.py", "bench/mutants_trace.py"):
        for path in sorted(ROOT.glob(pattern)):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def load_map(path: Path, digest: str, tests: list[str]) -> dict | None:
    """The map kept at `path` if it was made from these files and tests, else None."""
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if kept.get("digest") != digest or kept.get("paths") != tests:
        return None
    return kept["tests"]


def make_map(
    worker: Worker, tests: list[str], timeout: float, path: Path, digest: str, group: str
) -> tuple[Result, dict]:
    """The group's clean run, tracing: each test's seconds and the functions of the group's
    mutated files it runs, kept at `path`."""
    files = {name for target in TARGETS if target.group == group for name in expand(target.files)}
    raw = worker.folder.parent / f"{worker.folder.name}.trace.json"
    clean = worker.run(tests, timeout, trace_to=raw)
    found: dict = {}
    if clean.verdict == "survived":
        for test, seen in json.loads(raw.read_text()).items():
            ours = [f for f in seen["functions"] if f.split("::")[0] in files]
            found[test] = {"seconds": seen["seconds"], "functions": ours}
        path.write_text(json.dumps({"digest": digest, "paths": tests, "tests": found}, indent=0))
    raw.unlink(missing_ok=True)
    return clean, found


def tests_reaching(mutant: Mutant, test_map: dict) -> list[str]:
    """The tests that run the mutant's function, the fastest first (the map's own order on ties)."""
    function = f"{mutant.path}::{mutant.function}"
    reaching = [test for test, seen in test_map.items() if function in seen["functions"]]
    return sorted(reaching, key=lambda test: test_map[test]["seconds"])


# -- results kept as they come (--results, --resume) -----------------------------------------


def load_results(path: Path, mutants: list[Mutant]) -> tuple[list[Result], list[str]]:
    """The results a previous run wrote to `path` (the last line of a mutant wins), and the ids
    of those no mutant of this run has (its code changed since)."""
    by_id = {m.id: m for m in mutants}
    kept: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                kept[row["id"]] = row
    results = [
        Result(by_id[i], row["verdict"], row["seconds"], row.get("tail", ""), row.get("caught_by", ""))
        for i, row in kept.items()
        if i in by_id
    ]
    return results, [i for i in kept if i not in by_id]


def write_result(path: Path | None, result: Result, tests: int) -> None:
    if path is None:
        return
    m = result.mutant
    row = {
        "id": m.id,
        "verdict": result.verdict,
        "seconds": round(result.seconds, 1),
        "caught_by": result.caught_by,
        "tests": tests,
        "at": f"{m.path}:{m.line}",
        "what": m.what,
        "tail": result.tail if result.verdict != "killed" else "",
    }
    with path.open("a") as out:
        out.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the mutants without running them")
    parser.add_argument(
        "--only",
        metavar="PATTERN",
        action="append",
        help="only mutants whose id or text holds PATTERN (fnmatch if it has * ? [); repeat it for "
        "any of several",
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants run side by side (default 1)")
    parser.add_argument(
        "--max", type=int, default=0, help="run at most N mutants (the named ones come first)"
    )
    parser.add_argument(
        "--timeout", type=float, default=0, help="seconds per mutant (default: 3x its tests' clean run + 60)"
    )
    parser.add_argument(
        "--no-clean",
        action="store_true",
        help="skip the clean run of the tests (only when they are known to pass: failing tests make "
        "every mutant look killed); the timeout is then --timeout or 1200 s. A TRACED group still "
        "makes its map (its clean run) unless PATH.map.json is up to date",
    )
    parser.add_argument(
        "--tests",
        nargs="+",
        metavar="PATH",
        help="run these tests (paths or globs) instead of each group's: which test, if any, holds a "
        "survivor in place (e.g. --only ID --tests 'tests/unit' 'tests/store')",
    )
    parser.add_argument("--results", metavar="PATH", help="append each decided mutant to PATH as a JSON line")
    parser.add_argument(
        "--resume", action="store_true", help="skip the mutants --results PATH already decides"
    )
    parser.add_argument(
        "--summary", action="store_true", help="print the report of --results PATH; run nothing"
    )
    args = parser.parse_args(argv)
    if (args.resume or args.summary) and not args.results:
        parser.error("--resume and --summary read the results of --results PATH: name it")
    results_path = Path(args.results).resolve() if args.results else None

    mutants = all_mutants()
    if args.only:
        mutants = [m for m in mutants if any(matches(m, pattern) for pattern in args.only)]
    missing = [m for m in mutants if m.missing]
    previous: list[Result] = []
    if args.resume or args.summary:
        previous, gone = load_results(results_path, mutants)
        for i in gone:
            print(f"mutants: {results_path} decides {i}, which this code no longer makes (left out)")
        if args.summary:
            return report(previous, missing)
        decided = {r.mutant.id for r in previous if r.verdict in DECIDED}
        previous = [r for r in previous if r.mutant.id in decided]
        mutants = [m for m in mutants if m.id not in decided]
    if args.max:
        mutants = mutants[: args.max]

    if args.list:
        for m in mutants:
            print(f"{m.id}\n    {m.path}:{m.line} {m.function}: {m.what}")
        counts = {g: sum(1 for m in mutants if m.group == g) for g in TESTS}
        print(f"\n{len(mutants)} mutants ({', '.join(f'{g} {n}' for g, n in counts.items())})")
        for m in missing:
            print(f"MISSING {m.id}: {m.what}")
        return 1 if missing else 0

    runnable = [m for m in mutants if not m.missing]
    if not runnable:
        print("mutants: nothing to run")
        return report(previous, missing) if previous else (1 if missing else 0)
    groups = sorted({m.group for m in runnable}, key=list(TESTS).index)
    tests = {g: expand(tuple(args.tests)) if args.tests else tests_of(g) for g in groups}
    if args.tests and not tests[groups[0]]:
        raise SystemExit(f"mutants: --tests found nothing ({' '.join(args.tests)})")
    workers = [Worker.make() for _ in range(max(1, min(args.jobs, len(runnable))))]
    try:
        workers[0].check_imports_copy()
        timeouts: dict[str, float] = {}
        maps: dict[str, dict] = {}
        for group in groups:
            traced = group in TRACED and not args.tests
            if traced:  # the clean run is the map's run, unless a map of these very files is kept
                where = Path(f"{results_path}.map.json") if results_path else workers[0].folder / "map.json"
                digest = sources_digest()
                kept = load_map(where, digest, tests[group])
                if kept is not None:
                    maps[group] = kept
                    print(f"map of {group}: {len(kept)} tests, kept in {where}")
                    continue
                clean, maps[group] = make_map(
                    workers[0], tests[group], args.timeout or 3600, where, digest, group
                )
            elif not args.no_clean:  # must pass, and gives the timeout
                clean = workers[0].run(tests[group], timeout=args.timeout or 3600)
            else:
                timeouts[group] = args.timeout or 1200
                continue
            print(
                f"clean run of {group} ({' '.join(tests[group])}): {clean.verdict} in {clean.seconds:.1f} s"
                + (f", mapped to {where}" if traced else "")
            )
            if clean.verdict != "survived":
                print(f"mutants: the tests of {group} fail without a mutant; fix that first\n{clean.tail}")
                return 2
            timeouts[group] = args.timeout or 3 * clean.seconds + 60

        def plan(m: Mutant) -> tuple[list[str], float]:
            """The tests a mutant runs, and its timeout."""
            if m.group not in maps:
                return tests[m.group], timeouts[m.group]
            reaching = tests_reaching(m, maps[m.group])
            took = sum(maps[m.group][t]["seconds"] for t in reaching)
            return reaching, args.timeout or 3 * took + 60

        results = run_all(runnable, workers, plan, results_path)
    finally:
        for worker in workers:
            worker.remove()
    return report(previous + results, missing)


def matches(mutant: Mutant, pattern: str) -> bool:
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(mutant.id, pattern)
    return pattern in mutant.id or pattern in mutant.what


def run_all(mutants: list[Mutant], workers: list[Worker], plan, results_path: Path | None) -> list[Result]:
    todo: queue.Queue[Mutant] = queue.Queue()
    for m in mutants:
        todo.put(m)
    results: list[Result] = []
    lock = threading.Lock()

    def work(worker: Worker) -> None:
        while not worker.stopping:
            try:
                m = todo.get_nowait()
            except queue.Empty:
                return
            tests, timeout = plan(m)
            # no test runs its function: a survivor, decided without running anything
            result = worker.run(tests, timeout, m) if tests else Result(m, "not covered", 0.0)
            if worker.stopping:
                return
            with lock:
                results.append(result)
                write_result(results_path, result, len(tests))
                print(
                    f"[{len(results)}/{len(mutants)}] {result.verdict:8} {result.seconds:6.1f} s  "
                    f"{m.id}  ({m.path}:{m.line}, {len(tests)} tests)"
                    + (f"  by {result.caught_by}" if result.caught_by else ""),
                    flush=True,
                )

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in workers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:  # Ctrl-C: no new mutant starts and the running ones end before main removes the copies
        for worker in workers:
            worker.stop()
        for t in threads:
            if t.ident is not None:
                t.join()
    return results


def report(results: list[Result], missing: list[Mutant]) -> int:
    order = {id(r.mutant): n for n, r in enumerate(results)}
    bad = sorted((r for r in results if r.verdict != "killed"), key=lambda r: order[id(r.mutant)])
    for r in bad:
        m = r.mutant
        print(f"\n{r.verdict.upper()}: {m.path}:{m.line} {m.function}: {m.what}\n  id {m.id}")
        if r.verdict == "error":
            print(f"  {r.tail}")
        print(m.diff().rstrip())
    verdicts = ("killed", "survived", "not covered", "timeout", "error")
    count = {v: sum(1 for r in results if r.verdict == v) for v in verdicts}
    named = [r for r in results if r.mutant.id.startswith("named:")]
    rate = f" ({100 * count['killed'] / len(results):.1f} % killed)" if results else ""
    print(
        f"\n{len(results)} mutants: {count['killed']} killed, {count['survived']} survived, "
        f"{count['not covered']} not covered, {count['timeout']} timed out, {count['error']} errors"
        f"{rate} (target: 0 survivors)"
    )
    if named:
        print("named mutants: " + ", ".join(f"{r.mutant.id[6:]} {r.verdict}" for r in named))
    for m in missing:
        print(f"MISSING {m.id}: {m.what}")
    ran = [r for r in results if r.verdict != "not covered"]
    if ran:
        print(f"mean time per mutant run: {sum(r.seconds for r in ran) / len(ran):.1f} s")
    return 0 if not bad and not missing else 1


def _interrupted(_signum, _frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    # A run in the background (`&`, nohup) starts with Ctrl-C ignored, and a kill is SIGTERM:
    # each stops it as Ctrl-C does, its test runs ended and its copies removed.
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, _interrupted)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("mutants: interrupted; the copies are removed", file=sys.stderr)
        sys.exit(130)
