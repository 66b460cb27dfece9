"""What a browser launch and a new page cost in CPU, for each Chromium here: the full `chromium`
(its headless mode is the full browser without a window) and Debian's `chromium-headless-shell`
(the same build's old headless mode, which Playwright runs for headless by default).

    .venv/bin/python bench/bench_browser_pages.py [--pages 15] [--launches 5] [--hold 0.3]

The suite is CPU-bound and its CLI tests open hundreds of pages (issue 28), so the browser they
attach to is the cheaper one (tests/shared_browser.py). CPU seconds are the whole machine's
(/proc/stat), so run it on an otherwise idle machine: Chromium's helpers are not all reaped by
their parents, and the rusage of children misses most of them. Each figure is for one launch or
one page (opened, loaded from the simulator, kept open `--hold` seconds as a command keeps its
page while it reads, closed). Not run by the tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.engines.qwen.browser import launch_args, playwright_driver  # noqa: E402
from pipeline.simulator import Simulator  # noqa: E402

TARGET_PAGE_RATIO = 0.5  # the shell's page at most half the full browser's: else it is not worth it


def machine_cpu() -> float:
    """CPU seconds every processor of the machine has been busy since boot."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = stat.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_of(work: Callable) -> float:
    """Machine CPU seconds of `work(playwright)` in a driver of its own."""
    before = machine_cpu()
    with playwright_driver() as playwright:
        work(playwright)
    return machine_cpu() - before


def measure(executable: str, url: str, pages: int, launches: int, hold: float) -> tuple[float, float]:
    """(CPU-s per launch, CPU-s per page) of `executable`."""

    def launch(playwright, count: int):
        for _ in range(count):
            browser = playwright.chromium.launch(executable_path=executable, args=launch_args())
            browser.close()

    def browse(playwright):
        browser = playwright.chromium.launch(executable_path=executable, args=launch_args())
        context = browser.new_context()
        for _ in range(pages):
            page = context.new_page()
            page.goto(url)
            page.wait_for_timeout(hold * 1000)
            page.close()
        browser.close()

    base = cpu_of(lambda playwright: launch(playwright, 0))  # the driver alone
    per_launch = (cpu_of(lambda playwright: launch(playwright, launches)) - base) / launches
    per_page = (cpu_of(browse) - base - per_launch) / pages
    return per_launch, per_page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=15)
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--hold", type=float, default=0.3)
    args = parser.parse_args()
    browsers = [(name, shutil.which(name)) for name in ("chromium", "chromium-headless-shell")]
    found = [(name, path) for name, path in browsers if path]
    if not found:
        print("no chromium here", file=sys.stderr)
        return 2
    results = {}
    with Simulator(port=0).start() as sim:
        for name, path in found:
            results[name] = measure(path, sim.base_url + "/", args.pages, args.launches, args.hold)
            launch, page = results[name]
            print(f"{name:24} launch {launch:5.2f} CPU-s   page {page:5.2f} CPU-s")
    if len(results) == 2:
        ratio = results["chromium-headless-shell"][1] / results["chromium"][1]
        verdict = "ok" if ratio <= TARGET_PAGE_RATIO else "MISSED"
        print(f"shell page / full page: {ratio:.2f} (target <= {TARGET_PAGE_RATIO}) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
