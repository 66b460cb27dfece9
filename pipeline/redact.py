"""The secrets of this process, and the one function that masks them in text that leaves it.

A router may echo the key it was given in its error body, quote it from any character, cut
it to fit a line, URL-encode it or put it into a base64 `Authorization: Basic` header. A piece
of a key is still a piece of it, so masking comes first and cutting after, and any run of
MIN_RUN or more characters of a key, wherever in the key it starts, counts as the key: its
first 171 characters, its last 12 or its middle leak nothing. So does such a run of the key's
other forms (JSON-escaped, URL-encoded, base64 in each of its three alignments).

The key is registered where it is read (`router_key`); the sinks (the journal, the state and
dead-letter files, the consoles, `doctor --json`, `status --json`, `show`, `log`) call `mask`
or `mask_data` on what they write. Registration only adds: a secret is never forgotten. An
article is not masked but refused when it holds the key (`holds_secret`: contract/checks.py).

Fast, as it runs over every message: every run of MIN_RUN characters of a form holds one of
the form's blocks of _BLOCK characters at offsets 0, _STRIDE, 2*_STRIDE..., so a text where
no block is found (a few `in` tests, at C speed) holds no run; where one is, the runs are read
around it from an index of the form's MIN_RUN-character windows.

A key shorter than MIN_RUN is masked only where it stands alone as a token (not inside a longer
word of letters, digits, `-` or `_`: masking every "test" inside "latest" or the slug
"my-test" would mangle output and the journal's slugs, and a key that short, a local router's
placeholder, can be guessed anyway). Where it stands alone ("Invalid key: test", "key=test")
it is masked.

Passwords nobody registered, written in a URL (`user:PW@`) or as a `password=` pair (a URL's
query, a libpq conninfo string), are masked by their shape (`mask_passwords`).
"""

from __future__ import annotations

import base64
import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO
from urllib.parse import quote, quote_plus

if TYPE_CHECKING:
    from .config import Router, RouterKey

MASK = "[REDACTED]"
MIN_RUN = 8  # this many consecutive characters of a key are already the key
MIN_PREFIX = MIN_RUN  # its older name: a prefix was all that was masked once
ARTICLE_RUN = 16  # an article holding this much of a key (or all of a shorter one) is refused
_BLOCK, _STRIDE = 5, 4  # _BLOCK + _STRIDE - 1 <= MIN_RUN: every run holds a whole block

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()


def register(secret: str | None) -> None:
    """Mask `secret` (and its other forms) in everything this process writes from now on."""
    global _secrets
    if not secret:
        return
    with _lock:
        _secrets = tuple(sorted({*_secrets, secret}))


def router_key_found(settings: Router, env: Mapping[str, str] | None = None) -> RouterKey:
    """The router key and where it came from (config.read_router_key: the variable named by
    `settings.api_key_env`, else the file `settings.api_key_file`), registered."""
    from .config import read_router_key

    found = read_router_key(settings, env)
    register(found.value)
    return found


def router_key(settings: Router, env: Mapping[str, str] | None = None) -> str | None:
    """The router key (router_key_found), registered; None if neither place has one."""
    return router_key_found(settings, env).value


# -- a secret's forms, and the index of their runs ----------------------------------------------


def forms(secret: str) -> set[str]:
    """The ways `secret` may be written in text: as it is, JSON-escaped, URL-encoded (either hex
    case, `+` or `%20` for a space) and base64 (standard and URL-safe, in each of the three
    alignments a secret can have inside longer encoded data: only the characters that depend on
    the secret alone). A secret shorter than MIN_RUN: as it is and JSON-escaped only."""
    found = {secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]}
    if len(secret) < MIN_RUN:
        return found
    for encoded in (quote(secret, safe=""), quote(secret, safe="/"), quote_plus(secret, safe="")):
        found |= {encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), encoded)}
    raw = secret.encode("utf-8")
    for shift in range(3):
        whole = (shift + len(raw)) // 3 * 4  # characters of complete groups
        core = base64.b64encode(b"\0" * shift + raw).decode("ascii")[4 if shift else 0 : whole]
        found |= {core, core.translate(_URLSAFE)}
    return {form for form in found if form}


_URLSAFE = str.maketrans("+/", "-_")


class _Index(NamedTuple):
    needles: tuple[str, ...]  # each form's blocks: a text without any holds no run
    windows: dict[str, tuple[str, ...]]  # each MIN_RUN-character window -> the forms holding it
    short: tuple[str, ...]  # secrets (and forms) shorter than MIN_RUN: masked as tokens


@functools.lru_cache(maxsize=8)
def _index(secrets: tuple[str, ...]) -> _Index:
    needles: set[str] = set()
    windows: dict[str, set[str]] = {}
    short: set[str] = set()
    for secret in secrets:
        for form in forms(secret) if secret else ():
            if len(form) < MIN_RUN:
                short.add(form)
                continue
            needles.update(form[at : at + _BLOCK] for at in range(0, len(form) - _BLOCK + 1, _STRIDE))
            for at in range(len(form) - MIN_RUN + 1):
                windows.setdefault(form[at : at + MIN_RUN], set()).add(form)
    return _Index(
        tuple(sorted(needles)),
        {window: tuple(held) for window, held in windows.items()},
        tuple(sorted(short, key=len, reverse=True)),
    )


def _found(text: str, index: _Index) -> bool:
    """Whether `text` may hold a secret (no: it surely holds none), at C speed."""
    return any(needle in text for needle in index.needles) or any(s in text for s in index.short)


# -- masking --------------------------------------------------------------------------------------

# `user:PASSWORD@` after `://`; `password=VALUE` (a URL's query, libpq's key=value conninfo,
# quoted or not).
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


# A JSON Web Token, the shape of the chat's login token: header.payload.signature in base64url,
# the first two JSON objects (`eyJ` is `{"`).
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")


def mask_tokens(text: str) -> str:
    """`text` with every JWT-shaped token (a login token nobody registered) replaced by MASK."""
    return _JWT.sub(MASK, text) if "eyJ" in text else text


def mask(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every run of MIN_RUN+ characters of a secret's forms replaced by MASK (a short
    secret where it stands as a token), and every password written in a URL or a `password=`
    pair (mask_passwords).

    `secrets` defaults to the ones registered in this process.
    """
    text = mask_passwords(text)
    known = _secrets if secrets is None else tuple(secrets)
    if not known:
        return text
    index = _index(known)
    if not _found(text, index):  # the common case, at C speed
        return text
    spans = _run_spans(text, index)
    for secret in index.short:
        spans += _token_spans(text, secret)
    return _replace(text, spans)


def holds_secret(text: str, secrets: Iterable[str] | None = None) -> bool:
    """Whether `text` holds a registered secret: ARTICLE_RUN characters of one of its forms in a
    row, or all of a shorter form (a short secret: never, as it would be a common word). For an
    article, which is refused rather than masked: a key's public prefix (`sk-or-v1-`) in an
    article about the router is not the key."""
    known = _secrets if secrets is None else tuple(secrets)
    if not known:
        return False
    index = _index(known)
    if not any(needle in text for needle in index.needles):
        return False
    return any(end - start >= ARTICLE_RUN for start, end in _run_spans(text, index, whole=True))


def _run_spans(text: str, index: _Index, *, whole: bool = False) -> list[tuple[int, int]]:
    """Each longest run of MIN_RUN+ characters of a form, by where it starts: a run's first block
    is found 0 to _STRIDE-1 characters after its start. Starts are read left to right, and one
    inside a run already found is followed only when its run goes further (a key echoed whole
    costs one test per start, not one run each). `whole`: a run that is a whole form counts as
    ARTICLE_RUN long (for a form shorter than that)."""
    starts: set[int] = set()
    for needle in index.needles:
        found = text.find(needle)
        while found != -1:
            starts.update(range(max(0, found - _STRIDE + 1), found + 1))
            found = text.find(needle, found + 1)
    spans: list[tuple[int, int]] = []
    covered = 0  # the end of the runs found so far
    for start in sorted(starts):
        holders = index.windows.get(text[start : start + MIN_RUN])
        for form in holders or ():
            if start < covered and text[start : covered + 1] not in form:
                continue  # this run ends inside one already found
            end = _run_end(text, start, form)
            covered = max(covered, end)
            spans.append((start, start + ARTICLE_RUN if whole and end - start == len(form) else end))
    return spans


def _run_end(text: str, start: int, form: str) -> int:
    """The end of the longest run of `form` in `text` from `start` (whose first MIN_RUN
    characters are one): for each place the run's window is in `form`, how far text and form
    agree (a binary search over C-speed slice comparisons)."""
    best = start + MIN_RUN
    window = text[start:best]
    at = form.find(window)
    while at != -1:
        low, high = MIN_RUN, min(len(form) - at, len(text) - start)  # agree for `low` characters
        while low < high:
            middle = (low + high + 1) // 2
            if text[start : start + middle] == form[at : at + middle]:
                low = middle
            else:
                high = middle - 1
        best = max(best, start + low)
        at = form.find(window, at + 1)
    return best


def mask_data(value: Any, secrets: Iterable[str] | None = None) -> Any:
    """`value` with `mask` applied to every string in it (dict keys and values, lists, tuples).

    For JSON and TOML sinks: mask before serialising, so that an escape never splits a key.
    """
    known = _secrets if secrets is None else tuple(secrets)
    return _mask_all(value, known)


def masked_json(value: Any, **options: Any) -> str:
    """`json.dumps(mask_data(value), **options)`, in one C-speed pass when no secret is in it.

    Sound because escaping never hides a run of a key: each secret's JSON forms are among its
    forms, and the escaped text of a string holding a run holds a run of an escaped form (each
    character is escaped on its own). So a text where no form's block is found (nor a password's
    hint) is exactly what masking would write."""
    text = json.dumps(value, **options)
    known = _secrets
    if (not known or not _found(text, _index(known))) and _PASSWORD_HINT.search(text) is None:
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


def _word(char: str) -> bool:
    return char.isalnum() or char in "-_"


def _token_spans(text: str, secret: str) -> list[tuple[int, int]]:
    spans = []
    found = text.find(secret)
    while found != -1:
        end = found + len(secret)
        before = text[found - 1] if found else ""
        after = text[end] if end < len(text) else ""
        if not (before and _word(before)) and not (after and _word(after)):
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
    "ARTICLE_RUN",
    "MIN_RUN",
    "holds_secret",
    "MASK",
    "MIN_PREFIX",
    "MaskedStream",
    "mask",
    "mask_data",
    "mask_passwords",
    "mask_tokens",
    "masked_json",
    "register",
    "router_key",
    "router_key_found",
]
