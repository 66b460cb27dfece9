"""The one guard of every path the config names (issue 36, item 1; pipeline/pathguard.py): the
schema is walked, so a path key added later is refused at the same places or this fails.

Each path key is set, in turn, to each kind of forbidden target: the project's own files (the
config, a prompt, an article and its sidecars, the store and its -wal/-shm, the locks), every
other path key's file or folder, a symlink, a FIFO, a device, and the wrong one of file/folder.
Loading must be a ConfigError (exit 2) naming the key, and nothing is written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import tomli_w
from accounts_project import accounts_project
from project_files import add_prompt
from tests_cli_helpers import qwenpipe as qwenpipe_process
from tests_cli_helpers import qwenpipe_in_process

from pipeline.batch.cycle import run_cycle
from pipeline.config import ACCOUNT_KEYS, SCHEMA, ConfigError, load
from pipeline.pathguard import PathKind

# The project's own files, as a cycle leaves them (articles/.qwenpipe holds the store and locks).
PROJECT_FILES = [
    "config.toml",
    "prompts/tea.md",
    "articles/tea.md",
    "articles/tea.md.url",
    "articles/tea.md.failed",
    "articles/tea.md.json",
    "articles/.qwenpipe/qwenpipe.db",
    "articles/.qwenpipe/qwenpipe.db-wal",
    "articles/.qwenpipe/qwenpipe.db-shm",
    "articles/.qwenpipe/cycle.lock",
    "articles/.qwenpipe/locks/tea.lock",
]
PROJECT_FOLDERS = ["prompts", "articles", "articles/.qwenpipe"]
WITH_ACCOUNTS = pytest.mark.parametrize("accounts", [False, True], ids=["one account", "accounts.main"])


def path_keys() -> list[tuple[str, str, PathKind]]:
    """(place, key, kind) of every path key of the schema; accounts' as accounts.main."""
    found = [(section, name, spec.path) for section, keys in SCHEMA.items() for name, spec in keys.items()]
    found += [("accounts.main", name, spec.path) for name, spec in ACCOUNT_KEYS.items()]
    return [(place, name, kind) for place, name, kind in found if kind is not None]


def base_values(accounts: bool) -> dict:
    """A config with every path key set (an empty default: a path of its own), as a TOML table."""
    values: dict = {}
    for place, name, kind in path_keys():
        if place.startswith("accounts.") and not accounts:
            continue
        spec = ACCOUNT_KEYS[name] if place.startswith("accounts.") else SCHEMA[place][name]
        default = spec.default.format(name="main") if place.startswith("accounts.") else spec.default
        table = values.setdefault("accounts", {}).setdefault("main", {}) if "." in place else None
        table = table if table is not None else values.setdefault(place, {})
        table[name] = default or f"own/{place}.{name}" + ("" if kind.folder else ".txt")
    return values


def write_project(folder: Path, values: dict) -> Path:
    """The project's folders, its key file and browser program (as `values` name them), and
    config.toml."""
    for name in ("prompts", "articles", "outside"):
        (folder / name).mkdir(exist_ok=True)
    key_file = folder / values["router"]["api_key_file"]
    key_file.parent.mkdir(parents=True, exist_ok=True)
    key_file.write_text("sk-key-file-0123456789\n")
    key_file.chmod(0o600)
    program = folder / values["browser"]["executable"]
    program.write_text("#!/bin/sh\n")
    program.chmod(0o700)
    return write_config(folder, values)


def write_config(folder: Path, values: dict) -> Path:
    (folder / "config.toml").write_text(tomli_w.dumps(values))
    return folder / "config.toml"


def with_value(values: dict, place: str, name: str, value: str) -> dict:
    changed = {k: dict(v) for k, v in values.items()}
    if place.startswith("accounts."):
        changed["accounts"] = {"main": {**values["accounts"]["main"], name: value}}
    else:
        changed[place][name] = value
    return changed


def value_of(values: dict, place: str, name: str) -> str:
    return values["accounts"]["main"][name] if place.startswith("accounts.") else values[place][name]


def in_force(place: str, name: str, accounts: bool) -> bool:
    """[browser]'s profile and saved login are the one account's only without [accounts.NAME]."""
    if place.startswith("accounts."):
        return accounts
    return not (accounts and place == "browser" and name in ACCOUNT_KEYS)


def forbidden_targets(values: dict, place: str, name: str, kind: PathKind, accounts: bool) -> list[str]:
    """Each project file and folder, and each other path key's file (or a file in its folder)."""
    if kind is PathKind.PROJECT:
        return []
    targets = [*PROJECT_FILES, *(f"{folder}/new.txt" for folder in PROJECT_FOLDERS)]
    if kind.folder:
        targets += PROJECT_FOLDERS
    for other_place, other, other_kind in path_keys():
        if (other_place, other) == (place, name) or not in_force(other_place, other, accounts):
            continue
        if other_kind is PathKind.PROJECT:
            continue
        theirs = value_of(values, other_place, other)
        targets.append(f"{theirs}/x" if other_kind.folder else theirs)
    return [f"./{target}" for target in targets]  # "./": a path for browser.executable too


def refused(config: Path, key: str) -> str:
    with pytest.raises(ConfigError) as error:
        load(config)
    message = str(error.value)
    assert re.search(rf"(^|\s){re.escape(key)}\b", message), message
    return message


def test_every_path_like_key_of_the_schema_says_its_kind():
    """A key whose name says it is a path must carry a PathKind, or the guard never sees it."""
    looks_like_a_path = re.compile(r"(dir|file|path|folder|state|executable)$")
    keys = [(section, name, spec) for section, keys in SCHEMA.items() for name, spec in keys.items()]
    keys += [("accounts.NAME", name, spec) for name, spec in ACCOUNT_KEYS.items()]
    unmarked = [
        f"{section}.{name}"
        for section, name, spec in keys
        if (looks_like_a_path.search(name) or section == "paths") and spec.path is None
    ]
    assert unmarked == []
    assert len(path_keys()) >= 10  # prompts, articles, executable, profile_dir, storage_state, ...


@WITH_ACCOUNTS
def test_every_path_key_in_force_goes_through_the_guard(tmp_path, accounts):
    values = base_values(accounts)
    config = load(write_project(tmp_path, values))
    walked = {setting.name for setting in config.path_settings()}
    expected = {f"{place}.{name}" for place, name, _kind in path_keys() if in_force(place, name, accounts)}
    assert walked == expected


@WITH_ACCOUNTS
def test_each_path_key_is_refused_at_each_of_the_projects_own_files(tmp_path, accounts):
    values = base_values(accounts)
    write_project(tmp_path, values)
    tried = 0
    for place, name, kind in path_keys():
        if not in_force(place, name, accounts):
            continue
        for target in forbidden_targets(values, place, name, kind, accounts):
            config = write_config(tmp_path, with_value(values, place, name, target))
            before = config.read_bytes()
            message = refused(config, f"{place}.{name}")
            assert "is " in message and "of its own" in message or "not a" in message, message
            assert config.read_bytes() == before
            tried += 1
    assert tried > 100


@WITH_ACCOUNTS
def test_each_path_key_is_refused_at_a_symlink_a_fifo_a_device_or_the_wrong_kind(tmp_path, accounts):
    values = base_values(accounts)
    write_project(tmp_path, values)
    (tmp_path / "outside" / "file.txt").write_text("the user's own file\n")
    (tmp_path / "outside" / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    for place, name, kind in path_keys():
        if not in_force(place, name, accounts):
            continue
        link = tmp_path / f"link-{place}-{name}"
        link.symlink_to(tmp_path / "outside" / ("folder" if kind.folder else "file.txt"))
        cases = {"a FIFO": "./fifo", "a device": "/dev/null"}
        if not kind.follows_links:
            cases["a symlink"] = f"./{link.name}"
        if kind is not PathKind.PROJECT:
            cases["a folder" if not kind.folder else "a regular file"] = (
                "./outside/folder" if not kind.folder else "./outside/file.txt"
            )
        for said, target in cases.items():
            config = write_config(tmp_path, with_value(values, place, name, target))
            message = refused(config, f"{place}.{name}")
            assert said in message, message
    assert (tmp_path / "outside" / "file.txt").read_text() == "the user's own file\n"


def test_the_project_folders_may_be_links_and_the_program_may_be_one(tmp_path):
    """A project on another disk (articles a link to it) and /usr/bin/google-chrome (a link) work."""
    (tmp_path / "disk" / "articles").mkdir(parents=True)
    (tmp_path / "articles").symlink_to(tmp_path / "disk" / "articles")
    (tmp_path / "chrome").write_text("#!/bin/sh\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "google-chrome").symlink_to(tmp_path / "chrome")
    (tmp_path / "config.toml").write_text('[browser]\nexecutable = "./bin/google-chrome"\n')
    assert load(tmp_path / "config.toml").articles_dir == tmp_path / "disk" / "articles"


def test_a_key_file_that_is_a_symlink_is_refused_naming_the_key(tmp_path):
    key = tmp_path / "secrets" / "router.key"
    key.parent.mkdir()
    key.write_text("sk-0123456789abcdef\n")
    key.chmod(0o600)
    (tmp_path / "router.key").symlink_to(key)
    (tmp_path / "config.toml").write_text('[router]\napi_key_file = "router.key"\n')
    message = refused(tmp_path / "config.toml", "router.api_key_file")
    assert "is a symlink" in message and "sk-0123456789abcdef" not in message


# -- the metrics file, through the command line and at write time ------------------------------


METRICS_TARGETS = [
    *PROJECT_FILES,
    ".qwenpipe/state.json",  # the saved login
    ".qwenpipe/profile/qwenpipe.lock",  # the browser profile's lock
    "router.key",
]


def metrics_project(project: Path, target: str) -> Path:
    (project / "router.key").write_text("sk-key-file-0123456789\n")
    (project / "router.key").chmod(0o600)
    (project / "config.toml").write_text(
        f'[router]\napi_key_file = "router.key"\n[article]\nmin_words = 0\n[metrics]\ntextfile = "{target}"\n'
    )
    add_prompt(project, "tea")
    for name in METRICS_TARGETS:
        path = project / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"the project's own {name}\n")
    return project


def contents(project: Path) -> dict[str, bytes]:
    return {name: (project / name).read_bytes() for name in METRICS_TARGETS}


@pytest.mark.parametrize("target", METRICS_TARGETS)
def test_a_cycle_whose_metrics_file_is_a_project_file_is_exit_2_and_leaves_it(project, target):
    metrics_project(project, target)
    before = contents(project)
    result = qwenpipe_in_process("cycle", cwd=project)
    assert result.returncode == 2, result.stderr
    assert "metrics.textfile" in result.stderr and "of its own" in result.stderr, result.stderr
    assert contents(project) == before
    assert (project / "router.key").stat().st_mode & 0o777 == 0o600


def test_a_cron_cycle_whose_metrics_file_is_the_key_file_is_exit_2(project):
    """The finding itself, as cron runs it: the key file was replaced and left 0644."""
    metrics_project(project, "router.key")
    result = qwenpipe_process("cycle", cwd=project)
    assert result.returncode == 2 and "metrics.textfile" in result.stderr, result.stderr
    assert "is router.api_key_file" in result.stderr, result.stderr
    assert (project / "router.key").read_text() == "sk-key-file-0123456789\n"
    assert (project / "router.key").stat().st_mode & 0o777 == 0o600


def test_a_symlink_that_appears_at_the_metrics_file_after_load_is_not_followed(project, outside):
    (project / "metrics").mkdir()
    ws, _chats, _router, engines = accounts_project(project, '[metrics]\ntextfile = "metrics/q.prom"\n')
    before = outside.read_bytes()
    (project / "metrics" / "q.prom").symlink_to(outside)  # after the load's guard
    said: list[str] = []
    run_cycle(ws, engines(), say=said.append)
    assert outside.read_bytes() == before
    assert (project / "metrics" / "q.prom").is_symlink()
    assert any(line.startswith("metrics: metrics/q.prom not written") for line in said), said
