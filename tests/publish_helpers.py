"""Finished articles written directly (as the contract writes them), for the publishing tests."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pipeline.contract.prompts import Prompt, load_prompt
from pipeline.contract.render import render_article
from pipeline.engines.base import Answer

CHAT_URL = "https://chat.qwen.ai/c/0a1b2c3d-0000-4000-8000-000000000000"


def done_article(project: Path, slug: str, title: str = "Green Tea, Brewed Well", body: str = "") -> Path:
    """articles/SLUG.md as the contract writes it (chat_url included), and its sidecars."""
    body = body or (
        f"# {title}\n\nGreen tea wants water well below boiling and a short steep.\n\n"
        "## Water\n\nAbout 80 degrees.\n\n## Time\n\nTwo minutes at most.\n"
    )
    meta = {"title": title, "tags": ["tea"]}
    prompt = Prompt(slug=slug, path=project / "prompts" / f"{slug}.md", text="Write it.", meta=meta)
    text = render_article(prompt, Answer(body, "qwen"), chat_url=CHAT_URL, when=datetime(2026, 11, 30, 9, 0))
    articles = project / "articles"
    articles.mkdir(parents=True, exist_ok=True)
    (articles / f"{slug}.md").write_text(text, encoding="utf-8")
    (articles / f"{slug}.md.url").write_text(CHAT_URL + "\n", encoding="utf-8")
    (articles / f"{slug}.md.rejected").write_text("+++\nreason = 'x'\n+++\nold answer\n", encoding="utf-8")
    return articles / f"{slug}.md"


def article_of_prompt(project: Path, slug: str, body: str, engine: str = "router") -> Path:
    """articles/SLUG.md written from prompts/SLUG.md (its front matter and all) and `body`, as
    the contract renders a finished answer."""
    prompt = load_prompt(project / "prompts", slug)
    text = render_article(prompt, Answer(body, engine), chat_url=None, when=datetime(2026, 11, 30, 9, 0))
    articles = project / "articles"
    articles.mkdir(parents=True, exist_ok=True)
    (articles / f"{slug}.md").write_text(text, encoding="utf-8")
    return articles / f"{slug}.md"
