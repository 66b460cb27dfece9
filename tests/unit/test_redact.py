"""pipeline.redact: the router key, and every prefix of it of 8+ characters, never leaves the process."""

from __future__ import annotations

import base64
import io
import json
import re
import string
from urllib.parse import quote, quote_plus

import httpx
import pytest
import tomli_w

from pipeline import known_secrets, redact
from pipeline.config import ConfigError, Router, validate
from pipeline.engines.base import HardError
from pipeline.engines.router import RouterEngine
from pipeline.engines.router_errors import MAX_QUOTE, one_line, parse_error_body
from pipeline.redact import MASK, MIN_PREFIX, MIN_RUN, MaskedStream, mask, mask_data

KEY = "Zq7-unit-redact-SECRET-0123456789abcdef"
LONG_200 = ("Zq7L" + string.ascii_letters + string.digits) * 4  # 4 + 62, four times
LONG_200 = LONG_200[:200]
LONG_300 = ("Yx9M" + string.digits + string.ascii_letters) * 5
LONG_300 = LONG_300[:300]
REGEX_KEY = r"a.b*c+d?e^f$g[h]i(j)k{l}m|n\o/p"


def leaks(text: str, key: str) -> bool:
    """Any prefix of MIN_PREFIX or more characters contains the first MIN_PREFIX ones."""
    return key[:MIN_PREFIX] in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"{KEY} was refused", f"{MASK} was refused"),
        (f"Invalid key {KEY}, try again", f"Invalid key {MASK}, try again"),
        (f"Bearer {KEY}", f"Bearer {MASK}"),
        (f"{KEY} and {KEY} and again {KEY}{KEY}", f"{MASK} and {MASK} and again {MASK}"),
        (f"key {KEY[:MIN_PREFIX]}… was cut", f"key {MASK}… was cut"),
        (f"key {KEY[:20]}", f"key {MASK}"),
        (f"{KEY[:30]}XYZ", f"{MASK}XYZ"),
        (f"seven {KEY[: MIN_PREFIX - 1]} is not a prefix worth masking", None),
        ("nothing secret here", None),
    ],
)
def test_mask_hides_the_key_and_its_prefixes_anywhere(text, expected):
    assert mask(text, [KEY]) == (text if expected is None else expected)


def test_mask_finds_a_prefix_that_starts_inside_another_candidate():
    key = "aaaaaaaaXbbbbbbbb"
    assert mask("aaaaaaaaaXbbbbbbbb", [key]) == MASK
    assert mask("aaaaaaaaaXbbbbbbbb tail", [key]) == f"{MASK} tail"


@pytest.mark.parametrize("key", [LONG_200, LONG_300], ids=["200 chars", "300 chars"])
def test_mask_hides_a_long_key_whole_and_cut_anywhere(key):
    assert len(key) in (200, 300)
    assert mask(f"x{key}y", [key]) == f"x{MASK}y"
    for cut in range(MIN_PREFIX, len(key), 37):
        assert mask(f"echo: {key[:cut]}", [key]) == f"echo: {MASK}"


def test_a_key_of_regex_metacharacters_is_masked_literally():
    text = f"before {REGEX_KEY} middle {REGEX_KEY[:12]} after .*"
    assert mask(text, [REGEX_KEY]) == f"before {MASK} middle {MASK} after .*"
    # What the key would match as a pattern is not the key.
    assert mask("aZbbbcccde fghijklmnop", [REGEX_KEY]) == "aZbbbcccde fghijklmnop"


def test_mask_data_masks_before_serialising_so_json_and_toml_stay_valid():
    redact.register(REGEX_KEY)
    record = {"error": f"bad key {REGEX_KEY}", "nested": [{"k": REGEX_KEY}], "n": 3, REGEX_KEY: True}
    line = json.dumps(mask_data(record), ensure_ascii=False)
    assert json.loads(line) == {"error": f"bad key {MASK}", "nested": [{"k": MASK}], "n": 3, MASK: True}
    assert not leaks(line, REGEX_KEY) and not leaks(line, json.dumps(REGEX_KEY)[1:-1])
    toml = tomli_w.dumps(mask_data({"last_error": record["error"]}))
    assert toml == f'last_error = "bad key {MASK}"\n'
    # Text serialised elsewhere (a router's JSON error body) shows the key escaped: masked too.
    assert not leaks(mask(json.dumps({"error": REGEX_KEY})), json.dumps(REGEX_KEY)[1:-1])


@pytest.mark.parametrize(
    "record",
    [
        {"error": f"bad key {REGEX_KEY}", "nested": [{"k": REGEX_KEY[:12]}], REGEX_KEY: 1},
        {"quoted": f'a "{KEY}" \\ {KEY[:MIN_PREFIX]}\n', "short": "test"},
        {"articles": [{"slug": "tea", "last_error": None}], "n": 3},
    ],
    ids=["escaped key", "quoted key", "no key"],
)
def test_masked_json_writes_what_masking_before_serialising_writes(record):
    redact.register(REGEX_KEY), redact.register(KEY), redact.register("test")
    for options in ({"ensure_ascii": False}, {"ensure_ascii": False, "indent": 1}, {}):
        assert redact.masked_json(record, **options) == json.dumps(mask_data(record), **options)


def test_a_short_key_is_masked_only_where_it_stands_alone():
    short = "abc12"
    assert len(short) < MIN_PREFIX
    assert mask(f"key {short} refused; 'abc12'", [short]) == f"key {MASK} refused; '{MASK}'"
    assert mask("slug abc12-post and xabc12 stay", [short]) == "slug abc12-post and xabc12 stay"


@pytest.mark.parametrize("key", [KEY, LONG_200, LONG_300, REGEX_KEY])
@pytest.mark.parametrize("start", [0, 50, MAX_QUOTE - 40, MAX_QUOTE - 12, MAX_QUOTE - 8, MAX_QUOTE - 3])
def test_one_line_masks_before_it_cuts_so_no_part_of_the_key_survives(key, start):
    redact.register(key)
    quoted = one_line(f"{'w' * start}{key} and the rest of the router's error message")
    assert len(quoted) <= MAX_QUOTE
    # Not even a few characters of the key survive the cut: it was masked whole first.
    assert key[:3] not in quoted, quoted


def test_parse_error_body_of_an_echoed_200_char_key_holds_none_of_it():
    redact.register(LONG_200)
    body = json.dumps({"error": {"message": f"Invalid API key provided: {LONG_200}"}})
    message = parse_error_body(body, "application/json").message
    assert message == f"Invalid API key provided: {MASK}"


@pytest.mark.parametrize("key", [LONG_200, LONG_300], ids=["200 chars", "300 chars"])
def test_router_engine_error_for_an_echoed_long_key_holds_none_of_it(key):
    def echo(request: httpx.Request) -> httpx.Response:
        given = request.headers["authorization"].removeprefix("Bearer ")
        return httpx.Response(401, json={"error": {"message": f"Invalid API key provided: {given}"}})

    settings = Router(base_url="http://router.test/v1", api_key_env="MY_KEY", max_retries=0)
    told: list[str] = []
    engine = RouterEngine(
        settings, env={"MY_KEY": key}, transport=httpx.MockTransport(echo), on_retry=told.append
    )
    with engine, pytest.raises(HardError) as failed:
        engine.generate("Write about tea.")
    assert failed.value.code == "router_auth"
    assert not leaks(str(failed.value), key) and key[:3] not in str(failed.value)
    assert MASK in str(failed.value)
    health = RouterEngine(settings, env={"MY_KEY": key}, transport=httpx.MockTransport(echo)).health()
    assert not leaks(json.dumps(health), key) and MASK in health["error"]


def test_router_key_is_read_from_the_named_variable_and_registered():
    key = "Qw3-registered-by-router-key-0042"
    assert known_secrets.router_key(Router(api_key_env="SOME_KEY"), {"SOME_KEY": key}) == key
    assert mask(f"echo {key}") == f"echo {MASK}"
    assert known_secrets.router_key(Router(api_key_env="UNSET_KEY"), {}) is None


def test_console_messages_and_results_are_masked(capsys):
    from pipeline.console import out, say

    redact.register(KEY)
    say(f"router said {KEY[:40]}")
    out().print(f"{KEY}", markup=False)
    captured = capsys.readouterr()
    # Off a terminal a message line starts with its ISO time; what follows is masked.
    assert captured.err.endswith(f" router said {MASK}\n")
    assert captured.out == f"{MASK}\n"


def test_masked_stream_masks_every_write():
    redact.register(KEY)
    sink = io.StringIO()
    stream = MaskedStream(sink)
    stream.write(f"router said {KEY}\n")
    stream.flush()
    assert sink.getvalue() == f"router said {MASK}\n" and not stream.isatty()


@pytest.mark.parametrize(
    "pasted",
    ["sk-or-v1-0a1b2c3d4e5f6a7b8c9d", "sk live 123", "Bearer abc.def", "12345678abcdefgh", "ключ_123"],
)
def test_a_key_pasted_into_api_key_env_is_refused_without_showing_it(pasted):
    with pytest.raises(ConfigError) as refused:
        validate({"router": {"api_key_env": pasted}}, "config.toml")
    message = str(refused.value)
    assert pasted not in message and pasted[:MIN_PREFIX] not in message
    assert "router.api_key_env" in message and "NAME of an environment variable" in message


def test_a_non_string_api_key_env_is_refused_without_showing_it():
    with pytest.raises(ConfigError) as refused:
        validate({"router": {"api_key_env": 1234567890123}}, "config.toml")
    assert "1234567890123" not in str(refused.value) and "must be a string" in str(refused.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "store postgresql://qwen:hunter2@db/batch failed",
            f"store postgresql://qwen:{MASK}@db/batch failed",
        ),
        ("postgresql://:hunter2@db/batch", f"postgresql://:{MASK}@db/batch"),
        (
            "postgresql://db/batch?sslmode=require&password=hunter2&x=1",
            f"postgresql://db/batch?sslmode=require&password={MASK}&x=1",
        ),
        ("postgresql://db/b?PASSWORD=hun%40ter2", f"postgresql://db/b?PASSWORD={MASK}"),
        ("host=db password=hunter2 user=qwen", f"host=db password={MASK} user=qwen"),
        ("host=db password = 'hun ter\\'2' user=qwen", f"host=db password = {MASK} user=qwen"),
        ('dsn "password=hunter2"', f'dsn "password={MASK}"'),
        ("see PGPASSWORD or ~/.pgpass (mode 0600)", None),
        ("http://db:8080/path@x and a@b.c", None),
    ],
)
def test_a_password_in_a_url_or_a_conninfo_is_masked_wherever_it_reaches(text, expected):
    assert mask(text, []) == (text if expected is None else expected)
    assert "hunter2" not in json.dumps(mask_data({"error": text}))
    assert "hunter2" not in redact.masked_json({"error": [text]})


def test_a_password_with_no_key_registered_is_still_masked_by_every_sink(capsys):
    from pipeline.store.postgres import shown_url

    assert "hunter2" not in shown_url("postgresql://db/batch?password=hunter2")
    stream = io.StringIO()
    MaskedStream(stream).write("cannot connect: host=db password=hunter2\n")
    assert "hunter2" not in stream.getvalue()


# -- runs of the key from anywhere, its encodings, a short key as a token ---------------------

ODD = "Zk7+Qw/Ertyu=Iop+Asdfg/Hjkl=Zxcvb+Nm12/3456=7890+Poiuy/Trewq=Lkjhg"  # URL encoding escapes +/=


def windows(form: str) -> set[str]:
    return {form[at : at + MIN_RUN] for at in range(len(form) - MIN_RUN + 1)}


def b64_cores(key: str) -> list[str]:
    cores = []
    for shift in range(3):
        whole = (shift + len(key)) // 3 * 4
        core = base64.b64encode(b"\0" * shift + key.encode()).decode()[4 if shift else 0 : whole]
        cores += [core, core.replace("+", "-").replace("/", "_")]
    return cores


def holds_a_run(text: str, *forms: str) -> bool:
    return any(window in text for form in forms for window in windows(form))


@pytest.mark.parametrize("key", [KEY, ODD, LONG_200, REGEX_KEY], ids=["40", "odd", "200", "regex"])
def test_every_run_of_8_or_more_characters_of_the_key_is_masked_wherever_it_starts(key):
    for start in range(len(key) - MIN_RUN + 1):
        for length in {MIN_RUN, MIN_RUN + 1, 13, len(key) - start}:
            piece = key[start : start + length]
            if len(piece) < MIN_RUN:
                continue
            masked = mask(f"Invalid key: {piece}!", [key])
            assert masked == f"Invalid key: {MASK}!", (start, length, masked)
    assert mask(f"seven {key[3:10]} chars", [key]) == f"seven {key[3:10]} chars"  # 7: not the key


def test_the_pieces_the_issue_found_are_masked():
    for piece in (ODD[1:], ODD[-12:], ODD[20:40], f"x{ODD[5:]}", ODD[:-1]):
        assert not holds_a_run(mask(f"error: {piece} (401)", [ODD]), ODD), piece


@pytest.mark.parametrize(
    "encode",
    [
        lambda key: quote(key, safe=""),
        lambda key: re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(key, safe="")),
        lambda key: quote(key),
        lambda key: quote_plus(key),
        lambda key: quote(key, safe="")[7:],  # past the first escaped character
        lambda key: quote(key, safe="")[30:60],
    ],
    ids=["quote", "lower hex", "safe /", "plus", "past the first escape", "middle"],
)
def test_a_url_encoded_key_or_piece_of_one_is_masked(encode):
    text = f"GET /v1/models?key={encode(ODD)}&x=1 refused"
    masked = mask(text, [ODD])
    assert MASK in masked and masked.endswith("&x=1 refused")
    lower = re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(ODD, safe=""))
    assert not holds_a_run(masked, ODD, quote(ODD, safe=""), lower), masked


@pytest.mark.parametrize("before", ["", "u", "us", "user:", "Authorization: Bearer "])
@pytest.mark.parametrize("alphabet", ["standard", "urlsafe"])
def test_a_base64_encoded_key_is_masked_in_any_alignment(before, alphabet):
    encode = base64.b64encode if alphabet == "standard" else base64.urlsafe_b64encode
    for key in (ODD, KEY, LONG_200):
        encoded = encode(f"{before}{key}".encode()).decode()
        masked = mask(f"Authorization: Basic {encoded}", [key])
        assert MASK in masked and not holds_a_run(masked, *b64_cores(key)), (key, masked)
        piece = encoded[len(encoded) // 3 : len(encoded) // 3 + 12]  # a piece of it too
        assert not holds_a_run(mask(f"header {piece} cut", [key]), *b64_cores(key))


@pytest.mark.parametrize("key", ["abcdef", "k3y", "s3cr3t7"])
def test_a_short_key_is_masked_where_it_stands_as_a_token(key):
    for text in (f"key={key}", f"key={key}&x=1", f"'{key}'", f"Bearer {key}", f"{key}: bad", f"/{key}/"):
        assert key not in mask(text, [key]), text
    for text in (f"x{key}", f"{key}9", f"my-{key}-post", f"{key}_slug", f"la{key}st"):
        assert mask(text, [key]) == text, text


def test_a_json_escaped_key_and_pieces_of_it_are_masked():
    key = 'Qq"uote\\back/slash-and-more-0123456789'
    escaped = json.dumps(key)[1:-1]
    for piece in (escaped, escaped[3:], escaped[5:20]):
        assert not holds_a_run(mask(f"body: {piece}", [key]), escaped), piece
    redact.register(key)
    line = redact.masked_json({"error": f"x {key[2:]} y"})  # registered: the JSON sink
    assert not holds_a_run(line, key, escaped)


def test_masked_json_finds_every_form_in_serialised_text():
    redact.register(ODD)
    for piece in (ODD[9:30], quote(ODD, safe="")[11:40], b64_cores(ODD)[2][5:25]):
        line = redact.masked_json({"errors": [{"message": f"quoted {piece}"}]}, ensure_ascii=False)
        assert json.loads(line) == {"errors": [{"message": f"quoted {MASK}"}]}, piece


def test_an_article_holding_the_key_or_a_long_run_of_it_is_found_a_public_prefix_is_not():
    key = "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"
    article = "# Routers\n\nKeys look like sk-or-v1-... and are secret.\n"
    assert not redact.holds_secret(article, [key])
    assert not redact.holds_secret(article + key[20:35], [key])  # 15 characters: chance, not the key
    for piece in (key, key[20:36], key[-16:], base64.b64encode(key.encode()).decode()[8:30]):
        assert redact.holds_secret(f"{article}\nDebug: {piece}\n", [key]), piece
    assert redact.holds_secret("the key is Q7xkP2mw9 here", ["Q7xkP2mw9"])  # a whole shorter key
    assert not redact.holds_secret("a test of latest tests", ["test"])  # a short key: a word


def test_check_answer_rejects_an_answer_that_holds_the_key():
    from pipeline.config import Article
    from pipeline.contract.checks import check_answer

    redact.register(ODD)
    body = "# Tea\n\n" + "Green tea is a drink. " * 30
    assert check_answer(body, Article()).problem is None
    verdict = check_answer(body + f"\n\nUsed key {ODD[3:40]}\n", Article())
    assert verdict.code == "secret" and "holds the router key" in verdict.problem
    assert ODD[3:11] not in verdict.problem


# -- what the mutation check found no test holding (bench/mutants.py, redact group) -------------


def test_a_login_token_nobody_registered_is_masked_and_other_text_is_kept():
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJpZCI6InVzZXIifQ.c2lnbmF0dXJl"
    assert redact.mask_tokens(f"token={jwt}; next") == f"token={MASK}; next"
    assert redact.mask_tokens("eyJ alone is no token") == "eyJ alone is no token"


def test_a_password_in_a_url_or_a_pair_is_masked_and_other_text_is_kept():
    assert redact.mask_passwords("postgresql://qp:s3cret@db/x") == f"postgresql://qp:{MASK}@db/x"
    assert redact.mask_passwords("host=db password=s3cret user=qp") == f"host=db password={MASK} user=qp"
    assert redact.mask_passwords("no secret at all: host=db") == "no secret at all: host=db"


def test_the_router_key_comes_from_its_file_when_the_variable_is_unset(tmp_path):
    key_file = tmp_path / "router.key"
    key_file.write_text("Zq7-key-from-the-file-0123456789\n")
    key_file.chmod(0o600)
    settings = Router(api_key_env="QP_TEST_KEY", api_key_file=str(key_file))
    assert known_secrets.router_key(settings, env={}) == "Zq7-key-from-the-file-0123456789"
    assert (
        known_secrets.router_key(settings, env={"QP_TEST_KEY": "Zq7-from-the-env-987654"})
        == "Zq7-from-the-env-987654"
    )


def test_a_secret_of_exactly_min_run_characters_is_masked_inside_a_word_and_url_encoded():
    secret = "Zq7/+ab9"[:MIN_RUN]
    assert len(secret) == MIN_RUN
    assert mask(f"x{secret}y", [secret]) == f"x{MASK}y", "a run of MIN_RUN characters is the key"
    assert mask(quote(secret, safe=""), [secret]) == MASK, "its URL-encoded form too"


def test_the_password_hint_without_its_regex_agrees_with_it_for_every_character():
    """masked_json's fast look for a password (redact.password_hinted) finds one exactly where
    the regex does: for each letter of `password`, every character IGNORECASE takes for it is
    either one whose lower() is that letter or one of the folding characters the look sends to
    the regex; and on texts with each such character in each place, both agree."""
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    for letter in set("password"):
        taken = re.findall(f"(?i){letter}", everything)
        assert all(c.lower() == letter or c in redact._PASSWORD_FOLDS for c in taken), letter
        for at in [i for i, c in enumerate("password") if c == letter]:
            for c in taken:
                text = f'{{"x": "a {"password"[:at]}{c}{"password"[at + 1 :]} b"}}'
                assert redact.password_hinted(text) is (redact._password_hint().search(text) is not None)
    for text in ("https://u:p@host/x", "https://chat.qwen.ai/c/1", "no hint here", "PassWord", "a@b"):
        assert redact.password_hinted(text) is (redact._password_hint().search(text) is not None)
