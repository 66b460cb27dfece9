"""config.toml: defaults, validation messages that name the key and the file, init."""

from __future__ import annotations

import tomllib

import pytest

from pipeline import config
from pipeline.config import ConfigError, load


def test_missing_default_file_means_defaults(tmp_path):
    cfg = load()
    assert cfg.qwen.poll_interval == 60 and cfg.source is None
    assert cfg.articles_dir == (tmp_path / "articles").resolve()


def test_named_file_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="no such config file.*qwenpipe init"):
        load(tmp_path / "nope.toml")


def test_env_var_picks_the_file(tmp_path, monkeypatch):
    other = tmp_path / "sub" / "other.toml"
    other.parent.mkdir()
    other.write_text('[paths]\narticles = "out"\n')
    monkeypatch.setenv("QWENPIPE_CONFIG", str(other))
    cfg = load()
    assert cfg.source == other.resolve()
    assert cfg.articles_dir == (tmp_path / "sub" / "out").resolve(), (
        "relative paths are from the file's folder"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[qwen]\npoll_interval = -1\n", "qwen.poll_interval = -1 must be 0 to 86400"),
        ("[qwen]\nbase_url = 'ftp://x'\n", "qwen.base_url = 'ftp://x' must be an http\\(s\\) URL"),
        ("[qwen]\nbase_url = 'chat.qwen.ai'\n", "qwen.base_url"),
        ("[qwen]\npoll_intervl = 5\n", "unknown key qwen.poll_intervl"),
        ("[qwenn]\n", r"unknown section \[qwenn\]"),
        ("[qwen]\nmax_attempts = '5'\n", "qwen.max_attempts = '5' must be an integer"),
        ("[qwen]\nmax_attempts = 0\n", "must be 1 to 1000"),
        ("[browser]\nheadless = 'no'\n", "browser.headless = 'no' must be true or false"),
        ("[browser]\ndisplay = 'vnc'\n", "browser.display = 'vnc' must be one of 'auto', 'xvfb', 'none'"),
        ("[login]\nrefresh_hours = -1\n", "login.refresh_hours = -1 must be 0 to 8760"),
        ("[qwen]\npoll_interval = true\n", "must be an integer or a number"),
        ("[router]\napi_key_env = 'sk-abc 123'\n", "NAME of an environment variable"),
        ("qwen = 3\n", "must be a table"),
        ("[qwen\n", "not valid TOML"),
        ("[qwen.selectors]\ncomposer = 3\n", "non-empty strings"),
    ],
)
def test_bad_values_name_the_key_and_the_file(tmp_path, text, message):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load(path)
    assert str(path) in str(info.value)


def test_not_utf8(tmp_path):
    path = tmp_path / "config.toml"
    path.write_bytes(b"[qwen]\n# \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load(path)


def test_rendered_default_config_is_every_key_at_its_default():
    text = config.render_default_config()
    assert config.validate(tomllib.loads(text)) == config.defaults()
    for section, keys in config.SCHEMA.items():
        assert f"[{section}]" in text
        for key in keys:
            assert f"\n{key} = " in text


def test_readme_lists_every_config_key():
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("qwenpipe init` writes this file", 1)[1].split("```", 2)[1]
    for section, keys in config.SCHEMA.items():
        assert f"[{section}]" in block, section
        for key in keys:
            assert f"\n{key} = " in block, f"{section}.{key} missing from the README"
