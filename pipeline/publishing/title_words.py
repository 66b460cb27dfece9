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
from functools import lru_cache

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


STOP_LANGUAGES: dict[str, tuple[str, ...]] = {}  # a title stop word -> the languages it is one of
for _code, _words in TITLE_STOPWORDS.items():
    for _word in _words:
        STOP_LANGUAGES[_word] = (*STOP_LANGUAGES.get(_word, ()), _code)


@dataclass(frozen=True)
class TitleWords:
    words: frozenset[str]  # stems of the words of meaning, accents dropped
    numbers: tuple[str, ...]  # sorted; roman numerals as digits


class _Stems(dict):
    """word -> its stem in one language, accents dropped. Remembered: a batch's titles share most
    of their words, and a dict lookup is the cheapest way back to one."""

    def __init__(self, language: str) -> None:
        super().__init__()
        self.stemmer = snowballstemmer.stemmer(SNOWBALL[language])

    def __missing__(self, word: str) -> str:
        stem = self[word] = _plain(self.stemmer.stemWord(word))
        return stem


STEMS = {code: _Stems(code) for code in SNOWBALL}


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


@lru_cache(maxsize=200_000)
def _token(token: str) -> tuple[str | None, str, str]:
    """(number, word, word without accents) of one token of a title: the number ("3.13", a roman
    numeral's value) and empty words, or no number and the word case folded. Remembered, as
    stems are."""
    if token[0].isdigit():
        return token.replace(",", "."), "", ""
    word = _unmasked(token).casefold()
    roman = _roman(word)
    return (roman, "", "") if roman else (None, word, _plain(word))


def title_language(plain_words: list[str], default: str) -> str:
    """The language among SNOWBALL whose title stop words `plain_words` has most of; `default`
    when none has more than it. Words of one letter do not tell: "e" of "e-mail" is Italian's,
    Spanish's and Portuguese's "and"."""
    found = [STOP_LANGUAGES[w] for w in plain_words if len(w) > 1 and w in STOP_LANGUAGES]
    if not found:
        return default
    hits = dict.fromkeys(SNOWBALL, 0)
    for codes in found:
        for code in codes:
            hits[code] += 1
    best = max(hits, key=hits.__getitem__)
    return best if hits[best] > hits[default] else default


def title_words(title: str, default_language: str = "en") -> TitleWords:
    """`title` as compared (see the module's doc). `default_language`: the batch's
    `[article] language` (a code of languages.py; one Snowball has no stemmer for: English)."""
    if default_language not in SNOWBALL:
        default_language = "en"
    text = title if title.isascii() else unicodedata.normalize("NFKC", title)
    numbers: list[str] = []
    words: list[str] = []
    plain: list[str] = []
    for token in TOKEN_RE.findall(text):
        number, word, bare = _token(token)
        if number is None:
            words.append(word)
            plain.append(bare)
        else:
            numbers.append(number)
    language = title_language(plain, default_language)
    stops = TITLE_STOPWORDS[language]
    # Nothing but stop words ("How to do it"): all of them kept.
    kept = [word for word, bare in zip(words, plain, strict=True) if bare not in stops] or words
    return TitleWords(frozenset(map(STEMS[language].__getitem__, kept)), tuple(sorted(set(numbers))))
