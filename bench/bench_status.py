"""How long `qwenpipe status --json` takes over 10,000 articles and a 100,000-line journal.

    .venv/bin/python bench/bench_status.py [--articles 10000] [--lines 100000] [--against DIR]

Builds the batch in a temporary folder (files written directly, in the shapes the version
before the store wrote them: it is the reading that is measured), imports it into the store
once (the upgrade in place), then times `status --json` in-process and as a subprocess, cold
(the store just written by another process: 20 new events, the store opened afresh) and warm
(the same status again). Wall and CPU seconds. Beside them, measured in the same run and
paired (each figure's runs alternate with its peer's): the floor, a bare Python process that
only lists, stats, reads the tables and writes the same document (FLOOR), what this machine
gives any design; and `python -c "import typer"`. Targets (issue 39): a warm status as a
process within 2x the floor, and at 10,000 articles within 2x `import typer`; the older
absolute ones (issue 13) are shown too. `--against DIR`: another checkout's status (e.g. main's)
in turn with these. Not run by the tests.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from history import EVENTS, event_fields
from installed import ENV  # as a user's install runs it (installed.py)
from timing import checkout_env, options, timed_run, verdict

TARGETS = {"cold": 0.5, "warm": 0.3}  # seconds (issue 13)
FLOOR_RATIO = 2.0  # a warm status as a process, at most this many times the floor (issue 39)
TYPER_RATIO = 2.0  # ... and at 10,000 articles, at most this many times `import typer`
MIX = [  # (share, what the article looks like on disk)
    (0.40, "done"),
    (0.20, "pending"),
    (0.15, "generating"),
    (0.05, "sending"),
    (0.05, "backoff"),
    (0.05, "failed"),
    (0.05, "dead"),
    (0.05, "orphan"),
]


def build(root: Path, articles: int, lines: int) -> Path:
    prompts, out = root / "prompts", root / "articles"
    state = out / ".qwenpipe" / "state"
    for folder in (prompts, out, state):
        folder.mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text("[qwen]\npoll_interval = 60\nmax_sends_per_day = 500\n")
    rng = random.Random(5)
    now = time.time()
    kinds = [kind for share, kind in MIX for _ in range(int(share * articles))]
    slugs = []
    for n, kind in enumerate(kinds):
        slug = f"article-{n:05d}"
        slugs.append(slug)
        url = f"https://chat.qwen.ai/c/{n:08d}-0000-4000-8000-000000000000"
        if kind != "orphan":
            (prompts / f"{slug}.md").write_text(f"Write article {n}.")
        if kind == "done":
            (out / f"{slug}.md").write_text(f"+++\ntitle = 'Article {n}'\n+++\n# Article {n}\n\nBody.\n")
        if kind in ("generating", "backoff", "failed", "orphan"):
            (out / f"{slug}.md.url").write_text(url + "\n")
        if kind == "sending":
            (out / f"{slug}.md.sending").write_text(json.dumps({"time": now, "pid": 1}) + "\n")
        if kind == "dead":
            (out / f"{slug}.md.failed").write_text("reason = 'bot_check'\nattempts = 5\n")
        if kind not in ("pending", "done"):
            record = {
                "attempts": 0,
                "hard_failures": 0,
                "sent_at": now - rng.uniform(60, 86400),
                "engine": "qwen",
            }
            if kind == "backoff":
                # Its wait as the step writes it (2 failures at poll_interval 60: 120 s); a farther
                # one is a clock that went back, whose row status makes afresh at every look.
                record.update(attempts=2, next_try=now + 120, last_error="WAF page")
            if kind in ("failed", "dead"):
                record.update(hard_failures=1 if kind == "failed" else 5, last_error="bot check")
            (state / f"{slug}.json").write_text(json.dumps(record))
    journal = out / ".qwenpipe" / "journal.jsonl"
    with open(journal, "w", encoding="utf-8") as handle:
        start = now - 30 * 86400
        for i in range(lines):
            ts = start + (now - start) * i / lines
            slug = rng.choice(slugs)
            event = rng.choice(EVENTS)
            entry = {
                "time": datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds"),
                "ts": round(ts, 3),
                "slug": slug,
                "event": event,
                "pid": 4242,
                "engine": "qwen",
                **event_fields(event, i, rng),
            }
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return root


def import_once(root: Path) -> float:
    from pipeline.wiring import open_sqlite

    started = time.perf_counter()
    open_sqlite(root / "articles" / ".qwenpipe").close()
    return time.perf_counter() - started


def in_process(root: Path) -> tuple[float, float]:
    from pipeline.cli.app import run

    buffer = io.StringIO()
    started, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        code = run(["--config", str(root / "config.toml"), "status", "--json"])
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert code == 0 and json.loads(buffer.getvalue())["totals"]["total"] > 0
    return elapsed, cpu


def as_subprocess(root: Path, env: dict[str, str] = ENV) -> tuple[float, float]:
    elapsed, cpu, result = timed_run(
        [sys.executable, "-m", "pipeline", "--config", str(root / "config.toml"), "status", "--json"],
        env=env,
        cwd=tempfile.gettempdir(),  # not this checkout: its `pipeline` would come first
    )
    assert result.returncode == 0, result.stderr
    return elapsed, cpu


def grow(root: Path) -> None:
    """20 new events written by another connection (a cycle's); each `status` run closed its own
    store when it ended (cli.common.workspace_of)."""
    from pipeline.store.protocol import Event
    from pipeline.store.sqlite import SQLiteStore

    with SQLiteStore.open(root / "articles" / ".qwenpipe") as store, store.transaction() as tx:
        for _ in range(20):
            tx.append(Event("article-00001", "poll", time.time(), fields={"engine": "qwen"}))


# The least any Python process does for this document, qwenpipe's logic left out: list both
# folders, stat the unfinished prompts, read the store's four per-article tables, build a row
# of the documented fields per article and write the JSON. What the machine gives any design.
FLOOR = """
import json, os, sqlite3, sys
root = sys.argv[1]
prompts = list(os.scandir(root + "/prompts"))
articles = {e.name for e in os.scandir(root + "/articles")}
for e in prompts:
    if e.name not in articles:
        e.stat()
db = sqlite3.connect(root + "/articles/.qwenpipe/qwenpipe.db")
summaries, _, _, _ = [db.execute(q).fetchall() for q in (
    "SELECT slug, last_event, sent_ts, chat_url, engine, turns FROM summaries",
    "SELECT * FROM articles", "SELECT * FROM sends WHERE turn = 1", "SELECT * FROM prompt_checks")]
rows = [{"slug": r[0], "state": "done", "engine": r[4] or None, "age_seconds": 1, "attempts": 0,
         "hard_failures": 0, "next_try": None, "last_error": None, "chat_url": r[3] or None,
         "turn": None, "turns": None, "path": root + "/articles/" + r[0] + ".md",
         "account": "default", "host": None} for r in summaries]
sys.stdout.write(json.dumps({"articles": rows}, ensure_ascii=False))
"""


def floor(root: Path) -> tuple[float, float]:
    return timed_run([sys.executable, "-c", FLOOR, str(root)], env=ENV, check=True)[:2]


def typer(root: Path) -> tuple[float, float]:
    return timed_run([sys.executable, "-c", "import typer"], env=ENV, check=True)[:2]


def paired(root: Path, repeat: int, against: Path | None = None) -> dict[str, tuple[float, float]]:
    """The warm status as a process, the floor and `import typer` (and the status of the
    checkout `against`), their runs alternating (a shared machine's load falls on all alike):
    each one's median (wall, CPU)."""
    measures = [("status", as_subprocess), ("floor", floor), ("typer", typer)]
    if against is not None:
        # Its own copy of the batch: the document a warm status keeps (status_document) is read
        # only in the format of the code that wrote it, so two checkouts in turn on one batch
        # would each find the other's and make it again: both cold.
        copy = root.parent / "against"
        shutil.copytree(root, copy, symlinks=True)
        env = checkout_env(ENV, against)
        measures.append(("against", lambda _: as_subprocess(copy, env)))
        as_subprocess(copy, env)  # its document kept for its copy (the paths differ)
    runs: dict[str, list] = {name: [] for name, _ in measures}
    for _ in range(repeat):
        for name, measure in measures:
            runs[name].append(measure(root))
    return {
        name: (statistics.median(f[0] for f in found), statistics.median(f[1] for f in found))
        for name, found in runs.items()
    }


def timed(measure, root: Path, *, cold: bool, repeat: int) -> tuple[float, float]:
    figures = []
    for _ in range(repeat):
        grow(root) if cold else measure(root)
        figures.append(measure(root))
    return statistics.median(f[0] for f in figures), statistics.median(f[1] for f in figures)


def main() -> None:
    args = options(__doc__, against=True, articles=10_000, lines=100_000, repeat=3)
    with tempfile.TemporaryDirectory(prefix="qwenpipe-bench-") as folder:
        started = time.perf_counter()
        root = build(Path(folder) / "batch", args.articles, args.lines)  # beside it: --against's copy
        took = time.perf_counter() - started
        print(f"built {args.articles:,} articles and a {args.lines:,}-line journal in {took:.1f} s")
        print(f"imported into the store (once, on first open) in {import_once(root):.1f} s")
        in_process(root)  # imports paid once, as a long-running --watch would
        rows = [
            ("in-process", "cold", timed(in_process, root, cold=True, repeat=args.repeat)),
            ("in-process", "warm", timed(in_process, root, cold=False, repeat=args.repeat)),
            ("subprocess", "cold", timed(as_subprocess, root, cold=True, repeat=args.repeat)),
            ("subprocess", "warm", timed(as_subprocess, root, cold=False, repeat=args.repeat)),
        ]
        least = timed(floor, root, cold=False, repeat=args.repeat)
        side = paired(root, max(args.repeat, 5), args.against)
    load = os.getloadavg()[0]
    print(f"\n`status --json`, {args.articles:,} articles, {args.lines:,} journal lines")
    print(f"median of {args.repeat}; {os.cpu_count()} CPUs, load average {load:.1f} while it ran")
    print(f"{'how':<12}{'store':<8}{'seconds':>9}{'CPU s':>9}  {'target':>8}  ok")
    for how, when, (seconds, cpu) in rows:
        target = TARGETS[when]
        ok = verdict(seconds, cpu, target, cpu_only="CPU yes")
        print(f"{how:<12}{when:<8}{seconds:>9.3f}{cpu:>9.3f}  {'<= ' + str(target):>8}  {ok}")
    floor_line = f"{'floor':<12}{'warm':<8}{least[0]:>9.3f}{least[1]:>9.3f}"
    print(f"{floor_line}  (any Python process: list, stat, read, write)")
    (status, status_cpu), (low, low_cpu), (typer_s, typer_cpu) = side["status"], side["floor"], side["typer"]
    print(f"\npaired, median of {max(args.repeat, 5)} each (wall / CPU seconds):")
    print(f"  status --json (warm process) {status:.3f} / {status_cpu:.3f}")
    print(f"  floor                        {low:.3f} / {low_cpu:.3f}")
    print(f"  python -c 'import typer'     {typer_s:.3f} / {typer_cpu:.3f}")
    if args.against:
        other, other_cpu = side["against"]
        print(f"  status --json of {args.against}: {other:.3f} / {other_cpu:.3f}", end="")
        print(f" ({other_cpu / low_cpu:.2f}x the floor, {other_cpu / typer_cpu:.2f}x import typer, CPU)")
    ratio, ratio_cpu = status / low, status_cpu / low_cpu
    ok = "yes" if ratio <= FLOOR_RATIO else ("CPU yes" if ratio_cpu <= FLOOR_RATIO else "NO")
    print(f"  status / floor: {ratio:.2f}x wall, {ratio_cpu:.2f}x CPU  (<= {FLOOR_RATIO:g}x: {ok})")
    ratio, ratio_cpu = status / typer_s, status_cpu / typer_cpu
    wanted = f"<= {TYPER_RATIO:g}x at 10,000" if args.articles <= 10_000 else "target at 10,000 only"
    print(f"  status / import typer: {ratio:.2f}x wall, {ratio_cpu:.2f}x CPU  ({wanted})")


if __name__ == "__main__":
    main()
