"""RouterEngine against RouterSim served over real HTTP on loopback (no internet, no fakes in httpx)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipeline.config import Router
from pipeline.engines.base import HardError
from pipeline.engines.router import RouterEngine
from pipeline.simulator.router import RouterSim

KEY = "sk-over-http-SECRET-42"


class _RouterHandler(BaseHTTPRequestHandler):
    """Hands every request to the server's RouterSim and writes back what it returns, chunk by chunk."""

    protocol_version = "HTTP/1.0"  # the connection closes after each answer, which ends an SSE body

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, headers, chunks = self.server.sim.handle(
            self.command, self.path, list(self.headers.items()), body
        )
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()

    do_GET = do_POST = _serve

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output clean


@pytest.fixture
def sim() -> RouterSim:
    return RouterSim()


@pytest.fixture
def router_url(sim: RouterSim) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RouterHandler)
    server.daemon_threads = True
    server.sim = sim
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def make_engine(router_url: str):
    engines: list[RouterEngine] = []

    def make(*, env: dict | None = None, sleeps: list | None = None, **settings) -> RouterEngine:
        given = {"base_url": router_url, "model": "test/model", "max_retries": 4, "timeout": 5, **settings}
        config = Router(**given)
        told = sleeps if sleeps is not None else []
        engine = RouterEngine(config, env=env or {}, sleep=told.append)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


def fail(engine: RouterEngine) -> HardError:
    with pytest.raises(HardError) as caught:
        engine.generate("# Green tea\nWrite 300 words about green tea.")
    return caught.value


def test_answer_comes_back_and_ledger_shows_what_was_asked(sim, make_engine):
    answer = make_engine().generate("# Green tea\nWrite about green tea.")
    assert answer.engine == "router" and answer.model == "test/model" and answer.markdown.strip()
    (request,) = sim.chat_requests()
    assert request["body"]["stream"] is False and request["body"]["model"] == "test/model"
    assert request["body"]["messages"] == [{"role": "user", "content": "# Green tea\nWrite about green tea."}]
    assert request["status"] == 200 and request["auth"] is False


def test_same_prompt_same_article(make_engine):
    engine = make_engine()
    assert engine.generate("Tea").markdown == engine.generate("Tea").markdown


def test_router_that_streams_anyway(sim, make_engine):
    sim.set(scenario="stream_always")
    streamed = make_engine().generate("Tea")
    sim.set(scenario="ok")
    plain = make_engine().generate("Tea")
    assert streamed.markdown == plain.markdown and streamed.extra["finish_reason"] == "stop"


def test_rate_limited_with_retry_after_then_success(sim, make_engine):
    sim.set(scenario="rate_limited", fail_times=1, retry_after=0.05)
    sleeps: list[float] = []
    answer = make_engine(sleeps=sleeps).generate("Tea")
    assert answer.markdown and sleeps == [0.05]
    assert [r["status"] for r in sim.chat_requests()] == [429, 200]


def test_upstream_503_three_times_then_success(sim, make_engine):
    sim.set(scenario="upstream_503", fail_times=3)
    sleeps: list[float] = []
    make_engine(sleeps=sleeps).generate("Tea")
    assert sleeps == [2, 2, 2]  # read from "(reset after 2s)": 9router sends no Retry-After here
    assert [r["status"] for r in sim.chat_requests()] == [503, 503, 503, 200]


def test_upstream_503_forever_gives_up_with_routers_message(sim, make_engine):
    sim.set(scenario="upstream_503", fail_times=1000)
    err = fail(make_engine(max_retries=2))
    assert err.code == "router_failed" and len(sim.chat_requests()) == 3
    assert (
        str(err)
        == "router: HTTP 503: [test/model] [500]: upstream error (reset after 2s) (gave up after 3 attempts)"
    )


@pytest.mark.parametrize(
    ("scenario", "code", "message"),
    [
        ("auth", "router_auth", "router: HTTP 401 invalid_api_key: Invalid API key; set ROUTER_API_KEY"),
        (
            "auth_string",
            "router_auth",
            "router: HTTP 401: API key required for remote API access; set ROUTER_API_KEY",
        ),
        ("quota", "router_quota", "router: HTTP 429 insufficient_quota: You exceeded your current quota"),
        ("bad_request", "router_bad_request", "router: HTTP 400 bad_request: Invalid request"),
        ("length", "router_cut_short", "router answer was cut short (finish_reason=length)"),
        ("empty_answer", "router_empty", "router returned an empty answer"),
    ],
)
def test_permanent_failures_are_not_retried(sim, make_engine, scenario, code, message):
    sim.set(scenario=scenario)
    sleeps: list[float] = []
    err = fail(make_engine(sleeps=sleeps))
    assert err.code == code and str(err).startswith(message)
    assert len(sim.chat_requests()) == 1 and sleeps == []


@pytest.mark.parametrize(
    "scenario, max_retries, message",
    [
        pytest.param(
            "html_error",
            1,
            "router: HTTP 502: 502 Bad Gateway 502 Bad Gateway nginx/1.25.3 (gave up after 2 attempts)",
            id="html_error_page_is_quoted_as_text",
        ),
        pytest.param(
            "empty_error",
            0,
            "router: HTTP 500 with an empty body (gave up after 1 attempt)",
            id="empty_error_body_is_named",
        ),
        pytest.param(
            "error_in_200",
            1,
            "router: HTTP 200 upstream_error: upstream failed (gave up after 2 attempts)",
            id="error_inside_200_forever_is_a_failure_not_an_article",
        ),
    ],
)
def test_an_error_the_router_keeps_giving_is_said_in_words(sim, make_engine, scenario, max_retries, message):
    sim.set(scenario=scenario)
    err = fail(make_engine(max_retries=max_retries))
    assert str(err) == message
    assert len(sim.chat_requests()) == max_retries + 1


def test_error_inside_200_is_retried(sim, make_engine):
    sim.set(scenario="error_in_200", fail_times=1)
    assert make_engine().generate("Tea").markdown
    assert len(sim.chat_requests()) == 2


def test_unknown_model_is_not_retried(sim, make_engine):
    err = fail(make_engine(model="nope/model"))
    assert err.code == "router_model" and "No active credentials for provider: nope" in str(err)
    assert len(sim.chat_requests()) == 1


def test_slow_router_times_out_with_the_setting_named(sim, make_engine):
    sim.set(scenario="slow", delay=0.6)
    err = fail(make_engine(timeout=0.2, max_retries=0))
    assert err.code == "router_failed" and "no answer within 0.2 s (router.timeout)" in str(err)


def test_slow_router_within_timeout_answers(sim, make_engine):
    sim.set(scenario="slow", delay=0.1)
    assert make_engine(timeout=5).generate("Tea").markdown


def test_required_key_missing_wrong_and_right(sim, make_engine):
    sim.set(api_key=KEY)
    missing = fail(make_engine())
    assert "Missing API key; set ROUTER_API_KEY (router.api_key_env)" in str(missing)
    wrong = fail(make_engine(env={"ROUTER_API_KEY": "sk-wrong"}))
    assert "Invalid API key; the key in ROUTER_API_KEY (router.api_key_env) was refused" in str(wrong)
    assert make_engine(env={"ROUTER_API_KEY": KEY}).generate("Tea").markdown
    assert [r["auth"] for r in sim.chat_requests()] == [False, True, True]


def test_bare_string_401_when_key_required(sim, make_engine):
    sim.set(api_key=KEY, auth_error_shape="string")
    err = fail(make_engine())
    assert str(err).startswith("router: HTTP 401: API key required for remote API access")


def test_health_against_the_simulator(sim, make_engine):
    report = make_engine(model="qwen/qwen3-max").health()
    assert report["reachable"] and report["health_ok"] and report["model_listed"]
    assert report["models"][:2] == ["writer-combo", "fast-combo"] and "test/model" in report["models"]
    assert [e["path"] for e in sim.ledger()] == ["/api/health", "/v1/models"]


def test_key_never_appears_in_any_output(sim, make_engine, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    sim.set(api_key=KEY)
    texts: list[str] = []
    env = {"ROUTER_API_KEY": KEY}
    for scenario in ("rate_limited", "upstream_503", "auth", "quota", "html_error", "empty_error", "length"):
        sim.set(scenario=scenario, retry_after=0.01)
        engine = make_engine(env=env, max_retries=1)
        texts.append(repr(engine))
        try:
            texts.append(repr(engine.generate("Tea")))
        except HardError as err:
            texts += [str(err), repr(err), repr(err.args)]
    texts.append(repr(make_engine(env=env).health()))
    captured = capsys.readouterr()
    texts += [captured.out, captured.err, caplog.text, repr(sim.ledger())]
    assert all(KEY not in text for text in texts)
    assert all(entry["auth"] for entry in sim.chat_requests())


# -- RouterSim on its own --------------------------------------------------------------------------------


def _chat_body(**fields) -> bytes:
    return json.dumps(
        {"model": "test/model", "messages": [{"role": "user", "content": "Tea"}], **fields}
    ).encode()


def test_sim_streams_when_stream_is_absent_and_sends_done_twice():
    status, headers, chunks = RouterSim().handle("POST", "/v1/chat/completions", [], _chat_body())
    text = b"".join(chunks).decode()
    assert status == 200 and ("Content-Type", "text/event-stream") in headers
    assert text.endswith("data: [DONE]\n\ndata: [DONE]\n\n") and '"finish_reason": "stop"' in text


def test_sim_lists_combos_first_and_answers_health():
    sim = RouterSim()
    _, _, chunks = sim.handle("GET", "/v1/models?x=1", [], b"")
    ids = [m["id"] for m in json.loads(b"".join(chunks))["data"]]
    assert ids[:2] == ["writer-combo", "fast-combo"] and {"qwen/qwen3-max", "test/model"} <= set(ids)
    assert sim.handle("GET", "/api/health", [], b"")[0] == 200
    assert [e["path"] for e in sim.ledger()] == ["/v1/models?x=1", "/api/health"]


def test_sim_missing_model_is_400_bad_request():
    status, _, chunks = RouterSim().handle("POST", "/v1/chat/completions", [], b'{"messages": []}')
    assert status == 400 and json.loads(b"".join(chunks))["error"]["code"] == "bad_request"


def test_sim_accepts_headers_as_a_dict_and_never_stores_the_key():
    sim = RouterSim(api_key=KEY)
    status, _, _ = sim.handle("POST", "/v1/chat/completions", {"x-api-key": KEY}, _chat_body(stream=False))
    assert status == 200 and sim.ledger()[0]["auth"] is True and KEY not in repr(sim.ledger())


def test_sim_rejects_unknown_settings_and_scenarios():
    with pytest.raises(ValueError):
        RouterSim().set(scenario="nope")
    with pytest.raises(ValueError):
        RouterSim().set(colour="red")


def test_sim_counts_failures_across_threads():
    sim = RouterSim(scenario="upstream_503", fail_times=5)
    statuses: list[int] = []

    def call() -> None:
        statuses.append(sim.handle("POST", "/v1/chat/completions", [], _chat_body(stream=False))[0])

    threads = [threading.Thread(target=call) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses).count(503) == 5 and statuses.count(200) == 15 and len(sim.ledger()) == 20
