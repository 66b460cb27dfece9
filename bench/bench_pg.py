"""How long a no-op `cycle` and `status --json` take on the PostgreSQL store ([store] url), over
10,000 finished articles of a batch several hosts share.

    .venv/bin/python bench/bench_pg.py [--articles 10000] [--repeat 3]

Starts a throwaway server (tests/pg_server.py: Debian's postgresql binaries, a free loopback
port, removed afterwards), writes the batch's 10,000 finished rows in one transaction and the
same articles into this host's articles/ (as `sync` leaves them), then times real `qwenpipe`
processes (start-up included): the cycle finds nothing to do and starts no browser. Wall and
CPU seconds of the qwenpipe process (the server's own CPU is not in the figure); targets 1 s
for the cycle, 0.5 s for status. Not run by the tests.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from installed import ENV  # noqa: E402  # as a user's install runs it (installed.py)
from pg_server import PostgresServer  # noqa: E402
from timing import options, timed_qwenpipe, verdict  # noqa: E402

TARGETS = {"cycle": 1.0, "status --json": 0.5}  # seconds (issue 18)
# Loopback addresses nothing listens on: a bug that starts a browser or calls the router fails
# fast instead of reaching anything.
CONFIG = """[qwen]
base_url = "http://127.0.0.1:9"
poll_interval = 60
[router]
base_url = "http://127.0.0.1:9/v1"
[store]
url = "{url}"
host_id = "bench"
"""


def document(n: int, slug: str) -> str:
    return f"+++\ntitle = 'Article {n}'\nslug = '{slug}'\nengine = 'qwen'\n+++\nBody {n}.\n"


def build(root: Path, url: str, articles: int) -> Path:
    """prompts/, articles/ with every SLUG.md, and the batch's finished rows for each."""
    from pipeline.store.postgres import PostgresStore
    from pipeline.store.protocol import Finished

    prompts, out = root / "prompts", root / "articles"
    prompts.mkdir(parents=True)
    out.mkdir()
    (root / "config.toml").write_text(CONFIG.format(url=url))
    PostgresStore.init(url)
    now = time.time()
    with PostgresStore.open(url, host="bench") as store, store.transaction() as tx:
        for n in range(articles):
            slug = f"article-{n:05d}"
            (prompts / f"{slug}.md").write_text(f"Write article {n}.")
            (out / f"{slug}.md").write_text(document(n, slug))
            tx.put_finished(Finished(slug, "qwen", "default", "bench", now, document(n, slug)))
    return root


def check(what: str, result: subprocess.CompletedProcess, articles: int) -> str:
    """The run's own word on what it did; SystemExit when it did something else than nothing."""
    if what == "cycle":
        said = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        if result.returncode != 0 or "no browser" not in said or f"{articles} done" not in said:
            raise SystemExit(f"the no-op cycle did something else: exit {result.returncode}: {said}")
        return said.split(" ", 1)[1]
    if result.returncode != 0:
        raise SystemExit(f"status --json failed: exit {result.returncode}: {result.stderr.strip()}")
    done = json.loads(result.stdout)["totals"]["done"]
    if done != articles:
        raise SystemExit(f"status --json counts {done} done, not {articles}")
    return f"{done} done"


def measure(url: str, articles: int, repeat: int) -> list[tuple[str, float, float, str]]:
    with tempfile.TemporaryDirectory(prefix="qwenpipe-bench-pg-") as folder:
        started = time.perf_counter()
        root = build(Path(folder), url, articles)
        took = time.perf_counter() - started
        print(f"built {articles:,} finished articles (files and rows) in {took:.1f} s")
        rows = []
        for what, argv in (("cycle", ["cycle"]), ("status --json", ["status", "--json"])):
            # warm the page cache and the server's
            check(what, timed_qwenpipe(root, *argv, env=ENV)[2], articles)
            figures = [timed_qwenpipe(root, *argv, env=ENV) for _ in range(repeat)]
            said = check(what, figures[-1][2], articles)
            seconds, cpu = (statistics.median(f[i] for f in figures) for i in (0, 1))
            rows.append((what, seconds, cpu, said))
        return rows


def main() -> None:
    args = options(__doc__, articles=10_000, repeat=3)
    load_before = os.getloadavg()[0]
    with PostgresServer() as server:
        rows = measure(server.new_database(), args.articles, args.repeat)
    load = max(load_before, os.getloadavg()[0])
    print(f"\nPostgreSQL store, {args.articles:,} finished articles; median of {args.repeat} processes")
    print(f"{os.cpu_count()} CPUs, load average up to {load:.1f} while it ran")
    print(f"{'what':<16}{'seconds':>9}{'CPU s':>8}  {'target':>8}  ok   it says")
    for what, seconds, cpu, said in rows:
        target = TARGETS[what]
        ok = verdict(seconds, cpu, target)
        print(f"{what:<16}{seconds:>9.3f}{cpu:>8.3f}  {'<= ' + str(target):>8}  {ok:<4} {said}")


if __name__ == "__main__":
    main()
