"""Topic memory: `new` and `import` refuse a title near-identical to one the batch already has
(a prompt's or an article's), so that a topic list fed to cron twice, or worded again, does not
become two near-identical posts.

Two titles are compared as their words: accents, case and punctuation folded, the words sorted
(so "Green tea benefits" and "Benefits of green tea" are "benefits green tea" and "benefits
green of tea"), then rapidfuzz's normalised Indel similarity of the two (what
`fuzz.token_sort_ratio` computes; the words are sorted once per title here, not once per pair).
Not `token_set_ratio`: it scores 1.0 whenever one title's words are all in the other, so "Tea"
would stop every later "Tea ..." topic. A score at or above `[topics] similar` (0.85) is a
resemblance.

Fast enough for a large batch: each title is compared (`process.extractOne`, C++) only with the
known titles whose length allows the threshold at all (an Indel similarity `t` needs the shorter
to be at least t/(2-t) of the longer), so 1,000 new titles against 10,000 known ones take a
fraction of a second (bench/bench_topics.py).
"""

from __future__ import annotations

import bisect
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rapidfuzz import fuzz, process

from .. import files
from ..contract.prompts import is_folder_notes, is_slug, split_front_matter
from ..errors import SetupProblem, UsageProblem

ALLOW = "--allow-similar"
WORD_RE = re.compile(r"[^\W_]+")
# Front matter whose top-level `title` is a one-line TOML string without escapes (before any table
# or multi-line string): its value as it is.
PLAIN_TITLE_RE = re.compile(
    r"\+\+\+[ \t]*\r?\n(?:(?![ \t]*\[)(?![ \t]*\+\+\+)(?![^\n]*(?:\"\"\"|'''))[^\n]*\n)*?"
    r"""[ \t]*title[ \t]*=[ \t]*(?:"(?P<basic>[^"\\\n]*)"|'(?P<literal>[^'\n]*)')[ \t]*(?:#[^\n]*)?\r?\n"""
)


def words_key(title: str) -> str:
    """The title as compared: accents dropped, case folded, punctuation gone, words sorted."""
    if title.isascii():  # most titles: nothing to fold but the case (10,000 of them read at once)
        return " ".join(sorted(WORD_RE.findall(title.lower())))
    decomposed = unicodedata.normalize("NFKD", title)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return " ".join(sorted(WORD_RE.findall(plain)))


@dataclass(frozen=True)
class Resemblance:
    slug: str  # the known topic it resembles
    title: str  # that topic's title
    score: float  # 0..1
    where: str  # "its prompt", "its article", "line N of the list"

    def says(self, threshold: float) -> str:
        return (
            f"resembles {self.slug!r} ({self.where}: {self.title!r}): similarity {self.score:.2f}, "
            f"at least topics.similar = {threshold:g}"
        )


class TopicMemory:
    """The titles known so far, kept in the order of the length of their compared form, and the
    closest of them to a new title."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._cutoff = threshold * 100  # rapidfuzz scores 0..100
        self._lengths: list[int] = []  # sorted
        self._keys: list[str] = []  # in the same order
        self._topics: list[tuple[str, str, str]] = []  # (slug, title, where), in the same order

    def add(self, slug: str, title: str, where: str) -> None:
        key = words_key(title)
        if key:
            at = bisect.bisect_right(self._lengths, len(key))
            self._lengths.insert(at, len(key))
            self._keys.insert(at, key)
            self._topics.insert(at, (slug, title, where))

    def __len__(self) -> int:
        return len(self._keys)

    def closest(self, title: str) -> Resemblance | None:
        """The known topic most like `title`, if it is at least the threshold alike."""
        key = words_key(title)
        if not key:
            return None
        size, t = len(key), self.threshold
        low = bisect.bisect_left(self._lengths, math.ceil(size * t / (2 - t)))
        high = bisect.bisect_right(self._lengths, math.floor(size * (2 - t) / t))
        found = process.extractOne(
            key, self._keys[low:high], scorer=fuzz.ratio, processor=None, score_cutoff=self._cutoff
        )
        if found is None:
            return None
        _key, score, index = found
        slug, known, where = self._topics[low + index]
        return Resemblance(slug, known, score / 100, where)


def remember_batch(memory: TopicMemory, prompts_dir: Path, articles_dir: Path) -> TopicMemory:
    """`memory` with the title of every prompt and every article of the batch."""
    for slug, title, where in batch_titles(prompts_dir, articles_dir):
        memory.add(slug, title, where)
    return memory


def batch_titles(prompts_dir: Path, articles_dir: Path) -> Iterator[tuple[str, str, str]]:
    """(slug, title, "its prompt"/"its article") of each prompt and article file: the front
    matter's `title`, else (a prompt without one) its slug's words. A file that cannot be read
    or parsed is left out (`status` and `doctor` are the places that tell about it)."""
    for folder, where in ((prompts_dir, "its prompt"), (articles_dir, "its article")):
        for slug in _slugs(folder):
            title = _front_matter_title(folder / f"{slug}.md")
            if title is None and where == "its prompt":
                title = slug.replace("-", " ").replace("_", " ")
            if title:
                yield slug, title, where


def _slugs(folder: Path) -> Iterable[str]:
    try:
        names = [entry.name for entry in folder.iterdir()]
    except OSError:
        return []
    return sorted(n[:-3] for n in names if n.endswith(".md") and not is_folder_notes(n) and is_slug(n[:-3]))


def _front_matter_title(path: Path) -> str | None:
    try:
        raw = files.read_bytes(path, follow=True, limit=1_000_000).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError, SetupProblem):
        return None
    plain = PLAIN_TITLE_RE.match(raw)  # what `new`, `import` and render write: no TOML parser needed
    if plain:
        title = plain["basic"] if plain["basic"] is not None else plain["literal"]
        return title.strip() or None
    try:
        meta, _body = split_front_matter(raw, path)
    except UsageProblem:
        return None
    title = meta.get("title")
    return title.strip() if isinstance(title, str) and title.strip() else None
