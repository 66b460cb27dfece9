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
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from sim_project import make_project, prompt  # noqa: E402
from treecost import become_subreaper, measure  # noqa: E402

from pipeline.simulator import Simulator  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--arg", action="append", default=[], help="a Chromium switch for [browser] args")
    options = parser.parse_args()
    become_subreaper()
    seconds = []
    with Simulator(port=0, answer_seconds=2.0, thinking_seconds=0.3, url_delay=0.2).start() as sim:
        for run in range(options.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                project = make_project(Path(tmp), sim, own_browser=True)
                config = project / "config.toml"
                args = f"[browser]\nargs = {json.dumps(options.arg)}\n"
                config.write_text(config.read_text().replace("[browser]\n", args), encoding="utf-8")
                prompt(project, "tea", f"Write about tea, run {run}.")
                cost = measure([sys.executable, "-m", "pipeline", "generate", "tea"], cwd=project)
                if cost.code != 42:
                    sys.exit(f"run {run}: exit {cost.code}, expected 42 (sent)")
                seconds.append(cost.cpu)
                print(f"run {run}: {cost.cpu:.2f} CPU-s ({cost.how})", flush=True)
    print(f"generate that sends: median {statistics.median(seconds):.2f} CPU-s over {len(seconds)} runs")


if __name__ == "__main__":
    main()
