"""How the benchmarks take their figures, written once: their integer options, a timed
process (its wall seconds and the CPU seconds it used), and the verdict against a target.

It imports nothing of qwenpipe's and not installed.py (which compiles the package): a
benchmark passes the environment its processes run in (installed.ENV, as a user's install).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path


def options(description: str, *, against: bool = False, **defaults: int) -> argparse.Namespace:
    """The command line: `--NAME N` for each of `defaults` (in order, `_` written `-`); with
    `against`, `--against DIR` too: another checkout (e.g. main's) to measure in turn with this one."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    for name, default in defaults.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    if against:
        parser.add_argument("--against", type=Path, help="another checkout, measured in turn with this one")
    return parser.parse_args()


def checkout_env(env: dict[str, str], checkout: Path) -> dict[str, str]:
    """`env` running the qwenpipe of `checkout` instead of the installed one (compiled to
    bytecode first, as an install has it)."""
    import compileall

    compileall.compile_dir(str(checkout / "pipeline"), quiet=1)
    return {**env, "PYTHONPATH": str(checkout.resolve())}


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's children that have ended."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(
    argv: list[str], *, env: dict[str, str], **run
) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds, result) of `argv` run to its end in `env`, its output
    captured (`run`: more subprocess.run arguments)."""
    started, cpu = time.perf_counter(), children_cpu()
    result = subprocess.run(argv, capture_output=True, env=env, **run)
    return time.perf_counter() - started, children_cpu() - cpu, result


def timed_qwenpipe(
    root: Path, *argv: str, env: dict[str, str]
) -> tuple[float, float, subprocess.CompletedProcess]:
    """timed_run of `qwenpipe ARGV` in the project `root` (text output, 300 s at the most)."""
    return timed_run([sys.executable, "-m", "pipeline", *argv], env=env, cwd=root, text=True, timeout=300)


def verdict(seconds: float, cpu: float, target: float, cpu_only: str = "cpu") -> str:
    """The ok column: "yes" within the target, `cpu_only` when only the CPU seconds are (a busy
    machine), else "NO"."""
    return "yes" if seconds <= target else (cpu_only if cpu <= target else "NO")
