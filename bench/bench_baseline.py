"""Issue 13's speed targets on this machine: the code the issue measured, run here beside ours.

    .venv/bin/python bench/bench_baseline.py [--rev fedc608]

The issue states its targets in seconds, from figures its author measured with the code of
the time (fedc608): status --json 0.46 s warm and 0.82 s cold, a no-op cycle 0.32 s. Seconds
do not travel between machines (this VM ran that same code and bench at a third of that
speed), but ratios do. This checks out REV into a temporary git worktree, runs its own
bench_status.py and bench_cycle.py and then ours, in the same minutes, and prints each figure
with the speed-up the issue asked for (target / its baseline) beside the one measured here.
Needs the git history (a clone, not a copy of the files). Not run by the tests.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from installed import ENV  # as a user's install runs it (installed.py)

ROOT = Path(__file__).resolve().parent.parent
CYCLE = r"no-op cycle, 10,000 finished"
# (figure, the baseline in seconds, its target, how each bench's output names it: the
# issue's code, ours). Both benches print the label, then the seconds.
FIGURES = [
    ("status --json warm", 0.46, 0.3, r"subprocess\s+warm \(index\)", r"subprocess\s+warm"),
    ("status --json cold", 0.82, 0.5, r"subprocess\s+cold \(no index\)", r"subprocess\s+cold"),
    ("no-op cycle, 10,000 finished", 0.32, 0.3, CYCLE, CYCLE),
]


def seconds(output: str, label: str) -> float:
    found = re.search(label + r"\s+([0-9.]+)", output)
    if found is None:
        raise SystemExit(f"no figure {label!r} in the bench's output:\n{output}")
    return float(found[1])


def run_benches(tree: Path) -> str:
    """The output of bench_status.py and bench_cycle.py of the code at `tree`, run with it."""
    env = {**ENV, "PYTHONPATH": str(tree)}  # that tree's package, whatever is installed
    compileall.compile_dir(str(tree / "pipeline"), quiet=1)  # bytecode, as an install has it
    output = ""
    for script in ("bench_status.py", "bench_cycle.py"):
        result = subprocess.run(
            [sys.executable, str(tree / "bench" / script)], cwd=tree, env=env, capture_output=True, text=True
        )
        if result.returncode:
            raise SystemExit(f"{tree / 'bench' / script} failed: {result.stderr}")
        output += result.stdout
    return output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="fedc608", help="the code the issue measured (default fedc608)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qwenpipe-baseline-") as folder:
        tree = Path(folder) / "baseline"
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "add", "-q", "--detach", str(tree), args.rev], check=True)
        try:
            before = run_benches(tree)
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=False)
    now = run_benches(ROOT)
    print(f"the issue's code ({args.rev}) and this code, each with its own bench; {os.cpu_count()} CPUs")
    print(f"{'figure':<30}{args.rev + ' s':>11}{'now s':>8}{'now/then':>10}{'asked':>8}  ok")
    for figure, baseline, target, old_label, new_label in FIGURES:
        then, ours = seconds(before, old_label), seconds(now, new_label)
        asked = target / baseline
        ok = "yes" if ours / then <= asked else "NO"
        print(f"{figure:<30}{then:>11.3f}{ours:>8.3f}{ours / then:>10.2f}{asked:>8.2f}  {ok}")
    print(f"(asked: the issue's target over its figure then, e.g. 0.3 s / 0.46 s = {0.3 / 0.46:.2f})")


if __name__ == "__main__":
    main()
