"""config.toml's sections as typed read-only records: the one definition SCHEMA, `init` and reads share."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from pipeline import config
from pipeline.config import SCHEMA, SECTIONS, check_value, load


def test_schema_is_built_from_the_section_classes_with_nothing_left_out():
    assert list(SCHEMA) == list(SECTIONS)
    for name, section in SECTIONS.items():
        # every annotated attribute is a key (a field declared without key() would be lost)
        assert list(SCHEMA[name]) == list(section.__annotations__)


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


@pytest.mark.parametrize("name", list(SECTIONS) + ["accounts"])
def test_each_section_is_a_frozen_record_as_a_dataclass_would_be(name):
    """Sections are plain classes (cheaper to define at start-up): keyword construction, defaults,
    equality and hash by value, no assignment, a fresh copy of a mutable default, a typo refused."""
    section = SECTIONS.get(name, config.AccountSettings)
    keys = section.keys()
    first = next(iter(keys))
    built, again = section(), section()
    assert built == again
    if _hashable(built):  # as a frozen dataclass: hashable unless a value is a list or a table
        assert hash(built) == hash(again)
    assert built != object() and section.__eq__(built, object()) is NotImplemented
    assert repr(built).startswith(f"{section.__name__}({first}=")
    for key, spec in keys.items():
        if isinstance(spec.default, (list, dict)):
            assert getattr(built, key) is not getattr(again, key)  # not one shared list
    changed = built.replace(**{first: _other(keys[first].default)})
    assert changed != built and getattr(changed, first) == _other(keys[first].default)
    assert section(**{first: getattr(changed, first)}) == changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, first, getattr(changed, first))
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(built, first)
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_key'"):
        section(no_such_key=1)


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _other(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    return type(value)() if value else ["x"] if isinstance(value, list) else {"x": "y"}
