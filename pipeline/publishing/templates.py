"""Prompt templates: `prompts/_templates/NAME.md`, a prompt whose text and front matter hold
placeholders (`{title}`, `{slug}`, `{keyword}`, `{tags}` and any value given), and `new`, which
writes `prompts/SLUG.md` from one.

The folder's name starts with `_`, which no slug does: nothing under it is ever an article.
A template's front matter is parsed as TOML first and its strings filled in afterwards, so a
title with quotes or a newline can never break the prompt's TOML; a string that is exactly
`"{tags}"` becomes the list of tags. `{{` and `}}` are a literal brace.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from .. import files
from ..contract.prompts import (
    FENCE,
    SLUG_RE,
    Prompt,
    check_slug,
    parse_prompt,
    request_size_problem,
    split_front_matter,
)
from ..errors import UsageProblem

TEMPLATES_DIR = "_templates"
DEFAULT_TEMPLATE = "default"
PLACEHOLDER_RE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
STANDARD = ("title", "slug", "keyword", "tags")  # the placeholders every prompt has
SLUG_FROM_TITLE_MAX = 80
# What `new` and `import` use when prompts/_templates/default.md does not exist.
BUILT_IN = """+++
title = "{title}"
tags = "{tags}"
+++
Write a blog article titled "{title}" for the general reader.
Focus on: {keyword}.

Use markdown: one `#` title, then sections with `##` headings. About 800 words.
"""


@dataclass(frozen=True)
class Template:
    name: str
    where: str  # the file, or "the built-in default template"
    raw: str
    meta: dict  # front matter, placeholders not yet filled in
    body: str

    def placeholders(self) -> list[tuple[str, int]]:
        """(name, line number) of every placeholder, in order."""
        found = []
        for number, line in enumerate(self.raw.splitlines(), 1):
            found += [(m[1], number) for m in PLACEHOLDER_RE.finditer(line) if m[1]]
        return found

    def check(self, known: set[str], fix: str) -> None:
        """UsageProblem for the first placeholder not in `known`: where it is and `fix`."""
        for name, line in self.placeholders():
            if name not in known:
                names = ", ".join(sorted(known))
                raise UsageProblem(
                    f"{self.where} line {line}: unknown placeholder {{{name}}} (known: {names}); "
                    f"{fix.format(name=name)}, or write {{{{{name}}}}} for the literal text"
                )

    def unused(self, names) -> list[str]:
        """Of `names` (values given: --set names, a topic list's columns), those no placeholder
        of the template takes: dropped unless the user is told."""
        taken = {name for name, _line in self.placeholders()}
        return [name for name in names if name not in taken]

    def render(self, values: dict[str, str], tags: list[str], front: dict | None = None) -> str:
        """The prompt file's text for `values` (every placeholder must be in it: check first);
        `front`: more front matter keys (a topic list's categories, publishDate...), each
        unless the template sets it."""
        meta = _fill(self.meta, values, tags)
        meta.setdefault("title", values["title"])
        if tags:
            meta.setdefault("tags", list(tags))
        for name, value in (front or {}).items():
            meta.setdefault(name, value)
        head = f"{FENCE}\n{tomli_w.dumps(meta)}{FENCE}\n" if meta else ""
        return head + fill_text(self.body, values).lstrip("\n")


def fill_text(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        token = match[0]
        if token in ("{{", "}}"):
            return token[0]
        return values[match[1]]

    return PLACEHOLDER_RE.sub(one, text)


def _fill(value, values: dict[str, str], tags: list[str]):
    if isinstance(value, str):
        return list(tags) if value.strip() == "{tags}" else fill_text(value, values)
    if isinstance(value, dict):
        return {k: _fill(v, values, tags) for k, v in value.items()}
    if isinstance(value, list):
        filled = []
        for item in value:
            got = _fill(item, values, tags)
            filled += got if isinstance(item, str) and isinstance(got, list) else [got]
        return filled
    return value


def templates_dir(prompts_dir: Path) -> Path:
    return prompts_dir / TEMPLATES_DIR


def available(prompts_dir: Path) -> list[str]:
    try:
        return sorted(p.name[:-3] for p in templates_dir(prompts_dir).iterdir() if p.name.endswith(".md"))
    except OSError:
        return []


def load_template(prompts_dir: Path, name: str | None) -> Template:
    """The template NAME (None: `default`, the built-in one when there is no default.md)."""
    wanted = name or DEFAULT_TEMPLATE
    folder = templates_dir(prompts_dir)
    path = folder / f"{wanted}.md"
    if not SLUG_RE.fullmatch(wanted):
        raise UsageProblem(
            f"--template {wanted!r}: a template is named by its file in {folder} without .md "
            "(a-z, 0-9, '.', '_', '-')"
        )
    try:
        raw = files.read_bytes(path, follow=True).decode("utf-8-sig")
    except FileNotFoundError:
        if name is None:
            return _parse(DEFAULT_TEMPLATE, "the built-in default template", BUILT_IN)
        known = available(prompts_dir)
        listed = f"templates there: {', '.join(known)}" if known else "there are none yet"
        raise UsageProblem(
            f"no template {wanted!r}: {path} does not exist ({listed}); write it there"
        ) from None
    except UnicodeDecodeError as err:
        raise UsageProblem(f"{path}: not UTF-8 text (byte {err.start}); save the file as UTF-8") from None
    except files.UnsafeFile as bad:
        raise UsageProblem(f"{path} is {bad.kind}, not a template file: make it a text file") from None
    except OSError as err:
        raise UsageProblem(f"{path}: cannot read: {err.strerror}") from None
    return _parse(wanted, str(path), raw)


def _parse(name: str, where: str, raw: str) -> Template:
    meta, body = split_front_matter(raw, Path(where))
    if not body.strip():
        raise UsageProblem(f"{where}: the template has no prompt text below its front matter")
    return Template(name, where, raw, meta, body)


# An apostrophe inside a word (Grey's, don't, O'Brien): the word stays one. ’ and ʼ are dropped
# by the ASCII folding already.
INNER_APOSTROPHE = re.compile(r"(?<=[A-Za-z0-9])'(?=[A-Za-z])")


def slug_from_title(title: str) -> str:
    """A slug made from a title: accents and apostrophes dropped, lower case, words joined by '-', at most 80
    characters (cut at a word); empty when nothing of the title is a-z or 0-9."""
    plain = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    plain = INNER_APOSTROPHE.sub("", plain)  # "Earl Grey's" -> earl-greys, not earl-grey-s
    words = re.findall(r"[a-z0-9]+", plain.lower())
    slug = ""
    for word in words:
        longer = f"{slug}-{word}" if slug else word
        if len(longer) > SLUG_FROM_TITLE_MAX:
            break
        slug = longer
    return slug or "-".join(words)[:SLUG_FROM_TITLE_MAX]


def split_tags(text: str) -> list[str]:
    """`tea, health` (a topic list's cell) -> ["tea", "health"]."""
    return [tag.strip() for tag in text.split(",") if tag.strip()]


def values_for(title: str, slug: str, tags: list[str], extra: dict[str, str]) -> dict[str, str]:
    """Every placeholder's text: the standard four, then the extra ones (`keyword` defaults to the title)."""
    values = {"title": title, "slug": slug, "keyword": title, "tags": ", ".join(tags)}
    values.update({k: v for k, v in extra.items() if v != "" or k not in values})
    return values


def exists(prompts_dir: Path, articles_dir: Path, slug: str) -> Path | None:
    """The file that already holds `slug` (its prompt, or its article), or None."""
    for path in (prompts_dir / f"{slug}.md", articles_dir / f"{slug}.md"):
        if path.exists() or path.is_symlink():
            return path
    return None


def render_prompt(
    prompts_dir: Path, template: Template, slug: str, values: dict[str, str], tags, front: dict | None = None
) -> tuple[Path, str, Prompt]:
    """(path, text, the Prompt it loads as) for `slug`; UsageProblem when it would not load."""
    path = prompts_dir / f"{slug}.md"
    text = template.render(values, list(tags), front)
    try:
        return path, text, parse_prompt(slug, path, text)
    except UsageProblem as problem:
        raise UsageProblem(f"{template.where} makes an invalid prompt for {slug!r}: {problem}") from None


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """`--set key=value` options, each checked: a placeholder name, given once, not a standard one."""
    given: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise UsageProblem(f"--set {pair!r}: write --set NAME=VALUE, NAME made of letters, digits and _")
        if key in ("title", "slug", "tags"):
            raise UsageProblem(
                f"--set {pair!r}: {key} has its own option (--{key[:-1] if key == 'tags' else key})"
            )
        if key in given:
            raise UsageProblem(f"--set {key}=... is given twice; give it once")
        given[key] = value
    return given


def new_prompt(
    prompts_dir: Path,
    articles_dir: Path,
    slug: str,
    *,
    title: str,
    tags: list[str],
    template: str | None,
    sets: list[str],
    max_request_bytes: int = 0,
    warn: Callable[[str], None] | None = None,
    similar: float | None = None,
    language: str = "",
) -> Path:
    """Write prompts/SLUG.md from a template; never overwrites. Raises UsageProblem (exit 2)
    for an invalid or taken slug, an empty title, a bad --set, a bad or unknown template, and
    a title at least `similar` alike to a prompt's or an article's (topics.similar; None:
    --allow-similar, not checked; `language`: article.language, the titles' language when
    they do not tell).
    A prompt too large for the chat (over `max_request_bytes`, qwen.max_prompt_bytes; 0 = not
    checked) is written all the same, and `warn` is told why it will not be sent to the chat."""
    check_slug(slug)
    if not title.strip():
        raise UsageProblem("--title is empty: give the article's title, e.g. --title 'Brewing Green Tea'")
    extra = parse_sets(sets)
    taken = exists(prompts_dir, articles_dir, slug)
    if taken:
        raise UsageProblem(f"{slug!r} exists already ({taken}); pick another slug (nothing was written)")
    if similar is not None:
        _refuse_similar(prompts_dir, articles_dir, title.strip(), similar, language)
    chosen = load_template(prompts_dir, template)
    chosen.check(set(STANDARD) | set(extra), "give it with --set {name}=VALUE")
    values = values_for(title.strip(), slug, tags, extra)
    path, text, prompt = render_prompt(prompts_dir, chosen, slug, values, tags)
    if not files.create_new(path, text):
        raise UsageProblem(f"{slug!r} exists already ({path}); pick another slug (nothing was written)")
    too_large = max_request_bytes and request_size_problem(prompt, max_request_bytes)
    if too_large and warn is not None:
        warn(f"warning: {too_large}")
    for name in chosen.unused(extra):
        if warn is not None:
            warn(
                f"warning: --set {name}=... is not used: {chosen.where} has no {{{name}}}; "
                f"add {{{name}}} to the template, or leave the value out"
            )
    return path


def _refuse_similar(
    prompts_dir: Path, articles_dir: Path, title: str, threshold: float, language: str
) -> None:
    from .similar import ALLOW, TopicMemory, remember_batch

    found = remember_batch(TopicMemory(threshold, language), prompts_dir, articles_dir).closest(title)
    if found is not None:
        raise UsageProblem(
            f"--title {title!r} {found.says(threshold)}; nothing was written. If it is another "
            f"topic, run again with {ALLOW} (or raise [topics] similar in config.toml)"
        )
