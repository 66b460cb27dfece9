"""config.toml: the schema (one table of keys, defaults and rules), loading, validation, writing.

Every key has a default, so a missing file is a working setup. Unknown keys, wrong types and
impossible values raise ConfigError naming the key and the file: a typo must never silently
become a default.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import FrozenInstanceError, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, NamedTuple
from urllib.parse import parse_qsl, urlparse

from . import files
from .languages import LANGUAGES
from .pathguard import PathKind, Place, absolute
from .pathguard import problem as _path_problem
from .proxy import problem as _proxy
from .send_hours import problem as _send_hours

DEFAULT_CONFIG_NAME = "config.toml"
CONFIG_ENV = "QWENPIPE_CONFIG"


class ConfigError(Exception):
    """config.toml cannot be used as written (exit 2)."""


def _http_url(value: str) -> str | None:
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return "must be an http(s) URL such as https://chat.qwen.ai"
    return None


def _http_url_or_empty(value: str) -> str | None:
    return None if value == "" else _http_url(value)


def _ws_or_http_url_or_empty(value: str) -> str | None:
    if value == "":
        return None
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https", "ws", "wss") or not parsed.netloc:
        return "must be empty or a URL such as http://127.0.0.1:9222"
    return None


def _between(low: float, high: float, *, low_open: bool = False) -> Callable[[float], str | None]:
    """A range check: finite (no nan or inf: TOML allows both) and within [low, high] (or (low, high])."""

    def check(value: float) -> str | None:
        # Compared as they are: a huge TOML integer does not fit a float, so no math.isfinite on it.
        finite = not isinstance(value, float) or math.isfinite(value)
        below = value <= low if low_open else value < low
        if finite and not below and value <= high:
            return None
        low_shown, high_shown = _number(low), _number(high)
        return (
            f"must be more than {low_shown} and at most {high_shown}"
            if low_open
            else f"must be {low_shown} to {high_shown}"
        )

    return check


def _number(value: float) -> str:
    """A bound as a reader writes it: 1000000, not 1e+06."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


DISPLAY_MODES = ("auto", "xvfb", "none")  # browser.display: engines/qwen/display.py plans each
DAY = 86400  # the upper bound of most waits: a longer one is a typo, and would overflow timers


def _env_name(value: str) -> str | None:
    ok = value.isascii() and value.replace("_", "a").isalnum() and not value[:1].isdigit()
    if ok:
        return None
    return (
        "must be the NAME of an environment variable (letters, digits, _), not a key "
        "(the value is not shown, in case it is one): put the key in the environment, "
        'e.g. export ROUTER_API_KEY=..., and set api_key_env = "ROUTER_API_KEY"'
    )


def _not_empty(value: str) -> str | None:
    return "must not be empty" if not value.strip() else None


def _string_table(value: dict) -> str | None:
    bad = [k for k, v in value.items() if not isinstance(v, str) or not v.strip()]
    return f"entries must be non-empty strings (bad: {', '.join(bad)})" if bad else None


def _language(value: str) -> str | None:
    return None if value in ("", *LANGUAGES) else f"must be empty (any) or one of {', '.join(LANGUAGES)}"


def _one_of(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(repr(c) for c in choices)}"

    return check


def _command_with(*names: str) -> Callable[[str], str | None]:
    """A command template whose only placeholders are `names`."""
    known = " and ".join(f"{{{name}}}" for name in names)

    def check(value: str) -> str | None:
        import string

        try:
            fields = [
                name for _text, name, _spec, _conv in string.Formatter().parse(value) if name is not None
            ]
        except ValueError as err:
            return f"is not a command template ({err}; write {{{{ and }}}} for a literal brace)"
        unknown = [name for name in fields if name not in names]
        if unknown:
            return f"uses {{{unknown[0]}}}: the placeholders are {known}"
        return None

    return check


_after_command = _command_with("path", "slug")


def _string_list(value: list) -> str | None:
    return (
        None if all(isinstance(v, str) and v.strip() for v in value) else "entries must be non-empty strings"
    )


class Key(NamedTuple):
    type: type | tuple[type, ...]
    default: Any
    check: Callable[[Any], str | None] | None = None
    comment: str = ""
    may_be_secret: bool = False  # a key pasted in by mistake: messages never show the value
    path: PathKind | None = None  # a path: checked at load by pathguard (check_paths)


def key(
    type: type | tuple[type, ...],  # noqa: A002 - the same word as Key's field
    default: Any,
    check: Callable[[Any], str | None] | None = None,
    comment: str = "",
    *,
    may_be_secret: bool = False,
    path: PathKind | None = None,
) -> Any:
    """A section's field that carries its Key: the default, the rule and the comment in one line.
    `path`: the key names a file or folder of that kind (every such key must say so: the one
    guard of paths, Config.check_paths, goes by it)."""
    return Key(type, default, check, comment, may_be_secret, path)


class Section:
    """A [section] of config.toml: `config.qwen.max_attempts`, typed and read-only. Its keys are
    the class's `key(...)` attributes, in order. A frozen record as a dataclass would be (keyword
    construction, a missing key its default, equality and hash by value, no assignment), written
    once here: generating a dozen dataclasses cost every command ~10 ms of start-up
    (docs/performance.md, "Start-up")."""

    _keys: ClassVar[dict[str, Key]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._keys = {name: value for name, value in vars(cls).items() if isinstance(value, Key)}
        for name, spec in cls._keys.items():  # the class attribute reads as its default, as before
            setattr(cls, name, spec.default)

    @classmethod
    def keys(cls) -> dict[str, Key]:
        return dict(cls._keys)

    def __init__(self, **values: Any) -> None:
        unknown = values.keys() - self._keys.keys()
        if unknown:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {min(unknown)!r}")
        for name, spec in self._keys.items():
            object.__setattr__(self, name, values[name] if name in values else _copy(spec.default))

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._keys)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._keys)
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Section:
        """A copy with some keys changed (what dataclasses.replace gave)."""
        return type(self)(**{**{name: getattr(self, name) for name in self._keys}, **changes})


# The one place the keys live: defaults, validation, `init` and the docs all read these classes.
class Paths(Section):
    """[paths]"""

    prompts: str = key(
        str,
        "prompts",
        _not_empty,
        "folder of prompts/SLUG.md, relative to this file",
        path=PathKind.PROJECT,
    )
    articles: str = key(
        str,
        "articles",
        _not_empty,
        "where SLUG.md, SLUG.md.url and the journal go",
        path=PathKind.PROJECT,
    )


class Qwen(Section):
    """[qwen]"""

    base_url: str = key(str, "https://chat.qwen.ai", _http_url, "the chat site (or the simulator)")
    poll_interval: float = key((int, float), 60, _between(0, DAY), "seconds between two looks at one chat")
    max_attempts: int = key(int, 5, _between(1, 1000), "transient failures in a row before it counts as hard")
    concurrency: int = key(int, 2, _between(1, 64), "chats open at once in one cycle")
    max_sends_per_day: int = key(
        int, 0, _between(0, 100_000), "0 = no limit; counted from the journal, local day"
    )
    max_sends_per_cycle: int = key(int, 0, _between(0, 100_000), "0 = no limit; a later turn counts too")
    bot_check_pause: float = key(
        (int, float),
        6,
        _between(0.1, 24 * 7),
        "hours an account met by a bot check is left alone (or until `qwenpipe login --account NAME`)",
    )
    bot_check_pause_first: float = key(
        (int, float),
        0.5,
        _between(0.01, 24 * 7),
        "hours of an account's first bot-check hold; each strike within a day of the last doubles it, "
        "up to bot_check_pause",
    )
    send_hours: str = key(
        str, "", _send_hours, 'new sends only then, e.g. "07:00-22:00 Europe/Berlin" ("" = any time)'
    )
    page_timeout: float = key(
        (int, float), 30, _between(1, 3600), "seconds to wait for the chat page to load"
    )
    answer_timeout: float = key(
        (int, float),
        1800,
        _between(10, DAY),
        "generate --wait gives up after this many seconds",
    )
    stable_reads: int = key(int, 3, _between(1, 100), "reads 1 s apart the answer must stay unchanged")
    api_reads_per_second: float = key(
        (int, float),
        10,
        _between(1, 1000),
        "a cycle reads chats' JSON through one page at most this fast",
    )
    collect: str = key(
        str, "api", _one_of("api", "page"), '"page": open every chat\'s page, never the JSON first'
    )
    send_concurrency: int = key(int, 1, _between(1, 16), "sends side by side in one cycle (tabs)")
    run_timeout: float = key(
        (int, float),
        1800,
        _between(0, DAY, low_open=True),
        "stop a cycle/generate running longer (safe: the next run resumes)",
    )
    selectors: dict[str, str] = key(dict, {}, _string_table, "CSS selectors that replace the built-in ones")
    model: str = key(str, "", None, 'as the site\'s model picker names it, e.g. "Qwen3.7-Max"; "" = default')
    thinking: str = key(
        str,
        "auto",
        _one_of("auto", "on", "off"),
        '"on"/"off": Thinking/Fast in the thinking select (or the older toggle); "auto": Auto',
    )
    web_search: bool = key(bool, False, None, "turn the site's web search on for each new chat")
    max_prompt_bytes: int = key(
        int,
        100_000,
        _between(1000, 1_000_000),
        "a turn whose chat request is larger is refused unsent (the site shows a captcha)",
    )
    lost_chat_after: float = key(
        (int, float),
        1800,
        _between(10, 7 * DAY),
        "seconds an interrupted send's chat may stay unreadable before its prompt is sent again",
    )
    delete_chats: str = key(
        str,
        "never",
        _one_of("never", "after_collect"),
        '"after_collect": delete each chat once its article is on disk (leftover chats risk a ban)',
    )


class Browser(Section):
    """[browser]"""

    executable: str = key(
        str,
        "",
        None,
        "empty = auto: Playwright's Chromium, else chromium/google-chrome",
        path=PathKind.PROGRAM,
    )
    headless: bool = key(bool, True, None, "false for a visible browser (desktop or Xvfb)")
    display: str = key(str, "auto", _one_of(*DISPLAY_MODES), "headed without a screen: auto/xvfb start Xvfb")
    profile_dir: str = key(
        str,
        ".qwenpipe/profile",
        _not_empty,
        "persistent browser profile (the login)",
        path=PathKind.FOLDER_WRITTEN,
    )
    storage_state: str = key(
        str,
        ".qwenpipe/state.json",
        _not_empty,
        "saved login (0600), a file of its own",
        path=PathKind.FILE_WRITTEN,
    )
    cdp_url: str = key(str, "", _ws_or_http_url_or_empty, "attach to a running Chrome instead of launching")
    args: list[str] = key(list, [], None, "extra command-line switches for Chromium")
    proxy: str = key(
        str,
        "",
        _proxy,
        'the account\'s own exit, e.g. "http://user:pass@host:8080" (http, https, socks5); "" = none',
        may_be_secret=True,
    )
    trace: bool = key(
        bool,
        False,
        None,
        "keep a Playwright trace of the last run (.qwenpipe/trace-ACCOUNT.zip) for `qwenpipe report`",
    )


class Router(Section):
    """[router]"""

    enabled: bool = key(bool, True, None, "fall back to the router on a hard chat failure")
    base_url: str = key(str, "http://localhost:20128/v1", _http_url, "OpenAI-compatible endpoint")
    model: str = key(str, "qwen/qwen3-max", _not_empty, "model id as the router lists it")
    api_key_env: str = key(
        str, "ROUTER_API_KEY", _env_name, "environment variable holding the key", may_be_secret=True
    )
    api_key_file: str = key(
        str,
        "",
        None,
        "a file holding the key (mode 0600), read when that variable is unset (cron)",
        may_be_secret=True,
        path=PathKind.FILE_READ,
    )
    timeout: float = key((int, float), 600, _between(1, DAY), "seconds to wait for a whole answer")
    connect_timeout: float = key((int, float), 10, _between(0.5, 3600), "seconds to wait for a connection")
    max_retries: int = key(int, 4, _between(0, 100), "retries of 408/409/429/5xx before giving up")
    max_retry_wait: float = key((int, float), 300, _between(0, DAY), "cap on one wait between retries")


class Article(Section):
    """[article]"""

    min_words: int = key(int, 50, _between(0, 1_000_000), "shorter answers are rejected (0 = no minimum)")
    language: str = key(str, "", _language, 'expected language, e.g. "en" (empty = any)')
    refusal_phrases: list[str] = key(list, [], _string_list, "more phrases that mark a refusal")
    max_words: int = key(int, 0, _between(0, 1_000_000), "longer answers are rejected (0 = no maximum)")
    min_headings: int = key(
        int, 0, _between(0, 1000), "answers with fewer ## headings are rejected (0 = off)"
    )
    forbidden: list[str] = key(
        list, [], _string_list, 'more phrases that reject an answer (built in: "lorem ipsum", ...)'
    )
    strip_chatter: bool = key(bool, True, None, 'drop "Sure! Here is..." and a wrapping code fence')
    strip_title: bool = key(bool, False, None, "drop the first heading from the body when it is the title")
    answer_turn: int = key(
        int, 0, _between(0, 1000), "multi-turn prompts: the turn whose answer is the article (0 = last)"
    )


class Login(Section):
    """[login]"""

    refresh_hours: float = key(
        (int, float),
        24,
        _between(0, 24 * 365),
        "save the site's renewed login when the saved one ends within this (0 = never)",
    )


def _similarity(value: float) -> str | None:
    if _between(0, 1, low_open=True)(value) is None:
        return None
    return "must be more than 0 and at most 1, e.g. 0.8 (1 refuses only a title of the same words)"


class Topics(Section):
    """[topics]"""

    similar: float = key(
        (int, float),
        0.8,
        _similarity,
        "`new`/`import` refuse a title with the same numbers and this share of its words in common with a "
        "known one (1 = only the same words)",
    )


class Publish(Section):
    """[publish]"""

    dir: str = key(
        str,
        "",
        None,
        'copy done articles here, e.g. "site/content/posts" (empty = off)',
        path=PathKind.FOLDER_WRITTEN,
    )
    bundle: bool = key(bool, False, None, "true: Hugo page bundles, DIR/SLUG/index.md")
    strip_title: bool = key(bool, True, None, "drop the body's leading # heading (the theme shows the title)")
    draft: bool = key(bool, False, None, "publish with draft = true")
    keep: list[str] = key(
        list, [], _string_list, 'qwenpipe\'s own front matter keys a page keeps too, e.g. ["model"]'
    )
    after: str = key(str, "", _after_command, "command run after each publish, with {path} and {slug}")
    after_timeout: float = key(
        (int, float), 60, _between(0, DAY, low_open=True), "seconds before `after` is stopped"
    )
    after_cycle: str = key(
        str,
        "",
        _command_with("dir"),
        "command run once after a cycle that published (e.g. git commit and push), with {dir}",
    )


def _needs(module: str, extra: str, check: Callable[[Any], str | None] | None = None):
    """A key that, once set, needs an optional library: its check, then the library's presence
    (found, not imported: a cron cycle pays for it only when it uses it)."""

    def needs(value: Any) -> str | None:
        from importlib.util import find_spec

        problem = check(value) if check else None
        if problem or not value or find_spec(module) is not None:
            return problem
        return f"needs {module}, which is not installed here: pip install 'qwenpipe[{extra}]'"

    return needs


class Notify(Section):
    """[notify]"""

    ping_url: str = key(str, "", _http_url_or_empty, "healthchecks.io-style URL pinged by `cycle`")
    urls: list[str] = key(
        list,
        [],
        _needs("apprise", "notify", _string_list),
        'Apprise URLs told what needs a person, e.g. ["ntfy://ntfy.sh/TOPIC"]',
        may_be_secret=True,
    )
    daily_summary: bool = key(bool, False, None, "also send, once a day, a summary of the batch to urls")
    summary_hour: int = key(int, 8, _between(0, 23), "the local hour from which the day's summary is sent")


class Metrics(Section):
    """[metrics]"""

    textfile: str = key(
        str,
        "",
        _needs("prometheus_client", "metrics"),
        "Prometheus text file written after each cycle (node_exporter's textfile collector)",
        path=PathKind.FILE_WRITTEN,
    )


def _store_url(value: str) -> str | None:
    if value == "":
        return None
    try:
        parsed = urlparse(value)
        parsed.port  # noqa: B018 - a bad port raises here
    except ValueError:
        return "is not a URL such as postgresql://qwenpipe@db.example/qwenpipe"
    if parsed.scheme not in ("postgresql", "postgres") or not (parsed.netloc or parsed.query):
        return "must be empty (SQLite under articles/.qwenpipe) or a URL such as postgresql://user@host/db"
    in_query = any(
        name.strip().lower() == "password" for name, _ in parse_qsl(parsed.query, keep_blank_values=True)
    )
    if parsed.password is not None or in_query:
        return (
            "holds a password (not shown): remove it from the URL and give it to PostgreSQL's usual "
            "sources instead, PGPASSWORD or ~/.pgpass (mode 0600)"
        )
    return None


def _host_id(value: str) -> str | None:
    ok = value == "" or (
        len(value) <= 63 and value.replace("-", "a").replace("_", "a").replace(".", "a").isalnum()
    )
    return (
        None if ok and value.isascii() else "must be empty (the hostname) or letters, digits, '.', '-', '_'"
    )


class Store(Section):
    """[store]"""

    url: str = key(
        str,
        "",
        _store_url,
        "empty: SQLite under articles/.qwenpipe; or postgresql://user@host/db",
        may_be_secret=True,
    )
    host_id: str = key(str, "", _host_id, "empty: the machine's hostname; must be unique per host")
    lease_seconds: float = key(
        (int, float),
        300,
        _between(10, DAY),
        "an article lease; renewed every lease_seconds/3 while a host works",
    )
    orphan_hours: float = key(
        (int, float),
        6,
        _between(0.1, 24 * 365),
        "a chat whose account no host served this long goes to the router",
    )

    @property
    def host(self) -> str:
        """This host's name in the batch: host_id, else the machine's hostname."""
        # os.uname's nodename is what socket.gethostname() returns, without importing socket.
        return self.host_id or os.uname().nodename


SECTIONS: dict[str, type[Section]] = {
    "paths": Paths,
    "qwen": Qwen,
    "browser": Browser,
    "router": Router,
    "article": Article,
    "login": Login,
    "topics": Topics,
    "publish": Publish,
    "notify": Notify,
    "metrics": Metrics,
    "store": Store,
}
SCHEMA: dict[str, dict[str, Key]] = {name: section.keys() for name, section in SECTIONS.items()}


# [accounts.NAME]: one table per chat account, each with these keys. A table of tables, so it is
# not in SCHEMA (whose sections have fixed keys); "{name}" in a default is the account's name.
ACCOUNTS = "accounts"
ACCOUNT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}\Z")


class AccountSettings(Section):
    """[accounts.NAME]"""

    profile_dir: str = key(
        str,
        ".qwenpipe/accounts/{name}/profile",
        _not_empty,
        "this account's browser profile",
        path=PathKind.FOLDER_WRITTEN,
    )
    storage_state: str = key(
        str,
        ".qwenpipe/accounts/{name}/state.json",
        _not_empty,
        "this account's saved login (0600), its own",
        path=PathKind.FILE_WRITTEN,
    )
    max_sends_per_day: int = key(
        int,
        0,
        _between(0, 100_000),
        "this account's own limit (0 = none); qwen.max_sends_per_day is the total",
    )
    enabled: bool = key(bool, True, None, "false: no new sends; its chats in flight wait")
    proxy: str = key(
        str, "", _proxy, "this account's browser goes out through it (as browser.proxy)", may_be_secret=True
    )
    send_hours: str = key(str, "", _send_hours, 'this account\'s own qwen.send_hours ("" = qwen.send_hours)')


ACCOUNT_KEYS = AccountSettings.keys()


def defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of every key at its default (what `init` writes), and no accounts."""
    values = {s: {k: _copy(key.default) for k, key in keys.items()} for s, keys in SCHEMA.items()}
    values[ACCOUNTS] = {}
    return values


def account_defaults(name: str) -> dict[str, Any]:
    return {
        k: key.default.format(name=name) if isinstance(key.default, str) else key.default
        for k, key in ACCOUNT_KEYS.items()
    }


def _copy(value: Any) -> Any:
    return type(value)(value) if isinstance(value, (list, dict)) else value


class PathSetting(NamedTuple):
    """A path key in force: "accounts.main.storage_state" is place "accounts.main", key
    "storage_state"; its value as written, its absolute (unresolved) path, and its Key."""

    name: str
    place: str
    key: str
    value: str
    path: Path
    spec: Key


@dataclass(frozen=True)
class Config:
    """A validated configuration. Paths are absolute (relative ones taken from the file's folder)."""

    values: dict[str, dict[str, Any]]
    root: Path
    source: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def resolve(self, value: str) -> Path:
        """A path key's value as an absolute path (a relative one is taken from the file's folder).
        Not resolved: a symlink there stays one, for the writer to refuse (check_paths did at load)."""
        return absolute(self.root, value)

    # The project's own folders, resolved (a link to another disk is followed: pathguard.PROJECT),
    # once (a lstat per level of the path each time): a cycle asks for them often.
    @cached_property
    def prompts_dir(self) -> Path:
        return self.resolve(self.paths.prompts).resolve()

    @cached_property
    def articles_dir(self) -> Path:
        return self.resolve(self.paths.articles).resolve()

    @property
    def publish_dir(self) -> Path | None:
        """Where done articles are published; None when publishing is off. Not resolved: a
        symlink there is refused (publish.check_publish_dir), not silently followed."""
        value = self.publish.dir
        return self.resolve(value) if value else None

    # The typed sections: `config.qwen.max_attempts` (a typo is an AttributeError, not a default).
    @cached_property
    def paths(self) -> Paths:
        return Paths(**self.values["paths"])

    @cached_property
    def qwen(self) -> Qwen:
        return Qwen(**self.values["qwen"])

    @cached_property
    def browser(self) -> Browser:
        return Browser(**self.values["browser"])

    @cached_property
    def router(self) -> Router:
        return Router(**self.values["router"])

    @cached_property
    def article(self) -> Article:
        return Article(**self.values["article"])

    @cached_property
    def login(self) -> Login:
        return Login(**self.values["login"])

    @cached_property
    def topics(self) -> Topics:
        return Topics(**self.values["topics"])

    @cached_property
    def publish(self) -> Publish:
        return Publish(**self.values["publish"])

    @cached_property
    def notify(self) -> Notify:
        return Notify(**self.values["notify"])

    @cached_property
    def metrics(self) -> Metrics:
        return Metrics(**self.values["metrics"])

    @cached_property
    def store(self) -> Store:
        return Store(**self.values["store"])

    @property
    def rotation(self) -> str:
        """[accounts] rotation: "spread" (default) or "fill" (see contract/rotation.py)."""
        return str(self.values.get(ACCOUNTS_OWN, {}).get("rotation") or ACCOUNTS_KEYS["rotation"].default)

    @cached_property
    def accounts(self) -> dict[str, AccountSettings]:
        """[accounts.NAME] tables by name, in the file's order (none: the one account of [browser])."""
        return {name: AccountSettings(**keys) for name, keys in self.values.get(ACCOUNTS, {}).items()}

    def with_override(self, section: str, key: str, value: Any, where: str) -> Config:
        """A copy with one key set from the command line, checked like the file's keys."""
        checked = check_value(f"{section}.{key}", SCHEMA[section][key], value, where)
        values = {s: dict(keys) for s, keys in self.values.items()}
        values[section][key] = checked
        _check_proxies(values, where, from_file=False)
        config = Config(
            values=values,
            root=self.root,
            source=self.source,
            overrides={**self.overrides, f"{section}.{key}": where},
        )
        if SCHEMA[section][key].path is not None:  # a path from elsewhere: the same one guard
            config.check_paths()
        return config

    def describe(self) -> str:
        return str(self.source) if self.source else "built-in defaults (no config.toml)"

    def require_prompts_dir(self) -> Path:
        """The prompts folder; ConfigError when it does not exist, saying where it looked and the
        fix (a cron job started in the wrong folder must fail, not find nothing to do forever)."""
        folder = self.prompts_dir
        if not folder.is_dir():
            raise ConfigError(
                f"no prompts folder: {folder} does not exist (paths.prompts, {self.describe()}); "
                "run in the project's folder or pass --config PATH, or create it (`qwenpipe init` does)"
            )
        return folder

    def check_folders(self) -> Config:
        """Refuse folder settings that cannot work: prompts and articles the same folder or one
        inside the other (articles would be read as prompts), or a prompts path that is a file;
        then every path key (check_paths)."""
        prompts, articles = self.prompts_dir, self.articles_dir
        where = self.describe()
        shown = f"paths.prompts = {self.paths.prompts!r} ({prompts}) and "
        shown += f"paths.articles = {self.paths.articles!r} ({articles})"
        if prompts == articles:
            raise ConfigError(f"{where}: {shown} are the same folder; give each its own")
        if articles.is_relative_to(prompts) or prompts.is_relative_to(articles):
            raise ConfigError(f"{where}: {shown}: one is inside the other; make them separate folders")
        self.check_paths()  # first: a FIFO or a device is said as such
        if prompts.exists() and not prompts.is_dir():
            raise ConfigError(
                f"{where}: paths.prompts = {prompts} is a file, not a folder of SLUG.md prompts"
            )
        return self

    def path_settings(self) -> list[PathSetting]:
        """Every path key in force, in the file's order: the sections' (a [browser] key that
        [accounts.NAME] tables also have is the one account's of a setup without such tables, so
        only then), then each account's. An empty value (off) and a bare program name (looked
        up on PATH) name no path."""
        accounts = self.values.get(ACCOUNTS) or {}
        found: list[PathSetting] = []
        for place, keys, specs in (
            *((section, self.values[section], SCHEMA[section]) for section in SCHEMA),
            *((f"{ACCOUNTS}.{name}", table, ACCOUNT_KEYS) for name, table in accounts.items()),
        ):
            for name, spec in specs.items():
                value = keys[name]
                if (
                    spec.path is None
                    or not value
                    or (place == "browser" and accounts and name in ACCOUNT_KEYS)
                ):
                    continue
                if spec.path is PathKind.PROGRAM:
                    if os.sep not in value:
                        continue
                    path = Path(os.path.abspath(os.path.expanduser(value)))  # as the browser runs it
                else:
                    path = self.resolve(value)
                found.append(PathSetting(f"{place}.{name}", place, name, value, path, spec))
        return found

    def check_paths(self) -> None:
        """The one guard of every path the config names (pipeline/pathguard.py): each key's path
        holds nothing of the wrong kind (a symlink where qwenpipe writes, a FIFO, a device) and
        is none of the project's own files: this config file, the prompts, the articles (the
        store, sidecars and locks are under them), another key's file or folder. ConfigError
        naming the key, its path and the fix."""
        settings = self.path_settings()
        fixed = self._own_file()
        keys = [Place(s.name, s.path, s.spec.path.folder) for s in settings]  # type: ignore[union-attr]
        for at, setting in enumerate(settings):
            kind = setting.spec.path
            assert kind is not None
            places, later = [*fixed, *keys[:at]], keys[at + 1 :]
            example = self._example(setting)
            problem = _path_problem(setting.name, kind, setting.path, places, later, example)
            if problem:
                if setting.spec.may_be_secret and not os.path.lexists(setting.path):
                    shown = setting.name  # perhaps a key pasted where its path belongs: not shown
                else:
                    shown = f"{setting.name} = {setting.value!r} ({setting.path})"
                raise ConfigError(f"{self.describe()}: {shown} {problem}")

    def path_problem(self, name: str, kind: PathKind, path: Path) -> str | None:
        """Why `path`, given as `name` (a command's option such as `report --output`), cannot be
        used as a path of `kind`, or None: the same one guard as every key's (check_paths), so
        that a command never writes over this config file or into the project's folders, a
        profile or a saved login."""
        places = [
            *self._own_file(),
            *(Place(s.name, s.path, s.spec.path.folder) for s in self.path_settings()),  # type: ignore[union-attr]
        ]
        return _path_problem(name, kind, path, places)

    def _own_file(self) -> list[Place]:
        return [Place("this config file", self.source, folder=False)] if self.source else []

    def _example(self, setting: PathSetting) -> str:
        """A value that would do for `setting`'s key: its default (an account's, by its name)."""
        section, _, account = setting.place.partition(".")
        if account:
            return account_defaults(account)[setting.key]
        default = setting.spec.default
        return default if isinstance(default, str) else ""


def config_path(explicit: str | os.PathLike | None) -> tuple[Path, bool]:
    """Which file to read, and whether the user named it (then it must exist)."""
    if explicit:
        return Path(explicit).expanduser(), True
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser(), True
    return Path.cwd() / DEFAULT_CONFIG_NAME, False


def load(explicit: str | os.PathLike | None = None) -> Config:
    """Load and validate the config file picked by `--config`, QWENPIPE_CONFIG or ./config.toml."""
    path, named = config_path(explicit)
    if not path.exists():
        if named:
            raise ConfigError(
                f"{path}: no such config file (create one with `qwenpipe init --config {path}`)"
            )
        return Config(values=defaults(), root=Path.cwd().resolve()).check_folders()
    try:
        raw = files.read_bytes(path, follow=True).decode("utf-8")  # a FIFO never hangs a cron run
        data = tomllib.loads(raw)
    except files.UnsafeFile as bad:
        raise ConfigError(f"{path} is {bad.kind}, not a config file: make it a text file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; save it as UTF-8") from None
    except (tomllib.TOMLDecodeError, ValueError) as err:  # ValueError: an integer of 4300+ digits
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    values = validate(data, path)
    root = path.resolve().parent
    key_file = values["router"]["api_key_file"]
    if key_file:  # absolute from here on (not resolved: a link there is refused, not followed)
        values["router"]["api_key_file"] = str(absolute(root, key_file))
    config = Config(values=values, root=root, source=path.resolve()).check_folders()
    if key_file:  # refused now (not at 3 a.m.) when it cannot serve; its mode where it is used
        read_key_file(values["router"]["api_key_file"], path, private=False)
    return config


KEY_FILE_MAX = 64 * 1024


def exposed_key_file(path: str, info: os.stat_result) -> str | None:
    """Why the key file at `path` (its `info`) gives the key away, and the fix; None when it is
    this user's and no one else may read it (mode 0600 or stricter)."""
    import stat

    if info.st_uid == os.geteuid() and not info.st_mode & 0o077:
        return None
    mode = stat.S_IMODE(info.st_mode)
    whose = "" if info.st_uid == os.geteuid() else ", and it is another user's"
    return (
        f"{path} has mode {mode:04o}{whose}: others may read the key; make it yours and private: "
        f"chmod 600 {path}"
    )


def key_file_warning(config: Config) -> str | None:
    """For commands that only read (status, show...): the key file others may read, said as a
    warning; the runs that use the key refuse it (read_key_file)."""
    path = config.router.api_key_file
    if not path:
        return None
    try:
        exposed = exposed_key_file(path, os.lstat(path))
    except OSError:
        return None  # gone or unreadable: the runs that use it say so
    return f"router.api_key_file: {exposed}; runs that use the key refuse it until then" if exposed else None


def read_key_file(path: str, where: Path | str = "config.toml", *, private: bool = True) -> str | None:
    """The router key in router.api_key_file (its first line), None when the file is empty.
    ConfigError unless it is a regular file of this user that no one else may read (mode 0600 or
    stricter): a key the group or the world can read is a key given away. `private=False`: that
    one rule left to the caller (a command that only reads warns of it: key_file_warning).
    Never shows its text."""
    name = "router.api_key_file"
    try:
        handle = files.open_read(path)  # a FIFO never hangs a run; a link is refused (pathguard)
    except files.UnsafeFile as bad:
        raise ConfigError(f"{where}: {name}: {path} is {bad.kind}, not a file holding the key") from None
    except FileNotFoundError:
        raise ConfigError(
            f"{where}: {name}: no such file (the value is not shown, in case it is the key itself): "
            "give the path of a file holding the key"
        ) from None
    except OSError as err:
        raise ConfigError(f"{where}: {name}: cannot read {path}: {err.strerror}") from None
    with handle:
        exposed = exposed_key_file(path, os.fstat(handle.fileno()))
        if exposed and private:
            raise ConfigError(f"{where}: {name}: {exposed}")
        text = handle.read(KEY_FILE_MAX).decode("utf-8", errors="replace")  # bad bytes: refused below
    # Lines end at \n only (splitlines would also cut at \x0b, \x1c...: a key silently shortened).
    lines = [line.strip(" \t\r") for line in text.split("\n") if line.strip(" \t\r")]
    if not lines:
        return None
    bad = key_problem(lines[0])
    if bad:
        raise ConfigError(
            f"{where}: {name}: the key in {path} {bad} (the key is not shown): "
            "write the key alone on the file's first line, as the router gave it"
        )
    return lines[0]


def key_problem(key: str) -> str | None:
    """Why `key` cannot be a router key, or None: it goes into an HTTP header, which holds
    printable ASCII only. Never shows the key."""
    for char in key:
        if char == "\0":
            return "holds a NUL character"
        if not char.isascii():
            return "holds a non-ASCII character (a curly quote or a non-breaking space pasted with it?)"
        if not char.isprintable():
            return "holds a control character (a tab, an escape or a line break inside it?)"
    return None


class RouterKey(NamedTuple):
    """The router key (None: none is set) and where it came from, as messages name it:
    "ROUTER_API_KEY (router.api_key_env)" or "/path/router.key (router.api_key_file)"."""

    value: str | None
    source: str


def read_router_key(
    settings: Router, env: Mapping[str, str] | None = None, *, private: bool = True
) -> RouterKey:
    """The one place the router key is read: the variable named by `settings.api_key_env` in
    `env` (default os.environ), else the file `settings.api_key_file` (read_key_file). A key no
    HTTP header can carry is a ConfigError naming where it came from (key_problem). Not
    registered for masking here: pipeline.known_secrets.router_key_found does that."""
    name = settings.api_key_env or "ROUTER_API_KEY"
    source = f"{name} (router.api_key_env)"
    key = (os.environ if env is None else env).get(name) or None
    if key is not None:
        bad = key_problem(key)
        if bad:
            raise ConfigError(
                f"the key in {source} {bad} (the key is not shown): set it to the key alone, "
                f"as the router gave it: export {name}=..."
            )
        return RouterKey(key, source)
    if settings.api_key_file:  # cron carries no environment: the key's file
        path = settings.api_key_file
        return RouterKey(read_key_file(path, private=private), f"{path} (router.api_key_file)")
    return RouterKey(None, source)


def validate(data: dict[str, Any], where: Path | str = "config.toml") -> dict[str, dict[str, Any]]:
    """Merge `data` over the defaults, refusing anything that is not in SCHEMA or breaks a rule."""
    values = defaults()
    for section, table in data.items():
        if section == ACCOUNTS:
            values[ACCOUNTS] = _validate_accounts(table, where)
            values[ACCOUNTS_OWN] = {
                name: check_value(f"accounts.{name}", spec, table[name], where)
                for name, spec in ACCOUNTS_KEYS.items()
                if name in table and not isinstance(table[name], dict)
            }
            continue
        if section not in SCHEMA:
            known = ", ".join(f"[{s}]" for s in (*SCHEMA, "accounts.NAME"))
            raise ConfigError(f"{where}: unknown section [{section}] (known: {known})")
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: `{section}` must be a table [{section}], not a value")
        for key, value in table.items():
            spec = SCHEMA[section].get(key)
            name = f"{section}.{key}"
            if spec is None:
                known = ", ".join(SCHEMA[section])
                raise ConfigError(f"{where}: unknown key {name} (known in [{section}]: {known})")
            values[section][key] = check_value(name, spec, value, where)
    _check_proxies(values, where)
    return values


def _check_proxies(values: dict[str, dict[str, Any]], where: Path | str, *, from_file: bool = True) -> None:
    """The proxy keys that cannot work together with the rest: a proxy for a browser qwenpipe
    does not launch (browser.cdp_url), or, in the file, [browser]'s proxy beside
    [accounts.NAME] tables (it is the proxy of the one account of a setup without them: it would
    silently go unused; an account's own config has its proxy there: accounts.account_config)."""
    accounts = values.get(ACCOUNTS, {})
    if from_file and values["browser"]["proxy"] and accounts:
        names = ", ".join(f"[accounts.{name}]" for name in accounts)
        raise ConfigError(
            f"{where}: browser.proxy is the proxy of the one account of a setup without accounts, "
            f"and this one has {names}: set proxy in each account's table instead"
        )
    with_proxy = ["browser.proxy"] if values["browser"]["proxy"] else []
    with_proxy += [f"accounts.{name}.proxy" for name, keys in accounts.items() if keys.get("proxy")]
    if values["browser"]["cdp_url"] and with_proxy:
        raise ConfigError(
            f"{where}: {with_proxy[0]} is set, but browser.cdp_url (or --cdp) attaches to a Chrome "
            "you started, whose network settings are its own: start that Chrome with "
            "--proxy-server=HOST:PORT and remove the proxy key, or remove browser.cdp_url"
        )


# The keys of [accounts] itself (beside its [accounts.NAME] tables): how they share the sends.
ROTATIONS = ("spread", "fill")
ACCOUNTS_KEYS = {
    "rotation": Key(
        str,
        "spread",
        _one_of(*ROTATIONS),
        '"spread": a send to the account with the fewest sends today; "fill": the most left',
    ),
}
ACCOUNTS_OWN = "accounts_own"  # where values keep [accounts]' own keys (apart from its tables)


def _validate_accounts(table: Any, where: Path | str) -> dict[str, dict[str, Any]]:
    """[accounts.NAME] tables, in the file's order (the order that breaks ties in rotation).
    [accounts]' own keys (ACCOUNTS_KEYS) are taken out first: validate keeps them apart."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: `accounts` must be tables such as [accounts.main], not a value")
    accounts: dict[str, dict[str, Any]] = {}
    for name, keys in table.items():
        if name in ACCOUNTS_KEYS and not isinstance(keys, dict):
            continue  # [accounts] rotation = ...: not an account
        if not ACCOUNT_NAME.match(name):
            raise ConfigError(
                f"{where}: [accounts.{name}]: an account name is a-z, 0-9, _ and - "
                "(starting with a letter or digit, at most 63), e.g. [accounts.main]"
            )
        if not isinstance(keys, dict):
            raise ConfigError(f"{where}: `accounts.{name}` must be a table [accounts.{name}], not a value")
        values = account_defaults(name)
        for key, value in keys.items():
            spec = ACCOUNT_KEYS.get(key)
            if spec is None:
                known = ", ".join(ACCOUNT_KEYS)
                raise ConfigError(f"{where}: unknown key accounts.{name}.{key} (known: {known})")
            values[key] = check_value(f"accounts.{name}.{key}", spec, value, where)
        accounts[name] = values
    return accounts


def check_value(name: str, spec: Key, value: Any, where: Path | str) -> Any:
    types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
    shown = name if spec.may_be_secret else f"{name} = {value!r}"
    # bool is an int in Python; `poll_interval = true` is still a mistake.
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        wanted = " or ".join(_type_name(t) for t in types)
        raise ConfigError(f"{where}: {shown} must be {wanted}")
    if spec.check:
        problem = spec.check(value)
        if problem:
            raise ConfigError(f"{where}: {shown} {problem}")
    return value


def _type_name(t: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "a table",
    }.get(t, t.__name__)


def render_default_config() -> str:
    """The commented config.toml that `init` writes: every key at its default, one comment each."""
    import tomli_w

    parts = [
        "# qwenpipe configuration. Every key is shown at its default; relative paths are",
        "# taken from this file's folder. The router key itself is read from the environment",
        "# variable named by router.api_key_env, never from this file.",
        "",
    ]
    for section, keys in SCHEMA.items():
        parts.append(f"[{section}]")
        for key, spec in keys.items():
            # An empty table would come out as a [header]: write it inline instead.
            line = f"{key} = {{}}" if spec.default == {} else tomli_w.dumps({key: spec.default}).strip()
            parts.append(f"{line:<44} # {spec.comment}" if spec.comment else line)
        parts.append("")
    parts += [
        "# Several chat accounts: one table each (without any, [browser]'s profile and state are",
        "# the one account, named default). Defaults shown for an account named main:",
        "# [accounts.main]",
    ]
    for key, value in account_defaults("main").items():
        parts.append(f"# {tomli_w.dumps({key: value}).strip():<42} # {ACCOUNT_KEYS[key].comment}")
    parts.append("")
    return "\n".join(parts)
