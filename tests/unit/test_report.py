"""The report bundler (pipeline/setup/report.py), without a browser: what a bundle holds, that no
secret is in any member in any form (the registered ones, a proxy's password, the saved login's
cookies and stored values, the cookies and tokens a trace's own requests carried), unknown slugs,
and the path guard on --output, walked over every project file and every path key."""

from __future__ import annotations

import base64
import io
import json
import os
import time
import zipfile
from urllib.parse import quote

import pytest
from project_files import add_prompt, snapshot

from pipeline.config import ACCOUNT_KEYS, load
from pipeline.errors import UsageProblem
from pipeline.redact import MASK, MIN_RUN
from pipeline.setup.report import write_report
from pipeline.store.protocol import Event
from pipeline.wiring import workspace as open_workspace

KEY = "Ux5+Gh/Wertz=Pl0+Kmnbv/Cxyal=Sdfg+Hj78/4321=9876+Qwety/Asdfg=Lkjhz"
PROXY_PASSWORD = "Pr0xy-Passw0rd-77"
LOGIN_COOKIE = "L0gin-cookie-5e6f7a8b9c0d-MnBvCx"
STORED_VALUE = "St0red-value-kLmNoPqRsTuV-PoIuYt"
TRACE_COOKIE = "Tr4ce-cookie-f0e1d2c3b4a5-ZaQwSx"  # only the trace's requests carried it
SET_COOKIE = "S3t-cookie-99aa88bb77cc-EdCrFv"
BEARER = "Be4rer-opaque-1a2b3c4d5e6f7g8h"  # not a JWT: masked because the trace named it
SECRETS = (KEY, PROXY_PASSWORD, LOGIN_COOKIE, STORED_VALUE, TRACE_COOKIE, SET_COOKIE, BEARER)


def pieces(secret: str) -> set[str]:
    """Every MIN_RUN characters in a row of `secret` as it is, URL-encoded or base64 (in each of
    the three alignments it may have inside longer encoded data)."""
    forms = [secret, quote(secret, safe="")]
    for shift in range(3):
        whole = (shift + len(secret)) // 3 * 4
        forms.append(base64.b64encode(b"\0" * shift + secret.encode()).decode()[4 if shift else 0 : whole])
    return {form[at : at + MIN_RUN] for form in forms for at in range(len(form) - MIN_RUN + 1)}


def unpacked(data: bytes, prefix: str = "") -> dict[str, bytes]:
    found = {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            body = archive.read(info)
            found[prefix + info.filename] = body
            if info.filename.endswith(".zip"):
                found |= unpacked(body, f"{prefix}{info.filename}/")
    return found


def leaks(members: dict[str, bytes]) -> dict[str, list[str]]:
    every = {piece: secret for secret in SECRETS for piece in pieces(secret)}
    found = {}
    for name, body in members.items():
        text = name + body.decode("latin-1")
        held = sorted({every[piece] for piece in every if piece in text})
        if held:
            found[name] = held
    return found


def zipped(members: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return out.getvalue()


def a_trace() -> bytes:
    """A Playwright trace's shape: a network log of HAR entries, and actions and snapshots that
    quote what the page held (as a real one does: a cookie shown in a DOM snapshot)."""
    entry = {
        "type": "resource-snapshot",
        "snapshot": {
            "request": {
                "url": "https://chat.qwen.ai/api/v2/chats/new",
                "headers": [
                    {"name": "Cookie", "value": f"sid={TRACE_COOKIE}; lang=en"},
                    {"name": "Authorization", "value": f"Bearer {BEARER}"},
                ],
                "cookies": [{"name": "sid", "value": TRACE_COOKIE}],
            },
            "response": {
                "headers": [{"name": "set-cookie", "value": f"next={SET_COOKIE}; Path=/; HttpOnly"}]
            },
        },
    }
    actions = {"type": "frame-snapshot", "html": f"<p>{TRACE_COOKIE} {SET_COOKIE} {STORED_VALUE} {KEY}</p>"}
    return zipped({"trace.network": json.dumps(entry) + "\n", "trace.trace": json.dumps(actions) + "\n"})


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTER_API_KEY", KEY)
    folder = tmp_path / "project"
    (folder / "prompts").mkdir(parents=True)
    (folder / "articles").mkdir()
    (folder / "config.toml").write_text(
        f'[browser]\nstorage_state = "state.json"\nproxy = "http://me:{PROXY_PASSWORD}@proxy.example:8080"\n'
    )
    login = {
        "cookies": [{"name": "token", "value": LOGIN_COOKIE, "domain": "chat.qwen.ai", "path": "/"}],
        "origins": [
            {"origin": "https://chat.qwen.ai", "localStorage": [{"name": "t", "value": STORED_VALUE}]}
        ],
    }
    (folder / "state.json").write_text(json.dumps(login))
    add_prompt(folder, "tea", "Write about green tea.")
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_bundle_holds_the_article_and_no_secret_in_any_form_inside_its_trace_too(project, tmp_path):
    now = time.time()
    with open_workspace(load(project / "config.toml")) as workspace:
        journal = workspace.journal
        journal.append("tea", "sending", engine="qwen", error=f"the router said {KEY}")
        journal.append(
            "tea", "sent", engine="qwen", chat_url="https://chat.qwen.ai/c/0a1b2c3d-0000-4000-8000-00000000"
        )
        journal.append(
            "pan", "unknown_answer", where="chat_list", seen=f'{{"x": "{KEY}"}}', account="default"
        )
        with workspace.store.transaction() as tx:  # an unknown answer of two days ago: not the last day's
            tx.append(Event("old", "unknown_answer", now - 2 * 86400, fields={"where": "stream"}))
        state = workspace.state_dir
        (state / "trace-default.zip").write_bytes(a_trace())  # as an older qwenpipe kept it: unmasked
        (state / "bot-check-default.png").write_bytes(b"\x89PNG\r\n\x1a\npixels")
        (workspace.articles_dir / "tea.md.rejected").write_text(f"quoting {LOGIN_COOKIE} and {KEY}\n")
        (workspace.articles_dir / "tea.md.url").write_text(
            "https://chat.qwen.ai/c/0a1b2c3d-0000-4000-8000-00000000\n"
        )
        bundle = write_report(workspace, "tea", tmp_path / "out" / "r.zip", now=now)

    assert bundle.path == tmp_path / "out" / "r.zip" and bundle.path.stat().st_mode & 0o777 == 0o600
    members = unpacked(bundle.path.read_bytes())
    assert not leaks(members), leaks(members)
    assert set(bundle.members) == {name for name in members if "/" not in name or name.count(".zip/") == 0}
    assert {
        "journal.json",
        "records.json",
        "files.json",
        "files/tea.md",
        "files/tea.md.url",
        "files/tea.md.rejected",
        "unknown_answers.json",
        "screenshots/bot-check-default.png",
        "traces/trace-default.zip",
        "versions.json",
        "config.toml",
        "doctor.txt",
        "README.txt",
    } <= set(members)
    assert [e["event"] for e in json.loads(members["journal.json"])] == ["sending", "sent"]
    assert [e["slug"] for e in json.loads(members["unknown_answers.json"])] == ["pan"]
    trace = members["traces/trace-default.zip/trace.network"]
    assert json.loads(trace)["snapshot"]["request"]["cookies"] == [{"name": "sid", "value": MASK}]
    assert MASK.encode() in members["config.toml"] and b"proxy.example:8080" in members["config.toml"]
    checks = [line.split()[1] for line in members["doctor.txt"].decode().splitlines() if line[:4].strip()]
    assert "config" in checks and not {"proxy", "login", "router"} & set(checks), checks  # nothing asked
    listed = {entry["what"]: entry for entry in json.loads(members["files.json"])}
    assert listed["prompt"]["bytes"] == len("Write about green tea.") and not listed["article"]["exists"]


def test_without_a_trace_the_bundle_says_how_to_have_one(project, tmp_path):
    with open_workspace(load(project / "config.toml")) as workspace:
        bundle = write_report(workspace, "tea", tmp_path / "r.zip")
    assert not any(name.startswith("traces/") for name in bundle.members)
    assert any("[browser] trace = true" in note for note in bundle.notes), bundle.notes
    assert "trace = true" in bundle.summary()


@pytest.mark.parametrize(
    ("slug", "words"),
    [
        ("tee", "did you mean tea?"),
        ("zzzzzz", "`qwenpipe status` lists the articles"),
        ("Bad/Slug", "invalid slug"),
    ],
)
def test_an_unknown_slug_is_refused_with_the_close_names_and_nothing_written(project, tmp_path, slug, words):
    before = snapshot(tmp_path)
    with open_workspace(load(project / "config.toml")) as workspace, pytest.raises(UsageProblem) as refused:
        write_report(workspace, slug, tmp_path / "r.zip")
    assert words in str(refused.value)
    assert snapshot(tmp_path) == before


PROJECT_PLACES = [
    "config.toml",
    "prompts/tea.md",
    "prompts/r.zip",
    "articles/r.zip",
    "articles/.qwenpipe/r.zip",
]


@pytest.mark.parametrize("accounts", [False, True], ids=["one account", "accounts.main"])
def test_the_output_goes_through_the_path_guard_everywhere_the_project_keeps_files(project, accounts):
    """The project's own files and folders, and every path key in force (Config.path_settings:
    the schema's keys, an account's too), each as the output: refused, nothing written."""
    (project / "config.toml").write_text(
        '[metrics]\ntextfile = "metrics/m.prom"\n[publish]\ndir = "site"\n'
        + ("[accounts.main]\n" if accounts else "")
    )
    with open_workspace(load(project / "config.toml")) as workspace:
        settings = workspace.config.path_settings()
        keys = {s.name for s in settings}
        wanted = {f"browser.{k}" for k in ("profile_dir", "storage_state") if not accounts}
        wanted |= {f"accounts.main.{k}" for k, spec in ACCOUNT_KEYS.items() if spec.path and accounts}
        assert wanted | {"paths.prompts", "paths.articles", "metrics.textfile", "publish.dir"} <= keys
        places = [project / place for place in PROJECT_PLACES]
        places += [s.path / "r.zip" if s.spec.path.folder else s.path for s in settings]
        for place in places:
            before = snapshot(project)
            with pytest.raises(UsageProblem, match="--output"):
                write_report(workspace, "tea", place)
            assert snapshot(project) == before, place


def test_a_symlink_at_the_output_is_refused_and_left_as_it_is(project, tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("mine")
    link = tmp_path / "r.zip"
    os.symlink(target, link)
    with (
        open_workspace(load(project / "config.toml")) as workspace,
        pytest.raises(UsageProblem, match="symlink"),
    ):
        write_report(workspace, "tea", link)
    assert link.is_symlink() and target.read_text() == "mine"


@pytest.mark.parametrize("accounts", [(), ("main", "spare")], ids=["one account", "two accounts"])
@pytest.mark.parametrize("trace", [False, True])
def test_each_accounts_engine_keeps_its_own_trace_only_when_asked(tmp_path, accounts, trace):
    """The wiring gives each account's browser session its own trace file beside its bot-check
    screenshot (the report reads both by account), and none without `[browser] trace = true`."""
    from pipeline.accounts import account_config, all_accounts
    from pipeline.contract.quota import trace_path
    from pipeline.wiring import qwen_engine

    tables = "".join(f"[accounts.{name}]\n" for name in accounts)
    (tmp_path / "config.toml").write_text(f"[browser]\ntrace = {str(trace).lower()}\n{tables}")
    config = load(tmp_path / "config.toml")
    for account in all_accounts(config):
        engine = qwen_engine(account_config(config, account))
        try:
            wanted = trace_path(config.articles_dir / ".qwenpipe", account.name) if trace else None
            assert engine.session.trace == wanted
        finally:
            engine.close()
