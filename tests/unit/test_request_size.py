"""qwen.max_prompt_bytes: a turn whose chat request would be larger than the limit is refused
before anything is sent (the site answers a completion body over about 128 KB with its slider)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.config import ConfigError, load
from pipeline.contract.prompts import check_request_size, parse_prompt, request_body_bytes
from pipeline.errors import UsageProblem

TRICKY = 'He said "hi"\n\tthen \\ left: é, 中文, 🍵, \x01 and \u2028.'


def test_the_estimate_counts_json_escaping_and_utf8_bytes():
    empty = request_body_bytes("")
    assert request_body_bytes("a" * 1000) == empty + 1000
    assert request_body_bytes('"') == empty + 2  # \"
    assert request_body_bytes("\n") == empty + 2  # \n
    assert request_body_bytes("\\") == empty + 2
    assert request_body_bytes("\x01") == empty + 6  # \u0001
    assert request_body_bytes("é") == empty + 2  # two UTF-8 bytes, not \u00e9
    assert request_body_bytes("🍵") == empty + 4
    assert request_body_bytes("中") == empty + 3


def _page_body(text: str) -> dict:
    """The body as pipeline/simulator/static/app.js sendText builds it, for a later turn."""
    return {
        "stream": True,
        "incremental_output": True,
        "chat_id": "5f0c1f9e-3a51-4a4e-9a4e-0b8f4c3d2e1a",
        "chat_mode": "normal",
        "model": "qwen3-max",
        "chat_type": "t2t",
        "feature_config": {"thinking_enabled": False, "output_schema": "phase"},
        "parent_id": "a1b2c3d4-0000-4000-8000-123456789abc",
        "messages": [{"role": "user", "content": text, "chat_type": "t2t"}],
        "timestamp": 1_790_000_000,
    }


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_estimate_is_never_short_of_what_the_browser_sends(tmp_path):
    text = TRICKY * 50
    (tmp_path / "body.json").write_text(json.dumps(_page_body(text)), encoding="utf-8")
    script = "const fs=require('fs');const b=JSON.parse(fs.readFileSync(process.argv[1],'utf8'));"
    script += "process.stdout.write(String(Buffer.byteLength(JSON.stringify(b),'utf8')))"
    sent = int(
        subprocess.run(
            ["node", "-e", script, str(tmp_path / "body.json")], capture_output=True, text=True, check=True
        ).stdout
    )
    estimate = request_body_bytes(text)
    assert sent <= estimate <= sent + 64, (sent, estimate)


def _prompt(text: str):
    return parse_prompt("big", Path("prompts/big.md"), text)


def test_a_turn_over_the_limit_is_refused_naming_its_size_and_the_limit():
    check_request_size(_prompt("x" * 5000), 10_000)  # within: nothing raised
    big = _prompt("x" * 20_000)
    with pytest.raises(UsageProblem) as info:
        check_request_size(big, 10_000)
    message = str(info.value)
    size = request_body_bytes("x" * 20_000)
    assert f"{size:,} bytes" in message and "qwen.max_prompt_bytes = 10,000" in message
    assert "prompts/big.md" in message and "nothing was sent" in message and "--engine router" in message


def test_escaping_can_push_a_prompt_over_the_limit():
    text = "\n" * 6000  # 6,000 bytes in the file, 12,000 in the request
    check_request_size(_prompt("a" * 6000), 10_000)
    with pytest.raises(UsageProblem):
        check_request_size(_prompt("a" + text + "b"), 10_000)


def test_every_turn_is_checked_and_the_message_names_the_turn():
    prompt = _prompt("short\n=== next turn ===\n" + "y" * 20_000 + "\n=== next turn ===\nshort")
    with pytest.raises(UsageProblem, match="turn 2 of 3 makes a chat request"):
        check_request_size(prompt, 10_000)
    check_request_size(prompt, 10_000, first_turn=3)  # turns already sent are not judged again


@pytest.mark.parametrize("value", ["0", "-1", "999", "1000001", "1e5", "100000.0", '"100000"', "true"])
def test_max_prompt_bytes_must_be_a_sane_whole_number(tmp_path, value):
    path = tmp_path / "config.toml"
    path.write_text(f"[qwen]\nmax_prompt_bytes = {value}\n")
    with pytest.raises(
        ConfigError, match=r"qwen\.max_prompt_bytes = .* must be (an integer|1000 to 1000000)"
    ):
        load(path)


def test_max_prompt_bytes_defaults_to_100000_and_takes_a_value(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[qwen]\nmax_prompt_bytes = 50000\n")
    assert load(path).qwen.max_prompt_bytes == 50_000
    path.write_text("")
    assert load(path).qwen.max_prompt_bytes == 100_000


def _blog(tmp_path):
    from project_files import write_config

    write_config(tmp_path, "[qwen]\nmax_prompt_bytes = 1000\n")
    templates = tmp_path / "prompts" / "_templates"
    templates.mkdir(parents=True)
    (templates / "default.md").write_text('+++\ntitle = "{title}"\n+++\nWrite "{title}".\n{notes}\n')
    return tmp_path


def test_new_and_import_write_a_prompt_too_large_for_the_chat_and_warn(tmp_path):
    from tests_cli_helpers import qwenpipe_in_process as qwenpipe

    project = _blog(tmp_path)
    made = qwenpipe("new", "big", "--title", "Big", "--set", "notes=" + "n" * 1000, cwd=project)
    assert made.returncode == 0, made.stderr
    assert (project / "prompts" / "big.md").exists()
    assert "warning:" in made.stderr and "qwen.max_prompt_bytes = 1,000" in made.stderr
    small = qwenpipe("new", "small", "--title", "Small", "--set", "notes=short", cwd=project)
    assert small.returncode == 0 and "warning" not in small.stderr
    (project / "topics.csv").write_text(f"title,notes\nHuge,{'h' * 1000}\nTiny,short\n")
    imported = qwenpipe("import", "topics.csv", cwd=project)
    assert imported.returncode == 0, imported.stderr
    assert "topics.csv line 2: warning:" in imported.stderr and "line 3: warning" not in imported.stderr
    assert "1 too large for the chat" in imported.stderr
