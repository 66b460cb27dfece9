"""Is a complete answer an article? Tidy it (chatter, a wrapping fence), then check it.

Checks: no secret of this process in it (the router key, a proxy password: an answer that
quotes one is never written as an article, redact.holds_secret), minimum words, refusal
phrases (several languages, extendable), expected language (a stop-word heuristic: no model,
no download), and the quality gates: maximum words, minimum
headings, forbidden phrases (placeholders and boilerplate, extendable). Settings come from
`[article]` in config.toml, overridden by an `[article]` table in the prompt's front matter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..languages import detect_language
from ..redact import holds_secret

if TYPE_CHECKING:
    from ..config import Article

REFUSALS = (
    # English
    "i can't help with that",
    "i cannot help with that",
    "i can't assist with",
    "i cannot assist with",
    "i'm sorry, but i can't",
    "i am sorry, but i cannot",
    "i'm unable to help",
    "i am unable to help",
    "i won't be able to help",
    "as an ai language model, i cannot",
    "i must decline",
    # Spanish, French, German, Italian, Portuguese
    "no puedo ayudar con",
    "lo siento, pero no puedo",
    "je ne peux pas vous aider",
    "désolé, mais je ne peux pas",
    "ich kann dabei nicht helfen",
    "es tut mir leid, aber ich kann",
    "non posso aiutarti",
    "mi dispiace, ma non posso",
    "não posso ajudar com",
    "desculpe, mas não posso",
    # Chinese, Japanese, Russian
    "我无法帮助",
    "我不能帮助",
    "抱歉，我无法",
    "抱歉，我不能",
    "申し訳ありませんが",
    "お手伝いできません",
    "я не могу помочь",
    "извините, но я не могу",
)

# Phrases that mark an unfinished or boilerplate answer anywhere in it: a template's blanks, filler
# text, a model talking about itself. article.forbidden adds to these.
FORBIDDEN = (
    "[your name]",
    "[author name]",
    "[company name]",
    "[insert",
    "[placeholder",
    "lorem ipsum",
    "as an ai language model",
    "as a large language model",
    "i am an ai language model",
    "i'm an ai language model",
)

LEADING_CHATTER = re.compile(
    r"^\s*(sure|certainly|of course|absolutely|okay|ok|great|here is|here's|below is|alright)\b[^\n]{0,160}"
    r"(:|!|\.)\s*\n",
    re.IGNORECASE,
)
TRAILING_CHATTER = re.compile(
    r"\n\s*(let me know|i hope (this|that) helps|feel free to|if you('d| would) like|would you like|"
    r"hope you enjoy|happy to help)[^\n]*\s*$",
    re.IGNORECASE,
)
FENCE = re.compile(r"^\s*```(?:markdown|md|text)?\s*\n(.*)\n```\s*$", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    markdown: str  # the tidied answer
    problem: str | None  # None when it is an article
    # short reason: secret, refusal, too_short, wrong_language, too_long, few_headings, forbidden
    code: str = ""


def tidy(markdown: str, *, strip_chatter: bool = True) -> str:
    """Remove a wrapping code fence and the chat's greeting / sign-off around the article."""
    text = markdown.strip()
    if not strip_chatter:
        return text
    fenced = FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    for _ in range(2):  # "Sure!\nHere is your article:\n" is two lines of chatter
        text = LEADING_CHATTER.sub("", text, count=1).lstrip()
    text = TRAILING_CHATTER.sub("", text).rstrip()
    fenced = FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


def count_words(markdown: str) -> int:
    """Words as a reader counts them, the one rule for min_words, the front matter's word_count
    and what `generate` says: tokens with a letter or digit (not `#`, `-` or `**`), link
    targets left out."""
    text = re.sub(r"\]\([^)]*\)", "]", markdown)
    return sum(1 for token in text.split() if any(c.isalnum() for c in token))


SECTION_HEADING = re.compile(r"^ {0,3}#{2,6}\s+\S")  # a markdown heading of level 2 or more
CODE_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def count_headings(markdown: str) -> int:
    """Headings of level 2 and more (`## ...`), those inside code blocks left out."""
    count, in_code = 0, False
    for line in markdown.splitlines():
        if CODE_FENCE.match(line):
            in_code = not in_code
        elif not in_code and SECTION_HEADING.match(line):
            count += 1
    return count


def _normalised(text: str) -> str:
    return " ".join(text.lower().split()).replace("’", "'")


def check_answer(markdown: str, settings: Article) -> Verdict:
    """Tidy `markdown` and judge it against `settings` ([article], the prompt's table over it)."""
    text = tidy(markdown, strip_chatter=settings.strip_chatter)
    if holds_secret(markdown):  # the whole answer: what tidying drops is in the rejected file
        return Verdict(
            text,
            "the answer holds the router key (or a proxy password, or a long part of one): never "
            "written as an article; rotate the key if the router is not yours",
            "secret",
        )
    lowered = _normalised(text)
    head = lowered[:400]
    for phrase in (*REFUSALS, *settings.refusal_phrases):
        if phrase.lower() in head:
            return Verdict(text, f'the answer is a refusal ("{phrase}")', "refusal")
    words = count_words(text)
    minimum = settings.min_words
    if minimum and words < minimum:
        return Verdict(
            text, f"the answer has {words} words, fewer than article.min_words = {minimum}", "too_short"
        )
    maximum = settings.max_words
    if maximum and words > maximum:
        return Verdict(
            text, f"the answer has {words} words, more than article.max_words = {maximum}", "too_long"
        )
    headings = settings.min_headings
    if headings and count_headings(text) < headings:
        return Verdict(
            text,
            f"the answer has {count_headings(text)} section headings (## and deeper), fewer than "
            f"article.min_headings = {headings}",
            "few_headings",
        )
    for phrase in (*FORBIDDEN, *settings.forbidden):
        if _normalised(phrase) in lowered:
            return Verdict(
                text, f'the answer holds the forbidden phrase "{phrase}" (article.forbidden)', "forbidden"
            )
    wanted = settings.language
    if wanted:
        found = detect_language(text)
        if found and found != wanted:
            return Verdict(
                text, f"the answer looks like {found!r}, not article.language = {wanted!r}", "wrong_language"
            )
    return Verdict(text, None)
