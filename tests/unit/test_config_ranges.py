"""Numeric keys have ranges, folder settings that cannot work are refused, and a cron job in the
wrong folder fails (exit 2) instead of finding nothing to do forever."""

from __future__ import annotations

import pytest
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

from pipeline.config import SCHEMA, ConfigError, load

NUMERIC = [
    (section, key)
    for section, keys in SCHEMA.items()
    for key, spec in keys.items()
    if spec.type in (int, (int, float))
]


@pytest.mark.parametrize(("section", "key"), NUMERIC)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "-1e300", "10000000000000000000000"])
def test_every_numeric_key_refuses_values_outside_its_range(tmp_path, section, key, value):
    spec = SCHEMA[section][key]
    if spec.type is int and value in ("nan", "inf", "-inf", "1e300", "-1e300"):
        value = "99999999999999999999"  # an integer key: the type check already refuses floats
    path = tmp_path / "config.toml"
    path.write_text(f"[{section}]\n{key} = {value}\n")
    with pytest.raises(
        ConfigError, match=rf"{section}\.{key} = .* must be (more than )?-?[\d.]+ (to|and at most) \d+"
    ):
        load(path)


@pytest.mark.parametrize(("section", "key"), NUMERIC)
def test_every_numeric_default_is_inside_its_range(section, key):
    spec = SCHEMA[section][key]
    assert spec.check is not None and spec.check(spec.default) is None


def test_a_huge_float_in_the_config_is_exit_2_not_an_internal_error(tmp_path):
    (tmp_path / "config.toml").write_text("[qwen]\nrun_timeout = 1e300\n")
    (tmp_path / "prompts").mkdir()
    result = qwenpipe("cycle", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "qwen.run_timeout = 1e+300 must be more than 0 and at most 86400" in result.stderr
    assert "internal error" not in result.stderr


def test_an_integer_too_long_to_convert_is_a_toml_error(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[qwen]\nconcurrency = " + "9" * 5000 + "\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(path)


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ('prompts = "work"\narticles = "work"', "are the same folder"),
        ('prompts = "work"\narticles = "./work/"', "are the same folder"),
        ('prompts = "prompts"\narticles = "prompts/out"', "one is inside the other"),
        ('prompts = "articles/prompts"\narticles = "articles"', "one is inside the other"),
        ('prompts = "."\narticles = "articles"', "one is inside the other"),
    ],
)
def test_articles_and_prompts_must_be_separate_folders(tmp_path, paths, message):
    path = tmp_path / "config.toml"
    path.write_text(f"[paths]\n{paths}\n")
    with pytest.raises(ConfigError, match=message) as info:
        load(path)
    assert str(path) in str(info.value) and "paths.articles" in str(info.value)


def test_a_prompts_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "prompts").write_text("not a folder")
    result = qwenpipe("status", cwd=tmp_path)
    assert result.returncode == 2
    assert f"paths.prompts = {tmp_path / 'prompts'} is a file" in " ".join(result.stderr.split())


def test_cycle_without_a_prompts_folder_is_exit_2_saying_where_it_looked(tmp_path):
    result = qwenpipe("cycle", cwd=tmp_path)  # no config.toml, no prompts/: cron in the wrong folder
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said
    assert f"{tmp_path / 'prompts'} does not exist" in said
    assert "--config" in said and "qwenpipe init" in said
    assert not (tmp_path / "articles").exists(), "nothing is written"


@pytest.mark.parametrize(
    "args",
    [
        ["generate", "a" * 253],
        ["generate", "--wait", "a" * 253],
        ["show", "a" * 253],
        ["replay", "a" * 253],
        ["generate", "a" * 300, "--config", "config.toml"],
    ],
)
def test_a_slug_too_long_for_a_file_name_is_exit_2_on_every_path(project, args):
    (project / "articles" / "x.md").write_text("done\n")  # the fast path reads articles/
    result = qwenpipe(*args, cwd=project)
    assert result.returncode == 2, result.stderr
    assert "at most 200" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("api_reads_per_second = 0", "qwen.api_reads_per_second = 0 must be 1 to 1000"),
        (
            "api_reads_per_second = 1001",
            "qwen.api_reads_per_second = 1001 must be 1 to 1000",
        ),
        ('api_reads_per_second = "fast"', "qwen.api_reads_per_second"),
        ('collect = "dom"', "qwen.collect = 'dom' must be one of 'api', 'page'"),
        ("send_concurrency = 0", "qwen.send_concurrency = 0 must be 1 to 16"),
        ("send_concurrency = 17", "qwen.send_concurrency = 17 must be 1 to 16"),
    ],
)
def test_a_bad_collect_or_send_setting_is_exit_2_naming_the_key(tmp_path, line, message):
    (tmp_path / "config.toml").write_text(f"[qwen]\n{line}\n")
    (tmp_path / "prompts").mkdir()
    result = qwenpipe("cycle", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "articles").exists()
