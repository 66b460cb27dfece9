"""Topic memory: `new` and `import` refuse a title that names a topic the batch already has (a
prompt's or an article's), so that a topic list fed to cron twice, or worded again, does not
become two posts on one topic.

Two titles are one topic when they have the same numbers and nearly the same words of meaning
(title_words.py: Unicode look-alikes, case and accents folded, stop words dropped, words
stemmed in the title's language). Their similarity is the share of their words they have in
common (Dice: the words of each that the other has, over the words of both); a word with a typo
counts as shared (one letter added, dropped, changed or two swapped, in words of five letters or
more), and so does a compound written as one word or two ("setup", "set up"), at most one such
loose match in four words. Any other number (a year, a version, a model number, a part) is
another topic whatever the words: "iPhone 16 review" is not "iPhone 17 review". A similarity at
or above `[topics] similar` (0.8) is a resemblance: "Green tea benefits" and "The benefits of
green tea" 1.0, "Making cold brew coffee" and "How to make cold brew coffee at home" 0.89, "Best
hiking trails in Colorado" and "... in Colombia" 0.75.

Fast enough for a large batch: each known title's words are computed once, when it is added,
and kept in an index from (numbers, word) to titles; a new title is scored only against the
known ones with its numbers that share enough of its words exactly to reach the threshold with
the loose matches allowed (so a typo in every word of a title goes unseen). 1,000 new titles
against 10,000 known ones take a fraction of a second (bench/bench_topics.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rapidfuzz.distance import OSA

from .. import files
from ..contract.prompts import is_folder_notes, is_slug, split_front_matter
from ..errors import SetupProblem, UsageProblem
from .title_words import TitleWords, title_words

ALLOW = "--allow-similar"
TYPO_MIN_LENGTH = 5  # a word shorter than this has no typo allowed: Iran is not Iraq
# Front matter whose top-level `title` is a one-line TOML string without escapes (before any table
# or multi-line string): its value as it is.
PLAIN_TITLE_RE = re.compile(
    r"\+\+\+[ \t]*\r?\n(?:(?![ \t]*\[)(?![ \t]*\+\+\+)(?![^\n]*(?:\"\"\"|'''))[^\n]*\n)*?"
    r"""[ \t]*title[ \t]*=[ \t]*(?:"(?P<basic>[^"\\\n]*)"|'(?P<literal>[^'\n]*)')[ \t]*(?:#[^\n]*)?\r?\n"""
)


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


def loose_matches_allowed(words: int) -> int:
    """How many of the words two titles share, the shorter of `words` words, may be shared
    loosely (a typo, a compound)."""
    return 1 + words // 4


def is_typo(one: str, other: str) -> bool:
    """One letter added, dropped, changed or two swapped, in words of TYPO_MIN_LENGTH or more."""
    return max(len(one), len(other)) >= TYPO_MIN_LENGTH and OSA.distance(one, other, score_cutoff=1) <= 1


def compound_of(word: str, parts: Iterable[str]) -> tuple[str, str] | None:
    """The two of `parts` that `word` is made of, the first, at most two linking letters, then
    the second ("setup": set, up; "huhnerhalt": huhn, halt; "email": e, mail); None if none."""
    for head in parts:
        if word.startswith(head) and len(word) > len(head):
            for tail in parts:
                if tail != head and word.endswith(tail) and 0 <= len(word) - len(head) - len(tail) <= 2:
                    return head, tail
    return None


def _loose_match(left: list[str], right: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The words of `left` and of `right` that are one word loosely: a compound (first: "email"
    is "e mail", not a typo of "mail"), else a typo."""
    for one in left:
        if parts := compound_of(one, right):
            return (one,), parts
    for other in right:
        if parts := compound_of(other, left):
            return parts, (other,)
    for one in left:
        for other in right:
            if is_typo(one, other):
                return (one,), (other,)
    return None


def similarity(one: TitleWords, other: TitleWords, exact: int | None = None) -> float:
    """0..1: the share of their words two titles have in common, typos and compounds allowed
    (Dice: the words of each that the other has, over the words of both); 0 when their numbers
    differ. `exact`: how many words they share as they are, when known already."""
    if one.numbers != other.numbers:
        return 0.0
    total = len(one.words) + len(other.words)
    if total == 0:
        return 1.0  # numbers alone, the same ("2026")
    if exact is None:
        exact = len(one.words & other.words)
    matched = 2 * exact
    left, right = sorted(one.words - other.words), sorted(other.words - one.words)
    for _ in range(loose_matches_allowed(min(len(one.words), len(other.words)))):
        found = _loose_match(left, right)
        if found is None:
            break
        from_left, from_right = found
        for word in from_left:
            left.remove(word)
        for word in from_right:
            right.remove(word)
        matched += len(from_left) + len(from_right)
    return matched / total


class TopicMemory:
    """The titles known so far, each as its words and numbers, and the closest of them to a new
    title. `language`: the batch's `[article] language` (the language of a title without stop
    words to tell it; empty: English)."""

    def __init__(self, threshold: float, language: str = "") -> None:
        self.threshold = threshold
        self.language = language or "en"
        self._forms: list[TitleWords] = []
        self._topics: list[tuple[str, str, str]] = []  # (slug, title, where), in the same order
        self._index: dict[tuple[tuple[str, ...], str], list[int]] = {}  # (numbers, word) -> titles

    def form(self, title: str) -> TitleWords:
        return title_words(title, self.language)

    def add(self, slug: str, title: str, where: str) -> None:
        form = self.form(title)
        if not (form.words or form.numbers):
            return
        number = len(self._forms)
        self._forms.append(form)
        self._topics.append((slug, title, where))
        for word in form.words or ("",):
            self._index.setdefault((form.numbers, word), []).append(number)

    def __len__(self) -> int:
        return len(self._forms)

    def closest(self, title: str) -> Resemblance | None:
        """The known topic most like `title`, if it is at least the threshold alike (the first
        added among equals)."""
        form = self.form(title)
        if not (form.words or form.numbers):
            return None
        exact: Counter[int] = Counter()
        for word in form.words or ("",):
            exact.update(self._index.get((form.numbers, word), ()))
        size, t = len(form.words), self.threshold
        best: tuple[float, int] | None = None
        for number, shared in exact.items():
            known = self._forms[number]
            other = len(known.words)
            if 2 * shared + 3 * loose_matches_allowed(min(size, other)) < t * (size + other) - 1e-9:
                continue  # cannot reach the threshold even with every loose match allowed
            score = similarity(form, known, shared if form.words else 0)
            if score >= t and (best is None or (score, -number) > (best[0], -best[1])):
                best = (score, number)
        if best is None:
            return None
        score, number = best
        slug, known_title, where = self._topics[number]
        return Resemblance(slug, known_title, score, where)


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
