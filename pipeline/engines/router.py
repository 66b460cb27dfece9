"""The router engine: one article from an OpenAI-compatible endpoint (9router, LiteLLM, OpenRouter).

It is the fallback when the chat fails hard, so it must either return a complete article or
raise HardError with a line that quotes the router; it never returns a cut or empty answer.
The quirks it copes with are in docs/qwen-site.md ("The router"): 9router streams unless told
`"stream": false`, its error bodies come in several shapes, some failures arrive as HTTP 200,
and after a failure it locks the model for the time it announces.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import httpx

from ..redact import mask
from .base import Answer, Code, HardError
from .router_errors import (
    RouterFailure,
    classify_error_in_ok,
    classify_status,
    error_from_json,
    one_line,
    parse_error_body,
)

if TYPE_CHECKING:  # the section's type only: engines do not import the config
    from ..config import Router

log = logging.getLogger(__name__)

BACKOFF_BASE = 1.0  # seconds before the first unannounced retry; doubles each time


class _Secret:
    """Holds the API key so that no repr, traceback local or debug dump can show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None):
        self._value = value or None

    def reveal(self) -> str | None:
        return self._value

    def __bool__(self) -> bool:
        return self._value is not None

    def __repr__(self) -> str:
        return "<set>" if self._value else "<not set>"


class RouterEngine:
    """base.DirectEngine over `POST {base_url}/chat/completions`, with retries the SDK way.

    `settings` is the [router] section (pipeline.config.Router). The key is read from the
    environment variable named by `api_key_env` in `env` (default os.environ) and registered
    with pipeline.redact, so that no message, log line, file or repr can show it. `sleep`,
    `transport` and `rng` exist so tests run instantly; `on_retry(message)` is told before each wait.
    """

    name = "router"

    def __init__(
        self,
        settings: Router,
        *,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
        on_retry: Callable[[str], None] | None = None,
        rng: random.Random | None = None,
    ):
        self.base_url = settings.base_url.rstrip("/")
        self.model = settings.model
        self.api_key_env = settings.api_key_env
        self.max_retries = settings.max_retries
        self.max_retry_wait = float(settings.max_retry_wait)
        # Imported here: the engines load without the config (known_secrets reads it).
        from ..known_secrets import router_key_found

        found = router_key_found(settings, env)  # registered: every sink masks it from now on
        self._key = _Secret(found.value)
        self.key_source = found.source  # what a refusal names: the variable, or the key file
        self._sleep = sleep
        self._on_retry = on_retry
        self._random = rng or random.Random()
        timeout = httpx.Timeout(connect=settings.connect_timeout, read=settings.timeout, write=30, pool=30)
        # A loopback router must not go through the HTTP_PROXY a user set for the outside world.
        trust_env = not _is_loopback(self.base_url)
        self._client = httpx.Client(timeout=timeout, transport=transport, trust_env=trust_env)

    def __repr__(self) -> str:
        return (
            f"RouterEngine(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key_env={self.api_key_env!r}, key={self._key!r})"
        )

    def __enter__(self) -> RouterEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    # -- generate ------------------------------------------------------------------------------

    def generate(self, text: str, history: Sequence[tuple[str, str]] = ()) -> Answer:
        """Return the router's complete answer to `text` as one user message, after `history`
        (earlier (user, assistant) turns of the same conversation, for multi-turn prompts).

        Retries 408/409/429/5xx, errors inside an HTTP 200 and connection failures at most
        `max_retries` times, waiting what the router announced (capped by `max_retry_wait`) or
        an exponential backoff with full jitter. Raises HardError (see router_errors for the
        codes): at once for auth, quota, model and request errors and for an empty, cut or
        filtered answer; with code "router_failed" and the router's last message when the
        retries are spent.
        """
        messages = [
            {"role": role, "content": content}
            for user, assistant in history
            for role, content in (("user", user), ("assistant", assistant))
        ]
        messages.append({"role": "user", "content": text})
        body = {"model": self.model, "messages": messages, "stream": False}
        retries = 0
        while True:
            outcome = self._attempt(body)
            if isinstance(outcome, Answer):
                return outcome
            if not outcome.retryable:
                raise self._hard(outcome.message, outcome.code)
            if retries >= self.max_retries:
                attempts = f"{retries + 1} attempt{'s' if retries else ''}"
                raise self._hard(f"{outcome.message} (gave up after {attempts})", Code.ROUTER_FAILED)
            wait = self._wait_before_retry(outcome, retries)
            retries += 1
            self._announce_retry(outcome, wait, retries)
            self._sleep(wait)

    def _attempt(self, body: dict) -> Answer | RouterFailure:
        try:
            response = self._client.post(
                f"{self.base_url}/chat/completions", json=body, headers=self._headers()
            )
        except httpx.TimeoutException as err:
            return RouterFailure(self._timeout_message(err), Code.ROUTER_FAILED, retryable=True)
        except httpx.RequestError as err:
            message = f"router: cannot reach {self.base_url} ({type(err).__name__}: {one_line(str(err))})"
            return RouterFailure(message, Code.ROUTER_FAILED, retryable=True)
        if not response.is_success:
            error = parse_error_body(response.content, response.headers.get("content-type", ""))
            return self._with_hint(classify_status(response.status_code, error, response.headers))
        return self._read_answer(response)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key.reveal()}"
        return headers

    def _timeout_message(self, err: httpx.TimeoutException) -> str:
        if isinstance(err, httpx.ConnectTimeout):
            limit = self._client.timeout.connect
            return f"router: could not connect to {self.base_url} within {limit:g} s (router.connect_timeout)"
        if isinstance(err, httpx.ReadTimeout):
            return f"router: no answer within {self._client.timeout.read:g} s (router.timeout)"
        return f"router: {type(err).__name__} talking to {self.base_url}"

    def _with_hint(self, failure: RouterFailure) -> RouterFailure:
        """Add what the user can do about a failure that is theirs to fix."""
        if failure.code == Code.ROUTER_AUTH:
            env = self.api_key_env
            hint = (
                f"the key in {self.key_source} was refused"
                if self._key
                else f"set {env} (router.api_key_env), or router.api_key_file under cron"
            )
        elif failure.code == Code.ROUTER_MODEL:
            hint = f"router.model is {self.model!r}; GET {self.base_url}/models lists what it serves"
        elif failure.code == Code.ROUTER_NOT_FOUND:
            hint = f"is router.base_url ({self.base_url}) the /v1 endpoint?"
        else:
            return failure
        return replace(failure, message=f"{failure.message}; {hint}")

    def _read_answer(self, response: httpx.Response) -> Answer | RouterFailure:
        content_type = response.headers.get("content-type", "")
        text = response.text
        # 9router streams unless told not to; some versions ignore "stream": false.
        if "text/event-stream" in content_type or text.lstrip().startswith("data:"):
            return self._answer_from_sse(text, response.headers)
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            quote = parse_error_body(response.content, content_type).message or "an empty body"
            message = f"router: HTTP {response.status_code} but not a chat completion: {quote}"
            return RouterFailure(message, Code.ROUTER_BAD_RESPONSE, retryable=False)
        return self._answer_from_completion(data, response.headers)

    def _answer_from_completion(self, data: dict, headers: httpx.Headers) -> Answer | RouterFailure:
        if data.get("error"):
            return self._with_hint(classify_error_in_ok(error_from_json(data), headers))
        choices = data.get("choices") or []
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        message = choice.get("message") or {}
        content = _text_of(message.get("content") if isinstance(message, dict) else None)
        return self._finished_answer(content, choice.get("finish_reason"), data.get("model"))

    def _answer_from_sse(self, text: str, headers: httpx.Headers) -> Answer | RouterFailure:
        events, done = read_sse(text)
        parts: list[str] = []
        finish_reason = model = None
        for event in events:
            if event.get("error"):
                return self._with_hint(classify_error_in_ok(error_from_json(event), headers))
            model = event.get("model") or model
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or choice.get("message") or {}
                parts.append(_text_of(delta.get("content")))
                finish_reason = choice.get("finish_reason") or finish_reason
        if not done and finish_reason is None:
            return RouterFailure("router: the answer stream ended before [DONE]", Code.ROUTER_FAILED, True)
        return self._finished_answer("".join(parts), finish_reason, model)

    def _finished_answer(
        self, content: str, finish_reason: str | None, model: str | None
    ) -> Answer | RouterFailure:
        """Only a complete, non-empty answer becomes an Answer; the rest are hard failures."""
        if finish_reason == "length":
            return RouterFailure(
                "router answer was cut short (finish_reason=length)", Code.ROUTER_CUT_SHORT, False
            )
        if finish_reason == "content_filter":
            return RouterFailure(
                "router answer was blocked by a content filter (finish_reason=content_filter)",
                Code.ROUTER_CONTENT_FILTER,
                retryable=False,
            )
        if not content.strip():
            return RouterFailure("router returned an empty answer", Code.ROUTER_EMPTY, retryable=False)
        return Answer(
            markdown=content.strip(),
            engine="router",
            model=model or self.model,
            title=None,
            extra={"finish_reason": finish_reason},
        )

    def _wait_before_retry(self, failure: RouterFailure, retries_done: int) -> float:
        # 9router locks the model for the time it announces: retrying sooner is wasted.
        if failure.wait is not None:
            return min(failure.wait, self.max_retry_wait)
        ceiling = min(BACKOFF_BASE * 2**retries_done, self.max_retry_wait)
        return self._random.uniform(0, ceiling)

    def _announce_retry(self, failure: RouterFailure, wait: float, retry: int) -> None:
        message = mask(
            f"{failure.message}; retrying in {_seconds(wait)} s (retry {retry} of {self.max_retries})"
        )
        log.warning("%s", message)
        if self._on_retry:
            self._on_retry(message)

    def _hard(self, message: str, code: str) -> HardError:
        return HardError(mask(message), code=code)

    # -- doctor --------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """What `doctor` shows: is the router up, and does it list router.model? Never raises.

        Keys: base_url, model, key_env, key_source (where the key came from), key_set, reachable,
        health_ok (GET /api/health; None when unreachable), models_status, models (ids, as
        listed), model_listed (None when the list could not be read), error (one line, or None).
        """
        report: dict[str, Any] = {
            "base_url": self.base_url,
            "model": self.model,
            "key_env": self.api_key_env,
            "key_source": self.key_source,
            "key_set": bool(self._key),
            "reachable": False,
            "health_ok": None,
            "models_status": None,
            "models": [],
            "model_listed": None,
            "error": None,
        }
        root = self.base_url.removesuffix("/v1")
        try:
            health = self._client.get(f"{root}/api/health", headers=self._headers())
            report["reachable"] = True
            report["health_ok"] = health.is_success and _json_or_none(health).get("ok", True) is not False
            listing = self._client.get(f"{self.base_url}/models", headers=self._headers())
        except httpx.RequestError as err:
            report["error"] = mask(f"router: cannot reach {self.base_url} ({type(err).__name__})")
            return report
        report["models_status"] = listing.status_code
        if not listing.is_success:
            error = parse_error_body(listing.content, listing.headers.get("content-type", ""))
            failure = self._with_hint(classify_status(listing.status_code, error, listing.headers))
            report["error"] = mask(failure.message)
            return report
        entries = _json_or_none(listing).get("data") or []
        report["models"] = [str(m.get("id")) for m in entries if isinstance(m, dict) and m.get("id")]
        report["model_listed"] = self.model in report["models"]
        return report


def read_sse(text: str) -> tuple[list[dict], bool]:
    """The JSON events of an SSE body up to the first `data: [DONE]`, and whether it came."""
    events: list[dict] = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue  # comments (": ping"), event names, blank separators
        payload = line[5:].strip()
        if payload == "[DONE]":
            return events, True  # 9router sends it twice: the first one ends the answer
        try:
            event = json.loads(payload)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events, False


def _text_of(content: object) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return ""


def _json_or_none(response: httpx.Response) -> dict:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _is_loopback(url: str) -> bool:
    host = httpx.URL(url).host
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _seconds(wait: float) -> str:
    return f"{wait:.1f}".removesuffix(".0")


__all__ = ["RouterEngine", "read_sse"]
