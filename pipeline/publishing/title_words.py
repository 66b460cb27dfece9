"""A title as topic memory compares it: its words of meaning, and its numbers.

"The benefits of green tea" and "Green tea benefits" are one topic; "iPhone 16 review" and
"iPhone 17 review" are two. So a title becomes (words, numbers):

- Unicode folded: NFKC (full-width letters, ligatures), then the Cyrillic and Greek letters that
  look like a Latin one (CONFUSABLES) read as that letter in a word made only of Latin letters and
  such look-alikes ("Pаypаl" with a Cyrillic а is "Paypal"; a Russian word with any other Cyrillic
  letter stays Russian), then case folded;
- split into words (runs of letters) and numbers (runs of digits, with their dots: "3.13";
  "S24" is the word "s" and the number 24; "II", "XIV" are the numbers 2 and 14);
- the stop words of the title's language dropped ("how", "to", "the", "de", "für"...), the rest
  stemmed in that language with the Snowball stemmers ("caring", "care" -> "care";
  "succulents" -> "succul"), then accents dropped ("thé" and "the" typed without its accent).

The language: the one whose stop words the title has most of, else the batch's
`[article] language`, else English. Numbers are kept as they are: `similar.py` takes two
titles with other numbers (years, versions, model numbers) for two topics.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache

import snowballstemmer

from ..languages import STOPWORDS

# Unicode TR39 confusables.txt (security mechanisms, "confusable detection"): the Cyrillic and
# Greek letters whose prototype there is one Latin letter. Enough to unmask a Latin word spelt
# with look-alikes; the few letters confusable only with a Latin letter in another case are
# mapped to the letter they show.
CONFUSABLES = str.maketrans(
    {
        # Cyrillic, small
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "ѕ": "s", "і": "i",
        "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ү": "y", "ɡ": "g",
        # Cyrillic, capital
        "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
        "Т": "T", "Х": "X", "У": "Y", "Ѕ": "S", "І": "I", "Ј": "J", "Ԛ": "Q", "Ԝ": "W", "Ү": "Y",
        "Ӏ": "I",
        # Greek, small
        "α": "a", "ο": "o", "ν": "v", "ρ": "p", "υ": "u", "ι": "i", "ϲ": "c", "ϳ": "j",
        # Greek, capital
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
        "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C",
    }
)  # fmt: skip
LOOKALIKE = frozenset(chr(code) for code in CONFUSABLES)
TOKEN_RE = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")
ROMAN_RE = re.compile(r"(x{0,3})(ix|iv|v?i{0,3})")  # 2..39: parts, episodes, kings
ROMAN = {"i": 1, "v": 5, "x": 10}

# The languages of languages.py that Snowball stems.
SNOWBALL = {
    "en": "english", "es": "spanish", "fr": "french", "de": "german", "it": "italian",
    "pt": "portuguese", "ru": "russian", "ar": "arabic",
}  # fmt: skip
# What a title says besides its topic, on top of the stop words languages.py detects languages
# with (accents dropped: compared with the title's words without theirs).
TITLE_STOPWORDS_MORE = {
    "en": "a an how what why when where who which do does did doing your my our their them its about"
    " vs versus at into was were we they s here there these those all some any",
    "es": "a o e cómo qué cuál cuándo dónde por tu tus mi mis sus unos unas le les este esta estos"
    " estas muy",
    "fr": "à l d qu c s n j ce ces ça cela comment pourquoi quoi quand où ou son sa ses mon ma mes ton"
    " ta tes nos vos leur leurs aux est-ce c'est",
    "de": "wie man was warum wann wo ihr ihre mein meine sein seine beim vom zum zur am an in einer"
    " einen einem eines oder das der die",
    "it": "come perché cosa quando dove lo l d i al dal nel sul tuo tua mio mia",
    "pt": "como porque quando onde o a os as seu sua meu minha no na nos nas ao",
    "ru": "как что почему где когда и в во на с со о об по для к от из у не это",
    "ar": "",
}  # fmt: skip


def _plain(word: str) -> str:
    """`word` without its accents (ß is ss already: case folding did it)."""
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


TITLE_STOPWORDS = {
    code: frozenset(_plain(w) for w in (*STOPWORDS.get(code, ()), *TITLE_STOPWORDS_MORE[code].split()))
    for code in SNOWBALL
}


@dataclass(frozen=True)
class TitleWords:
    words: frozenset[str]  # stems of the words of meaning, accents dropped
    numbers: tuple[str, ...]  # sorted; roman numerals as digits


@cache
def _stemmer(language: str):
    return snowballstemmer.stemmer(SNOWBALL[language])


def _unmasked(token: str) -> str:
    """A word of Latin letters and their Cyrillic/Greek look-alikes, in Latin letters."""
    if token.isascii() or not any(c in LOOKALIKE for c in token):
        return token
    if all(c in LOOKALIKE or ("LATIN" in unicodedata.name(c, "")) for c in token):
        return token.translate(CONFUSABLES)
    return token


def _roman(word: str) -> str | None:
    """'xiv' -> '14'; None for a word that is not a roman numeral of two letters or more."""
    if len(word) < 2 or not ROMAN_RE.fullmatch(word):
        return None
    values = [ROMAN[c] for c in word]
    total = sum(-v if v < after else v for v, after in zip(values, [*values[1:], 0], strict=True))
    return str(total)


def title_language(plain_words: list[str], default: str) -> str:
    """The language among SNOWBALL whose title stop words `plain_words` has most of; `default`
    when none has more than it."""
    best, most = default, sum(1 for w in plain_words if w in TITLE_STOPWORDS[default])
    for code, stops in TITLE_STOPWORDS.items():
        hits = sum(1 for w in plain_words if w in stops)
        if hits > most:
            best, most = code, hits
    return best


def title_words(title: str, default_language: str = "en") -> TitleWords:
    """`title` as compared (see the module's doc). `default_language`: the batch's
    `[article] language` (a code of languages.py; one Snowball has no stemmer for: English)."""
    text = unicodedata.normalize("NFKC", title)
    tokens = [_unmasked(t) for t in TOKEN_RE.findall(text)]
    words: list[str] = []
    numbers: list[str] = []
    for token in (t.casefold() for t in tokens):
        if token[0].isdigit():
            numbers.append(token.replace(",", "."))
        else:
            roman = _roman(token)
            (numbers if roman else words).append(roman or token)
    default = default_language if default_language in SNOWBALL else "en"
    plain = [_plain(w) for w in words]
    language = title_language(plain, default)
    stops = TITLE_STOPWORDS[language]
    kept = [w for w, p in zip(words, plain, strict=True) if p not in stops] or words  # "How to do it"
    stems = _stemmer(language).stemWords(kept)
    return TitleWords(frozenset(_plain(s) for s in stems), tuple(sorted(set(numbers))))
