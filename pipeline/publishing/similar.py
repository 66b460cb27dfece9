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
and indexed by (numbers, word); a new title is scored only against the known ones with its
numbers that hold one of its rarest words or a word one of them may match (TopicMemory.closest
says why that misses none), so 1,000 new titles against 10,000 known ones take a quarter of a
second, also when common words are in thousands of them (bench/bench_topics.py).
"""

from __future__ import annotations

import math
import re
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
# What may join the two words of a compound: nothing (setup, email), or German's linking
# elements (Fugenelemente: Hühner-halt-ung is Huhn + er + Haltung).
LINKS = frozenset(("", "e", "s", "n", "en", "er", "es", "ens"))
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
    return (
        -1 <= len(one) - len(other) <= 1
        and max(len(one), len(other)) >= TYPO_MIN_LENGTH
        and OSA.distance(one, other, score_cutoff=1) <= 1
    )


def compound_of(word: str, parts: Iterable[str]) -> tuple[str, str] | None:
    """The two of `parts` that `word` is made of, the first, a linking element (LINKS), then the
    second ("setup": set, up; "huhnerhalt": huhn, halt; "email": e, mail); None if none."""
    for head in parts:
        if word.startswith(head) and len(word) > len(head):
            for tail in parts:
                if tail != head and word.endswith(tail) and word[len(head) : len(word) - len(tail)] in LINKS:
                    return head, tail
    return None


def typo_keys(word: str) -> set[str]:
    """`word` and `word` less each of its letters: two words are a typo of each other (OSA
    distance 1: a letter added, dropped, changed, or two swapped) only if they share one."""
    return {word, *(word[:i] + word[i + 1 :] for i in range(len(word)))}


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


def similarity(one: TitleWords, other: TitleWords, cutoff: float = 0.0) -> float:
    """0..1: the share of their words two titles have in common, typos and compounds allowed
    (Dice: the words of each that the other has, over the words of both); 0 when their numbers
    differ, or when it is below `cutoff` (as rapidfuzz's score_cutoff: nothing more is worked out
    once the rest cannot reach it)."""
    if one.numbers != other.numbers:
        return 0.0
    total = len(one.words) + len(other.words)
    if total == 0:
        return 1.0  # numbers alone, the same ("2026")
    matched = 2 * len(one.words & other.words)
    left, right = sorted(one.words - other.words), sorted(other.words - one.words)
    room = loose_matches_allowed(min(len(one.words), len(other.words)))
    # Each loose match takes a word of each side or more, and adds 3 at most (a compound).
    if matched + min(3 * min(room, len(left), len(right)), len(left) + len(right)) < cutoff * total - 1e-9:
        return 0.0
    for _ in range(room):
        found = _loose_match(left, right)
        if found is None:
            break
        from_left, from_right = found
        for word in from_left:
            left.remove(word)
        for word in from_right:
            right.remove(word)
        matched += len(from_left) + len(from_right)
    score = matched / total
    return score if score >= cutoff else 0.0


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
        self._words: set[str] = set()  # every word of every known title
        self._typos: dict[str, list[str]] = {}  # a typo key (typo_keys) -> the known words with it

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
            if word not in self._words:
                self._words.add(word)
                if len(word) >= TYPO_MIN_LENGTH - 1:
                    for key in typo_keys(word):
                        self._typos.setdefault(key, []).append(word)

    def __len__(self) -> int:
        return len(self._forms)

    def _matches(self, words: frozenset[str]) -> dict[str, set[str]]:
        """For each of a new title's `words`, the known words it may match: itself, its typos,
        the compound it makes with another of them, the parts it is made of."""
        known = self._words
        matches = {word: {word} & known for word in words}
        for word, found in matches.items():
            if len(word) >= TYPO_MIN_LENGTH - 1:
                found.update(
                    w for key in typo_keys(word) for w in self._typos.get(key, ()) if is_typo(word, w)
                )
            for cut in range(1, len(word)):
                head, rest = word[:cut], word[cut:]
                if head in known:
                    for link in LINKS:
                        if rest.startswith(link) and rest[len(link) :] in known:
                            found.update((head, rest[len(link) :]))
            for other in words:
                if other != word:
                    for link in LINKS:
                        if (compound := word + link + other) in known:
                            found.add(compound)
                            matches[other].add(compound)
        return matches

    def closest(self, title: str) -> Resemblance | None:
        """The known topic most like `title`, if it is at least the threshold alike (the first
        added among equals).

        Only the known titles that can be are scored. One at least `t` alike matches at least
        t·n/(3-2t) of the new title's n words (each matched word of the new title matches at
        most two of the other's, a compound's parts), so it matches one at least of any
        n - that + 1 of them: of its rarest, looked up with all the known words each may match."""
        form = self.form(title)
        if not (form.words or form.numbers):
            return None
        t, size = self.threshold, len(form.words)
        if form.words:
            matches = self._matches(form.words)
            must = max(1, math.ceil(t * size / (3 - 2 * t) - 1e-9))
            rarest = sorted(
                matches.values(),
                key=lambda words: sum(len(self._index.get((form.numbers, w), ())) for w in words),
            )[: size - must + 1]
            keys = [(form.numbers, w) for words in rarest for w in words]
            reachable = set().union(*matches.values())
        else:
            keys, reachable = [(form.numbers, "")], set()
        best: tuple[float, int] | None = None
        for number in sorted({n for key in keys for n in self._index.get(key, ())}):
            known = self._forms[number]
            # The words of the known title that a word of this one may match, and what they can add up to.
            hits = len(known.words & reachable)
            if form.words and hits + min(size, 2 * hits) < t * (size + len(known.words)) - 1e-9:
                continue
            score = similarity(form, known, t)
            if score >= t and (best is None or score > best[0]):
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
