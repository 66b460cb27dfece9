"""How long `qwenpipe import` takes for a topic list of 1,000 rows (from the built-in template).

    .venv/bin/python bench/bench_import.py [--rows 1000] [--repeat 3]

Each figure is the wall time of the import itself (in-process, the CSV read, every row checked,
every prompt written and fsynced), beside the target: well under a second. Not run by the tests.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import options  # noqa: E402

from pipeline.publishing.topics import import_topics  # noqa: E402

TARGET = 1.0  # seconds, for 1,000 rows


def one_run(rows: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "prompts").mkdir()
        (root / "articles").mkdir()
        source = root / "topics.csv"
        lines = [f'"Topic {n}: brewing, storing and tasting",,"tea, how-to",reader {n}' for n in range(rows)]
        source.write_text("title,slug,tags,audience\n" + "\n".join(lines) + "\n", encoding="utf-8")
        started = time.perf_counter()
        report = import_topics(root / "prompts", root / "articles", source, None)
        seconds = time.perf_counter() - started
        assert len(report.written) == rows, report.summary()
        return seconds


def main() -> None:
    args = options(__doc__, rows=1000, repeat=3)
    figures = [one_run(args.rows) for _ in range(args.repeat)]
    target = TARGET * args.rows / 1000
    median = statistics.median(figures)
    verdict = "ok" if median < target else "SLOW"
    print(f"import of {args.rows} rows: median {median:.3f} s (target < {target:.1f} s) {verdict}")


if __name__ == "__main__":
    main()
