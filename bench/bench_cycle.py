"""How long a cycle takes when there is nothing to do: 10,000 finished articles, and 10,000
pending ones held back by qwen.max_sends_per_day (the journal says today's sends are used up).

    .venv/bin/python bench/bench_cycle.py [--articles 10000] [--repeat 3] [--against DIR]

Each figure is the wall time of a real `qwenpipe cycle` process (start-up included): at most
0.3 s at 10,000 articles (issue 13), under 1 s at 100,000 (issue 39), with no browser started.
Then where a no-op cycle's CPU goes, part by part, in one process (`breakdown`): the imports,
the sweep of killed writers' leftovers, the scan of both folders, the store's records, the
plan. Not run by the tests.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from installed import ENV  # as a user's install runs it (installed.py)
from timing import checkout_env, options, timed_qwenpipe, timed_run, verdict

TARGETS = {10_000: 0.3, 100_000: 1.0}  # articles: seconds, each (issues 13 and 39)
# Loopback addresses that nothing listens on: a bug that starts a browser or a router call
# fails fast instead of reaching the internet.
CONFIG = """[qwen]
base_url = "http://127.0.0.1:9"
poll_interval = 60
{extra}
[router]
base_url = "http://127.0.0.1:9/v1"
"""


def build_finished(root: Path, articles: int) -> Path:
    prompts, out = root / "prompts", root / "articles"
    prompts.mkdir(parents=True)
    out.mkdir()
    (root / "config.toml").write_text(CONFIG.format(extra=""))
    for n in range(articles):
        slug = f"article-{n:05d}"
        (prompts / f"{slug}.md").write_text(f"Write article {n}.")
        (out / f"{slug}.md").write_text(f"+++\ntitle = 'Article {n}'\nslug = '{slug}'\n+++\nBody {n}.\n")
    return root


def build_throttled(root: Path, articles: int, limit: int = 50) -> Path:
    """Pending prompts, and a journal whose `sending` lines use up today's max_sends_per_day."""
    prompts, out = root / "prompts", root / "articles"
    (out / ".qwenpipe").mkdir(parents=True)
    prompts.mkdir()
    (root / "config.toml").write_text(CONFIG.format(extra=f"max_sends_per_day = {limit}"))
    for n in range(articles):
        (prompts / f"article-{n:05d}.md").write_text(f"Write article {n}.")
    now = time.time()
    with open(out / ".qwenpipe" / "journal.jsonl", "w", encoding="utf-8") as journal:
        for n in range(limit):
            ts = now - 60 + n * 0.5
            entry = {
                "time": datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds"),
                "ts": round(ts, 3),
                "slug": f"earlier-{n}",
                "event": "sending",
                "pid": 4242,
                "engine": "qwen",
            }
            journal.write(json.dumps(entry) + "\n")
    return root


def time_cycle(root: Path, env: dict[str, str] = ENV) -> tuple[float, str, float]:
    elapsed, cpu, result = timed_qwenpipe(root, "cycle", env=env)
    summary = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
    if "no browser" not in summary:
        raise SystemExit(f"the no-op cycle used a browser or failed: exit {result.returncode}: {summary}")
    return elapsed, summary, cpu


def measure(
    articles: int = 10_000, repeat: int = 3, against: Path | None = None
) -> list[tuple[str, float, str, float]]:
    """[(what, median seconds, the cycle's own summary, median CPU seconds)] for the two no-op
    cycles; with `against` (another checkout), its cycles too, in turn with these."""
    rows = []
    codes = [("", ENV)] + ([(f" ({against})", checkout_env(ENV, against))] if against else [])
    for label, build in (
        (f"no-op cycle, {articles:,} finished", build_finished),
        (f"no-op cycle, {articles:,} throttled", build_throttled),
    ):
        with tempfile.TemporaryDirectory(prefix="qwenpipe-bench-cycle-") as folder:
            root = build(Path(folder), articles)
            time_cycle(root)  # warm the page cache, as cron's every-5-minutes runs are
            figures: dict[str, list] = {name: [] for name, _ in codes}
            for _ in range(repeat):
                for name, env in codes:
                    figures[name].append(time_cycle(root, env))
            for name, found in figures.items():
                rows.append(
                    (
                        label + name,
                        statistics.median(f[0] for f in found),
                        found[-1][1],
                        statistics.median(f[2] for f in found),
                    )
                )
    return rows


# The parts of a no-op cycle, timed in a process of their own (its CPU seconds, each): what
# batch.cycle.run_cycle does before any step, in its order.
BREAKDOWN = """
import os, sys, time
from pathlib import Path
started = time.process_time()
from pipeline import files
from pipeline.batch import cycle, scan
from pipeline.config import load
from pipeline.wiring import workspace as open_workspace
parts = [("imports", time.process_time() - started)]
def part(name, work):
    begun = time.process_time()
    found = work()
    parts.append((name, time.process_time() - begun))
    return found
workspace = part("workspace (config, store)", lambda: open_workspace(load(None)))
folders = (workspace.state_dir, workspace.state_dir / "state")
part("sweep of .qwenpipe/", lambda: [files.clean_stale_temporaries(f) for f in folders])
leftovers = []  # the scan's listing of articles/ is the sweep's (run_cycle)
prompts, articles = workspace.prompts_dir, workspace.articles_dir
views = part("scan of both folders", lambda: scan.scan(prompts, articles, leftovers))
part("sweep of articles/", lambda: files.clean_stale_temporaries(workspace.articles_dir, names=leftovers))
part("records from the store", lambda: scan.attach_records(views, workspace.state_dir, workspace.store))
part("plan", lambda: cycle.plan(workspace, views, cycle.CycleReport(), time.time()))
for name, seconds in parts:
    print(f"{name}\t{seconds:.3f}")
"""


def breakdown(root: Path) -> list[tuple[str, float]]:
    """(part, CPU seconds) of a no-op cycle's work in `root`, one process (see BREAKDOWN)."""
    result = timed_run([sys.executable, "-c", BREAKDOWN], env=ENV, cwd=root, text=True, check=True)[2]
    return [
        (name, float(seconds)) for name, seconds in (line.split("\t") for line in result.stdout.splitlines())
    ]


def target_for(articles: int) -> float:
    return TARGETS[min(TARGETS, key=lambda size: abs(size - articles))]


def main() -> None:
    args = options(__doc__, against=True, articles=10_000, repeat=3)
    rows = measure(args.articles, args.repeat, args.against)
    target = target_for(args.articles)
    print(f"median of {args.repeat} `qwenpipe cycle` processes; {os.cpu_count()} CPUs")
    print(f"{'what':<36}{'seconds':>9}{'CPU s':>8}  {'target':>8}  ok  cycle says")
    for label, seconds, summary, cpu in rows:
        ok = verdict(seconds, cpu, target)
        print(f"{label:<36}{seconds:>9.3f}{cpu:>8.3f}  {'<= ' + str(target):>8}  {ok:<3} {summary}")
    with tempfile.TemporaryDirectory(prefix="qwenpipe-bench-cycle-") as folder:
        root = build_finished(Path(folder), args.articles)
        parts = breakdown(root)
    load = os.getloadavg()[0]
    print(f"\nwhere a no-op cycle's CPU goes ({args.articles:,} finished; load average {load:.1f}):")
    for name, seconds in parts:
        print(f"  {name:<28}{seconds:>7.3f} CPU s")


if __name__ == "__main__":
    main()
