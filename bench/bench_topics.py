"""How long topic memory takes: 1,000 new titles against 10,000 known ones.

    .venv/bin/python bench/bench_topics.py [--known 10000] [--rows 1000] [--repeat 3]

Three figures, each beside its target (well under a second), medians of `--repeat` runs,
in-process, in wall and CPU seconds (the verdict is on CPU seconds: a machine loaded by other work
stretches the wall time, not the work):
reading the known titles (the front matter of 10,000 prompt files, as `new` and `import` do),
and comparing 1,000 titles with them (each one also remembered, as an import does, so the later
rows are compared with the earlier ones too), twice: words drawn evenly from the vocabulary, and
drawn as real titles' are (Zipf: the commonest word, as "best" or "guide", in about a title of
two, which a word index must not compare with every title holding it). The titles are random
words of a 3,000-word vocabulary, 3 to 9 of them, about the length of real titles. Not run by the
tests.
"""

from __future__ import annotations

import random
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import options  # noqa: E402

from pipeline.config import Topics  # noqa: E402
from pipeline.publishing.similar import TopicMemory, remember_batch  # noqa: E402

TARGET = 1.0  # seconds, for 1,000 titles against 10,000, and for reading 10,000
THRESHOLD = Topics().similar  # topics.similar's default


def titles(count: int, rng: random.Random, skewed: bool = False) -> list[str]:
    vocabulary = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))) for _ in range(3000)]
    weights = [1 / rank for rank in range(1, len(vocabulary) + 1)] if skewed else None
    return [
        " ".join(rng.choices(vocabulary, weights, k=rng.randint(3, 9))).capitalize() for _ in range(count)
    ]


def one_run(
    known: int, rows: int, seed: int, skewed: bool
) -> tuple[tuple[float, float], tuple[float, float]]:
    """((wall, CPU) seconds reading the known titles, (wall, CPU) seconds comparing the new ones)."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        prompts = Path(tmp) / "prompts"
        prompts.mkdir()
        for number, title in enumerate(titles(known, rng, skewed)):
            (prompts / f"topic-{number:05d}.md").write_text(
                f'+++\ntitle = "{title}"\ntags = ["tea"]\n+++\nWrite about {title}.\n', encoding="utf-8"
            )
        started, cpu = time.perf_counter(), time.process_time()
        memory = remember_batch(TopicMemory(THRESHOLD), prompts, Path(tmp) / "articles")
        reading = (time.perf_counter() - started, time.process_time() - cpu)
        assert len(memory) == known
    new = titles(rows, rng, skewed)
    started, cpu = time.perf_counter(), time.process_time()
    for number, title in enumerate(new):
        if memory.closest(title) is None:
            memory.add(f"row-{number}", title, f"line {number + 2} of the list")
    return reading, (time.perf_counter() - started, time.process_time() - cpu)


def main() -> None:
    args = options(__doc__, known=10_000, rows=1000, repeat=3)
    even = [one_run(args.known, args.rows, seed, skewed=False) for seed in range(args.repeat)]
    skewed = [one_run(args.known, args.rows, seed, skewed=True) for seed in range(args.repeat)]
    for runs, step, what in (
        (even, 0, f"reading {args.known:,} known titles"),
        (even, 1, f"{args.rows:,} titles against {args.known:,}"),
        (skewed, 1, f"{args.rows:,} titles against {args.known:,}, common words (Zipf)"),
    ):
        wall = statistics.median(run[step][0] for run in runs)
        cpu = statistics.median(run[step][1] for run in runs)
        verdict = "ok" if cpu < TARGET else "SLOW"
        print(
            f"topic memory, {what}: median {cpu:.3f} s CPU, {wall:.3f} s wall "
            f"(target < {TARGET:.1f} s) {verdict}"
        )


if __name__ == "__main__":
    main()
