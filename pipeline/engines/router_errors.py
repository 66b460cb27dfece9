"""Reading a router's failures: error bodies in every shape, retry waits, and the retry rule.

OpenAI-compatible routers (9router, LiteLLM, OpenRouter) do not agree on how an error looks,
so everything here turns whatever arrived into one line that quotes the router, a stable
code, and whether (and how long) to wait before trying again. Nothing here does I/O.
Every quote goes through one_line, which masks the key (pipeline.redact) before it cuts.
"""

from __future__ import annotations

import datetime
import email.utils
import html
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..redact import mask
from .base import Code

MAX_QUOTE = 200

# Statuses the openai SDK retries; everything else below 500 is the caller's fault.
RETRYABLE_STATUSES = frozenset({408, 409, 429})

_QUOTA_WORDS = ("quota", "usage limit")
_AUTH_WORDS = ("api key", "api_key", "unauthorized", "unauthenticated", "authentication")
_RESET_AFTER = re.compile(r"reset after\s+((?:\d+(?:\.\d+)?\s*(?:ms|h|m|s)\s*)+)", re.IGNORECASE)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s)", re.IGNORECASE)
_SECONDS_PER_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class RouterFailure:
    """One failed attempt: `message` is one line for people, `code` a stable HardError code.

    `retryable` failures may be tried again after `wait` seconds (None = no hint from the
    router, use backoff); the others must stop at once.
    """

    message: str
    code: Code
    retryable: bool
    wait: float | None = None


@dataclass(frozen=True)
class ErrorBody:
    """What an error body says, whatever its shape; `message` is None for an empty body."""

    message: str | None
    code: str | None = None
    type: str | None = None


def one_line(text: str, limit: int = MAX_QUOTE) -> str:
    """Mask the secrets, collapse whitespace and cut to about `limit` characters, so a quote
    fits a log line. Masking comes first: a key cut short would no longer be recognised."""
    text = " ".join(mask(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def strip_html(text: str) -> str:
    """The visible text of an HTML page (scripts and styles dropped), on one line."""
    text = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>", " ", text)
    text = re.sub(r"(?s)<[^>]*>", " ", text)
    return one_line(html.unescape(text))


def parse_error_body(body: bytes | str, content_type: str = "") -> ErrorBody:
    """Read an error body of any shape: {"error": {...}}, {"error": "..."}, JSON, HTML, text, empty."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if not text.strip():
        return ErrorBody(None)
    try:
        data = json.loads(text)
    except ValueError:
        looks_html = "html" in content_type.lower() or text.lstrip().startswith("<")
        return ErrorBody(strip_html(text) if looks_html else one_line(text))
    return error_from_json(data)


def error_from_json(data: object) -> ErrorBody:
    """The error a parsed JSON body describes (also used for an "error" inside an HTTP 200)."""
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail") or error.get("error")
            if message is None:
                message = json.dumps(error, ensure_ascii=False)
            return ErrorBody(
                one_line(str(message)), _text_or_none(error.get("code")), _text_or_none(error.get("type"))
            )
        if error is not None:
            return ErrorBody(one_line(str(error)))
    return ErrorBody(one_line(json.dumps(data, ensure_ascii=False)))


def _text_or_none(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


def describe(status: int, error: ErrorBody) -> str:
    """`router: HTTP 401 invalid_api_key: Invalid API key`, or `... with an empty body`."""
    if error.message is None:
        return f"router: HTTP {status} with an empty body"
    code = f" {error.code}" if error.code else ""
    return f"router: HTTP {status}{code}: {error.message}"


def says_quota(error: ErrorBody) -> bool:
    """A spent quota is not a retry-later: insufficient_quota, or the words quota / usage limit."""
    codes = f"{error.code or ''} {error.type or ''}".lower()
    return "insufficient_quota" in codes or _mentions(error.message, _QUOTA_WORDS)


def says_auth(error: ErrorBody) -> bool:
    codes = f"{error.code or ''} {error.type or ''}".lower()
    return "api_key" in codes or "authentication" in codes or _mentions(error.message, _AUTH_WORDS)


def _mentions(text: str | None, words: tuple[str, ...]) -> bool:
    lowered = (text or "").lower()
    return any(word in lowered for word in words)


def classify_status(status: int, error: ErrorBody, headers: Mapping[str, str]) -> RouterFailure:
    """The failure an HTTP error status means, with the router's announced wait when retryable."""
    message = describe(status, error)
    if says_quota(error):
        return RouterFailure(message, Code.ROUTER_QUOTA, retryable=False)
    if status in RETRYABLE_STATUSES or status >= 500:
        return RouterFailure(
            message, Code.ROUTER_FAILED, retryable=True, wait=announced_wait(headers, message)
        )
    if status in (401, 403):
        return RouterFailure(message, Code.ROUTER_AUTH, retryable=False)
    if status == 404:
        mentions_model = "model" in f"{error.code} {error.message}".lower()
        return RouterFailure(message, Code.ROUTER_MODEL if mentions_model else Code.ROUTER_NOT_FOUND, False)
    if status in (400, 422):
        return RouterFailure(message, Code.ROUTER_BAD_REQUEST, retryable=False)
    return RouterFailure(message, Code.ROUTER_REJECTED, retryable=False)


def classify_error_in_ok(error: ErrorBody, headers: Mapping[str, str]) -> RouterFailure:
    """An "error" inside an HTTP 200: an upstream failure (retry like a 500) unless quota or auth."""
    message = describe(200, error)
    if says_quota(error):
        return RouterFailure(message, Code.ROUTER_QUOTA, retryable=False)
    if says_auth(error):
        return RouterFailure(message, Code.ROUTER_AUTH, retryable=False)
    return RouterFailure(message, Code.ROUTER_FAILED, retryable=True, wait=announced_wait(headers, message))


def announced_wait(
    headers: Mapping[str, str], message: str = "", *, now: float | None = None
) -> float | None:
    """Seconds the router asked us to wait: retry-after-ms, then Retry-After, then "(reset after Ns)".

    `headers` must look keys up case-insensitively (httpx.Headers does). None = no usable hint.
    """
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return max(millis / 1000.0, 0.0)
    retry_after = headers.get("retry-after")
    if retry_after:
        seconds = _number(retry_after)
        if seconds is None:
            seconds = _seconds_until_http_date(retry_after, now)
        if seconds is not None:
            return max(seconds, 0.0)
    return reset_after_seconds(message)


def reset_after_seconds(message: str) -> float | None:
    """9router's "(reset after 2m 30s)" / "(reset after 30s)" as seconds, or None."""
    match = _RESET_AFTER.search(message or "")
    if not match:
        return None
    parts = _DURATION_PART.findall(match.group(1))
    return sum(float(amount) * _SECONDS_PER_UNIT[unit.lower()] for amount, unit in parts)


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    # float() accepts "nan" and "inf": neither is a wait.
    return number if number is not None and 0 <= number < float("inf") else None


def _seconds_until_http_date(value: str, now: float | None) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # "-0000" dates come back naive; HTTP dates are always UTC
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp() - (time.time() if now is None else now)
