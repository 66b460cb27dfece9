"""The languages an article may be asked to be in (`[article] language`), and how an answer's
language is guessed: a stop-word heuristic for the Latin-script ones and the script for the
others (no model, no download). Below the config, which validates the key against LANGUAGES,
and the contract, whose checks use detect_language."""

from __future__ import annotations

import re
import unicodedata

STOPWORDS = {
    "en": frozenset("the and of to in is that for it with as on are this be by you your can or from".split()),
    "es": frozenset("el la de que y en los las del se por un una para con es su al lo como más".split()),
    "fr": frozenset("le la les de des et en un une est que pour dans du pas qui sur au avec".split()),
    "de": frozenset("der die das und ist nicht ein eine zu den mit von sich auf für im dem des".split()),
    "it": frozenset("il la di che e un una per non sono con del della gli le si più come".split()),
    "pt": frozenset("o a de que e do da em um uma para com não os as dos das se por".split()),
}
SCRIPTS = {"zh": "CJK", "ja": "HIRAGANA", "ko": "HANGUL", "ru": "CYRILLIC", "ar": "ARABIC"}
LANGUAGES = tuple(STOPWORDS) + tuple(SCRIPTS)


def detect_language(text: str) -> str | None:
    """A best guess among LANGUAGES, or None when the text is too short to tell."""
    letters = [c for c in text if c.isalpha()]
    if len(letters) < 40:
        return None
    for code, script in SCRIPTS.items():
        share = sum(1 for c in letters if script in unicodedata.name(c, "")) / len(letters)
        if share > 0.3:
            if code == "zh" and any(
                "HIRAGANA" in unicodedata.name(c, "") or "KATAKANA" in unicodedata.name(c, "")
                for c in letters[:400]
            ):
                return "ja"
            return code
    words = re.findall(r"[^\W\d_]+", text.lower())
    scores = {code: sum(1 for w in words if w in stops) for code, stops in STOPWORDS.items()}
    best = max(scores, key=scores.get)
    return best if scores[best] >= 3 else None
