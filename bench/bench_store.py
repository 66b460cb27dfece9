"""How long the SQLite store takes to give `status --json` what it needs, over 10,000 articles
and 100,000 events: every article's record and summary (its last step, kept by each append),
the first sends, the remembered prompt checks, today's sends and the quota blocks.

    .venv/bin/python bench/bench_store.py [--articles 10000] [--events 100000] [--repeat 5]

Cold: a fresh process opens the store and loads (the interpreter's start and the imports are
timed apart from the load). Warm: a store already open loads again (what `status --watch` and a
cycle see). The targets are issue 13's for the whole `status --json`: <= 0.5 s cold, <= 0.3 s
warm; the store's part must leave room for the rest. Not run by the tests.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.contract.quota import local_day_start, next_local_midnight
from pipeline.store.protocol import ArticleRecord, Event, Intent, QuotaBlock
from pipeline.store.sqlite import SQLiteStore

TARGETS = {"cold": 0.5, "warm": 0.3}


def build(state_dir: Path, articles: int, events: int) -> None:
    # Imported here and in main, not at the top: COLD_SCRIPT times its import of this module.
    from history import EVENTS, event_fields

    rng = random.Random(13)
    now = time.time()
    slugs = [f"article-{n:05d}" for n in range(articles)]
    with SQLiteStore.open(state_dir) as store, store.transaction() as tx:
        for n, slug in enumerate(slugs):
            failing = n % 10 == 0
            tx.put_article(
                ArticleRecord(
                    slug,
                    attempts=2 if failing else 0,
                    sent_at=now - rng.uniform(60, 86400),
                    last_poll=now - rng.uniform(0, 600),
                    engine="qwen",
                    last_error="WAF page" if failing else "",
                    progress="writing: 1200 chars",
                    sent_sha256=f"{n:064x}",
                    errors=({"time": now, "engine": "qwen", "code": "waf", "error": "WAF page"},) * 3
                    if failing
                    else (),
                )
            )
            if n % 20 == 0:
                tx.record_intent(slug, Intent(1, now, f"{n:064x}", pid=4242))
        start = now - 30 * 86400
        for i in range(events):
            event = rng.choice(EVENTS)
            fields = {"engine": "qwen", **event_fields(event, i, rng)}
            ts = start + (now - start) * i / events
            tx.append(
                Event(rng.choice(slugs), event, round(ts, 3), pid=4242, account="default", fields=fields)
            )
        tx.block_quota(QuotaBlock("default", until=now + 3600, reason="RateLimited", since=now))


def load(store: SQLiteStore) -> int:
    """What status reads from the store; returns how many articles it described."""
    now = time.time()
    records = store.articles()
    summaries = store.summaries()
    store.prompt_checks()
    store.first_sends()
    store.send_counts(local_day_start(now), next_local_midnight(now))
    store.quota_blocks(now)
    return len({*records, *summaries})


def warm(state_dir: Path, repeat: int) -> tuple[float, float]:
    """(wall, CPU) medians of a load by a store already open."""
    with SQLiteStore.open(state_dir) as store:
        load(store)
        walls, cpus = [], []
        for _ in range(repeat):
            started, cpu = time.perf_counter(), time.process_time()
            load(store)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


COLD_SCRIPT = """
import json, sys, time
started = time.perf_counter()
from pathlib import Path
from bench_store import load
from pipeline.store.sqlite import SQLiteStore
imported, cpu = time.perf_counter(), time.process_time()
with SQLiteStore.open(Path(sys.argv[1])) as store:
    n = load(store)
wall, cpu = time.perf_counter() - imported, time.process_time() - cpu
print(json.dumps({"imports": imported - started, "open_and_load": wall, "cpu": cpu, "n": n}))
"""


def cold(state_dir: Path, repeat: int) -> tuple[float, float, float, float]:
    """(open + load, its CPU, imports, whole process) medians over fresh processes."""
    loads, cpus, imports, wholes = [], [], [], []
    for _ in range(repeat):
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-c", COLD_SCRIPT, str(state_dir)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)},
            check=True,
        )
        wholes.append(time.perf_counter() - started)
        figures = json.loads(result.stdout)
        loads.append(figures["open_and_load"])
        cpus.append(figures["cpu"])
        imports.append(figures["imports"])
    return tuple(statistics.median(f) for f in (loads, cpus, imports, wholes))


def main() -> None:
    from timing import options

    args = options(__doc__, articles=10_000, events=100_000, repeat=5)
    with tempfile.TemporaryDirectory(prefix="qwenpipe-bench-store-") as folder:
        state_dir = Path(folder) / "articles" / ".qwenpipe"
        started = time.perf_counter()
        build(state_dir, args.articles, args.events)
        size = (state_dir / "qwenpipe.db").stat().st_size
        print(
            f"built {args.articles:,} records and {args.events:,} events in "
            f"{time.perf_counter() - started:.1f} s ({size / 1e6:.1f} MB)"
        )
        cold_load, cold_cpu, cold_imports, cold_whole = cold(state_dir, args.repeat)
        warm_load, warm_cpu = warm(state_dir, args.repeat)
    print(
        f"\nthe store's part of `status --json`: {args.articles:,} records + last events of {args.events:,}"
    )
    print(f"median of {args.repeat}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("(CPU seconds: what the load costs whatever else the machine is doing)")
    print(f"{'':<40}{'seconds':>9}{'CPU':>8}  {'target':>8}  ok")
    rows = [
        ("cold: open + load, fresh process", cold_load, cold_cpu, TARGETS["cold"]),
        ("  (its imports of pipeline.store)", cold_imports, None, None),
        ("  (the whole process, python -c)", cold_whole, None, None),
        ("warm: load again, store open", warm_load, warm_cpu, TARGETS["warm"]),
    ]
    for what, seconds, cpu, target in rows:
        goal = f"<= {target}" if target else ""
        verdict = "" if target is None else ("yes" if seconds <= target else "NO")
        cpu_text = "" if cpu is None else f"{cpu:.3f}"
        print(f"{what:<40}{seconds:>9.3f}{cpu_text:>8}  {goal:>8}  {verdict}")


if __name__ == "__main__":
    main()
