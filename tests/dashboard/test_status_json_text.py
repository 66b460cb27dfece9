"""`status --json` writes its rows field by field (Row.json_text, BatchStatus.json_text) instead
of json.dumps: the bytes must be json.dumps's, for every field, every kind of value it can hold."""

from __future__ import annotations

import json
import time
from dataclasses import fields, replace
from pathlib import Path

import pytest

from pipeline.batch.status import STATES, BatchStatus, Row

# Strings json.dumps escapes (quotes, backslashes, control characters, a lone surrogate) or
# writes as they are (ensure_ascii=False: accents, CJK, an emoji, a line separator).
TEXTS = ["", "plain", 'a "quoted" \\ back\\slash', "tab\tnew\nline\r\x00\x1f\x7f", "é 中 😀 \u2028 \ud800"]
INTS = [0, 7, -3, 10**20]
TIMES = [0.0, 1_796_000_000.5, time.time()]
SAMPLES = {"str": TEXTS, "int": INTS, "float": TIMES}


def samples(annotation: str) -> list:
    """The values a field of this annotation can hold ("str | None", "int", "float | None"...)."""
    kinds = [kind.strip() for kind in annotation.split("|")]
    found = [None] if "None" in kinds else []
    for kind in kinds:
        if kind != "None":
            found += SAMPLES[kind]  # a new kind of field: give it samples here
    return found


def every_row() -> list[Row]:
    base = Row("tea", "done", path="/articles/tea.md")
    return [replace(base, **{field.name: value}) for field in fields(Row) for value in samples(field.type)]


def test_every_field_of_a_row_is_written_as_json_dumps_writes_it():
    rows = every_row()
    assert len(rows) > 40
    for row in rows:
        assert row.json_text() == json.dumps(row.to_json(), ensure_ascii=False), row


@pytest.mark.parametrize("count", [0, 1, 3])
def test_the_whole_document_is_json_dumps_of_to_json(count):
    rows = every_row()[:count]
    status = BatchStatus(
        now=time.time(),
        prompts_dir=Path("/p/prompts"),
        articles_dir=Path("/p/articles"),
        rows=rows,
        totals=dict.fromkeys(STATES, 1),
        sends_today=3,
        sends_limit=0,
        warnings=['a "warning" é'],
    )
    assert status.json_text() == json.dumps(status.to_json(), ensure_ascii=False)
