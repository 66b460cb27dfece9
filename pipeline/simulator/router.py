"""The router side of the simulator: an OpenAI-compatible endpoint that behaves like 9router.

Pure Python and no sockets: the simulator's HTTP server hands every request to
`RouterSim.handle` and writes back what it returns. It follows docs/qwen-site.md ("The router")
(streams unless `"stream": false`, `data: [DONE]` twice, the uneven error bodies, 503 with
"(reset after Ns)") and keeps a ledger so tests can count requests and read their bodies.

Scenarios (`set(scenario=NAME)`); the failing ones fail `fail_times` times, then answer:
  ok, rate_limited (429 + Retry-After), upstream_503 (503, wait only in the message), quota
  (429 insufficient_quota), auth (401 object), auth_string (401 bare string), bad_request
  (400), html_error (502 HTML), empty_error (500, empty body), error_in_200, empty_answer,
  length, stream_always (SSE even with "stream": false), slow (waits `delay` s, then answers),
  echo_key (401 on /v1/models and chat, quoting the presented key back, as some routers do;
  `echo_form` says how: whole, from_second, last12, middle, urlencoded, base64 (a Basic
  credential `user:KEY`)), answer_key (200: the article, then a line quoting the presented key).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

Response = tuple[int, list[tuple[str, str]], Iterable[bytes]]

COMBOS = ["writer-combo", "fast-combo"]
MODELS = ["qwen/qwen3-max", "qwen/qwen3-coder-plus", "test/model", "openai/gpt-4o-mini"]

# Scenarios that recover after `fail_times` failures by default; the rest fail every time.
RECOVERING = {"rate_limited": 1, "upstream_503": 1}
ALWAYS = 1000
SCENARIOS = {
    "ok",
    "rate_limited",
    "upstream_503",
    "quota",
    "auth",
    "auth_string",
    "bad_request",
    "html_error",
    "empty_error",
    "error_in_200",
    "empty_answer",
    "length",
    "stream_always",
    "slow",
    "echo_key",
    "answer_key",
}
# Scenarios that change the answer rather than replace it with an error.
ANSWER_SHAPES = {"ok", "empty_answer", "length", "stream_always", "slow", "answer_key"}
# How echo_key quotes the key it was given (routers quote it cut, encoded, or in part).
ECHO_FORMS = {
    "whole": lambda key: key,
    "from_second": lambda key: key[1:],
    "last12": lambda key: key[-12:],
    "middle": lambda key: key[len(key) // 4 : len(key) * 3 // 4],
    "urlencoded": lambda key: quote(key, safe=""),
    "base64": lambda key: base64.b64encode(f"user:{key}".encode()).decode(),
}

_HTML_502 = (
    "<html><head><title>502 Bad Gateway</title><style>body{font-family:sans}</style></head>"
    "<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx/1.25.3</center></body></html>"
)


class RouterSim:
    """A 9router replica: `handle` one request, `set` the behaviour, read the `ledger`. Thread-safe."""

    def __init__(self, **settings: Any):
        self._lock = threading.Lock()
        self._ledger: list[dict] = []
        self.scenario = "ok"
        self.fail_times = ALWAYS
        self.retry_after: float = 2
        self.delay: float = 3.0
        self.api_key: str | None = None
        self.auth_error_shape = "object"
        self.echo_form = "whole"
        self.models = [*COMBOS, *MODELS]
        self._failures = 0
        if settings:
            self.set(**settings)

    # -- control -------------------------------------------------------------------------------

    def set(self, **kw: Any) -> None:
        """Change behaviour: scenario, fail_times, retry_after, delay, api_key, auth_error_shape,
        echo_form, models.

        Setting a scenario restarts its failure count; `fail_times` defaults to 1 for
        rate_limited / upstream_503 and to 1000 (always) for the others. Raises ValueError on
        an unknown name.
        """
        unknown = set(kw) - {
            "scenario",
            "fail_times",
            "retry_after",
            "delay",
            "api_key",
            "auth_error_shape",
            "echo_form",
            "models",
        }
        if unknown:
            raise ValueError(f"RouterSim.set: unknown setting(s) {', '.join(sorted(unknown))}")
        scenario = kw.get("scenario")
        if scenario is not None and scenario not in SCENARIOS:
            raise ValueError(
                f"RouterSim: unknown scenario {scenario!r} (known: {', '.join(sorted(SCENARIOS))})"
            )
        if kw.get("auth_error_shape", "object") not in ("object", "string"):
            raise ValueError("RouterSim: auth_error_shape must be 'object' or 'string'")
        if kw.get("echo_form", "whole") not in ECHO_FORMS:
            raise ValueError(f"RouterSim: echo_form must be one of {', '.join(ECHO_FORMS)}")
        with self._lock:
            if scenario is not None:
                self.scenario = scenario
                self.fail_times = RECOVERING.get(scenario, ALWAYS)
                self._failures = 0
            if "fail_times" in kw:
                self.fail_times = int(kw["fail_times"])
                self._failures = 0
            for name in ("retry_after", "delay", "api_key", "auth_error_shape", "echo_form"):
                if name in kw:
                    setattr(self, name, kw[name])
            if "models" in kw:
                self.models = list(kw["models"])

    def reset(self) -> None:
        """Back to a healthy router with an empty ledger."""
        with self._lock:
            self._ledger.clear()
        self.set(
            scenario="ok",
            retry_after=2,
            delay=3.0,
            api_key=None,
            auth_error_shape="object",
            echo_form="whole",
            models=[*COMBOS, *MODELS],
        )

    def ledger(self) -> list[dict]:
        """One dict per request: time, method, path, body (parsed JSON or None), status, scenario, auth."""
        with self._lock:
            return [dict(entry) for entry in self._ledger]

    def chat_requests(self) -> list[dict]:
        """The ledger's POST /v1/chat/completions entries (what a test counts as sends)."""
        return [
            e for e in self.ledger() if e["method"] == "POST" and e["path"].startswith("/v1/chat/completions")
        ]

    # -- requests ------------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, headers: list[tuple[str, str]] | Mapping[str, str], body: bytes
    ) -> Response:
        """Answer one HTTP request; `path` may carry a query; `headers` are (name, value) pairs or a dict.

        Returns (status, headers, body chunks).
        """
        if isinstance(headers, Mapping):  # the shared server passes a dict; the spec says pairs
            headers = list(headers.items())
        with self._lock:
            scenario = self.scenario
        body_json = _parse_json(body)
        status, out_headers, chunks = self._route(method.upper(), urlsplit(path).path, headers, body_json)
        with self._lock:
            self._ledger.append(
                {
                    "time": time.time(),
                    "method": method.upper(),
                    "path": path,
                    "body": body_json if isinstance(body_json, (dict, list)) else None,
                    "status": status,
                    "scenario": scenario,
                    "auth": _has_credentials(headers),
                }
            )
        return status, out_headers, chunks

    def _route(self, method: str, path: str, headers: list[tuple[str, str]], body_json: Any) -> Response:
        route = path.rstrip("/")
        if route == "/api/health" and method == "GET":
            return _json(200, {"ok": True})
        if route in ("/v1/models", "/v1/chat/completions"):
            refused = self._check_key(headers) or self._echo_key(route, headers)
            if refused:
                return refused
            if route == "/v1/models" and method == "GET":
                return _json(200, self._model_list())
            if route == "/v1/chat/completions" and method == "POST":
                return self._chat(body_json, _presented_key(headers) or "")
            return _error(405, f"Method {method} not allowed", "invalid_request_error", "method_not_allowed")
        return _error(404, f"Not found: {path}", "invalid_request_error", "not_found")

    def _check_key(self, headers: list[tuple[str, str]]) -> Response | None:
        if not self.api_key:
            return None
        given = _presented_key(headers)
        if given == self.api_key:
            return None
        if self.auth_error_shape == "string":
            return _json(401, {"error": "API key required for remote API access"})
        return _error(
            401, "Invalid API key" if given else "Missing API key", "authentication_error", "invalid_api_key"
        )

    def _echo_key(self, route: str, headers: list[tuple[str, str]]) -> Response | None:
        """echo_key: refuse whatever key came, and quote it in full (only chat requests count
        as failures, so `fail_times` means the same as in the other scenarios)."""
        with self._lock:
            if self.scenario != "echo_key" or self._failures >= self.fail_times:
                return None
            if route == "/v1/chat/completions":
                self._failures += 1
        given = ECHO_FORMS[self.echo_form](_presented_key(headers) or "(none)")
        return _error(401, f"Invalid API key provided: {given}", "authentication_error", "invalid_api_key")

    def _model_list(self) -> dict:
        owner = {m: "combo" if m in COMBOS else m.split("/", 1)[0] for m in self.models}
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "created": 0, "owned_by": owner[m]} for m in self.models],
        }

    def _chat(self, body: Any, key: str = "") -> Response:
        if not isinstance(body, dict):
            return _error(400, "Invalid JSON body", "invalid_request_error", "bad_request")
        model = body.get("model")
        if not model:
            return _error(400, "Missing model", "invalid_request_error", "bad_request")
        if model not in self.models:
            provider = str(model).split("/", 1)[0]
            return _error(
                404,
                f"No active credentials for provider: {provider}",
                "invalid_request_error",
                "model_not_found",
            )
        with self._lock:
            scenario = self.scenario
            failing = self._failures < self.fail_times
            if failing:
                self._failures += 1
            retry_after, delay = self.retry_after, self.delay
        if scenario not in ANSWER_SHAPES and failing:
            return self._failure(scenario, model, retry_after)
        if scenario == "slow":
            time.sleep(delay)
        shape = scenario if failing else "ok"
        content = "" if shape == "empty_answer" else _answer(_prompt_of(body))
        if scenario == "answer_key":  # every time: an answer, not a failure to recover from
            content += f"\n\nDebug: this answer was requested with the API key {key}.\n"
        finish = "stop"
        if shape == "length":
            content, finish = content[: max(len(content) // 3, 1)], "length"
        if body.get("stream", True) is not False or shape == "stream_always":
            return _sse(model, content, finish)
        return _json(200, _completion(model, content, finish))

    def _failure(self, scenario: str, model: str, retry_after: float) -> Response:
        if scenario == "rate_limited":
            message = f"[{model}] All accounts rate limited (reset after {_duration(retry_after)})"
            return _json(429, {"error": {"message": message}}, [("Retry-After", _number(retry_after))])
        if scenario == "upstream_503":
            message = f"[{model}] [500]: upstream error (reset after {_duration(retry_after)})"
            return _json(503, {"error": {"message": message}})
        if scenario == "quota":
            return _error(429, "You exceeded your current quota", "insufficient_quota", "insufficient_quota")
        if scenario == "auth":
            return _error(401, "Invalid API key", "authentication_error", "invalid_api_key")
        if scenario == "auth_string":
            return _json(401, {"error": "API key required for remote API access"})
        if scenario == "bad_request":
            return _error(
                400,
                "Invalid request: messages must be a non-empty array",
                "invalid_request_error",
                "bad_request",
            )
        if scenario == "html_error":
            return (
                502,
                [("Content-Type", "text/html"), ("Content-Length", str(len(_HTML_502)))],
                [_HTML_502.encode()],
            )
        if scenario == "empty_error":
            return 500, [("Content-Length", "0")], [b""]
        if scenario == "error_in_200":
            return _json(200, {"error": {"message": "upstream failed", "code": "upstream_error"}})
        raise AssertionError(f"no failure for scenario {scenario}")


# -- bodies ------------------------------------------------------------------------------------


def _answer(prompt: str) -> str:
    """The article for `prompt`: the shared simulator's answer_for when it exists, else our own."""
    try:
        from .answers import answer_for
    except ImportError:
        return fallback_answer(prompt)
    return answer_for(prompt, 1)  # same prompt, same article: a router has no chat history


def fallback_answer(prompt: str) -> str:
    """A deterministic markdown article derived from the prompt (same prompt, same article)."""
    first_line = next((line.strip("# ").strip() for line in prompt.splitlines() if line.strip()), "Untitled")
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    return (
        f"# {first_line[:80]}\n\n"
        f"This article answers the prompt (fingerprint {digest}).\n\n"
        "## Why it matters\n\nA simulated router wrote this so tests can run without a real model.\n\n"
        "## In short\n\n- It is deterministic.\n- It is markdown.\n"
    )


def _prompt_of(body: dict) -> str:
    messages = body.get("messages") or []
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    last = users[-1] if users else ""
    return last if isinstance(last, str) else json.dumps(last)


def _completion(model: str, content: str, finish: str) -> dict:
    return {
        "id": f"chatcmpl-sim{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
        ],
        # 9router reports its own token counts, not the upstream's: never rely on them.
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _sse(model: str, content: str, finish: str) -> Response:
    created = int(time.time())

    def chunk(delta: dict, finish_reason: str | None) -> bytes:
        event = {
            "id": f"chatcmpl-sim{created}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        return f"data: {json.dumps(event)}\n\n".encode()

    pieces = [chunk({"role": "assistant", "content": ""}, None)]
    pieces += [chunk({"content": part}, None) for part in _split(content)]
    pieces += [chunk({}, finish), b"data: [DONE]\n\n", b"data: [DONE]\n\n"]  # 9router sends it twice
    return 200, [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")], pieces


def _split(text: str, size: int = 40) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _json(status: int, data: Any, extra: list[tuple[str, str]] | None = None) -> Response:
    payload = json.dumps(data).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload))), *(extra or [])]
    return status, headers, [payload]


def _error(status: int, message: str, type_: str, code: str) -> Response:
    return _json(status, {"error": {"message": message, "type": type_, "code": code}})


def _parse_json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((value for key, value in headers if key.lower() == name), None)


def _has_credentials(headers: list[tuple[str, str]]) -> bool:
    return bool(_header(headers, "authorization") or _header(headers, "x-api-key"))


def _presented_key(headers: list[tuple[str, str]]) -> str | None:
    auth = _header(headers, "authorization") or ""
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return _header(headers, "x-api-key")


def _number(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def _duration(seconds: float) -> str:
    """9router's way of writing a wait: "30s", "2m 30s"."""
    if seconds >= 60 and float(seconds).is_integer():
        minutes, rest = divmod(int(seconds), 60)
        return f"{minutes}m {rest}s" if rest else f"{minutes}m"
    return f"{_number(seconds)}s"
