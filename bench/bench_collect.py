"""Collecting finished chats through the site's JSON vs a page per chat, the `--wait` latency, and
(with --makespan, slow) 50 prompts from nothing to 50 articles (real Chromium, the simulator).

    .venv/bin/python bench/bench_collect.py [--chats 20 200] [--pairs 3] [--makespan]

- one `generate` collecting one finished chat and one `cycle` collecting 20, run in pairs (the
  machine is shared and noisy: each pair measured back to back), the cycle at the default
  `qwen.api_reads_per_second` (10) and at the benchmark's; the ratio beside its target (issue 39:
  at most 1.5x);
- one cycle collecting N finished chats, `qwen.collect = "api"` (one page, the chats' JSON) and,
  in the same run, `"page"` (a page per chat, `qwen.concurrency = 4`) on 20 of them;
- `generate --wait`: the time from the answer's stored "finished" to SLUG.md on disk;
- --makespan: 50 prompts, answers 30 s each, a cycle started every 60 s (one still running makes
  the next step aside, as under cron), `qwen.send_concurrency` 1 and 3.

The chats to collect are made in the simulator directly (its ChatStore) and their sidecars
written, so only the collecting is timed. They are finished long ago by the site's clock (made
with its clock two minutes back), as a cron cycle finds the chats of an earlier one: each costs
one JSON read (steady.finished_long_ago). Not run by the tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from installed import ENV  # as a user's install runs it (installed.py)

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

COLLECT_TARGET = 10.0  # s, 200 chats in one cycle
TWENTY_TARGET = 1.5  # one cycle collecting 20 finished chats, at most this many times one generate
LONG_AGO = -120.0  # s: the site's clock while the chats are made, put back to 0 once they finished
ANSWER_SECONDS = 1.2  # an answer ends a whole second after its send: the stamps tell them apart
WAIT_TARGET = 1.0  # s, --wait: the page and the stored status agree -> SLUG.md (from_agreement)
BENCH_READS_PER_SECOND = 100  # 200 chats x 3 stable reads in 10 s needs more than 60 a second
CONFIG = """[qwen]
base_url = "{base}"
poll_interval = 0
page_timeout = 30
{extra}
[browser]
profile_dir = "profile"
storage_state = "state.json"
[router]
enabled = false
base_url = "{base}/v1"
[article]
min_words = 0
"""


def qwenpipe(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args], cwd=project, env=ENV, capture_output=True, text=True
    )


def project(folder: Path, sim, extra: str = "") -> Path:
    (folder / "prompts").mkdir(parents=True)
    (folder / "articles").mkdir()
    (folder / "config.toml").write_text(CONFIG.format(base=sim.base_url, extra=extra), encoding="utf-8")
    return folder


def finished_chats(folder: Path, sim, chats: int, extra: str) -> Path:
    """A project with `chats` sent prompts whose answers the simulator finished long ago by its
    clock (made with the clock LONG_AGO back, which is put right once they finished)."""
    root = project(folder, sim, extra)
    sim.set(clock_offset=LONG_AGO)
    for n in range(chats):
        text = f"Write benchmark article {n} ({folder.name})."
        (root / "prompts" / f"p{n:03d}.md").write_text(text, encoding="utf-8")
        chat_id = sim.store.new_chat()
        sim.store.send(chat_id, text, None, gate=None)
        (root / "articles" / f"p{n:03d}.md.url").write_text(f"{sim.base_url}/c/{chat_id}\n")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every answer stored as finished
        views = [sim.store.chat_view(ident) for ident in sim.chat_ids()]
        if all(m["finished"] for v in views if v for m in v["messages"] if m["role"] == "assistant"):
            sim.set(clock_offset=0.0)
            return root
        time.sleep(0.1)
    raise RuntimeError("the simulator's answers did not finish")


def timed_cycle(root: Path, chats: int) -> tuple[float, int]:
    """Seconds of one cycle, and how many of the chats it collected."""
    started = time.perf_counter()
    result = qwenpipe(root, "cycle")
    seconds = time.perf_counter() - started
    assert result.returncode in (0, 3), result.stderr
    return seconds, len(list((root / "articles").glob("p*.md")))


def collecting(chat_counts: tuple[int, ...]) -> dict[str, tuple[float, int, dict]]:
    """label -> (seconds, chats collected, the simulator's page loads and JSON reads)."""
    from pipeline.simulator import Simulator

    figures = {}
    ways = [(n, "api", f"api_reads_per_second = {BENCH_READS_PER_SECOND}") for n in chat_counts]
    ways.append((min(chat_counts), "page", 'collect = "page"\nconcurrency = 4'))
    with (
        Simulator(port=0, answer_seconds=ANSWER_SECONDS, thinking_seconds=0.1, url_delay=0.1).start() as sim,
        tempfile.TemporaryDirectory(prefix="qwenpipe-bench-collect-") as folder,
    ):
        for chats, way, extra in ways:
            root = finished_chats(Path(folder) / f"{way}-{chats}", sim, chats, extra)
            before = sim.requests()
            seconds, collected = timed_cycle(root, chats)
            after = sim.requests()
            seen = {k: after.get(k, 0) - before.get(k, 0) for k in ("chat_page", "chat_json")}
            figures[f"{way} {chats}"] = (seconds, collected, seen)
    return figures


class Pair(NamedTuple):
    """One back-to-back measure: a generate collecting one chat, then cycles collecting 20."""

    one: float  # s, `qwenpipe generate` of one finished chat (its page: the default way)
    twenty: float  # s, `qwenpipe cycle` of 20 at the default qwen.api_reads_per_second
    twenty_fast: float  # s, the same at BENCH_READS_PER_SECOND
    reads: int  # the simulator's JSON reads of the 20 chats in the default cycle


def one_and_twenty(pairs: int, chats: int = 20) -> list[Pair]:
    """`pairs` pairs, each on chats of its own: one generate collecting one, one cycle collecting
    `chats` (default rate), one at the benchmark's rate; every command a process of its own."""
    from pipeline.simulator import Simulator

    measured = []
    with (
        Simulator(port=0, answer_seconds=ANSWER_SECONDS, thinking_seconds=0.1, url_delay=0.1).start() as sim,
        tempfile.TemporaryDirectory(prefix="qwenpipe-bench-twenty-") as folder,
    ):
        for n in range(pairs):
            one = finished_chats(Path(folder) / f"one-{n}", sim, 1, "")
            twenty = finished_chats(Path(folder) / f"twenty-{n}", sim, chats, "")
            fast = finished_chats(
                Path(folder) / f"fast-{n}", sim, chats, f"api_reads_per_second = {BENCH_READS_PER_SECOND}"
            )
            started = time.perf_counter()
            result = qwenpipe(one, "generate", "p000")
            one_seconds = time.perf_counter() - started
            assert result.returncode == 0, result.stderr
            before = sim.requests().get("chat_json", 0)
            twenty_seconds, collected = timed_cycle(twenty, chats)
            reads = sim.requests().get("chat_json", 0) - before
            fast_seconds, collected_fast = timed_cycle(fast, chats)
            assert collected == collected_fast == chats, (collected, collected_fast)
            measured.append(Pair(one_seconds, twenty_seconds, fast_seconds, reads))
    return measured


def collect_phase(chats: int = 20, runs: int = 3) -> list[tuple[float, int]]:
    """(seconds, JSON reads) of the collecting alone: QwenEngine.collect over `chats` finished
    chats in a browser already running (its page opened and read, nothing written), at the
    default qwen.api_reads_per_second: what the Chromium launch and the process start, which a
    loaded machine makes noisy, leave out of the cycle's figure."""
    from pipeline.config import Browser, Qwen
    from pipeline.engines.qwen.browser import BrowserSession
    from pipeline.engines.qwen.engine import QwenEngine
    from pipeline.simulator import Simulator

    measured = []
    with (
        Simulator(port=0, answer_seconds=ANSWER_SECONDS, thinking_seconds=0.1, url_delay=0.1).start() as sim,
        tempfile.TemporaryDirectory(prefix="qwenpipe-bench-phase-") as folder,
    ):
        browser = Browser(
            profile_dir=str(Path(folder) / "profile"), storage_state=str(Path(folder) / "s.json")
        )
        with BrowserSession(browser) as session, QwenEngine(Qwen(base_url=sim.base_url), session) as engine:
            engine.prepare()
            for n in range(runs):
                root = finished_chats(Path(folder) / f"phase-{n}", sim, chats, "")
                urls = [path.read_text().strip() for path in sorted((root / "articles").glob("*.url"))]
                before = sim.requests().get("chat_json", 0)
                started = time.perf_counter()
                found = dict(engine.collect(urls))
                seconds = time.perf_counter() - started
                assert len(found) == chats, f"{len(found)} of {chats} collected"
                measured.append((seconds, sim.requests().get("chat_json", 0) - before))
    return measured


def wait_latency(runs: int = 3) -> list[float]:
    """`generate --wait` lags: SLUG.md's mtime minus the moment the simulator stored "finished".
    The simulator's page agrees PAGE_SETTLE (0.7 s) later at the earliest (app.js draws it done
    at its next 300 ms poll after that): subtract it for the lag from the moment they agree."""
    from pipeline.simulator import Simulator
    from pipeline.simulator.chats import FINISH_LAG

    thinking, answer = 0.5, 4.0
    lags = []
    with (
        Simulator(port=0, answer_seconds=answer, thinking_seconds=thinking, url_delay=0.2).start() as sim,
        tempfile.TemporaryDirectory(prefix="qwenpipe-bench-wait-") as folder,
    ):
        root = project(Path(folder), sim)
        for n in range(runs):
            text = f"Write a waited-for benchmark article, take {n}."
            (root / "prompts" / f"w{n}.md").write_text(text, encoding="utf-8")
            result = qwenpipe(root, "generate", f"w{n}", "--wait")
            assert result.returncode == 0, result.stderr
            received = next(e["time"] for e in sim.sends() if e["prompt"] == text)
            finished = received + thinking + answer + FINISH_LAG
            lags.append((root / "articles" / f"w{n}.md").stat().st_mtime - finished)
    return lags


def from_agreement(lag: float) -> float:
    """A wait_latency lag counted from the moment the page agrees with the stored status: an
    upper bound, as the page agrees PAGE_SETTLE after it at the earliest."""
    from pipeline.simulator.chats import PAGE_SETTLE

    return lag - PAGE_SETTLE


def makespan(send_concurrency: int, prompts: int = 50, answer: float = 30.0, every: float = 60.0) -> float:
    """Seconds from the first cycle to `prompts` articles, a cycle started every `every` s."""
    from pipeline.simulator import Simulator

    with (
        Simulator(port=0, answer_seconds=answer, thinking_seconds=0.5, url_delay=0.2).start() as sim,
        tempfile.TemporaryDirectory(prefix="qwenpipe-bench-makespan-") as folder,
    ):
        root = project(Path(folder), sim, f"send_concurrency = {send_concurrency}\nconcurrency = 4")
        for n in range(prompts):
            (root / "prompts" / f"m{n:02d}.md").write_text(f"Write makespan article {n}.", encoding="utf-8")
        started = time.perf_counter()
        running: list[subprocess.Popen] = []
        while len(list((root / "articles").glob("m*.md"))) < prompts:
            running = [p for p in running if p.poll() is None]
            cycle = [sys.executable, "-m", "pipeline", "cycle"]
            running.append(
                subprocess.Popen(
                    cycle, cwd=root, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
            next_at = time.perf_counter() + every
            while time.perf_counter() < next_at and len(list((root / "articles").glob("m*.md"))) < prompts:
                time.sleep(0.5)
        seconds = time.perf_counter() - started
        for process in running:
            process.wait()
        sends = len(sim.sends())
    assert sends == prompts, f"{sends} sends for {prompts} prompts"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--pairs", type=int, default=3, help="generate-1 / cycle-20 pairs to run")
    parser.add_argument("--makespan", action="store_true", help="also the 50-prompt makespan (minutes)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    pairs = one_and_twenty(args.pairs)
    print(
        f"one generate collecting 1 finished chat vs one cycle collecting 20 (load {load:.1f} at the start)"
    )
    for pair in pairs:
        print(
            f"  generate 1 {pair.one:5.2f} s   cycle 20 {pair.twenty:5.2f} s ({pair.reads} JSON reads) "
            f"{pair.twenty / pair.one:4.2f}x   at {BENCH_READS_PER_SECOND} reads/s {pair.twenty_fast:5.2f} s "
            f"{pair.twenty_fast / pair.one:4.2f}x"
        )
    for label, ratios in (
        ("api_reads_per_second = 10 (default)", [p.twenty / p.one for p in pairs]),
        (f"api_reads_per_second = {BENCH_READS_PER_SECOND}", [p.twenty_fast / p.one for p in pairs]),
    ):
        ratio = statistics.median(ratios)
        verdict = "yes" if ratio <= TWENTY_TARGET else "NO"
        print(f"  median {ratio:.2f}x, {label}  target <= {TWENTY_TARGET:g}x: {verdict}")
    phase = collect_phase()
    print(
        f"  the collecting alone, 20 chats in a running browser (api_reads_per_second = 10): "
        f"{', '.join(f'{s:.2f} s / {r} reads' for s, r in phase)}"
    )
    print(f"  (load {os.getloadavg()[0]:.1f} at the end)")
    load = os.getloadavg()[0]
    figures = collecting(tuple(args.chats))
    lags = wait_latency()
    print(f"collecting finished chats ({os.cpu_count()} CPUs, load {load:.1f} at the start)")
    page_label = f"page {min(args.chats)}"
    page_seconds = figures[page_label][0] / min(args.chats)  # a chat
    for label, (seconds, collected, seen) in figures.items():
        chats = int(label.split()[1])
        line = (
            f"  {label:<9} {seconds:6.1f} s  {collected}/{chats} collected, "
            f"{seen['chat_page']} chat pages, {seen['chat_json']} JSON reads"
        )
        if label.startswith("api"):
            ratio = page_seconds * chats / seconds
            measured = "measured" if chats == min(args.chats) else "page path extrapolated"
            line += f"  {ratio:.1f}x the page path ({measured})"
            if chats == 200:
                line += f"  target <= {COLLECT_TARGET:g} s: {'yes' if seconds <= COLLECT_TARGET else 'NO'}"
        print(line)
    print(f"  (api: qwen.api_reads_per_second = {BENCH_READS_PER_SECOND}, stable_reads = 3)")
    lag = statistics.median(lags)
    agreed = from_agreement(lag)
    verdict = "yes" if agreed <= WAIT_TARGET else "NO"
    print(
        f"generate --wait: stored finished -> SLUG.md {lag:.2f} s median of "
        f"{', '.join(f'{x:.2f}' for x in lags)}; from the page's agreement at most {agreed:.2f} s"
        f"  target <= {WAIT_TARGET:g} s: {verdict}"
    )
    if args.makespan:
        for level in (1, 3):
            print(
                f"makespan, 50 prompts, 30 s answers, cycles every 60 s, send_concurrency {level}: "
                f"{makespan(level):.0f} s (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
