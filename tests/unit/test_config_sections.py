"""config.toml's sections as typed dataclasses: the one definition SCHEMA, `init` and reads share."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from pipeline import config
from pipeline.config import SCHEMA, SECTIONS, check_value, load


def test_schema_is_built_from_the_section_classes_with_nothing_left_out():
    assert list(SCHEMA) == list(SECTIONS)
    for name, section in SECTIONS.items():
        assert list(SCHEMA[name]) == [f.name for f in dataclasses.fields(section)]


@pytest.mark.parametrize("name", list(SECTIONS))
def test_each_fields_default_passes_its_own_rule_and_matches_its_annotation(name):
    section = SECTIONS[name]
    built = section()
    hints = typing.get_type_hints(section)
    for key, spec in section.keys().items():
        value = getattr(built, key)
        assert value == spec.default
        assert check_value(f"{name}.{key}", spec, value, "defaults") == value
        wanted = typing.get_origin(hints[key]) or hints[key]
        assert isinstance(value, (int, float) if wanted is float else wanted), (key, hints[key])


def test_a_loaded_file_reads_as_typed_attributes_and_a_typo_is_an_error_not_a_default(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[qwen]\nmax_attempts = 9\n[publish]\nbundle = true\n")
    loaded = load(path)
    assert loaded.qwen.max_attempts == 9 and loaded.publish.bundle is True
    assert loaded.qwen.poll_interval == 60
    with pytest.raises(AttributeError):
        loaded.qwen.max_attempt  # noqa: B018 - the read is the test
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.qwen.max_attempts = 1  # type: ignore[misc]


def test_a_command_line_override_shows_in_the_typed_section(tmp_path):
    loaded = load(None).with_override("qwen", "concurrency", 7, "--concurrency")
    assert loaded.qwen.concurrency == 7
    assert config.Qwen().concurrency == 2  # the class default is untouched
