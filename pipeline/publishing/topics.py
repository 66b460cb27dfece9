"""Topic lists: `qwenpipe import topics.csv`, one prompt per row, written from a template.

The CSV has a header. `title` is required; `slug` is optional (else made from the title);
`tags` is split on commas; every other column is a placeholder of the template. Three of them
are also front matter of the prompt, and so of its article and its published page (unless the
template sets them): `categories` (split on commas), `description` (the page's description for
search engines, instead of the article's first paragraph) and `publish_at` (an ISO date or date
and time: Hugo's `publishDate`, before which Hugo does not build the page). Each row is
all or nothing: it is checked whole (its slug, its cells, the prompt it makes) before its file
is written, whole, never over an existing one. A bad row is reported with its line number and
the rest go on; a bad file (no header, no `title` column, a placeholder no column fills) stops
the import before anything is written.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from .. import files
from ..contract.prompts import check_slug, request_size_problem
from ..errors import UsageProblem
from .similar import ALLOW, TopicMemory, remember_batch
from .templates import (
    STANDARD,
    exists,
    load_template,
    render_prompt,
    slug_from_title,
    split_tags,
    values_for,
)

DATE_ONLY = re.compile(r"\d{4}-\d\d-\d\d")
OWN_COLUMNS = ("title", "slug", "tags")  # columns with a meaning of their own (not only placeholders)
FRONT_COLUMNS = ("categories", "description", "publish_at")  # cells that become front matter


@dataclass
class ImportReport:
    source: Path
    dry_run: bool = False
    written: list[tuple[str, Path]] = field(default_factory=list)  # (slug, prompt file)
    existing: list[str] = field(default_factory=list)  # one line each: which row, which file
    invalid: list[str] = field(default_factory=list)  # one line each: which row, what, the fix
    too_large: list[str] = field(default_factory=list)  # written, but too large for the chat
    similar: list[str] = field(default_factory=list)  # one line each: which row, which topic it resembles
    unused: list[str] = field(default_factory=list)  # one line each: a row's value no placeholder takes

    def summary(self) -> str:
        verb = "would write" if self.dry_run else "wrote"
        parts = [f"{verb} {len(self.written)} prompt(s)"]
        if self.existing:
            parts.append(f"{len(self.existing)} skipped (slug exists)")
        if self.similar:
            parts.append(f"{len(self.similar)} refused (similar to a known topic; {ALLOW} imports them)")
        if self.invalid:
            parts.append(f"{len(self.invalid)} invalid (nothing written for them)")
        if self.too_large:
            parts.append(f"{len(self.too_large)} too large for the chat (qwen.max_prompt_bytes)")
        return f"import {self.source}: {', '.join(parts)}"


def import_topics(
    prompts_dir: Path,
    articles_dir: Path,
    source: Path,
    template: str | None,
    *,
    dry_run: bool = False,
    max_request_bytes: int = 0,
    similar: float | None = None,
    language: str = "",
) -> ImportReport:
    """Write one prompt per row of the CSV file `source`. UsageProblem when the file itself
    cannot be used (nothing written then); per-row problems are in the report, and so are the
    prompts written that are too large for the chat (over `max_request_bytes`; 0 = unchecked).
    With `similar` (topics.similar; None: --allow-similar), a row whose title is at least that
    alike to a prompt's, an article's or an earlier row's is refused, and reported (`language`:
    article.language, the titles' language when they do not tell)."""
    rows = _read_rows(source)
    try:
        header_line, header = next(rows)
    except StopIteration:
        raise UsageProblem(
            f"{source} is empty: its first line must be a header naming the columns, e.g. title,slug,tags"
        ) from None
    columns = _check_header(source, header)
    chosen = load_template(prompts_dir, template)
    placeholders = set(STANDARD) | {c for c in columns if c.isidentifier()}
    chosen.check(placeholders, f"add a `{{name}}` column to {source}")
    report = ImportReport(source, dry_run=dry_run)
    memory = (
        None if similar is None else remember_batch(TopicMemory(similar, language), prompts_dir, articles_dir)
    )
    first_line_of: dict[str, int] = {}
    for line, cells in rows:
        if not any(cell.strip() for cell in cells):
            continue  # a blank line
        where = f"{source} line {line}"
        if len(cells) != len(columns):
            report.invalid.append(
                f"{where}: {len(cells)} cells, but the header (line {header_line}) has "
                f'{len(columns)} columns; fix the row (a comma inside a cell needs "quotes")'
            )
            continue
        row = dict(zip(columns, cells, strict=True))
        try:
            slug = _row_slug(where, row)
        except UsageProblem as problem:
            report.invalid.append(str(problem))
            continue
        if slug in first_line_of:
            report.invalid.append(
                f"{where}: slug {slug!r} is also on line {first_line_of[slug]}; give this row its own slug"
            )
            continue
        first_line_of[slug] = line
        taken = exists(prompts_dir, articles_dir, slug)
        if taken:
            report.existing.append(f"{where}: skipped: {slug!r} exists already ({taken})")
            continue
        found = memory.closest(row["title"]) if memory is not None else None
        if found is not None:
            report.similar.append(
                f"{where}: refused: {slug!r} {found.says(similar)}; if it is another topic, "
                f"import it with {ALLOW}"
            )
            continue
        tags = split_tags(row.get("tags", ""))
        extra = {k: v.strip() for k, v in row.items() if k not in OWN_COLUMNS}
        try:
            front = front_matter_of(where, row)  # its problems name the row already
        except UsageProblem as problem:
            report.invalid.append(str(problem))
            continue
        try:
            path, text, prompt = render_prompt(
                prompts_dir, chosen, slug, values_for(row["title"].strip(), slug, tags, extra), tags, front
            )
        except UsageProblem as problem:
            report.invalid.append(f"{where}: {problem}")
            continue
        if not dry_run and not files.create_new(path, text, sync=False):
            report.existing.append(f"{where}: skipped: {slug!r} exists already ({path})")
            continue
        report.written.append((slug, path))
        for name in chosen.unused(k for k, v in extra.items() if v and k not in FRONT_COLUMNS):
            report.unused.append(
                f"{where}: warning: column {name!r} = {extra[name]!r} is not used: {chosen.where} "
                f"has no {{{name}}}; add {{{name}}} to the template, or drop the column"
            )
        if memory is not None:
            memory.add(slug, row["title"].strip(), f"line {line} of the list")
        too_large = max_request_bytes and request_size_problem(prompt, max_request_bytes)
        if too_large:
            report.too_large.append(f"{where}: warning: {too_large}")
    if report.written and not dry_run:
        os.sync()  # once for the lot: an fsync per file would cost more than the whole import
    return report


def _read_rows(source: Path):
    """(line number where the record starts, cells) for each CSV record of `source`."""
    try:
        raw = files.read_bytes(source, follow=True)
    except FileNotFoundError:
        raise UsageProblem(f"{source}: no such file (give the path of a CSV file with a header)") from None
    except files.UnsafeFile as bad:
        raise UsageProblem(f"{source} is {bad.kind}, not a CSV file") from None
    except OSError as err:
        raise UsageProblem(f"{source}: cannot read: {err.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UsageProblem(f"{source}: not UTF-8 text (byte {err.start}); save it as UTF-8 CSV") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    ended = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise UsageProblem(f"{source} line {reader.line_num}: not valid CSV: {err}") from None
        start, ended = ended + 1, reader.line_num
        yield start, cells


def _check_header(source: Path, header: list[str]) -> list[str]:
    columns = [name.strip().lower() for name in header]
    for number, name in enumerate(columns, 1):
        if not name:
            raise UsageProblem(f"{source} line 1: column {number} of the header has no name; name it")
        if columns.index(name) != number - 1:
            raise UsageProblem(f"{source} line 1: column {name!r} appears twice in the header; keep one")
    if "title" not in columns:
        raise UsageProblem(
            f"{source} line 1: no `title` column (the header is: {','.join(header)}); "
            "the first line must name the columns, one of them title"
        )
    return columns


def _row_slug(where: str, row: dict[str, str]) -> str:
    title = row["title"].strip()
    if not title:
        raise UsageProblem(f"{where}: field title is empty; give the row a title")
    given = row.get("slug", "").strip()
    if given:
        try:
            return check_slug(given)
        except UsageProblem as problem:
            raise UsageProblem(f"{where}: field slug = {given!r}: {problem}") from None
    made = slug_from_title(title)
    if not made:
        raise UsageProblem(
            f"{where}: field title = {title!r} has no a-z or 0-9 to make a slug from; give the row a slug"
        )
    return made


def front_matter_of(where: str, row: dict[str, str]) -> dict:
    """The front matter a row's `categories`, `description` and `publish_at` cells give its
    prompt (empty cells give none). UsageProblem for a `publish_at` that is not ISO."""
    front: dict = {}
    categories = split_tags(row.get("categories", ""))
    if categories:
        front["categories"] = categories
    summary = row.get("description", "").strip()
    if summary:
        front["description"] = summary
    when = row.get("publish_at", "").strip()
    if when:
        front["publishDate"] = publish_date(where, when)
    return front


def publish_date(where: str, text: str) -> date | datetime:
    """`2027-03-01` (a date) or `2027-03-01T09:00:00+01:00` (a date and time, with or without
    its offset; `Z` for UTC) as the TOML value Hugo reads for publishDate."""
    try:
        if DATE_ONLY.fullmatch(text):
            return date.fromisoformat(text)
        return datetime.fromisoformat(text)
    except ValueError:
        raise UsageProblem(
            f"{where}: field publish_at = {text!r} is not an ISO date or date and time; write e.g. "
            "2027-03-01 or 2027-03-01T09:00:00+01:00 (or leave it empty: published when done)"
        ) from None
