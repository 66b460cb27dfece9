"""CPU of `generate --wait` runs, one after another in one process, attached to one browser.

    .venv/bin/python bench/bench_attached_runs.py [--batches 8] [--runs 4]

The way the test suite runs its CLI tests (tests/tests_cli_helpers.qwenpipe_in_process: the
worker holds its Playwright driver; tests/shared_browser.py: one headless shell per worker that
each command attaches to over CDP), against the simulator on loopback. Each batch prints the
browser's CPU (its whole process group, /proc), this process's (the simulator, the commands,
the driver), the CPU a run, and the browser's open DevTools connections. Target: flat from the
first batch to the last. It grew 0.75 -> 1.6 CPU-s a run over 32 runs while each attached session
left its connection open (fixed in da43500: BrowserSession._disconnect; docs/performance.md,
"Where the CPU went").
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the suite's helpers: the way it runs commands

from timing import options  # noqa: E402


def group_cpu(group: int) -> float:
    """CPU seconds of the live processes of process group `group` and the children they reaped."""
    total = 0.0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # utime, stime, cutime, cstime follow
            total += sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def own_cpu() -> float:
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    args = options(__doc__, batches=8, runs=4)
    os.environ.setdefault("NO_COLOR", "1")
    import shared_browser
    from sim_project import make_project, prompt
    from sockets import devtools_clients
    from tests_cli_helpers import qwenpipe_in_process, release_driver

    from pipeline.simulator import Simulator

    with Simulator(port=0).start() as sim, tempfile.TemporaryDirectory() as folder:
        endpoint = shared_browser.cdp_url()
        group = shared_browser._process.pid  # the browser leads its own process group
        try:
            print("batch  browser CPU-s  this process CPU-s  CPU-s a run  DevTools connections")
            for batch in range(args.batches):
                browser, mine = group_cpu(group), own_cpu()
                for run in range(args.runs):
                    project = make_project(Path(folder) / f"b{batch}r{run}", sim, router=False)
                    prompt(project, "a", f"Write about attached runs ({batch}.{run}, {time.time()}).")
                    done = qwenpipe_in_process("generate", "a", "--wait", cwd=project)
                    if done.returncode != 0:
                        print(done.stderr, file=sys.stderr)
                        return 1
                browser, mine = group_cpu(group) - browser, own_cpu() - mine
                print(
                    f"{batch:5d}  {browser:13.2f}  {mine:18.2f}  {(browser + mine) / args.runs:11.2f}"
                    f"  {devtools_clients(endpoint):20d}",
                    flush=True,
                )
        finally:
            release_driver()
            shared_browser.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
