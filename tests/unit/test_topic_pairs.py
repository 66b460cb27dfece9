"""Topic memory on a labelled set (tests/fixtures/topic_pairs.tsv): title pairs that are one
topic worded again, and pairs of two topics sharing most of their letters (years, versions,
model numbers, places, products, ingredients), in English, German, French and Spanish. Precision
(of the pairs refused, how many are one topic) and recall (of the pairs that are one topic, how
many are refused) are each at least 0.95 at the default threshold."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pipeline.config import Topics
from pipeline.publishing.similar import TopicMemory, similarity
from pipeline.publishing.title_words import title_words

PAIRS = Path(__file__).resolve().parent.parent / "fixtures" / "topic_pairs.tsv"


def labelled_pairs() -> list[tuple[bool, str, str, str]]:
    """(one topic?, language, first title, second title) of each pair of the set."""
    with PAIRS.open(encoding="utf-8", newline="") as lines:
        rows = [row for row in csv.reader(lines, delimiter="\t") if row and not row[0].startswith("#")]
    header, *pairs = rows
    assert header == ["label", "lang", "first", "second"]
    assert all(len(row) == 4 and row[0] in ("same", "different") for row in pairs), "a malformed row"
    return [(label == "same", lang, first, second) for label, lang, first, second in pairs]


def judged_same(first: str, second: str, language: str, threshold: float) -> bool:
    memory = TopicMemory(threshold, language)
    memory.add("first", first, "its prompt")
    return memory.closest(second) is not None


def test_the_set_is_large_and_covers_four_languages_both_ways():
    pairs = labelled_pairs()
    assert len(pairs) >= 200
    for language in ("en", "de", "fr", "es"):
        labels = {same for same, lang, _a, _b in pairs if lang == language}
        assert labels == {True, False}, language


def test_precision_and_recall_at_the_default_threshold_are_at_least_095():
    """Each pair judged both ways: the first title known and the second new, and the other way."""
    threshold = Topics().similar
    judged = [
        (same, judged_same(known, new, lang, threshold), f"{known!r} then {new!r}")
        for same, lang, a, b in labelled_pairs()
        for known, new in ((a, b), (b, a))
    ]
    refused_right = sum(1 for same, refused, _pair in judged if same and refused)
    precision = refused_right / sum(1 for _same, refused, _pair in judged if refused)
    recall = refused_right / sum(1 for same, _refused, _pair in judged if same)
    wrong = [
        f"{'same' if same else 'different'}: {pair}" for same, refused, pair in judged if refused != same
    ]
    assert precision >= 0.95 and recall >= 0.95, (precision, recall, wrong)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("iPhone 17 review", "iPhone 16 review"),
        ("Best budget laptops 2025", "Best budget laptops 2026"),
        ("Python 3.12 new features", "Python 3.13 new features"),
        ("Windows 10 tips", "Windows 11 tips"),
        ("The Apollo 11 mission", "The Apollo 13 mission"),
        ("World War I timeline", "World War II timeline"),
    ],
)
def test_another_number_is_another_topic_whatever_the_words(first, second):
    assert not judged_same(first, second, "en", 0.01)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The benefits of green tea", "Green tea benefits"),
        ("How to learn Spanish fast", "Learn Spanish fast"),
        ("Caring for succulents indoors", "Indoor succulent care"),
        ("Paypal guide", "P\u0430yp\u0430l guide"),  # Cyrillic а
        ("Review of the iPhone 17", "iPhone 17 review"),
    ],
)
def test_the_same_topic_worded_again_is_refused_even_at_1(first, second):
    assert judged_same(first, second, "en", 1.0)


def test_the_index_finds_what_comparing_with_every_known_title_finds():
    """closest() scores only the known titles its index says can reach the threshold; with every
    first title of the set known, it finds the best score that scoring each of them finds."""
    pairs = labelled_pairs()
    firsts = [first for _same, _lang, first, _second in pairs]
    titles = [title for _s, _l, first, second in pairs for title in (second, f"{first} guide", first.upper())]
    forms = [title_words(title) for title in firsts]
    best = [max(similarity(form, known, 0.5) for known in forms) for form in map(title_words, titles)]
    for threshold in (0.5, 0.8, 0.95):
        memory = TopicMemory(threshold)
        for number, first in enumerate(firsts):
            memory.add(f"t{number}", first, "its prompt")
        for title, score in zip(titles, best, strict=True):
            found = memory.closest(title)
            assert (found.score if found else 0.0) == (score if score >= threshold else 0.0), (
                title,
                threshold,
            )
