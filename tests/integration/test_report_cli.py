"""`qwenpipe report SLUG` end to end: a project whose article went to the simulator through a real
Chromium with `[browser] trace = true` (its own browser, as cron launches it, with a saved
login whose cookie every request carries), then the bundle unpacked, every member and every
member of the trace inside, and scanned for each secret in any form: the router key (whole, in
pieces, base64, URL-encoded) and the login's cookie."""

from __future__ import annotations

import base64
import io
import json
import time
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest
from sim_project import make_project, prompt
from tests_cli_helpers import qwenpipe_in_process

from pipeline.config import load
from pipeline.contract.workspace import Workspace
from pipeline.engines.qwen.stream import COMPLETIONS_PATH
from pipeline.redact import MASK, MIN_RUN

pytestmark = pytest.mark.browser

OWN_BROWSER = True  # the cron path: a persistent profile loads the saved login and is traced
SIMULATOR = {"answer_seconds": 0.5, "url_delay": 0.1}  # conftest.py `sim`

KEY = "Rk7+Vb/Nmqwe=Tz3+Lpoiu/Ytrew=Qasd+Fg56/1234=8765+Hjklm/Zxcvb=Nmlkj"
COOKIE = "c00k1e-Ssid-9f8e7d6c5b4a3210-QpWoEiRuTy"  # the site's session cookie: in no registry


def pieces(secret: str) -> set[str]:
    """Every MIN_RUN characters in a row of `secret` as it is, URL-encoded, or base64 (in the
    three alignments it may have inside longer encoded data)."""
    forms = [secret, quote(secret, safe="")]
    for shift in range(3):
        whole = (shift + len(secret)) // 3 * 4
        forms.append(base64.b64encode(b"\0" * shift + secret.encode()).decode()[4 if shift else 0 : whole])
    return {form[at : at + MIN_RUN] for form in forms for at in range(len(form) - MIN_RUN + 1)}


PIECES = pieces(KEY) | pieces(COOKIE)


def unpacked(data: bytes, prefix: str = "") -> dict[str, bytes]:
    """Every member of the zip `data`, and of each zip inside it, by its path."""
    found = {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            body = archive.read(info)
            found[prefix + info.filename] = body
            if info.filename.endswith(".zip"):
                found |= unpacked(body, f"{prefix}{info.filename}/")
    return found


def leaks(members: dict[str, bytes]) -> dict[str, list[str]]:
    found = {}
    for name, body in members.items():
        text = name + body.decode("latin-1")
        held = sorted(piece for piece in PIECES if piece in text)
        if held:
            found[name] = held[:3]
    return found


def test_a_report_bundles_the_run_and_its_trace_with_no_secret_in_any_form(sim, tmp_path):
    project = make_project(tmp_path / "project", sim)
    config = project / "config.toml"
    config.write_text(config.read_text().replace("[browser]\n", "[browser]\ntrace = true\n"))
    host = sim.base_url.split("//")[1].split(":")[0]
    cookie = {"name": "ssxmod", "value": COOKIE, "domain": host, "path": "/", "expires": time.time() + 86400}
    (project / "state.json").write_text(json.dumps({"cookies": [cookie], "origins": []}))
    (project / "state.json").chmod(0o600)
    prompt(project, "tea", "Write an article about green tea.")
    env = {"ROUTER_API_KEY": KEY}

    codes = [qwenpipe_in_process("generate", "tea", cwd=project, env=env).returncode]
    trace = project / "articles" / ".qwenpipe" / "trace-default.zip"
    assert COMPLETIONS_PATH.encode() in unpacked(trace.read_bytes())["trace.network"], (
        "the send is not traced"
    )
    while codes[-1] == 3 or len(codes) == 1:
        time.sleep(0.3)
        codes.append(qwenpipe_in_process("generate", "tea", cwd=project, env=env).returncode)
        assert len(codes) < 30, codes
    assert codes[0] == 42 and codes[-1] == 0, codes
    articles = project / "articles"
    assert trace.is_file() and trace.stat().st_mode & 0o777 == 0o600
    # The last run only: the send's completion request was the first run's, and each run's
    # trace replaced the one before (no temporary of Playwright's left beside it).
    kept = unpacked(trace.read_bytes())
    assert (
        sim.base_url.encode() in kept["trace.network"]
        and COMPLETIONS_PATH.encode() not in kept["trace.network"]
    )
    assert sorted(p.name for p in trace.parent.iterdir() if "trace" in p.name) == [trace.name]
    # What the report reads beside the run: an unknown answer of the last day (of another
    # article: every slug's are bundled), a bot check's page, a sidecar an older version wrote
    # unmasked.
    with Workspace(load(config)) as workspace:
        workspace.journal.append(
            "pan", "unknown_answer", where="chat_json", seen='{"code": "Zq9"}', account="default"
        )
    (articles / ".qwenpipe" / "bot-check-default.png").write_bytes(b"\x89PNG\r\n\x1a\nthe page")
    (articles / "tea.md.rejected").write_text(f"an answer quoting {KEY}\n")

    out = tmp_path / "sent" / "report.zip"
    (tmp_path / "sent").mkdir()
    made = qwenpipe_in_process("report", "tea", "--output", out, cwd=project, env=env)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(out) and "traces/trace-default.zip" in made.stderr
    assert "Traceback" not in made.stderr and not [p for p in PIECES if p in made.stdout + made.stderr]
    members = unpacked(out.read_bytes())
    assert not leaks(members), leaks(members)

    network = [
        body for name, body in members.items() if name.startswith("traces/") and name.endswith(".network")
    ]
    assert network and sim.base_url.encode() in b"".join(network), "the trace holds no request of the run"
    assert MASK.encode() in b"".join(network), "the cookie in the trace's requests was not masked"
    journal = json.loads(members["journal.json"])
    assert {"sending", "sent", "done"} <= {entry["event"] for entry in journal}, journal
    (unknown,) = json.loads(members["unknown_answers.json"])
    assert unknown["slug"] == "pan" and unknown["where"] == "chat_json" and unknown["account"] == "default"
    records = json.loads(members["records.json"])
    assert [send["chat_url"] for send in records["sends"]] == [(articles / "tea.md.url").read_text().strip()]
    assert members["files/tea.md"] == b"Write an article about green tea."
    assert MASK.encode() in members["files/tea.md.rejected"]
    assert members["screenshots/bot-check-default.png"].endswith(b"the page")
    versions = json.loads(members["versions.json"])
    assert versions["qwenpipe"] and versions["playwright"] and versions["python"] and versions["os"]
    assert b"trace = true" in members["config.toml"] and b"OK" in members["doctor.txt"]


def test_an_unknown_slug_or_an_output_among_the_projects_files_is_exit_2_and_writes_nothing(sim, tmp_path):
    project = make_project(tmp_path / "project", sim)
    prompt(project, "green-tea", "Write an article about green tea.")
    unknown = qwenpipe_in_process("report", "green-tee", cwd=project)
    assert unknown.returncode == 2 and "did you mean green-tea" in unknown.stderr, unknown.stderr
    for inside in (project / "articles" / "r.zip", project / "config.toml", project / "prompts" / "r.zip"):
        before = inside.read_bytes() if inside.exists() else None
        refused = qwenpipe_in_process("report", "green-tea", "-o", inside, cwd=project)
        assert refused.returncode == 2 and "--output" in refused.stderr, refused.stderr
        assert (inside.read_bytes() if inside.exists() else None) == before
    assert not list(Path(project).rglob("*.zip")) and "Traceback" not in refused.stderr


def test_a_chrome_the_user_runs_is_never_traced(sim, tmp_path):
    """Attached over CDP (`browser.cdp_url`: here the tests' shared Chromium) qwenpipe uses the
    context of a Chrome that is the user's, with tabs of their own: no trace, and the report
    says there is none."""
    project = make_project(tmp_path / "project", sim, own_browser=False)
    config = project / "config.toml"
    config.write_text(config.read_text().replace("[browser]\n", "[browser]\ntrace = true\n"))
    prompt(project, "tea", "Write an article about green tea.")
    sent = qwenpipe_in_process("generate", "tea", cwd=project)
    assert sent.returncode == 42, sent.stderr
    assert not list((project / "articles" / ".qwenpipe").glob("*trace*"))
    made = qwenpipe_in_process("report", "tea", "-o", tmp_path / "r.zip", cwd=project)
    assert made.returncode == 0 and "no Playwright trace yet" in made.stderr, made.stderr
