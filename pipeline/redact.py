"""The secrets of this process, and the one function that masks them in text that leaves it.

A router may echo the key it was given in its error body, quote it from any character, cut
it to fit a line, URL-encode it or put it into a base64 `Authorization: Basic` header. A piece
of a key is still a piece of it, so masking comes first and cutting after, and any run of
MIN_RUN or more characters of a key, wherever in the key it starts, counts as the key: its
first 171 characters, its last 12 or its middle leak nothing. So does such a run of the key's
other forms (JSON-escaped, URL-encoded, base64 in each of its three alignments).

The key is registered where it is read (known_secrets.router_key), and so is every secret the
workspace knows (proxy passwords, PGPASSWORD, the tokens of notify URLs). Registration only
adds: a secret is never forgotten. Two boundaries mask, so that no caller has to:
- what is kept on disk: `mask_kept`, called by the two places every write passes through,
  files.atomic_write / create_new (every record under `.qwenpipe/`, the sidecars, the metrics,
  a zip's members: a browser trace, a report bundle) and the store's SQLTransaction (every bound value
  of every write, SQLite and PostgreSQL alike);
- what leaves the process: the consoles (MaskedStream), the notifications, the JSON commands.
What the user reads as their own is kept `Verbatim`: an article (refused, not masked, when it
holds a key: `holds_secret`, contract/checks.py), its published page, a saved login; so are the
names records are found by (a slug, an account, a chat).

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

import functools
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, TextIO
from urllib.parse import quote, quote_plus

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
    from binascii import b2a_base64  # base64's own encoder; imported only once a secret is known

    raw = secret.encode("utf-8")
    for shift in range(3):
        whole = (shift + len(raw)) // 3 * 4  # characters of complete groups
        core = b2a_base64(b"\0" * shift + raw, newline=False).decode("ascii")[4 if shift else 0 : whole]
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
@functools.cache  # compiled on first need, as the two below: a status that masks nothing never needs them
def _password() -> re.Pattern[str]:
    return re.compile(
        r"(?P<lead>://[^\s/@:]*:)[^\s/@]+(?=@)"
        r"|(?P<key>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&;,'\"]+)",
        re.IGNORECASE,
    )


# Found in any text that holds such a password, and in its JSON form (escaping never breaks the
# word `password`, nor adds whitespace, `/` or `@`): masked_json's test.
@functools.cache
def _password_hint() -> re.Pattern[str]:
    return re.compile(r"password|://[^\s/@]*:[^\s/@]+@", re.IGNORECASE)


# The characters re's IGNORECASE takes for a letter of `password` whose lower() is not it.
_PASSWORD_FOLDS = "\u017f"  # LATIN SMALL LETTER LONG S, for s


def password_hinted(text: str) -> bool:
    """`_password_hint().search(text) is not None`, without the regex over a whole document (a
    status of 100,000 articles: a second): its URL form needs an `@`, and its word, as
    IGNORECASE matches it, is `password` in the text's lower() unless a folding character is
    in it (test_redact enumerates every character)."""
    if "@" in text or any(char in text for char in _PASSWORD_FOLDS):
        return _password_hint().search(text) is not None
    return "password" in text.lower()


def mask_passwords(text: str) -> str:
    """`text` with every password written in a URL or a `password=` pair replaced by MASK."""
    if _password_hint().search(text) is None:
        return text
    return _password().sub(lambda found: (found["lead"] or found["key"]) + MASK, text)


# A JSON Web Token, the shape of the chat's login token: header.payload.signature in base64url,
# the first two JSON objects (`eyJ` is `{"`).
@functools.cache
def _jwt() -> re.Pattern[str]:
    return re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")


def mask_tokens(text: str) -> str:
    """`text` with every JWT-shaped token (a login token nobody registered) replaced by MASK."""
    return _jwt().sub(MASK, text) if "eyJ" in text else text


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
    return masked_json_text(json.dumps(value, **options), lambda: value, **options)


def masked_json_text(
    text: str, value: Callable[[], Any], *, unhinted: slice | None = None, **options: Any
) -> str:
    """masked_json of `value()`, given `text`, its `json.dumps(value(), **options)` as the caller
    wrote it: `text` itself when no secret may be in it (value() is then never built).

    `unhinted`: a part of `text` already known to hold no password hint (`password_hinted` was
    false for it: a kept status document's rows, looked at once when kept) and to begin and end
    between two JSON values, where no hint can straddle its edge. Only the rest is looked at
    again for one; registered secrets are looked for everywhere (one may be new)."""
    known = _secrets
    rest = (text,) if unhinted is None else (text[: unhinted.start], text[unhinted.stop :])
    if (known and _found(text, _index(known))) or any(password_hinted(part) for part in rest):
        return json.dumps(mask_data(value(), known), **options)
    return text


def _mask_all(value: Any, secrets: tuple[str, ...]) -> Any:
    return _walk(value, lambda text: mask(text, secrets))


def _walk(value: Any, masking: Any) -> Any:
    """`value` with `masking` applied to every string in it (dict keys and values, lists, tuples)."""
    if isinstance(value, str):
        return masking(value)
    if isinstance(value, Mapping):
        return {_walk(k, masking): _walk(v, masking) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_walk(v, masking) for v in value)
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


# -- what is kept on disk ---------------------------------------------------------------------


class Verbatim(str):
    """Text that the boundary of the disk keeps as it is: what the user reads as their own (an
    article, its published page, a saved login, whose tokens are its whole point), and the names
    a record is found by (a slug, an account, a chat: store.sql.named, the intent marker). An
    article is refused rather than masked when it holds a key (holds_secret): masking would
    change the user's text where it only quotes a key's public prefix (`sk-or-v1-`), and a real
    leak is never written at all."""


def mask_kept(data: Any) -> Any:
    """The one mask on everything kept: `data` (text, UTF-8 bytes, or any other bound value,
    returned as it is) with every run of MIN_RUN+ characters of a registered secret's forms,
    every password written in a URL or a `password=` pair and every login token (JWT) masked.
    Called where every write to disk passes (files.atomic_write and create_new, the store's
    SQLTransaction), never by the writers themselves.

    Text that needed masking and is JSON or TOML (a record) is masked value by value and
    written again in its format, so that a mask never swallows a quote between two strings.
    `Verbatim` text is kept as it is (a plain str); a zip archive (a Playwright trace, a report
    bundle) is masked member by member (mask_zip); other bytes that are not UTF-8 (a
    screenshot) hold no text to mask."""
    if isinstance(data, Verbatim):
        return str(data)
    if isinstance(data, bytes):
        if is_zip(data):  # a Playwright trace, a report: its members are text like any other
            return mask_zip(data, mask_kept)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        masked = mask_kept(text)
        return data if masked is text else masked.encode("utf-8")
    if not isinstance(data, str):
        return data
    masked = _mask_text(data)
    if masked == data:  # the common case: nothing secret in it
        return data
    return _masked_record(data) or masked


ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first member, or an empty zip


def is_zip(data: bytes) -> bool:
    """Whether `data` is a zip archive (a Playwright trace, a `qwenpipe report` bundle)."""
    if not data.startswith(ZIP_MAGIC):
        return False
    import io
    import zipfile

    return zipfile.is_zipfile(io.BytesIO(data))


def mask_zip(data: bytes, masking: Callable[[bytes], bytes]) -> bytes:
    """The zip archive `data` with `masking` applied to each member's bytes (a zip inside is
    the masking's to open: mask_kept does) and every member's name masked: a trace's network
    log and DOM snapshots are text that compression hides from a scan of the archive's bytes.
    `data` itself when nothing changed (nothing is compressed again)."""
    import io
    import zipfile

    members = []
    changed = False
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            body = archive.read(info)
            masked, name = masking(body), _mask_text(info.filename)
            changed = changed or masked != body or name != info.filename
            members.append((info, name, masked))
    if not changed:
        return data
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, name, body in members:
            kept = zipfile.ZipInfo(name, info.date_time)
            kept.compress_type, kept.external_attr = zipfile.ZIP_DEFLATED, info.external_attr
            archive.writestr(kept, body)
    return out.getvalue()


def registered() -> tuple[str, ...]:
    """The secrets registered so far (for a sink that masks more than them: `qwenpipe report`)."""
    return _secrets


def _mask_text(text: str) -> str:
    # A secret shorter than MIN_RUN is masked where text leaves the process, not in what is kept:
    # as a token it is a word (a local router's key `qwen`), and masking it in a record would
    # change an engine's name, a slug or the chat URL the contract reads back.
    return mask_tokens(mask(text, tuple(secret for secret in _secrets if len(secret) >= MIN_RUN)))


def _masked_record(text: str) -> str | None:
    """`text` masked value by value when it is a JSON or TOML record, else None."""
    body = text.rstrip()
    end = text[len(body) :]  # a record's newline is kept
    try:
        return json.dumps(_walk(json.loads(body), _mask_text), ensure_ascii=False) + end
    except ValueError:
        pass
    import tomllib

    try:
        record = tomllib.loads(text)
    except ValueError:
        return None
    if not record:
        return None
    import tomli_w

    return tomli_w.dumps(_walk(record, _mask_text))


def url_tokens(url: str) -> tuple[str, ...]:
    """The parts of a URL (a notify URL: Apprise's `tgram://BOT_TOKEN/CHAT`, `ntfy://host/TOPIC`,
    a webhook's path) that may be tokens, to register: each part after its scheme, split at
    `/ : @ ? & = #`, of MIN_RUN or more characters that is no host name (no `.`) and holds a digit
    or is 16 characters long (a word such as `services` is no token)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    parts = re.split(r"[/:@?&=#]", rest)
    return tuple(
        part
        for part in parts
        if len(part) >= MIN_RUN and "." not in part and (len(part) >= 16 or any(c.isdigit() for c in part))
    )


class MaskedStream:
    """A text stream that masks what is written to it; everything else goes to the real stream."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(mask(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


LINE_LIMIT = 200  # characters: what one line of a message shows of an error


def first_line(what: BaseException | str, limit: int = LINE_LIMIT) -> str:
    """The first line of an error's message (or of a text) as one line of a message shows it:
    masked (no registered secret, password in a URL or login token), stripped and cut to
    `limit` characters. An error with no words is named by its type; a text with none is ""."""
    text = str(getattr(what, "message", "") or what) if isinstance(what, BaseException) else what or ""
    line = next((line.strip() for line in mask_tokens(mask(text)).splitlines() if line.strip()), "")
    if not line and isinstance(what, BaseException):
        return type(what).__name__
    return line[:limit]


def scheme_only(url: str) -> str:
    """A URL as messages show it when any of it may be a secret (a notify URL holds its token
    in its path): its scheme alone."""
    return f"{url.split('://', 1)[0]}://..." if "://" in url else "a notify URL"


__all__ = [
    "ARTICLE_RUN",
    "MIN_RUN",
    "holds_secret",
    "is_zip",
    "MASK",
    "MIN_PREFIX",
    "MaskedStream",
    "mask",
    "mask_data",
    "mask_kept",
    "mask_passwords",
    "mask_zip",
    "mask_tokens",
    "masked_json",
    "first_line",
    "register",
    "registered",
    "scheme_only",
    "url_tokens",
    "Verbatim",
]
