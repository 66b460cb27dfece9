"""The finished article: TOML front matter between `+++` lines, then the answer's markdown."""

from __future__ import annotations

import re
from datetime import datetime

import tomli_w

from .engines.base import Answer
from .prompts import Prompt

H1_RE = re.compile(r"^#\s+(.+?)\s*#*\s*$")


def first_heading(markdown: str) -> str | None:
    for line in markdown.splitlines():
        match = H1_RE.match(line.strip())
        if match:
            return match.group(1).strip()
    return None


def article_title(prompt: Prompt, answer: Answer) -> str:
    """The prompt's own title wins; then the answer's first heading; then the chat's title."""
    title = prompt.meta.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return first_heading(answer.markdown) or answer.title or prompt.slug


def render_article(prompt: Prompt, answer: Answer, *, chat_url: str | None, when: datetime) -> str:
    """The whole SLUG.md document. Our keys override the prompt's, except that its title wins."""
    ours: dict[str, object] = {
        "title": article_title(prompt, answer),
        "slug": prompt.slug,
        "date": when.astimezone().replace(microsecond=0),
        "engine": answer.engine,
    }
    if answer.model:
        ours["model"] = answer.model
    if chat_url:
        ours["chat_url"] = chat_url
    ours["prompt_sha256"] = prompt.sha256
    meta = {**{k: v for k, v in prompt.meta.items() if k not in ours}, **ours}
    # Keep ours first for people reading the file; tomli_w puts tables after plain keys itself.
    ordered = {**ours, **{k: v for k, v in meta.items() if k not in ours}}
    body = answer.markdown.strip() + "\n"
    return f"+++\n{tomli_w.dumps(ordered)}+++\n\n{body}"
