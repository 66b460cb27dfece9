"""Collecting in-flight chats: one cycle polling one at a time, one polling side by side, or
one `generate` process per chat (real Chromium against the simulator, loopback only).

    .venv/bin/python bench/bench_concurrent_polls.py [--chats 20] [--concurrency 1 4]

Each way gets its own project whose prompts were all sent by one cycle and whose answers are
complete before the clock starts, so only the collecting is timed. Not run by the tests.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

from installed import ENV  # noqa: E402  # as a user's install runs it (installed.py)
from sim_project import make_project  # noqa: E402

ANSWER_SECONDS = 1.0


def qwenpipe(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args], cwd=project, env=ENV, capture_output=True, text=True
    )


def sent_project(folder: Path, sim, chats: int, concurrency: int = 1) -> Path:
    """A project whose `chats` prompts were all sent (one cycle) and whose answers are complete."""
    project = make_project(folder, sim, extra=f"concurrency = {concurrency}", own_browser=True)
    with open(project / "config.toml", "a", encoding="utf-8") as config:
        config.write("\n[article]\nmin_words = 0\n")
    for n in range(chats):
        (project / "prompts" / f"p{n:02d}.md").write_text(f"Write benchmark article {n} ({folder.name}).")
    result = qwenpipe(project, "cycle")
    assert result.returncode == 42, result.stderr
    time.sleep(ANSWER_SECONDS + 2)  # every answer complete
    return project


def timed_cycle(project: Path, chats: int) -> float:
    started = time.perf_counter()
    result = qwenpipe(project, "cycle")
    seconds = time.perf_counter() - started
    assert result.returncode in (0, 3), result.stderr
    assert "one chat at a time" not in result.stderr, result.stderr
    collected = len(list((project / "articles").glob("p*.md")))
    if collected < chats:  # a page still drawing its answer at the look: the next cycle takes it
        print(f"  ({project.name}: {collected} of {chats} collected by this cycle)", file=sys.stderr)
    return seconds


def timed_generates(project: Path, chats: int) -> float:
    started = time.perf_counter()
    for n in range(chats):
        result = qwenpipe(project, "generate", f"p{n:02d}")
        assert result.returncode == 0, result.stderr
    return time.perf_counter() - started


def measure(chats: int = 20, levels: tuple[int, ...] = (1, 4)) -> dict[str, float]:
    """Seconds to collect `chats` finished chats: `cycle c=N` for each level, and `generates`."""
    from pipeline.simulator import Simulator

    figures: dict[str, float] = {}
    with (
        Simulator(port=0, answer_seconds=ANSWER_SECONDS, thinking_seconds=0.2, url_delay=0.2).start() as sim,
        tempfile.TemporaryDirectory(prefix="qwenpipe-bench-concurrent-") as folder,
    ):
        for level in levels:
            project = sent_project(Path(folder) / f"cycle-{level}", sim, chats, concurrency=level)
            figures[f"cycle c={level}"] = timed_cycle(project, chats)
        project = sent_project(Path(folder) / "generates", sim, chats)
        figures["generates"] = timed_generates(project, chats)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    figures = measure(args.chats, tuple(args.concurrency))
    print(f"collecting {args.chats} finished chats ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    sequential = figures.get("cycle c=1")
    for name, seconds in figures.items():
        line = f"  {name:<14} {seconds:6.1f} s  ({seconds / args.chats:.2f} s a chat)"
        if sequential and name != "cycle c=1":
            line += f"  {sequential / seconds:.2f}x the speed of one cycle polling one at a time"
        print(line)
    best = min(v for k, v in figures.items() if k.startswith("cycle"))
    print(f"  separate generates / best cycle: {figures['generates'] / best:.2f}x")


if __name__ == "__main__":
    main()
