"""RouterEngine against scripted responses (httpx.MockTransport) with an instant sleep."""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time

import httpx
import pytest

from pipeline.config import Router
from pipeline.engines.base import Answer, HardError
from pipeline.engines.router import RouterEngine, read_sse
from pipeline.engines.router_errors import announced_wait, parse_error_body, reset_after_seconds

BASE = "http://router.test/v1"
SETTINGS = {"base_url": BASE, "model": "qwen/qwen3-max", "max_retries": 4, "max_retry_wait": 300}
KEY = "sk-test-SECRET-0123456789"


class Script:
    """A MockTransport handler: answers with `responses` in order (the last one repeats), records requests."""

    def __init__(self, *responses):
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.responses[min(len(self.requests), len(self.responses)) - 1]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def body(self, index: int = 0) -> dict:
        return json.loads(self.requests[index].content)


class UpperBound(random.Random):
    """Full jitter drawn at its ceiling, so the backoff schedule is visible."""

    def uniform(self, a: float, b: float) -> float:
        return b


def completion(content="# Title\n\nBody of the article.", finish="stop", model="qwen/qwen3-max"):
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
    data = {"id": "c1", "object": "chat.completion", "model": model, "choices": [choice]}
    if model is None:
        del data["model"]
    return httpx.Response(200, json=data)


def error(status, message="boom", type_=None, code=None, headers=None):
    err = {"message": message}
    if type_:
        err["type"] = type_
    if code:
        err["code"] = code
    return httpx.Response(status, json={"error": err}, headers=headers)


def sse(*events, done_times=2, content_type="text/event-stream"):
    lines = [f"data: {json.dumps(e)}\n\n" for e in events] + ["data: [DONE]\n\n"] * done_times
    headers = {"content-type": content_type} if content_type else {}
    return httpx.Response(200, content="".join(lines).encode(), headers=headers)


def chunk(content=None, finish=None, model="test/model"):
    delta = {} if content is None else {"content": content}
    return {
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def make(script, *, env=None, rng=None, on_retry=None, **settings):
    sleeps: list[float] = []
    engine = RouterEngine(
        Router(**{**SETTINGS, **settings}),
        env={} if env is None else env,
        sleep=sleeps.append,
        transport=httpx.MockTransport(script),
        on_retry=on_retry,
        rng=rng,
    )
    return engine, sleeps


def fail(engine, text="Write about tea") -> HardError:
    with pytest.raises(HardError) as caught:
        engine.generate(text)
    return caught.value


# -- the request ----------------------------------------------------------------------------------


def test_posts_non_streaming_chat_completion_with_json_accept():
    script = Script(completion())
    engine, _ = make(script)
    engine.generate("Write about tea")
    request = script.requests[0]
    assert request.method == "POST" and str(request.url) == f"{BASE}/chat/completions"
    assert script.body() == {
        "model": "qwen/qwen3-max",
        "messages": [{"role": "user", "content": "Write about tea"}],
        "stream": False,
    }
    assert request.headers["accept"] == "application/json"
    assert "authorization" not in request.headers


def test_sends_bearer_key_from_named_env_var():
    script = Script(completion())
    engine, _ = make(script, env={"MY_ROUTER_KEY": KEY}, api_key_env="MY_ROUTER_KEY")
    engine.generate("x")
    assert script.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_timeouts_split_connect_and_read():
    engine, _ = make(Script(completion()), timeout=600, connect_timeout=10)
    t = engine._client.timeout
    assert (t.connect, t.read, t.write, t.pool) == (10, 600, 30, 30)


def test_answer_names_the_model_the_router_used():
    engine, _ = make(Script(completion(model="writer-combo/qwen3")))
    answer = engine.generate("x")
    assert answer == Answer(
        markdown="# Title\n\nBody of the article.",
        engine="router",
        title=None,
        model="writer-combo/qwen3",
        extra={"finish_reason": "stop"},
    )


def test_answer_falls_back_to_configured_model():
    engine, _ = make(Script(completion(model=None)))
    assert engine.generate("x").model == "qwen/qwen3-max"


def test_content_given_as_parts_is_joined():
    engine, _ = make(
        Script(completion(content=[{"type": "text", "text": "# A"}, {"type": "text", "text": "\n\nB"}]))
    )
    assert engine.generate("x").markdown == "# A\n\nB"


# -- SSE even though we asked for JSON --------------------------------------------------------------


def test_sse_answer_is_collected_until_done_sent_twice():
    script = Script(sse(chunk("# Ti"), chunk("tle\n\nBody"), chunk(finish="stop")))
    engine, _ = make(script)
    answer = engine.generate("x")
    assert answer.markdown == "# Title\n\nBody" and answer.model == "test/model"
    assert answer.extra["finish_reason"] == "stop" and len(script.requests) == 1


def test_sse_without_content_type_is_recognised_by_body():
    engine, _ = make(Script(sse(chunk("Hello"), chunk(finish="stop"), content_type="application/json")))
    assert engine.generate("x").markdown == "Hello"


def test_sse_stops_at_first_done():
    body = (
        "data: "
        + json.dumps(chunk("A", "stop"))
        + "\n\ndata: [DONE]\n\ndata: "
        + json.dumps(chunk("B"))
        + "\n\n"
    )
    events, done = read_sse(body + "data: [DONE]\n\n")
    assert done and [e["choices"][0]["delta"]["content"] for e in events] == ["A"]


def test_sse_length_finish_from_last_chunk_is_hard():
    engine, _ = make(Script(sse(chunk("Half an artic"), chunk(finish="length"))))
    err = fail(engine)
    assert err.code == "router_cut_short" and "finish_reason=length" in str(err)


def test_sse_error_event_is_classified():
    engine, _ = make(Script(sse({"error": {"message": "usage limit reached", "code": "limit"}})))
    assert fail(engine).code == "router_quota"


def test_sse_cut_before_done_is_retried():
    cut = sse(chunk("Half"), done_times=0)
    script = Script(cut, sse(chunk("Whole"), chunk(finish="stop")))
    engine, sleeps = make(script)
    assert engine.generate("x").markdown == "Whole" and len(sleeps) == 1


# -- error bodies: one line quoting the router --------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            error(400, "Missing model", "invalid_request_error", "bad_request"),
            "router: HTTP 400 bad_request: Missing model",
        ),
        (
            error(400, "[test/model] [400]: bad things (reset after 30s)"),
            "router: HTTP 400: [test/model] [400]: bad things (reset after 30s)",
        ),
        (httpx.Response(400, json={"error": "bare string problem"}), "router: HTTP 400: bare string problem"),
        (
            httpx.Response(400, json={"detail": "FastAPI-style detail"}),
            "router: HTTP 400: FastAPI-style detail",
        ),
        (httpx.Response(400, text="plain\n  text   error"), "router: HTTP 400: plain text error"),
        (httpx.Response(400, text=""), "router: HTTP 400 with an empty body"),
    ],
)
def test_error_body_shapes_give_one_line(response, expected):
    engine, _ = make(Script(response))
    err = fail(engine)
    assert str(err) == expected and err.code == "router_bad_request"


def test_html_error_is_stripped_and_cut():
    page = (
        "<html><head><title>502 Bad Gateway</title><style>p{color:red}</style><script>var x=1</script>"
        "</head><body><h1>Bad&nbsp;Gateway</h1><p>" + "very long text " * 50 + "</p></body></html>"
    )
    engine, _ = make(
        Script(httpx.Response(502, text=page, headers={"content-type": "text/html"})), max_retries=0
    )
    err = fail(engine)
    message = str(err)
    assert message.startswith("router: HTTP 502: 502 Bad Gateway Bad Gateway very long text")
    assert "<" not in message and "color" not in message and "var x" not in message and "\n" not in message
    assert len(message) < 300 and err.code == "router_failed"


def test_empty_error_body_says_so():
    engine, _ = make(Script(httpx.Response(502)), max_retries=0)
    assert str(fail(engine)).startswith("router: HTTP 502 with an empty body")


def test_numeric_error_code_is_kept():
    assert parse_error_body(b'{"error": {"message": "slow down", "code": 429}}').code == "429"


# -- status classes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "router_bad_request"),
        (401, "router_auth"),
        (403, "router_auth"),
        (404, "router_model"),
        (422, "router_bad_request"),
        (405, "router_rejected"),
    ],
)
def test_client_errors_are_not_retried(status, code):
    script = Script(error(status, "model said no", code="some_code"))
    engine, sleeps = make(script)
    err = fail(engine)
    assert err.code == code and len(script.requests) == 1 and sleeps == []
    assert f"router: HTTP {status} some_code: model said no" in str(err)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_retryable_statuses_are_retried_max_retries_times(status):
    script = Script(error(status, "busy"), error(status, "still busy"))
    engine, sleeps = make(script, max_retries=3)
    err = fail(engine)
    assert len(script.requests) == 4 and len(sleeps) == 3
    assert err.code == "router_failed"
    assert str(err) == f"router: HTTP {status}: still busy (gave up after 4 attempts)"


def test_zero_retries_means_one_request():
    script = Script(error(503, "busy"))
    engine, _ = make(script, max_retries=0)
    fail(engine)
    assert len(script.requests) == 1


def test_retry_then_success_returns_the_answer():
    script = Script(error(429, "slow down"), completion())
    engine, sleeps = make(script)
    assert engine.generate("x").markdown.startswith("# Title") and len(sleeps) == 1


@pytest.mark.parametrize(
    "response",
    [
        error(429, "You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
        error(429, "weird", code="insufficient_quota"),
        error(429, "Daily usage limit reached for this account"),
        error(503, "[gemini/pro] [429]: Resource exhausted, check quota (reset after 2m)"),
        httpx.Response(429, json={"error": "Quota exceeded"}),
    ],
)
def test_quota_is_never_retried(response):
    script = Script(response)
    engine, sleeps = make(script)
    err = fail(engine)
    assert err.code == "router_quota" and len(script.requests) == 1 and sleeps == []


def test_unknown_model_says_which_model_is_configured():
    body = error(404, "No active credentials for provider: nope", "invalid_request_error", "model_not_found")
    err = fail(make(Script(body))[0])
    assert err.code == "router_model"
    assert "No active credentials for provider: nope" in str(err) and "'qwen/qwen3-max'" in str(err)


def test_404_page_points_at_base_url():
    err = fail(make(Script(httpx.Response(404, text="<h1>Not Found</h1>")))[0])
    assert err.code == "router_not_found" and "router.base_url" in str(err)


def test_401_without_key_says_which_variable_to_set():
    err = fail(make(Script(error(401, "Missing API key", "authentication_error", "invalid_api_key")))[0])
    assert str(err) == (
        "router: HTTP 401 invalid_api_key: Missing API key; set ROUTER_API_KEY (router.api_key_env), "
        "or router.api_key_file under cron"
    )
    assert err.code == "router_auth"


def test_401_with_key_says_it_was_refused():
    err = fail(
        make(Script(error(401, "Invalid API key", code="invalid_api_key")), env={"ROUTER_API_KEY": KEY})[0]
    )
    assert "the key in ROUTER_API_KEY (router.api_key_env) was refused" in str(err)


def test_bare_string_401():
    response = httpx.Response(401, json={"error": "API key required for remote API access"})
    err = fail(make(Script(response))[0])
    assert str(err).startswith("router: HTTP 401: API key required for remote API access; set ROUTER_API_KEY")


def test_connection_errors_are_retried_then_reported():
    script = Script(httpx.ConnectError("[Errno 111] Connection refused"))
    engine, sleeps = make(script, max_retries=2)
    err = fail(engine)
    assert len(script.requests) == 3 and len(sleeps) == 2 and err.code == "router_failed"
    assert str(err) == (
        f"router: cannot reach {BASE} (ConnectError: [Errno 111] Connection refused) "
        "(gave up after 3 attempts)"
    )


def test_read_timeout_is_retried_and_names_the_setting():
    script = Script(httpx.ReadTimeout("timed out"), completion())
    engine, sleeps = make(script, timeout=600)
    assert engine.generate("x").engine == "router" and len(sleeps) == 1
    err = fail(make(Script(httpx.ReadTimeout("timed out")), max_retries=0)[0])
    assert str(err) == "router: no answer within 600 s (router.timeout) (gave up after 1 attempt)"


def test_connect_timeout_names_the_setting():
    err = fail(make(Script(httpx.ConnectTimeout("slow")), max_retries=0, connect_timeout=10)[0])
    assert "within 10 s (router.connect_timeout)" in str(err)


# -- waits ----------------------------------------------------------------------------------------------


def test_retry_after_seconds_is_honoured():
    engine, sleeps = make(Script(error(429, "slow", headers={"Retry-After": "7"}), completion()))
    engine.generate("x")
    assert sleeps == [7]


def test_retry_after_ms_wins_over_retry_after():
    response = error(429, "slow (reset after 30s)", headers={"retry-after-ms": "1500", "Retry-After": "7"})
    engine, sleeps = make(Script(response, completion()))
    engine.generate("x")
    assert sleeps == [1.5]


def test_retry_after_http_date_is_honoured():
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    engine, sleeps = make(Script(error(503, "later", headers={"Retry-After": when}), completion()))
    engine.generate("x")
    assert 115 <= sleeps[0] <= 121


def test_retry_after_date_in_the_past_means_no_wait():
    assert announced_wait(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0


def test_unusable_retry_after_falls_back_to_message_hint():
    headers = httpx.Headers({"Retry-After": "soon"})
    assert announced_wait(headers, "x (reset after 30s)") == 30


@pytest.mark.parametrize(
    ("message", "seconds"),
    [
        ("[a/b] [500]: oops (reset after 2m 30s)", 150),
        ("(reset after 30s)", 30),
        ("(reset after 2s)", 2),
        ("(reset after 1h 2m)", 3720),
        ("(reset after 500ms)", 0.5),
        ("no hint here", None),
    ],
)
def test_reset_after_in_message(message, seconds):
    assert reset_after_seconds(message) == seconds


def test_reset_after_in_message_is_used_when_no_header():
    message = "[test/model] [500]: upstream error (reset after 2m 30s)"
    engine, sleeps = make(Script(error(503, message), completion()))
    engine.generate("x")
    assert sleeps == [150]


def test_announced_waits_are_capped():
    long_header = error(429, "slow", headers={"Retry-After": "1000"})
    long_message = error(503, "x (reset after 2m 30s)")
    engine, sleeps = make(Script(long_header, long_message, completion()), max_retry_wait=60)
    engine.generate("x")
    assert sleeps == [60, 60]


def test_backoff_doubles_from_one_second_with_cap():
    engine, sleeps = make(Script(error(500, "x")), rng=UpperBound(), max_retries=5, max_retry_wait=5)
    fail(engine)
    assert sleeps == [1, 2, 4, 5, 5]


def test_backoff_has_full_jitter_within_bounds():
    engine, sleeps = make(Script(error(500, "x")), rng=random.Random(7), max_retries=6, max_retry_wait=300)
    fail(engine)
    assert len(sleeps) == 6
    assert all(0 <= wait <= 2**i for i, wait in enumerate(sleeps))
    assert len(set(sleeps)) > 1  # jittered, not a fixed schedule


def test_on_retry_is_told_how_long():
    told: list[str] = []
    engine, _ = make(
        Script(error(429, "busy", headers={"Retry-After": "4"}), completion()), on_retry=told.append
    )
    engine.generate("x")
    assert told == ["router: HTTP 429: busy; retrying in 4 s (retry 1 of 4)"]


# -- HTTP 200 that is not an article ---------------------------------------------------------------------


def test_error_inside_200_is_retried_then_succeeds():
    script = Script(
        httpx.Response(200, json={"error": {"message": "upstream failed", "code": "upstream_error"}}),
        completion(),
    )
    engine, sleeps = make(script)
    assert engine.generate("x").markdown.startswith("# Title") and len(sleeps) == 1


def test_error_inside_200_gives_up_with_its_message():
    body = {"error": {"message": "upstream failed", "code": "upstream_error"}}
    engine, _ = make(Script(httpx.Response(200, json=body)), max_retries=1)
    err = fail(engine)
    assert err.code == "router_failed"
    assert str(err) == "router: HTTP 200 upstream_error: upstream failed (gave up after 2 attempts)"


@pytest.mark.parametrize(
    ("error_body", "code"),
    [
        ({"message": "monthly quota exhausted"}, "router_quota"),
        ({"message": "Invalid API key"}, "router_auth"),
        ("bare quota string", "router_quota"),
    ],
)
def test_error_inside_200_about_quota_or_auth_is_not_retried(error_body, code):
    script = Script(httpx.Response(200, json={"error": error_body}))
    engine, _ = make(script)
    assert fail(engine).code == code and len(script.requests) == 1


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, json={"id": "x", "object": "chat.completion", "choices": []}),
        httpx.Response(200, json={"id": "x"}),
        completion(content=""),
        completion(content="  \n\t "),
        completion(content=None),
    ],
)
def test_empty_answer_is_hard(response):
    script = Script(response)
    err = fail(make(script)[0])
    assert str(err) == "router returned an empty answer" and err.code == "router_empty"
    assert len(script.requests) == 1


def test_length_finish_is_hard_even_with_content():
    err = fail(make(Script(completion(content="# Half an", finish="length")))[0])
    assert str(err) == "router answer was cut short (finish_reason=length)" and err.code == "router_cut_short"


def test_content_filter_is_hard():
    err = fail(make(Script(completion(content="", finish="content_filter")))[0])
    assert err.code == "router_content_filter"


def test_200_that_is_not_json_is_hard():
    err = fail(make(Script(httpx.Response(200, text="<html><body>Login</body></html>")))[0])
    assert err.code == "router_bad_response" and "Login" in str(err)


# -- the key stays secret ------------------------------------------------------------------------------------


def test_key_is_not_in_repr():
    engine, _ = make(Script(completion()), env={"ROUTER_API_KEY": KEY})
    assert KEY not in repr(engine) and "key=<set>" in repr(engine)
    assert KEY not in repr(vars(engine))


def test_echoed_key_is_redacted_everywhere(caplog):
    told: list[str] = []
    echo = f"Invalid key {KEY} for Bearer {KEY}"
    script = Script(error(503, echo, headers={"Retry-After": "1"}), error(401, echo, code="invalid_api_key"))
    engine, _ = make(script, env={"ROUTER_API_KEY": KEY}, on_retry=told.append)
    with caplog.at_level(logging.DEBUG):
        err = fail(engine)
    assert script.requests[0].headers["authorization"] == f"Bearer {KEY}"
    texts = [str(err), repr(err), *err.args, *told, caplog.text, *(r.getMessage() for r in caplog.records)]
    assert all(KEY not in text for text in texts)
    assert "[REDACTED]" in str(err) and "[REDACTED]" in told[0]
    assert err.__cause__ is None and err.__context__ is None


def test_echoed_key_in_final_retry_message_is_redacted():
    engine, _ = make(Script(error(500, f"bad key {KEY}")), env={"ROUTER_API_KEY": KEY}, max_retries=1)
    assert KEY not in str(fail(engine))


# -- health --------------------------------------------------------------------------------------------------


def test_health_reports_reachable_and_listed_model():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/health":
            return httpx.Response(200, json={"ok": True})
        assert request.url.path == "/v1/models"
        return httpx.Response(
            200, json={"object": "list", "data": [{"id": "combo"}, {"id": "qwen/qwen3-max"}]}
        )

    report = make(handler)[0].health()
    assert report["reachable"] and report["health_ok"] and report["model_listed"]
    assert report["models"] == ["combo", "qwen/qwen3-max"] and report["error"] is None


def test_health_reports_unlisted_model_and_missing_health_route():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/health":
            return httpx.Response(404, text="not here")
        return httpx.Response(200, json={"data": [{"id": "other"}]})

    report = make(handler)[0].health()
    assert report["reachable"] and report["health_ok"] is False and report["model_listed"] is False


def test_health_reports_auth_failure_on_models():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/health":
            return httpx.Response(200, json={"ok": True})
        return httpx.Response(401, json={"error": "API key required for remote API access"})

    report = make(handler)[0].health()
    assert report["models_status"] == 401 and "set ROUTER_API_KEY" in report["error"]
    assert report["model_listed"] is None


def test_health_of_unreachable_router():
    report = make(Script(httpx.ConnectError("refused")))[0].health()
    assert report["reachable"] is False and "cannot reach" in report["error"]
