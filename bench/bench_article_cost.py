"""The cost of an article: CPU seconds and peak memory of the whole process tree, per browser.

    .venv/bin/python bench/bench_article_cost.py [--articles 20] [--levels 1 4]
        [--browsers full shell xvfb] [--arg=--a-chromium-switch ...]

Against the simulator on loopback, for each browser (`full`: the `chromium` package in its
headless mode, qwenpipe's default here; `shell`: Debian's `chromium-headless-shell`, the same
build's old headless mode; `xvfb`: the full `chromium` headed under a virtual display, what the
real site asks for) and each `qwen.send_concurrency` in --levels:

- one `cycle` sending N prompts (a fresh project: its own profile, launched as cron does), then,
  once every answer is finished, one `cycle` collecting them (`qwen.stable_reads` at its default):
  CPU-s per article of each and of both, and the peak memory of each;
- one `generate SLUG --wait` in a fresh project (launch, send, read the stream, write SLUG.md).

Every figure is the tree's (treecost.py: a cgroup around the command, else this process as the
subreaper of its orphans): Python, Playwright's driver, Chromium and its helpers, Xvfb. Memory is
the peak of the tree's summed PSS, sampled every 0.2 s. Prints a table, and the same as JSON on
stderr (run_all.py reads it). Not run by the tests.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from installed import ENV  # noqa: E402  # as a user's install runs it (installed.py)
from sim_project import make_project, prompt  # noqa: E402
from treecost import Cost, become_subreaper, measure  # noqa: E402

from pipeline.simulator import Simulator  # noqa: E402

# [browser] keys of each browser measured (the executable looked up on PATH).
BROWSERS = {
    "full": ("chromium", 'headless = true\nexecutable = "{path}"\n'),
    "shell": ("chromium-headless-shell", 'headless = true\nexecutable = "{path}"\n'),
    "xvfb": ("chromium", 'headless = false\ndisplay = "xvfb"\nexecutable = "{path}"\n'),
}
# Issue 39: CPU per article in a cycle no higher than on main 704c232 (the full Chromium,
# send_concurrency 1, 20 prompts: 0.80 CPU-s an article, docs/performance.md).
CPU_PER_ARTICLE_LIMIT = 0.80
SIM = {"answer_seconds": 2.0, "thinking_seconds": 0.3, "url_delay": 0.2}
FINISHED_AFTER = SIM["answer_seconds"] + SIM["thinking_seconds"] + 2.0  # the last send's answer, and some


def project(folder: Path, sim, browser: str, path: str, level: int, args: list[str]) -> Path:
    """A fresh project on the simulator: its own profile, the browser's [browser] keys, the
    product's default stable_reads, router off (a failure shows as a failure, not as an article)."""
    root = make_project(
        folder, sim, router=False, own_browser=True, stable_reads=3, extra=f"send_concurrency = {level}"
    )
    keys = BROWSERS[browser][1].format(path=path) + f"args = {json.dumps(args)}\n"
    config = root / "config.toml"
    text = config.read_text().replace("[browser]\n", "[browser]\n" + keys) + "\n[article]\nmin_words = 0\n"
    config.write_text(text, encoding="utf-8")
    return root


RUN_ENV = dict(ENV)  # --code: another checkout's package instead (a paired run against it)


def qwenpipe(root: Path, *argv: str) -> Cost:
    return measure(
        [sys.executable, "-m", "pipeline", *argv], cwd=root, env=RUN_ENV, output=root / "output.log"
    )


def done(root: Path) -> int:
    return sum(1 for path in (root / "articles").glob("*.md"))


def cycle_of(sim, folder: Path, browser: str, path: str, level: int, articles: int, args: list[str]) -> dict:
    """The send cycle and the collect cycle of `articles` prompts."""
    root = project(folder, sim, browser, path, level, args)
    for n in range(articles):
        prompt(root, f"p{n:02d}", f"Write benchmark article {n} ({browser}, {level} at once).")
    sent = qwenpipe(root, "cycle")
    if sent.code != 42 or len(list((root / "articles").glob("*.md.url"))) != articles:
        raise SystemExit(f"{browser} x{level}: the send cycle exit {sent.code}; see {root / 'output.log'}")
    time.sleep(FINISHED_AFTER)
    collected = qwenpipe(root, "cycle")
    if done(root) != articles:
        raise SystemExit(
            f"{browser} x{level}: {done(root)} of {articles} collected; see {root / 'output.log'}"
        )
    return {"send": asdict(sent), "collect": asdict(collected)}


def wait_of(sim, folder: Path, browser: str, path: str, args: list[str]) -> dict:
    root = project(folder, sim, browser, path, 1, args)
    prompt(root, "tea", f"Write about tea ({browser}).")
    cost = qwenpipe(root, "generate", "tea", "--wait")
    if cost.code != 0 or done(root) != 1:
        raise SystemExit(f"{browser}: generate --wait exit {cost.code}; see {root / 'output.log'}")
    return asdict(cost)


def run(articles: int, levels: list[int], browsers: list[str], args: list[str]) -> dict:
    become_subreaper()
    figures: dict = {"articles": articles, "load": os.getloadavg()[0], "browsers": {}}
    with Simulator(port=0, **SIM).start() as sim, tempfile.TemporaryDirectory(prefix="qwenpipe-cost-") as tmp:
        for browser in browsers:
            path = shutil.which(BROWSERS[browser][0])
            if path is None:
                print(f"{browser}: no {BROWSERS[browser][0]} on PATH, skipped", file=sys.stderr)
                continue
            mine = figures["browsers"][browser] = {"path": path, "levels": {}}
            for level in levels:
                folder = Path(tmp) / f"{browser}-{level}"
                mine["levels"][level] = cycle_of(sim, folder, browser, path, level, articles, args)
                print_level(browser, level, articles, mine["levels"][level])
            mine["wait"] = wait_of(sim, Path(tmp) / f"{browser}-wait", browser, path, args)
            print_wait(browser, mine["wait"])
        taken = [entry["prompt"] for entry in sim.ledger() if entry["accepted"]]
        assert len(taken) == len(set(taken)), "a prompt sent twice"
    figures["load_after"] = os.getloadavg()[0]
    return figures


def print_level(browser: str, level: int, articles: int, figures: dict) -> None:
    send, collect = figures["send"], figures["collect"]
    per = (send["cpu"] + collect["cpu"]) / articles
    print(
        f"{browser:<6} send_concurrency {level}: {per:5.2f} CPU-s an article"
        f" (send {send['cpu'] / articles:.2f}, collect {collect['cpu'] / articles:.2f});"
        f" peak PSS send {send['pss_mib']:.0f} MiB, collect {collect['pss_mib']:.0f} MiB;"
        f" wall send {send['wall']:.1f} s, collect {collect['wall']:.1f} s",
        flush=True,
    )


def print_wait(browser: str, cost: dict) -> None:
    print(
        f"{browser:<6} generate --wait: {cost['cpu']:.2f} CPU-s, peak PSS {cost['pss_mib']:.0f} MiB,"
        f" wall {cost['wall']:.1f} s ({cost['how']})",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=20)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--browsers", nargs="+", choices=list(BROWSERS), default=list(BROWSERS))
    parser.add_argument("--arg", action="append", default=[], help="a Chromium switch for [browser] args")
    parser.add_argument("--code", type=Path, help="run the qwenpipe of this checkout (e.g. main's) instead")
    options = parser.parse_args()
    if options.code:
        compileall.compile_dir(str(options.code / "pipeline"), quiet=1)  # bytecode, as an install has it
        RUN_ENV["PYTHONPATH"] = str(options.code.resolve())
    figures = run(options.articles, options.levels, options.browsers, options.arg)
    print(f"load average {figures['load']:.1f} before, {figures['load_after']:.1f} after")
    print(json.dumps(figures), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
