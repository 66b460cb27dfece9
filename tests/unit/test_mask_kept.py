"""The one mask on everything kept (redact.mask_kept): what it masks, how a record stays a valid
record, what it leaves alone (Verbatim text, binary bytes, numbers), and the two places every
write passes through (files' writers; the store's: tests/store/test_store_masks_what_it_keeps.py).
The secrets the workspace registers (known_secrets.register_all) are masked by it."""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime

import pytest
import tomli_w

from pipeline import files, redact
from pipeline.config import load
from pipeline.known_secrets import register_all
from pipeline.redact import MASK, Verbatim, mask_kept, url_tokens

KEY = "Qz8-kept-key-0123456789-abcdefghij"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJpZCI6IjEyMyJ9.c2lnbmF0dXJl"  # a login token nobody registered


@pytest.fixture(autouse=True)
def key():
    redact.register(KEY)


def test_text_loses_the_key_a_url_password_and_a_login_token():
    text = f"401 for {KEY}; proxy http://me:hunter2@proxy:8080; token {TOKEN}"
    kept = mask_kept(text)
    assert KEY[:8] not in kept and "hunter2" not in kept and "eyJ" not in kept
    assert kept.count(MASK) == 3 and "proxy:8080" in kept


def test_a_json_record_is_masked_value_by_value_and_stays_json():
    record = {"error": f"bad key {KEY}", "path": "/site/pub.md", "n": 3, "tail": ["password=", "x"]}
    text = json.dumps(record) + "\n"
    kept = mask_kept(text)
    assert kept.endswith("\n") and KEY[:8] not in kept
    assert json.loads(kept) == {**record, "error": f"bad key {MASK}"}


def test_a_password_pair_never_swallows_the_quotes_between_two_strings():
    """As text, `password=` at the end of one string and the next string's quotes look like a
    quoted password: masked as text that is no JSON any more; masked value by value it is kept."""
    text = json.dumps({"a": f"{KEY} password=", "b": "c"}, separators=(",", ":"))
    assert json.loads(mask_kept(text)) == {"a": f"{MASK} password=", "b": "c"}


def test_a_toml_record_is_masked_value_by_value_and_stays_toml():
    record = {"reason": f"router: {KEY}", "time": datetime(2026, 12, 4, tzinfo=UTC), "attempts": 2}
    kept = mask_kept(tomli_w.dumps(record))
    assert tomllib.loads(kept) == {**record, "reason": f"router: {MASK}"}


def test_verbatim_text_binary_bytes_and_other_values_are_kept_as_they_are():
    article = Verbatim(f"an article quoting {KEY}")
    kept = mask_kept(article)
    assert kept == article and type(kept) is str  # what a database driver takes
    png = b"\x89PNG\r\n\x1a\n" + KEY.encode()
    assert mask_kept(png) is png
    assert mask_kept(f"x {KEY}".encode()) == f"x {MASK}".encode()
    for value in (None, 3, 2.5, b""):
        assert mask_kept(value) is value


def test_every_file_writer_masks_and_only_verbatim_text_is_written_as_it_is(tmp_path):
    state = tmp_path / files.STATE_DIR
    files.atomic_write(state / "a.json", json.dumps({"error": KEY}))
    files.create_new(state / "b.txt", f"error: {KEY}\n".encode())
    files.atomic_write(state / "c.md", Verbatim(f"quoting {KEY}"))
    with files.FileLock(state / "d.lock", purpose=f"publish {KEY}"):
        lock = (state / "d.lock").read_text()
    assert KEY[:8] not in (state / "a.json").read_text() + (state / "b.txt").read_text() + lock
    assert MASK in (state / "b.txt").read_text() and MASK in lock
    assert (state / "c.md").read_text() == f"quoting {KEY}"


@pytest.mark.parametrize(
    ("url", "tokens"),
    [
        ("tgram://123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/987654321", None),
        ("ntfy://ntfy.sh/alerts-7d1f3c9b", ("alerts-7d1f3c9b",)),
        (
            "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ",
            ("T1JJ3T3L2", "A1BRTD4JD", "TIiajkdnlazkcOXrIdevi7FQ"),
        ),
        (
            "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX",
            ("XXXXXXXXXXXXXXXXXXXXXXXX",),
        ),
        ("json://127.0.0.1:9/hook", ()),
    ],
)
def test_the_tokens_of_a_notify_url_are_its_long_parts_that_are_no_host_name(url, tokens):
    found = url_tokens(url)
    if tokens is None:  # a bot token: both of its parts, and the chat
        assert found == ("123456789", "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "987654321")
    else:
        assert found == tokens


def test_the_workspace_registers_pgpassword_and_the_notify_tokens(tmp_path):
    (tmp_path / "config.toml").write_text(
        '[store]\nurl = "postgresql://qwenpipe@db.example/articles"\n'
        '[notify]\nurls = ["tgram://123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/42"]\n'
    )
    config = load(tmp_path / "config.toml")
    register_all(config, {"PGPASSWORD": "pg-Secret-4711-pass"})
    kept = mask_kept("FATAL: password pg-Secret-4711-pass refused; bot AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw")
    assert "4711" not in kept and "AAHdq" not in kept and kept.count(MASK) == 2


def test_a_secret_shorter_than_min_run_is_kept_as_a_word_in_records_and_masked_on_screen():
    """A local router's key `qwen` must not turn the chat URL or an engine's name of a record into
    [REDACTED]; what leaves the process (mask: the consoles) still hides it."""
    redact.register("qwen")
    line = "https://chat.qwen.ai/c/0a1b2c3d-0000-4000-8000-000000000000\n"
    assert mask_kept(line) == line
    assert mask_kept(json.dumps({"engine": "qwen"})) == json.dumps({"engine": "qwen"})
    assert redact.mask("Invalid key: qwen") == f"Invalid key: {MASK}"


def test_the_intent_marker_keeps_its_names_so_recovery_finds_the_send(tmp_path):
    """The marker's account and owner are names recovery reads back: a proxy password `password1`
    must not turn the account `password1-home` into [REDACTED] (a record of text would be)."""
    from pipeline.contract.article import read_marker, write_marker

    redact.register("password1")
    marker = {"time": 1.0, "pid": 7, "prompt_sha256": "ab" * 32, "account": "password1-home", "owner": "o"}
    write_marker(tmp_path / "tea.md.sending", marker)
    assert read_marker(tmp_path / "tea.md.sending") == marker
    assert MASK in mask_kept(json.dumps(marker))  # what the marker's writer keeps from happening


def zipped(members: dict[str, bytes], compression: int = 8) -> bytes:
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, body in members.items():
            archive.writestr(name, body)
    return out.getvalue()


def unzipped(data: bytes) -> dict[str, bytes]:
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def test_a_zip_is_masked_member_by_member_a_zip_inside_too_and_its_names(tmp_path):
    """A Playwright trace is a zip whose compressed members hide its network log from a scan of
    its bytes: the disk's mask opens it (and a trace inside a report bundle), and a write of
    one through files keeps no key in any member."""
    png = b"\x89PNG\r\n\x1a\n\xff\xfe" + KEY.encode("utf-16")  # binary: kept as it is
    trace = zipped({"trace.network": f'{{"Cookie": "k={KEY}", "t": "{TOKEN}"}}\n'.encode(), "a.png": png})
    bundle = zipped({"trace.zip": trace, f"by-{KEY}.txt": b"plain", "journal.json": b'{"e": 1}'})
    path = tmp_path / "bundle.zip"
    files.atomic_write(path, bundle)
    kept = unzipped(path.read_bytes())
    assert set(kept) == {"trace.zip", f"by-{MASK}.txt", "journal.json"}
    inner = unzipped(kept["trace.zip"])
    assert KEY[:8].encode() not in inner["trace.network"] and b"eyJ" not in inner["trace.network"]
    assert MASK.encode() in inner["trace.network"] and inner["a.png"] == png
    assert kept["journal.json"] == b'{"e": 1}'


def test_a_zip_holding_no_secret_is_kept_byte_for_byte():
    clean = zipped({"a.txt": b"nothing secret", "b.json": b"{}"}, compression=0)
    assert mask_kept(clean) is clean
