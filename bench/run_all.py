"""Every qwenpipe benchmark, one table, each figure beside its target.

    .venv/bin/python bench/run_all.py [--quick]

- CLI start-up: a no-op `generate` on a finished article vs `python -c "import typer"`;
- no-op cycles over 10,000 finished and 10,000 throttled articles (bench_cycle.py);
- `status --json` over 10,000 articles and a 100,000-line journal (bench_status.py);
- one cycle polling 20 in-flight chats vs 20 separate `generate` calls (real Chromium against
  the simulator), and the peak memory of that cycle (ru_maxrss, the Python process and its
  largest child);
- one cycle collecting 20 and 200 finished chats through their JSON (qwen.collect = "api") and
  the page-per-chat path measured in the same run (bench_collect.py);
- the time from the answer's stored "finished" to SLUG.md on disk with `generate --wait`;
- the cost of an article (bench_article_cost.py): CPU-s per article of a cycle sending 20 prompts
  and the cycle collecting them, `send_concurrency` 1 and 4, a one-off `generate --wait`, and the
  peak memory (PSS) of each, whole process tree, for the full Chromium, the headless shell and
  headed under Xvfb (`--quick`: 5 prompts, the full Chromium, send_concurrency 1);
- with --makespan (minutes): 50 prompts, 30 s answers, cycles every 60 s, send_concurrency 1, 3.

Loopback only. Not run by the tests. `--quick` uses 1,000 articles and 5 chats (a smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import bench_article_cost  # noqa: E402
import bench_collect  # noqa: E402
import bench_concurrent_polls as polls  # noqa: E402
import bench_cycle  # noqa: E402
import bench_status  # noqa: E402
from installed import ENV  # noqa: E402  # as a user's install runs it (installed.py)

# The Python process of a cycle, its peak memory printed for us (and its largest child's).
MEMORY_PROBE = (
    "import resource, sys\n"
    "from pipeline.cli.app import run\n"
    "code = run(['cycle'])\n"
    "mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(f'MAXRSS {mine} {kids}', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def median_run(args: list[str], cwd: Path, repeat: int) -> float:
    figures = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, check=False)
        figures.append(time.perf_counter() - started)
    return statistics.median(figures)


def startup(repeat: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="qwenpipe-bench-start-") as folder:
        root = Path(folder)
        (root / "prompts").mkdir()
        (root / "articles").mkdir()
        (root / "config.toml").write_text('[qwen]\nbase_url = "http://127.0.0.1:9"\n')
        (root / "prompts" / "done.md").write_text("Write about being done.")
        (root / "articles" / "done.md").write_text("+++\ntitle = 'Done'\n+++\nDone.\n")
        python = [sys.executable]
        median_run([*python, "-c", "import typer"], root, 2)  # warm the caches
        typer = median_run([*python, "-c", "import typer"], root, repeat)
        noop = median_run([*python, "-m", "pipeline", "generate", "done"], root, repeat)
    return noop, typer


def status_figures(articles: int, lines: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="qwenpipe-bench-status-") as folder:
        root = bench_status.build(Path(folder), articles, lines)
        bench_status.import_once(root)  # the upgrade in place, once, not timed
        cold = bench_status.timed(bench_status.as_subprocess, root, cold=True, repeat=3)[0]
        warm = bench_status.timed(bench_status.as_subprocess, root, cold=False, repeat=3)[0]
    return cold, warm


def polling(chats: int) -> dict[str, float]:
    from pipeline.simulator import Simulator

    figures: dict[str, float] = {}
    with (
        Simulator(
            port=0, answer_seconds=polls.ANSWER_SECONDS, thinking_seconds=0.2, url_delay=0.2
        ).start() as sim,
        tempfile.TemporaryDirectory(prefix="qwenpipe-bench-poll-") as folder,
    ):
        one = polls.sent_project(Path(folder) / "cycle", sim, chats, concurrency=2)
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-c", MEMORY_PROBE], cwd=one, env=ENV, capture_output=True, text=True
        )
        figures["cycle"] = time.perf_counter() - started
        assert result.returncode == 0, result.stderr
        mine, kids = result.stderr.split("MAXRSS ")[1].split()[:2]
        figures["rss_python"], figures["rss_child"] = int(mine) / 1024, int(kids) / 1024

        four = polls.sent_project(Path(folder) / "cycle-4", sim, chats, concurrency=4)
        figures["cycle_4"] = polls.timed_cycle(four, chats)

        many = polls.sent_project(Path(folder) / "generates", sim, chats)
        figures["generates"] = polls.timed_generates(many, chats)

    return figures


def article_cost_rows(quick: bool) -> list[tuple[str, str, str, bool | None]]:
    """bench_article_cost's figures: CPU-s an article (the full Chromium's at send_concurrency 1
    against the figure it must not exceed, issue 39), peak PSS, generate --wait."""
    articles, levels, browsers = (
        (5, [1], ["full"]) if quick else (20, [1, 4], list(bench_article_cost.BROWSERS))
    )
    figures = bench_article_cost.run(articles, levels, browsers, [])
    rows: list[tuple[str, str, str, bool | None]] = []
    limit = bench_article_cost.CPU_PER_ARTICLE_LIMIT
    for browser, mine in figures["browsers"].items():
        for level, cycle in mine["levels"].items():
            send, collect = cycle["send"], cycle["collect"]
            per = (send["cpu"] + collect["cpu"]) / articles
            gate = browser == "full" and level == 1 and not quick  # 5 articles share the launch less
            target = f"<= {limit:g} (issue 39)" if gate else "(reported)"
            rows.append(
                (
                    f"CPU-s an article, {articles} sent + collected, {browser}, send_concurrency {level}",
                    f"{per:.2f}",
                    target,
                    per <= limit if gate else None,
                )
            )
            peak = max(send["pss_mib"], collect["pss_mib"])
            rows.append(
                (
                    f"  peak PSS of those cycles ({browser}, {level} at once)",
                    f"{peak:.0f} MiB",
                    "(reported)",
                    None,
                )
            )
        wait = mine["wait"]
        rows.append((f"one-off generate --wait ({browser})", f"{wait['cpu']:.2f} CPU-s", "(reported)", None))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 articles, 5 chats: a smoke run")
    parser.add_argument("--makespan", action="store_true", help="also the 50-prompt makespan (minutes)")
    args = parser.parse_args()
    articles, lines, chats = (1_000, 10_000, 5) if args.quick else (10_000, 100_000, 20)
    rows: list[tuple[str, str, str, bool | None]] = []

    noop, typer = startup(repeat=7)
    rows.append(("start-up: no-op `generate` (done article)", f"{noop:.3f} s", "", None))
    rows.append(('start-up: python -c "import typer"', f"{typer:.3f} s", "", None))
    rows.append(("start-up ratio", f"{noop / typer:.2f}x", "<= 1x", noop / typer <= 1.0))  # issue 13

    target = bench_cycle.target_for(articles)  # 0.3 s at 10,000 (issue 13), 1 s at 100,000 (39)
    for label, seconds, _summary, _cpu in bench_cycle.measure(articles, repeat=3):
        rows.append((label, f"{seconds:.3f} s", f"<= {target:g} s, no browser", seconds <= target))

    cold, warm = status_figures(articles, lines)
    what = f"{articles:,} articles, {lines:,} journal lines"
    for when, seconds in (("cold", cold), ("warm", warm)):
        limit = bench_status.TARGETS[when]
        label = f"status --json, {what}, {when}"
        rows.append((label, f"{seconds:.3f} s", f"<= {limit:g} s", seconds <= limit))

    poll = polling(chats)
    ratio = poll["generates"] / poll["cycle"]
    rows.append(
        (
            f"one cycle collecting {chats} finished chats (qwen.concurrency = 2)",
            f"{poll['cycle']:.1f} s",
            "",
            None,
        )
    )
    rows.append(("the same, qwen.concurrency = 4", f"{poll['cycle_4']:.1f} s", "", None))
    rows.append((f"{chats} separate `generate` calls", f"{poll['generates']:.1f} s", "", None))
    rows.append(("one browser vs one per call", f"{ratio:.2f}x faster", "> 1x", ratio > 1))
    counts = (chats,) if args.quick else (chats, 200)
    collected = bench_collect.collecting(counts)
    page_label = f"page {min(counts)}"
    page_chat = collected[page_label][0] / min(counts)
    rows.append(
        (
            f"collect {min(counts)} finished chats, a page each (concurrency 4)",
            f"{collected[page_label][0]:.1f} s",
            "",
            None,
        )
    )
    for count in counts:
        seconds, done, seen = collected[f"api {count}"]
        target = "<= 10 s" if count == 200 else ""
        rows.append(
            (
                f"collect {count} finished chats via JSON ({done} done, {seen['chat_page']} chat pages)",
                f"{seconds:.1f} s",
                target,
                seconds <= 10 if count == 200 else None,
            )
        )
        how = "measured" if count == min(counts) else "page path extrapolated"
        rows.append(
            (
                f"  vs a page each ({how})",
                f"{page_chat * count / seconds:.1f}x faster",
                "> 1x",
                seconds < page_chat * count,
            )
        )
    lag = statistics.median(bench_collect.wait_latency())
    rows.append(("stored finished -> SLUG.md (--wait)", f"{lag:.2f} s", "(reported)", None))
    agreed = bench_collect.from_agreement(lag)  # issue 17: within 1 s where they agree
    rows.append(("  page and store agree -> SLUG.md, at most", f"{agreed:.2f} s", "<= 1 s", agreed <= 1.0))
    if args.makespan:
        for level in (1, 3):
            seconds = bench_collect.makespan(level)
            rows.append(
                (f"makespan 50 prompts, 30 s answers, send_concurrency {level}", f"{seconds:.0f} s", "", None)
            )
    rows.append(
        (
            "peak RSS, the cycle's Python process",
            f"{poll['rss_python']:.0f} MB",
            "< 200 MB",
            poll["rss_python"] < 200,
        )
    )
    rows.append(
        ("peak RSS, its largest child (driver/browser)", f"{poll['rss_child']:.0f} MB", "(reported)", None)
    )
    rows.extend(article_cost_rows(args.quick))

    print(f"\nqwenpipe benchmarks ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'measured':>14}  {'target':<18} ok")
    for name, value, target, ok in rows:
        mark = "" if ok is None else ("yes" if ok else "NO")
        print(f"{name:<{width}}  {value:>14}  {target:<18} {mark}")
    print(json.dumps({"rows": [list(r) for r in rows]}), file=sys.stderr)


if __name__ == "__main__":
    main()
