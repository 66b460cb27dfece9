"""The secrets of this process, and the one function that masks them in text that leaves it.

A router may echo the key it was given in its error body, and error text is later cut to fit
a line. A key cut in half is still half a key, so masking comes first and cutting after, and
any prefix of a key of MIN_PREFIX characters or more counts as the key: a cut that keeps the
first 171 characters of a 200-character key leaks nothing.

The key is registered where it is read (`router_key`); the sinks (the journal, the state and
dead-letter files, the consoles, `doctor --json`, `status --json`, `show`) call `mask` or
`mask_data` on what they write. Registration only adds: a secret is never forgotten.

A key shorter than MIN_PREFIX is masked only where it stands alone (not inside a longer run of
letters, digits or key punctuation): masking every "test" inside "latest" or a slug would
mangle output and the journal's slugs, and a key that short (a local router's placeholder)
can be guessed anyway. Where it stands alone ("Invalid key: test") it is masked.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from .config import Router

MASK = "[REDACTED]"
MIN_PREFIX = 8  # this many leading characters of a key are already the key
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+/=")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()


def register(secret: str | None) -> None:
    """Mask `secret` (and its JSON-escaped form) in everything this process writes from now on."""
    global _secrets
    if not secret:
        return
    forms = {secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]}
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | forms))


def router_key(settings: Router, env: Mapping[str, str] | None = None) -> str | None:
    """The router key from the variable named by `settings.api_key_env` (the [router] section),
    registered; None if unset."""
    name = settings.api_key_env or "ROUTER_API_KEY"
    key = (os.environ if env is None else env).get(name) or None
    register(key)
    return key


# Passwords nobody registered (a PostgreSQL URL's, a conninfo string's, any URL's login): masked
# by their shape wherever they appear. `user:PASSWORD@` after `://`; `password=VALUE` (a URL's
# query, libpq's key=value conninfo, quoted or not).
_PASSWORD = re.compile(
    r"(?P<lead>://[^\s/@:]*:)[^\s/@]+(?=@)"
    r"|(?P<key>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&;,'\"]+)",
    re.IGNORECASE,
)
# Found in any text that holds such a password, and in its JSON form (escaping never breaks the
# word `password`, nor adds whitespace, `/` or `@`): masked_json's test.
_PASSWORD_HINT = re.compile(r"password|://[^\s/@]*:[^\s/@]+@", re.IGNORECASE)


def mask_passwords(text: str) -> str:
    """`text` with every password written in a URL or a `password=` pair replaced by MASK."""
    if _PASSWORD_HINT.search(text) is None:
        return text
    return _PASSWORD.sub(lambda found: (found["lead"] or found["key"]) + MASK, text)


def mask(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every secret, and every prefix of one of MIN_PREFIX+ characters, replaced by MASK;
    and every password written in a URL or a `password=` pair (mask_passwords).

    `secrets` defaults to the ones registered in this process.
    """
    text = mask_passwords(text)
    known = _secrets if secrets is None else tuple(secrets)
    if not known or _probe(known).search(text) is None:  # the common case, at C speed
        return text
    spans: list[tuple[int, int]] = []
    for secret in known:
        if secret:
            spans += _prefix_spans(text, secret) if len(secret) >= MIN_PREFIX else _token_spans(text, secret)
    return _replace(text, spans)


@functools.lru_cache(maxsize=8)
def _probe(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """Matches wherever a secret's head (or a whole short secret) starts: no match, nothing to mask."""
    heads = sorted({secret[:MIN_PREFIX] for secret in secrets if secret}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, heads)) or "(?!)")


def mask_data(value: Any, secrets: Iterable[str] | None = None) -> Any:
    """`value` with `mask` applied to every string in it (dict keys and values, lists, tuples).

    For JSON and TOML sinks: mask before serialising, so that an escape never splits a key.
    """
    known = _secrets if secrets is None else tuple(secrets)
    return _mask_all(value, known)


def masked_json(value: Any, **options: Any) -> str:
    """`json.dumps(mask_data(value), **options)`, in one C-speed pass when no secret is in it.

    Sound because escaping never hides a key's head: each secret is registered in its JSON
    forms too, and the escaped text of a string holding a head holds the head of an escaped
    form. So a text where no head of any form is found is exactly what masking would write."""
    text = json.dumps(value, **options)
    known = _secrets
    if (not known or _probe(known).search(text) is None) and _PASSWORD_HINT.search(text) is None:
        return text
    return json.dumps(mask_data(value, known), **options)


def _mask_all(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return mask(value, secrets)
    if isinstance(value, Mapping):
        return {_mask_all(k, secrets): _mask_all(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_mask_all(v, secrets) for v in value)
    return value


def _prefix_spans(text: str, secret: str) -> list[tuple[int, int]]:
    # Every place a MIN_PREFIX head starts is a candidate (they may overlap, as in "aaaaaaaaa"
    # before a key of a's): each reaches as far as the text goes on agreeing with the key.
    head, spans = secret[:MIN_PREFIX], []
    found = text.find(head)
    while found != -1:
        end, limit = found + MIN_PREFIX, min(found + len(secret), len(text))
        while end < limit and text[end] == secret[end - found]:
            end += 1
        spans.append((found, end))
        found = text.find(head, found + 1)
    return spans


def _token_spans(text: str, secret: str) -> list[tuple[int, int]]:
    spans = []
    found = text.find(secret)
    while found != -1:
        end = found + len(secret)
        before = text[found - 1] if found else ""
        after = text[end] if end < len(text) else ""
        if before not in _KEY_CHARS and after not in _KEY_CHARS:
            spans.append((found, end))
        found = text.find(secret, found + 1)
    return spans


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with the union of `spans` (of every secret and form, found in the same text) masked."""
    if not spans:
        return text
    parts, start = [], 0
    for begin, end in sorted(spans):
        if begin <= start and parts:  # overlaps or touches the mask just written
            start = max(start, end)
            continue
        parts += [text[start:begin], MASK]
        start = end
    return "".join(parts) + text[start:]


class MaskedStream:
    """A text stream that masks what is written to it; everything else goes to the real stream."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(mask(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


__all__ = [
    "MASK",
    "MIN_PREFIX",
    "MaskedStream",
    "mask",
    "mask_data",
    "mask_passwords",
    "masked_json",
    "register",
    "router_key",
]
