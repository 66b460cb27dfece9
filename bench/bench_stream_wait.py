"""How soon `generate --wait` has the article on disk after the answer's last frame: read from
the page's own stream (today) beside the chat's JSON read after the page (`--no-stream`, the
simulator answering the send without a stream: the way it was read before).

    .venv/bin/python bench/bench_stream_wait.py [--repeat 5] [--answer-ms 3000]

Each run is a fresh project and a real `python -m pipeline generate S --wait` against the
simulator in this process. The answer's last frame leaves the simulator at a time it knows
(the message's start + thinking + answer time + the finish lag, on the system-wide monotonic
clock); the bench watches for `S.md` every 5 ms and takes the gap. Target: within 1 s (median of
the runs). Not run by the tests.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from sim_project import make_project, prompt  # noqa: E402
from timing import options  # noqa: E402

from pipeline.simulator import Simulator  # noqa: E402
from pipeline.simulator.chats import FINISH_LAG  # noqa: E402

TARGET = 1.0


def one_run(sim: Simulator, folder: Path, slug: str) -> float | None:
    """Seconds from the answer's last frame to the article on disk (None: the run failed)."""
    project = make_project(folder, sim, router=False, own_browser=True)
    text = prompt(project, slug, f"Write an article about {slug.replace('-', ' ')}.")
    article = project / "articles" / f"{slug}.md"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "generate", slug, "--wait"],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    written = None
    while proc.poll() is None and written is None:
        if article.exists():
            written = time.monotonic()
        time.sleep(0.005)
    _, err = proc.communicate(timeout=300)
    if written is None and article.exists():
        written = time.monotonic()  # the process ended between two looks
    if proc.returncode != 0 or written is None:
        print(f"  {slug}: exit {proc.returncode}: {err.strip()[-300:]}", file=sys.stderr)
        return None
    with sim.store.lock:
        chat = next(c for c in sim.store.chats.values() if c.messages and c.messages[0].text == text)
        reply = chat.last_assistant()
        last_frame = reply.started + reply.thinking_seconds + reply.answer_seconds + FINISH_LAG
    return written - last_frame


def main() -> int:
    args = options(__doc__, repeat=5, answer_ms=3000)
    rows = []
    for label, stream in (("stream (the page's own)", True), ("chat JSON after the page", False)):
        gaps = []
        with (
            tempfile.TemporaryDirectory() as tmp,
            Simulator(
                answer_seconds=args.answer_ms / 1000, thinking_seconds=0.5, url_delay=0.2, stream=stream
            ).start() as sim,
        ):
            for n in range(args.repeat):
                gap = one_run(sim, Path(tmp) / f"run{n}", f"wait-{n}")
                if gap is not None:
                    gaps.append(gap)
        median = statistics.median(gaps) if gaps else float("nan")
        ok = "yes" if gaps and median <= TARGET else "NO"
        rows.append(
            (label, len(gaps), median, min(gaps, default=float("nan")), max(gaps, default=float("nan")), ok)
        )
    print(f"{'read from':<26} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7} {'target s':>9} ok")
    for label, runs, median, low, high, ok in rows:
        print(f"{label:<26} {runs:>4} {median:>9.3f} {low:>7.3f} {high:>7.3f} {TARGET:>9.1f} {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
