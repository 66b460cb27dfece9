"""The suite's slowest tests, with the wall and the CPU seconds each took, so that the next
slow test is seen when it lands.

    .venv/bin/python bench/bench_slowest_tests.py [--top 20] [--save times.jsonl] [-- PYTEST ARGS...]
    .venv/bin/python bench/bench_slowest_tests.py --load before.jsonl [--compare after.jsonl]

Runs pytest (the README's whole suite unless PYTEST ARGS say otherwise) with a small plugin
that times each test's call: wall seconds, and CPU seconds of the test's process plus the
children that ended during it (the `qwenpipe` processes a CLI test starts; a browser launched
in-process and kept for a module is counted where it ends). Prints the `--top` tests by CPU,
then by wall, then the modules by CPU. `--save` keeps the figures (one JSON line a test);
`--load` reports saved ones without running anything, and `--compare` sets a second run beside
them, module by module. Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PLUGIN = """
import json, os, resource, time
import pytest

def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    wall, cpu = time.perf_counter(), _cpu()
    yield
    line = {"test": item.nodeid, "wall": time.perf_counter() - wall, "cpu": _cpu() - cpu}
    with open(os.environ["QWENPIPE_TEST_TIMES"], "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\\n")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--save", type=Path, help="keep each test's figures in this file (JSON lines)")
    parser.add_argument("--load", type=Path, help="report a saved run instead of running the suite")
    parser.add_argument("--compare", type=Path, help="with --load: a later saved run to set beside it")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    if args.load:
        before = read_rows(args.load)
        if args.compare:
            compare(before, read_rows(args.compare))
        else:
            report(before, args.top)
        return 0
    returncode, rows = run_suite(args.pytest_args)
    if not rows:
        print("no test times were recorded", file=sys.stderr)
        return returncode or 1
    if args.save:
        args.save.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    report(rows, args.top)
    return returncode


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_suite(pytest_args: list[str]) -> tuple[int, list[dict]]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "qwenpipe_test_times.py").write_text(PLUGIN, encoding="utf-8")
        times = Path(tmp) / "times.jsonl"
        env = {
            **os.environ,
            "QWENPIPE_TEST_TIMES": str(times),
            "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH", "")])),
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        command = [sys.executable, "-m", "pytest", "-q", "-n", "5", "-p", "qwenpipe_test_times"]
        result = subprocess.run(command + (pytest_args or []), cwd=ROOT, env=env)
        return result.returncode, read_rows(times) if times.exists() else []


def module_of(row: dict) -> str:
    return row["test"].split("::", 1)[0]


def by_module(rows: list[dict]) -> dict[str, tuple[int, float, float]]:
    modules: dict[str, list[float]] = {}
    for row in rows:
        entry = modules.setdefault(module_of(row), [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += row["cpu"]
        entry[2] += row["wall"]
    return {name: (int(n), cpu, wall) for name, (n, cpu, wall) in modules.items()}


def report(rows: list[dict], top: int) -> None:
    total_wall, total_cpu = sum(r["wall"] for r in rows), sum(r["cpu"] for r in rows)
    print(f"{len(rows)} tests: {total_wall:.0f} s of test wall time, {total_cpu:.0f} CPU-s (with children)")
    for key in ("cpu", "wall"):
        print(f"\nslowest {top} by {key}:")
        print(f"{'cpu s':>8} {'wall s':>8}  test")
        for row in sorted(rows, key=lambda r: r[key], reverse=True)[:top]:
            print(f"{row['cpu']:>8.1f} {row['wall']:>8.1f}  {row['test']}")
    print(f"\nmodules by cpu (top {top}):")
    print(f"{'tests':>6} {'cpu s':>8} {'wall s':>8}  module")
    modules = sorted(by_module(rows).items(), key=lambda item: item[1][1], reverse=True)
    for name, (count, cpu, wall) in modules[:top]:
        print(f"{count:>6} {cpu:>8.1f} {wall:>8.1f}  {name}")


def compare(before: list[dict], after: list[dict]) -> None:
    """The two runs' totals, then every module's CPU seconds before and after (biggest first)."""
    old, new = by_module(before), by_module(after)
    for label, rows in (("before", before), ("after", after)):
        cpu, wall = sum(r["cpu"] for r in rows), sum(r["wall"] for r in rows)
        print(f"{label:>6}: {len(rows)} tests, {cpu:.0f} CPU-s, {wall:.0f} s of test wall time")
    print(f"\n{'tests':>6} {'cpu s':>8} {'tests':>6} {'cpu s':>8}  module (before | after)")
    none = (0, 0.0, 0.0)
    names = sorted(set(old) | set(new), key=lambda n: -max(old.get(n, none)[1], new.get(n, none)[1]))
    for name in names:
        a, b = old.get(name, none), new.get(name, none)
        print(f"{a[0]:>6} {a[1]:>8.1f} {b[0]:>6} {b[1]:>8.1f}  {name}")


if __name__ == "__main__":
    sys.exit(main())
