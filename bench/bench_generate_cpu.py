"""CPU seconds of one `qwenpipe generate` that sends, against the simulator on loopback.

    .venv/bin/python bench/bench_generate_cpu.py [--repeat 5] [--arg=--some-chromium-switch ...]

Each run is a fresh project (a fresh browser profile, as in the tests) and a real `python -m
pipeline generate` (Python, Playwright's node driver, Chromium). The figure is the CPU of the
whole process tree: this bench makes itself the subreaper of the run, so Chromium's children
(renderer, GPU, network, zygote), orphaned when the browser exits, are reaped here and counted;
RUSAGE_CHILDREN of a plain subprocess.run misses them (~3.9 s seen instead of ~6.5 s). CPU,
not wall time: the figure holds on a loaded machine. Not run by the tests.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from sim_project import make_project, prompt  # noqa: E402

from pipeline.simulator import Simulator  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36


def tree_cpu(argv: list[str], cwd: Path) -> tuple[float, int]:
    """(CPU seconds of `argv` and every process it started, its exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    pid = os.fork()
    if pid == 0:  # the child: its stdout and stderr go nowhere
        try:
            os.chdir(cwd)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    code = -1
    while True:  # the run, then every orphan of its tree handed to us
        try:
            reaped, status = os.wait()
        except ChildProcessError:
            break
        if reaped == pid:
            code = os.waitstatus_to_exitcode(status)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--arg", action="append", default=[], help="a Chromium switch for [browser] args")
    options = parser.parse_args()
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("cannot become a subreaper (Linux only): the figure would miss Chromium's children")
    seconds = []
    with Simulator(port=0, answer_seconds=2.0, thinking_seconds=0.3, url_delay=0.2).start() as sim:
        for run in range(options.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                project = make_project(Path(tmp), sim, own_browser=True)
                config = project / "config.toml"
                args = f"[browser]\nargs = {json.dumps(options.arg)}\n"
                config.write_text(config.read_text().replace("[browser]\n", args), encoding="utf-8")
                prompt(project, "tea", f"Write about tea, run {run}.")
                cpu, code = tree_cpu([sys.executable, "-m", "pipeline", "generate", "tea"], project)
                if code != 42:
                    sys.exit(f"run {run}: exit {code}, expected 42 (sent)")
                seconds.append(cpu)
                print(f"run {run}: {cpu:.2f} CPU-s", flush=True)
    print(f"generate that sends: median {statistics.median(seconds):.2f} CPU-s over {len(seconds)} runs")


if __name__ == "__main__":
    main()
