"""Bad key bytes are bad input (issue 36, item 3): a router key no HTTP header can carry, from
the key file or from the variable api_key_env names, is exit 2 naming where it came from (never
`internal error: UnicodeEncodeError`, never the key); and a key the router refuses is named by
its real source, on stderr, in `doctor` and so in what is notified (one wording:
RouterEngine._with_hint)."""

from __future__ import annotations

import json

import httpx
import pytest
from fakes import took_nothing
from project_files import add_prompt
from test_alerts import cycle, setup, webhook  # noqa: F401 - webhook: the fixture
from tests_cli_helpers import qwenpipe as qwenpipe_process
from tests_cli_helpers import qwenpipe_in_process

from pipeline.config import ConfigError, Router, load
from pipeline.contract.workspace import Engines
from pipeline.engines.base import HardError
from pipeline.engines.router import RouterEngine
from pipeline.known_secrets import router_key
from pipeline.setup.doctor import FAIL, Report, check_router

GOOD = "sk-good-0123456789abcdef"
# The characters an HTTP header cannot carry, as a paste brings them; a variable holds no NUL
# and no undecodable bytes, a file may.
BAD_IN_BOTH = {
    "non-ASCII letter": "sk-café-0123456789",
    "non-breaking space": "sk-0123456789\u00a0abcdef",
    "curly quote": "\u201csk-0123456789abcdef\u201d",
    "escape": "sk-0123\x1b[0m456789",
    "tab inside": "sk-0123\t456789",
    "delete": "sk-0123456789\x7f",
    "vertical tab": "sk-0123\x0b456789",
}
BAD_IN_FILES = {**BAD_IN_BOTH, "NUL": "sk-0123\x00456789"}
WORDS = {
    "non-ASCII letter": "non-ASCII",
    "non-breaking space": "non-ASCII",
    "curly quote": "non-ASCII",
    "escape": "control character",
    "tab inside": "control character",
    "delete": "control character",
    "vertical tab": "control character",
    "NUL": "NUL",
}


def key_file(folder, data: bytes):
    path = folder / "router.key"
    path.write_bytes(data)
    path.chmod(0o600)
    (folder / "config.toml").write_text('[router]\napi_key_file = "router.key"\n')
    return path


@pytest.mark.parametrize("bad", sorted(BAD_IN_FILES))
def test_a_key_file_holding_a_bad_character_is_refused_naming_the_file(tmp_path, bad):
    path = key_file(tmp_path, BAD_IN_FILES[bad].encode("utf-8") + b"\n")
    with pytest.raises(ConfigError) as refused:
        load(tmp_path / "config.toml")
    message = str(refused.value)
    assert f"router.api_key_file: the key in {path} " in message and WORDS[bad] in message, message
    assert BAD_IN_FILES[bad].strip() not in message and "sk-" not in message


def test_a_key_file_of_bytes_that_are_not_utf8_is_refused_naming_the_file(tmp_path):
    path = key_file(tmp_path, b"sk-0123\xff\xfe456789\n")
    with pytest.raises(ConfigError, match=f"the key in {path} holds a non-ASCII character"):
        load(tmp_path / "config.toml")


@pytest.mark.parametrize("bad", sorted(BAD_IN_BOTH))
def test_a_variable_holding_a_bad_character_is_refused_naming_the_variable(tmp_path, bad):
    settings = Router(api_key_env="QP_ROUTER_KEY")
    with pytest.raises(ConfigError) as refused:
        router_key(settings, env={"QP_ROUTER_KEY": BAD_IN_BOTH[bad]})
    message = str(refused.value)
    assert "the key in QP_ROUTER_KEY (router.api_key_env)" in message and WORDS[bad] in message
    assert "sk-" not in message and "export QP_ROUTER_KEY=..." in message


def test_a_good_key_from_either_place_is_taken_as_it_is(tmp_path):
    key_file(tmp_path, f"  {GOOD}\r\n\nsecond line\n".encode())
    config = load(tmp_path / "config.toml")
    assert router_key(config.router, env={}) == GOOD
    assert router_key(config.router, env={"ROUTER_API_KEY": GOOD + "-env"}) == GOOD + "-env"


@pytest.mark.parametrize("bad", ["non-ASCII letter", "NUL"])
def test_a_cycle_with_a_bad_key_file_is_exit_2_not_an_internal_error(project, bad):
    path = key_file(project, BAD_IN_FILES[bad].encode("utf-8") + b"\n")
    result = qwenpipe_in_process("cycle", cwd=project, env={"ROUTER_API_KEY": None})
    assert result.returncode == 2, result.stderr
    assert str(path) in result.stderr and "internal error" not in result.stderr


def test_a_cron_cycle_with_a_non_ascii_key_in_the_variable_is_exit_2_naming_it(project):
    result = qwenpipe_process("cycle", cwd=project, env={"ROUTER_API_KEY": BAD_IN_BOTH["non-ASCII letter"]})
    assert result.returncode == 2, result.stderr
    assert "the key in ROUTER_API_KEY (router.api_key_env) holds a non-ASCII character" in result.stderr
    assert "UnicodeEncodeError" not in result.stderr and "café" not in result.stderr


# -- a refused key is named by where it came from ------------------------------------------------


def sources(folder):
    """(settings, env, the source a refusal names) for a key from the variable and from the file."""
    path = folder / "router.key"
    path.write_text("sk-wrong-from-file-0123456789\n")
    path.chmod(0o600)
    return [
        ({}, {"ROUTER_API_KEY": "sk-wrong-from-env-0123456789"}, "ROUTER_API_KEY (router.api_key_env)"),
        ({"api_key_file": str(path)}, {}, f"{path} (router.api_key_file)"),
    ]


def test_a_refused_key_is_named_by_its_source_in_the_engines_message(tmp_path):
    refuse = httpx.MockTransport(
        lambda _request: httpx.Response(401, json={"error": {"message": "Invalid API key"}})
    )
    for settings, env, source in sources(tmp_path):
        router = Router(base_url="http://router.test/v1", max_retries=0, **settings)
        engine = RouterEngine(router, env=env, transport=refuse, sleep=lambda _s: None)
        with pytest.raises(HardError) as refused:
            engine.generate("Write about tea")
        assert f"the key in {source} was refused" in str(refused.value)
        assert "sk-wrong" not in str(refused.value)


def test_doctor_names_the_refused_keys_source(sim, tmp_path, monkeypatch):
    sim.router.set(api_key=GOOD)
    try:
        for settings, env, source in sources(tmp_path):
            monkeypatch.delenv("ROUTER_API_KEY", raising=False)
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            lines = [f'base_url = "{sim.base_url}/v1"', *(f'{k} = "{v}"' for k, v in settings.items())]
            (tmp_path / "config.toml").write_text("[router]\n" + "\n".join(lines) + "\n")
            report = Report("x")
            check_router(report, load(tmp_path / "config.toml"))
            checks = {check.name: check for check in report.checks}
            model = checks["router model"]
            assert model.status == FAIL and f"the key in {source} was refused" in model.detail, model
            assert model.fix == f"check router.base_url and the key in {source}"
    finally:
        sim.router.set(api_key=None)


def test_the_notification_of_a_failing_router_names_the_refused_keys_source(
    project,
    webhook,  # noqa: F811 - test_alerts' fixture, imported above
    monkeypatch,
):
    monkeypatch.delenv("ROUTER_API_KEY", raising=False)
    (project / "router.key").write_text("sk-wrong-from-file-0123456789\n")
    (project / "router.key").chmod(0o600)
    ws, chats, _fake, _engines = setup(project, [webhook.url], '[router]\napi_key_file = "router.key"\n')
    chats["default"].send_error = took_nothing(HardError("the chat refused the session", code="chat_refused"))
    refuse = httpx.MockTransport(
        lambda _request: httpx.Response(401, json={"error": {"message": "Invalid API key"}})
    )

    def engines() -> Engines:
        return Engines(
            ws.config,
            chat_factory=lambda _config: chats["default"],
            router_factory=lambda config: RouterEngine(
                config.router, env={}, transport=refuse, sleep=lambda _s: None
            ),
        )

    add_prompt(project, "tea")
    cycle(ws, engines)
    told = {message["title"]: message["message"] for message in webhook.received}
    router = told.get("qwenpipe: the router is failing", "")
    assert f"the key in {project / 'router.key'} (router.api_key_file) was refused" in router, told
    assert "sk-wrong" not in json.dumps(webhook.received)
