"""Can a page do with less? CPU of the ways a command could use its pages, whole process tree.

    .venv/bin/python bench/bench_page_diet.py [--pages 10] [--hold 2] [--browsers full shell]

Against the simulator, for each browser, one process per way (Playwright's driver, one browser
launched, `--pages` loads of the chat app, each until its composer shows, as a send's page does),
its tree's CPU counted as in bench_article_cost.py (treecost.py):

- `launch`: the browser started and closed, no page (subtracted from the others);
- `new-page`: a new page per load, closed after it (what the engine does: one page per call);
- `one-page`: one page for all loads, navigated again each time ("one page per account");
- `one-page-blank`: the same, the page sent to about:blank between two loads (the app stopped:
  no timers, no streams, no frames while it waits for its next use);
- `route`: a new page per load with a Playwright route that aborts images, fonts and media and
  lets the rest through (every request then pauses in the driver; Playwright turns the HTTP
  cache off for a routed page);
- `images-off`: a new page per load, Chromium started with --blink-settings=imagesEnabled=false
  (images never fetched, no route);
- `held`: a new page per load kept open `--hold` seconds more before it is closed: the cost of
  a second of an open page (a send's page left reading its stream).

Prints CPU-s per load beyond the launch (and per second held). The simulator's page loads no
image, font or media, so `route` and `images-off` measure only what they add. Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from installed import ENV  # noqa: E402
from treecost import become_subreaper, measure  # noqa: E402

WAYS = ("launch", "new-page", "one-page", "one-page-blank", "route", "images-off", "held")
BROWSERS = {"full": "chromium", "shell": "chromium-headless-shell"}
BLOCKED = ("image", "font", "media")
COMPOSER = "textarea.message-input-textarea, textarea#chat-input"


def child(way: str, executable: str, url: str, pages: int, hold: float) -> None:
    """One way, in this process (measured from outside)."""
    from pipeline.engines.qwen.browser import launch_args, playwright_driver

    extra = ["--blink-settings=imagesEnabled=false"] if way == "images-off" else []
    with playwright_driver() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=launch_args(extra))
        context = browser.new_context()
        if way == "route":
            context.route(
                "**/*",
                lambda route: route.abort() if route.request.resource_type in BLOCKED else route.continue_(),
            )
        count = 0 if way == "launch" else pages
        page = context.new_page() if way.startswith("one-page") else None
        for _ in range(count):
            mine = page or context.new_page()
            mine.goto(url, wait_until="domcontentloaded")
            mine.wait_for_selector(COMPOSER)
            if way == "held":
                mine.wait_for_timeout(hold * 1000)
            if way == "one-page-blank":
                mine.goto("about:blank")  # the app stopped between two uses
            if page is None:
                mine.close()
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each way (the median is kept)")
    parser.add_argument("--browsers", nargs="+", choices=list(BROWSERS), default=list(BROWSERS))
    parser.add_argument("--child", nargs=3, metavar=("WAY", "EXECUTABLE", "URL"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(*options.child, options.pages, options.hold)
        return 0
    from pipeline.simulator import Simulator

    become_subreaper()
    results: dict[str, dict[str, float]] = {}
    load = os.getloadavg()[0]
    with Simulator(port=0).start() as sim, tempfile.TemporaryDirectory() as tmp:
        for name in options.browsers:
            executable = shutil.which(BROWSERS[name])
            if executable is None:
                continue
            cpu: dict[str, float] = {}
            for way in WAYS:
                argv = [sys.executable, __file__, "--pages", str(options.pages), "--hold", str(options.hold)]
                runs = []
                for _ in range(options.repeat):
                    cost = measure(
                        [*argv, "--child", way, executable, sim.base_url + "/"], cwd=Path(tmp), env=ENV
                    )
                    if cost.code != 0:
                        raise SystemExit(f"{name} {way}: exit {cost.code}")
                    runs.append(cost.cpu)
                cpu[way] = sorted(runs)[len(runs) // 2]
            per = {way: (cpu[way] - cpu["launch"]) / options.pages for way in WAYS if way != "launch"}
            per["second held"] = (cpu["held"] - cpu["new-page"]) / (options.pages * options.hold)
            per["launch"] = cpu["launch"]
            results[name] = per
            print(
                f"{name:<6} launch {cpu['launch']:.2f} CPU-s; per load: "
                + ", ".join(f"{way} {per[way]:.3f}" for way in WAYS[1:])
                + f"; an open page {per['second held']:.3f} CPU-s a second",
                flush=True,
            )
    print(f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(json.dumps(results), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
