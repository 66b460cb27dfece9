"""The finished article: TOML front matter between `+++` lines, then the answer's markdown."""

from __future__ import annotations

import math
import re
from datetime import datetime

import tomli_w

from ..engines.base import Answer
from .checks import count_words
from .prompts import Prompt

HEADING_RE = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
NOT_PROSE_RE = re.compile(r"(#|\||>|[-*+]\s|\d+[.)]\s|<)")  # headings, tables, quotes, lists, HTML
WORDS_PER_MINUTE = 200
DESCRIPTION_LENGTH = 160
# Front matter keys that only qwenpipe writes: a prompt's own value for one of them never reaches
# the article, even when this article has no value for it (a router article has no chat_url).
OWNED_KEYS = frozenset(
    {
        "title",
        "slug",
        "date",
        "description",
        "engine",
        "model",
        "chat_url",
        "account",
        "word_count",
        "reading_time",
        "turns",
        "prompt_sha256",
        "prompt_edited_after_send",
    }
)


def first_heading(markdown: str) -> str | None:
    """The first H1, else the first heading of any level."""
    headings = [
        (len(line) - len(line.lstrip("#")), m.group(1).strip())
        for line in markdown.splitlines()
        if (m := HEADING_RE.match(line.strip()))
    ]
    h1 = [text for level, text in headings if level == 1]
    return h1[0] if h1 else (headings[0][1] if headings else None)


def first_line(markdown: str) -> str | None:
    for line in markdown.splitlines():
        text = _plain(line).strip()
        if text:
            return text[:120]
    return None


def article_title(prompt: Prompt, answer: Answer) -> str:
    """The prompt's own title wins; then the answer's first heading; then its first line."""
    title = prompt.meta.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return first_heading(answer.markdown) or first_line(answer.markdown) or answer.title or prompt.slug


def strip_title_heading(markdown: str, title: str) -> str:
    """The body without its first heading when that heading says the same as the title."""
    lines = markdown.strip().splitlines()
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        match = HEADING_RE.match(line.strip())
        if match and _same(match.group(1), title):
            return "\n".join(lines[index + 1 :]).strip()
        break
    return markdown.strip()


def description(markdown: str) -> str:
    """The first paragraph of prose (not a heading, list, table, quote or code), trimmed to 160."""
    paragraph: list[str] = []
    in_code = False
    for line in markdown.splitlines() + [""]:
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if not stripped:
            if paragraph:
                break
            continue
        if NOT_PROSE_RE.match(stripped):
            if paragraph:
                break
            continue
        paragraph.append(stripped)
    text = _plain(" ".join(paragraph))
    if len(text) <= DESCRIPTION_LENGTH:
        return text
    cut = text[: DESCRIPTION_LENGTH - 1].rsplit(" ", 1)[0].rstrip(",;:. ")
    return cut + "…"


def article_description(prompt: Prompt, body: str) -> str:
    """The prompt's own `description` (its front matter's, as written), else the body's first
    paragraph (description())."""
    own = prompt.meta.get("description")
    if isinstance(own, str) and own.strip():
        return own.strip()
    return description(body)


def article_body(prompt: Prompt, answer: Answer, *, strip_title: bool = False) -> str:
    """The markdown below the article's front matter."""
    title = article_title(prompt, answer)
    return strip_title_heading(answer.markdown, title) if strip_title else answer.markdown.strip()


def render_article(
    prompt: Prompt,
    answer: Answer,
    *,
    chat_url: str | None,
    when: datetime,
    strip_title: bool = False,
    turns: int = 1,
    sent_sha256: str | None = None,
    account: str = "",
) -> str:
    """The whole SLUG.md document. Our keys (OWNED_KEYS) replace the prompt's, except that its
    title and its description win; `chat_url` is the chat's only for an article the chat wrote.

    `sent_sha256`: the hash of the prompt as it was sent, when it was edited since: the article
    answers that version, so that is the hash it carries, with `prompt_edited_after_send`.
    `account`: the chat account that wrote it (only a chat's article names one)."""
    title = article_title(prompt, answer)
    body = article_body(prompt, answer, strip_title=strip_title)
    words = count_words(body)
    ours: dict[str, object] = {
        "title": title,
        "slug": prompt.slug,
        "date": when.astimezone().replace(microsecond=0),
        "description": article_description(prompt, body),
        "engine": answer.engine,
    }
    if answer.model:
        ours["model"] = answer.model
    if chat_url and answer.engine == "qwen":
        ours["chat_url"] = chat_url
    if account and answer.engine == "qwen":
        ours["account"] = account
    ours.update(
        {
            "word_count": words,
            "reading_time": max(1, math.ceil(words / WORDS_PER_MINUTE)),
            "turns": turns,
            "prompt_sha256": sent_sha256 or prompt.sha256,
        }
    )
    if sent_sha256 and sent_sha256 != prompt.sha256:
        ours["prompt_edited_after_send"] = True
    extra = {k: v for k, v in prompt.meta.items() if k not in OWNED_KEYS}
    # Ours first for people reading the file; tomli_w puts tables after plain keys itself.
    return f"+++\n{tomli_w.dumps({**ours, **extra})}+++\n\n{body}\n"


def _plain(text: str) -> str:
    """Markdown emphasis, links (inline, reference, footnote, autolinks), inline HTML, escapes
    and code marks removed: for counting and for descriptions."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\[\^[^\]]*\]", "", text)  # a footnote mark [^1]
    text = re.sub(r"!?\[([^\]]*)\]\[[^\]]*\]", r"\1", text)  # [text][ref]
    text = re.sub(r"<((?:https?|mailto):[^>\s]+)>", r"\1", text)  # <https://...>
    text = re.sub(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>", "", text)  # <em>, </a>, <br/>
    text = re.sub(r"(?<!\\)[*`~]+", "", text)
    text = re.sub(r"(?<![\\\w])_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>~])", r"\1", text)  # \* -> *
    text = re.sub(r"\s{2,}", " ", text)
    return text.lstrip("# ").strip() if text.lstrip().startswith("#") else text


def _same(a: str, b: str) -> bool:
    def norm(s: str) -> str:
        return re.sub(r"\W+", " ", _plain(s)).strip().casefold()

    return norm(a) == norm(b)
