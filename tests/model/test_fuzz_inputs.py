"""Fuzzing what users and crashes leave on disk: config files, prompt files, sidecars, journals.

Every input either works or is refused with a clear one-line message and exit 2 (1 for a
dead letter); never a traceback (the runs here set QWENPIPE_DEBUG, so `pipeline.cli.app.run`
re-raises an unexpected exception and a bug fails here with its traceback), never a write
outside articles/, nothing that existed lost.
The engines are in-process fakes, patched into the CLI's lazy Engines: no browser, no network.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tempfile
import tomllib
from pathlib import Path
from unittest import mock

import hypothesis.strategies as st
import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, settings

from pipeline.cli.app import run
from pipeline.config import SCHEMA, ConfigError, load
from pipeline.contract.workspace import Engines
from pipeline.engines.base import Answer, ChatTurns, FoundChat, Generating, TurnState

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(
    max_examples=int(os.environ.get("QWENPIPE_FUZZ_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
EXIT_CODES = {0, 1, 2, 3, 42}
ANSWER = "# A Fine Title\n\nThe body of the fuzzed article, with enough words to be an article.\n"


class FuzzChat:
    """Sends, then answers at once; multi-turn aware. Records what it was sent."""

    name = "qwen"
    base_url = "https://chat.qwen.ai"
    launches = 0

    def noticed(self) -> list:  # it answers nothing it does not know
        return []

    def __init__(self) -> None:
        self.messages: dict[str, list[str]] = {}

    def prepare(self) -> None:
        pass

    def send(self, text: str, choice=None, *, on_chat_id=None) -> str:
        url = f"{self.base_url}/c/{len(self.messages) + 1:08d}-0000-4000-8000-000000000000"
        if on_chat_id is not None:
            on_chat_id(url.rsplit("/", 1)[1])
        self.messages[url] = [text]
        return url

    def user_messages(self, chat_url: str) -> list[str] | None:
        return self.messages.get(chat_url)

    def check(self, chat_url: str):
        return Answer(ANSWER, "qwen", model="qwen-max") if chat_url in self.messages else Generating()

    def wait(self, chat_url: str, *, timeout: float, on_progress=None) -> Answer:
        return Answer(ANSWER, "qwen", model="qwen-max")

    def find_chats(self, text: str = "", *, sha256: str = "") -> list[FoundChat]:
        return [FoundChat(u, None) for u, m in reversed(self.messages.items()) if m[0] == text]

    def read_turns(self, chat_url: str) -> ChatTurns:
        users = self.messages.get(chat_url) or ["?"]
        return ChatTurns([TurnState(u, ANSWER, complete=True) for u in users], title="T", model="m")

    def send_turn(self, chat_url: str, text: str) -> None:
        self.messages.setdefault(chat_url, []).append(text)

    def close(self) -> None:
        pass


class FuzzRouter:
    name = "router"

    def generate(self, text: str, history=()) -> Answer:
        return Answer(ANSWER, "router", model="test/model")

    def close(self) -> None:
        pass


@contextlib.contextmanager
def project():
    """A fresh project (hypothesis runs many examples per test: no function-scoped tmp_path)."""
    root = Path(tempfile.mkdtemp(prefix="qwenpipe-fuzz-"))
    (root / "prompts").mkdir()
    (root / "articles").mkdir()
    (root / "config.toml").write_text(
        "[qwen]\npoll_interval = 0\nmax_attempts = 3\n[article]\nmin_words = 0\n"
    )
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def qwenpipe(root: Path, *args: str, config: Path | None = None) -> tuple[int, str]:
    """The real CLI in-process, with fake engines; (exit code, stderr). QWENPIPE_DEBUG is set: an
    unexpected exception is a bug, and it comes through with its traceback."""
    chat, router = FuzzChat(), FuzzRouter()
    stderr, stdout = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, {"QWENPIPE_DEBUG": "1"}),
        mock.patch.object(Engines, "chat", lambda self, account="default": chat),
        mock.patch.object(Engines, "router", lambda self: router),
        contextlib.redirect_stderr(stderr),
        contextlib.redirect_stdout(stdout),
    ):
        code = run(["--config", str(config or root / "config.toml"), *args])
    return code, stderr.getvalue()


def snapshot(folder: Path, *, skip: Path | None = None) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and (skip is None or skip not in p.parents)
    }


# The account's browser profile: the browser's own state, which every send writes (and, with
# it, the record of the chats the account's sends made: pipeline/contract/sent_chats.py).
PROFILE = ".qwenpipe/profile/"


def outside_articles(files: dict[str, bytes]) -> dict[str, bytes]:
    """What a run must leave as it was: everything but articles/ and the account's profile."""
    return {k: v for k, v in files.items() if not k.startswith(("articles/", PROFILE))}


STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d ")  # say()'s time off a terminal


def assert_clear_refusal(code: int, stderr: str) -> None:
    assert code in EXIT_CODES, code
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    if code == 2:
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert lines and STAMP.sub("", lines[-1]).startswith("qwenpipe: "), stderr


# -- config files --------------------------------------------------------------------------------

toml_scalars = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20),
    st.datetimes(),
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
# Paths stay inside the project (an absolute path is the user's choice, not a bug to fuzz).
safe_paths = st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8})?", fullmatch=True)


@st.composite
def config_documents(draw) -> dict:
    document: dict = {}
    sections = draw(st.lists(st.sampled_from([*SCHEMA, "extra", "Qwen"]), max_size=4, unique=True))
    for section in sections:
        known = list(SCHEMA.get(section, {}))
        keys = draw(st.lists(st.sampled_from(known + ["typo", "max_attemps"]), max_size=4, unique=True))
        table = {}
        for key in keys:
            table[key] = draw(safe_paths) if section == "paths" and key in known else draw(toml_values)
        document[section] = table if draw(st.integers(0, 9)) else draw(toml_scalars)
    return document


@FUZZ
@given(text=st.text(max_size=300))
@example(text="[qwen]\nmax_attempts = 0\n")
@example(text="[qwen]\npoll_interval = true\n")
@example(text="[paths]\narticles = ''\n")
@example(text="qwen = 3\n")
@example(text="[qwen.selectors]\ncomposer = 5\n")
@example(text="[browser]\nargs = [1, 2]\n")
def test_any_config_text_works_or_is_refused_with_exit_2(text):
    with project() as root:
        config = root / "fuzzed.toml"
        config.write_text(text, encoding="utf-8", errors="surrogatepass")
        check_config_run(root, config)


@FUZZ
@given(document=config_documents())
def test_any_valid_toml_config_works_or_is_refused_with_exit_2(document):
    with project() as root:
        config = root / "fuzzed.toml"
        config.write_text(tomli_w.dumps(document), encoding="utf-8")
        check_config_run(root, config)


@FUZZ
@given(raw=st.binary(max_size=200))
@example(raw=b"\xff\xfe[\x00q\x00")  # UTF-16
@example(raw="[qwen]\nbase_url = 'http://caf\xe9'\n".encode("latin-1"))
def test_config_bytes_that_are_not_utf8_are_refused(raw):
    with project() as root:
        config = root / "fuzzed.toml"
        config.write_bytes(raw)
        check_config_run(root, config)


def check_config_run(root: Path, config: Path) -> None:
    (root / "prompts" / "done.md").write_text("Write about things that are finished.")
    (root / "articles" / "done.md").write_text("+++\ntitle = 'Done'\n+++\nDone.\n")
    try:
        workable = load(config)
    except ConfigError:
        workable = None
    before = snapshot(root)
    for args in (["generate", "done"], ["status", "--json"], ["cycle"]):
        code, stderr = qwenpipe(root, *args, config=config)
        assert_clear_refusal(code, stderr)
        if workable is None:
            assert code == 2 and config.name in stderr, stderr
            assert snapshot(root) == before, "a refused config still wrote files"
    if workable is not None:
        articles = workable.articles_dir
        assert root in articles.parents or articles == root, articles
        after = snapshot(root, skip=articles)
        assert {k: v for k, v in before.items() if not (root / k).is_relative_to(articles)} == after


# -- prompt files --------------------------------------------------------------------------------

front_matter = st.one_of(
    st.just(""),
    st.builds(
        lambda d: f"+++\n{tomli_w.dumps(d)}+++\n",
        st.dictionaries(st.text(min_size=1, max_size=8), toml_values, max_size=4),
    ),
    st.builds(lambda t: f"+++\n{t}\n+++\n", st.text(max_size=60)),
    st.just("+++\ntitle = 'never closed'\n"),
    st.just("+++\n[article]\nmin_words = 'many'\n+++\n"),
    st.just("+++\n[article]\nanswer_turn = 3\n+++\n"),
    st.just("+++\ntitle = 7\ntags = [1, 'a']\ndate = 1979-05-27\n+++\n"),
)
bodies = st.one_of(
    st.text(max_size=200),
    st.just("First turn.\n=== next turn ===\nSecond turn."),
    st.just("=== next turn ===\nA turn after nothing."),
    st.just("   \n\n"),
)
encodings = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1", "nul"])


@FUZZ
@given(head=front_matter, body=bodies, encoding=encodings)
def test_any_prompt_file_is_written_up_or_refused_with_exit_2(head, body, encoding):
    with project() as root:
        text = head + body
        if encoding == "nul":
            raw = text.encode("utf-8") + b"\x00tail"
        else:
            raw = text.encode(encoding, errors="replace")
        (root / "prompts" / "fuzz.md").write_bytes(raw)
        before = snapshot(root)
        code, stderr = qwenpipe(root, "generate", "fuzz", "--wait")
        assert_clear_refusal(code, stderr)
        if code == 2:
            assert snapshot(root) == before, "a refused prompt still wrote files"
            return
        assert code == 0, stderr
        article = (root / "articles" / "fuzz.md").read_text(encoding="utf-8")
        head_text, body_text = article[4:].split("\n+++\n", 1)
        meta = tomllib.loads(head_text)
        assert meta["slug"] == "fuzz" and "fuzzed article" in body_text
        assert outside_articles(snapshot(root)) == outside_articles(before)


def test_a_prompt_over_one_megabyte_is_refused(tmp_path):
    with project() as root:
        (root / "prompts" / "big.md").write_bytes(b"a" * 1_000_001)
        code, stderr = qwenpipe(root, "generate", "big")
        assert code == 2 and "too large" in stderr


# -- sidecars, state, journal ------------------------------------------------------------------

CHAT_URL = "https://chat.qwen.ai/c/00000001-0000-4000-8000-000000000000"
sidecar_text = st.one_of(
    st.binary(max_size=120),
    st.text(max_size=120).map(lambda t: t.encode("utf-8", errors="surrogatepass")),
    st.sampled_from(
        [
            CHAT_URL.encode() + b"\n",
            CHAT_URL.encode() + b"\n" + CHAT_URL.encode() + b"\n",
            b"https://evil.example/c/00000001-0000-4000-8000-000000000000\n",
            b"file:///etc/passwd\n",
            CHAT_URL.encode() + b"?x=1\n",
            "\ufeff".encode() + CHAT_URL.encode(),
            CHAT_URL.encode("utf-16"),
        ]
    ),
)
json_junk = st.one_of(
    st.binary(max_size=80),
    st.builds(
        json.dumps,
        st.recursive(
            st.none() | st.integers() | st.text(max_size=5) | st.floats(),
            lambda i: st.lists(i, max_size=3) | st.dictionaries(st.text(max_size=12), i, max_size=4),
            max_leaves=8,
        ),
    ).map(str.encode),
    st.builds(
        lambda a, h, t: json.dumps(
            {"attempts": a, "hard_failures": h, "next_try": t, "errors": "x"}
        ).encode(),
        st.one_of(st.integers(), st.text(max_size=3), st.none()),
        st.one_of(st.integers(-5, 10), st.floats()),
        st.one_of(st.floats(), st.text(max_size=3)),
    ),
)
journal_lines = st.lists(
    st.one_of(
        st.binary(max_size=60),
        st.just(b'{"ts": 1, "slug": "fuzz", "event": "sending"'),  # torn
        st.just(b'{"ts": "yesterday", "slug": 5, "event": null}\n'),
        st.just(b"[1, 2, 3]\n"),
        st.just(json.dumps({"ts": -1, "slug": "fuzz", "event": "sending"}).encode() + b"\n"),
        st.just(json.dumps({"ts": 1, "slug": "fuzz", "event": "done", "duration": "x"}).encode() + b"\n"),
    ),
    max_size=8,
)


@FUZZ
@given(
    url=st.one_of(st.none(), sidecar_text),
    failed=st.one_of(st.none(), sidecar_text, st.just(b"reason = 'bot_check'\nattempts = 'x'\n")),
    sending=st.one_of(st.none(), sidecar_text),
    state=st.one_of(st.none(), json_junk),
    quota=st.one_of(st.none(), json_junk),
    journal=journal_lines,
    command=st.sampled_from(
        [
            ("generate", "fuzz"),
            ("generate", "fuzz", "--wait"),
            ("cycle",),
            ("status", "--json"),
            ("replay", "fuzz"),
        ]
    ),
)
def test_any_sidecar_state_or_journal_works_or_is_refused(
    url, failed, sending, state, quota, journal, command
):
    with project() as root:
        (root / "prompts" / "fuzz.md").write_text("Write about sidecars.")
        (root / "prompts" / "other.md").write_text("Write about neighbours.")
        out = root / "articles"
        (out / ".qwenpipe" / "state").mkdir(parents=True)
        (out / "other.md").write_text("+++\ntitle = 'Other'\n+++\nDone before.\n")
        for name, data in ((".md.url", url), (".md.failed", failed), (".md.sending", sending)):
            if data is not None:
                (out / f"fuzz{name}").write_bytes(data)
        if state is not None:
            (out / ".qwenpipe" / "state" / "fuzz.json").write_bytes(state)
        if quota is not None:
            (out / ".qwenpipe" / "quota.json").write_bytes(quota)
        if journal:
            (out / ".qwenpipe" / "journal.jsonl").write_bytes(b"".join(journal))
        before = snapshot(root)
        code, stderr = qwenpipe(root, *command)
        assert_clear_refusal(code, stderr)
        after = snapshot(root)
        if code == 2:
            assert after == before, "refused, yet files changed"
        # Nothing outside articles/ changes; the finished neighbour is never touched.
        assert outside_articles(after) == outside_articles(before)
        assert after["articles/other.md"] == before["articles/other.md"]
        # A URL sidecar is the proof of a send: it may be read, never replaced by another chat.
        if url is not None and "articles/fuzz.md.url" in after:
            assert after["articles/fuzz.md.url"] == url
        # The journal only grows: old lines are never rewritten.
        if journal:
            assert after["articles/.qwenpipe/journal.jsonl"].startswith(b"".join(journal))


@pytest.mark.parametrize("ts", [b"1e20", b"Infinity", b"NaN", b"-1e20"])
@pytest.mark.parametrize("command", [("status", "--json"), ("cycle",), ("show", "fuzz")])
def test_a_journal_line_with_an_impossible_time_is_skipped(ts, command):
    with project() as root:
        config = root / "config.toml"
        config.write_text(config.read_text().replace("[qwen]\n", "[qwen]\nmax_sends_per_day = 5\n"))
        (root / "prompts" / "fuzz.md").write_text("Write about time.")
        state = root / "articles" / ".qwenpipe"
        state.mkdir(parents=True)
        (state / "journal.jsonl").write_bytes(b'{"ts": ' + ts + b', "slug": "fuzz", "event": "sending"}\n')
        code, stderr = qwenpipe(root, *command)
        assert code in (0, 3, 42), stderr
