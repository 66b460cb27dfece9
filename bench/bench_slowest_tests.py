"""The suite's slowest tests, with the wall and the CPU seconds each took, so that the next
slow test is seen when it lands.

    .venv/bin/python bench/bench_slowest_tests.py [--top 20] [-- PYTEST ARGS...]

Runs pytest (the README's whole suite unless PYTEST ARGS say otherwise) with a small plugin
that times each test's call: wall seconds, and CPU seconds of the test's process plus the
children that ended during it (the `qwenpipe` processes a CLI test starts; a browser launched
in-process and kept for a module is counted where it ends). Prints the `--top` tests by CPU,
then by wall. Not run by the tests.
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
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
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
        result = subprocess.run(command + (args.pytest_args or []), cwd=ROOT, env=env)
        rows = (
            [json.loads(line) for line in times.read_text(encoding="utf-8").splitlines()]
            if times.exists()
            else []
        )
    if not rows:
        print("no test times were recorded", file=sys.stderr)
        return result.returncode or 1
    total_wall, total_cpu = sum(r["wall"] for r in rows), sum(r["cpu"] for r in rows)
    print(f"{len(rows)} tests: {total_wall:.0f} s of test wall time, {total_cpu:.0f} CPU-s (with children)")
    for key in ("cpu", "wall"):
        print(f"\nslowest {args.top} by {key}:")
        print(f"{'cpu s':>8} {'wall s':>8}  test")
        for row in sorted(rows, key=lambda r: r[key], reverse=True)[: args.top]:
            print(f"{row['cpu']:>8.1f} {row['wall']:>8.1f}  {row['test']}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
