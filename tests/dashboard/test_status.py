"""`status` and `show` over real files: every state made by the contract itself, never by hand."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime

import pytest
from fakes import FakeChat, FakeRouter, took_nothing
from project_files import add_prompt
from tests_cli_helpers import qwenpipe, qwenpipe_in_process

from pipeline.batch.status import STATES, collect
from pipeline.cli.app import run
from pipeline.config import load
from pipeline.contract.step import Status, generate
from pipeline.contract.workspace import Engines, Workspace
from pipeline.engines.base import Answer, HardError, QuotaSpent, TransientError
from pipeline.wiring import workspace as open_workspace

ROW_FIELDS = [
    "slug",
    "state",
    "engine",
    "age_seconds",
    "attempts",
    "hard_failures",
    "next_try",
    "last_error",
    "chat_url",
    "turn",
    "turns",
    "path",
    "account",
    "host",
]
TOP_FIELDS = [
    "schema",
    "generated_at",
    "prompts_dir",
    "articles_dir",
    "totals",
    "shown",
    "sends",
    "chat_quota",
    "last_cycle",
    "login",
    "accounts",
    "warnings",
    "store_error",
    "articles",
]


# Long enough to pass any article checks (minimum words and the like): status is not about them.
BODY = "# Tea\n\n" + " ".join(
    "Tea has been grown, traded and brewed for thousands of years across many lands." for _ in range(12)
)


def chat_answer() -> Answer:
    return Answer(markdown=BODY, engine="qwen", title="Tea")


def router_answer() -> Answer:
    return Answer(markdown=BODY, engine="router", model="test/model")


def make_workspace(project, extra: str = "") -> Workspace:
    # poll_interval 30 so that a transient failure leaves a next try in the future.
    (project / "config.toml").write_text(f"[qwen]\npoll_interval = 30\nmax_attempts = 3\n{extra}")
    return open_workspace(load(project / "config.toml"))


@pytest.fixture
def batch(project):
    """One article in each state the contract can leave behind, all written by `generate`."""
    ws = make_workspace(project)
    chat, router = FakeChat(), FakeRouter()
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    now = time.time()
    at = lambda t: lambda: t  # noqa: E731 - a frozen clock
    for slug in ("pending", "sending", "generating", "done", "routed", "failed", "dead", "backoff", "orphan"):
        add_prompt(project, slug, f"Write about {slug}.")

    chat.crash_after_send = RuntimeError("killed between the click and the URL")
    with pytest.raises(RuntimeError):
        generate(ws, "sending", eng)
    chat.crash_after_send = None

    assert generate(ws, "generating", eng).status is Status.QUEUED

    assert generate(ws, "done", eng, clock=at(now - 200)).status is Status.QUEUED
    chat.enqueue_check(chat_answer())
    assert generate(ws, "done", eng).status is Status.DONE

    assert generate(ws, "backoff", eng, clock=at(now - 100)).status is Status.QUEUED
    chat.enqueue_check(TransientError("WAF page\nsecond line", code="waf"))
    assert generate(ws, "backoff", eng, clock=at(now)).status is Status.WORKING

    # Seen before anything was typed: no send to recover.
    chat.send_error = took_nothing(HardError("logged out", code="logged_out"))
    router.enqueue(router_answer())
    assert generate(ws, "routed", eng).status is Status.DONE
    router.enqueue(HardError("router: HTTP 401", code="router_auth"))
    assert generate(ws, "failed", eng).status is Status.FAILED
    for _ in range(3):
        router.enqueue(HardError("router: HTTP 500", code="router_http"))
        generate(ws, "dead", eng)
    assert (project / "articles" / "dead.md.failed").exists()
    chat.send_error = None

    assert generate(ws, "orphan", eng).status is Status.QUEUED
    (project / "prompts" / "orphan.md").unlink()
    return ws


def by_slug(status):
    return {row.slug: row for row in status.rows}


def status_json(project, *args) -> dict:
    return json.loads(cli_out(project, "status", "--json", *args))


def cli_out(project, *args) -> str:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = run(["--config", str(project / "config.toml"), *args])
    assert code == 0, buffer.getvalue()
    return buffer.getvalue()


def test_every_state_is_derived_from_the_files_the_contract_wrote(batch):
    rows = by_slug(collect(batch))
    assert {slug: row.state for slug, row in rows.items()} == {
        "pending": "pending",
        "sending": "sending",
        "generating": "generating",
        "done": "done",
        "routed": "done",
        "failed": "failed",
        "dead": "dead",
        "backoff": "backoff",
        "orphan": "orphan",
    }
    assert rows["routed"].engine == "router" and rows["done"].engine == "qwen"
    assert rows["dead"].hard_failures == 3 and rows["failed"].hard_failures == 1
    assert rows["backoff"].attempts == 1 and rows["backoff"].last_error == "WAF page"


def test_json_rows_field_by_field(batch, project):
    doc = status_json(project)
    assert list(doc) == TOP_FIELDS and doc["schema"] == 1
    rows = {row["slug"]: row for row in doc["articles"]}
    assert all(list(row) == ROW_FIELDS for row in rows.values())
    articles = project / "articles"

    gen = rows["generating"]
    assert gen["state"] == "generating" and gen["engine"] == "qwen"
    assert isinstance(gen["age_seconds"], int) and 0 <= gen["age_seconds"] < 60
    assert (gen["attempts"], gen["hard_failures"], gen["next_try"], gen["last_error"]) == (0, 0, None, None)
    assert gen["chat_url"] == (articles / "generating.md.url").read_text().strip()
    assert gen["turn"] is None and gen["turns"] is None and gen["path"] == str(articles / "generating.md")
    assert gen["account"] == "default" and rows["pending"]["account"] is None
    assert [a["name"] for a in doc["accounts"]] == ["default"]

    done = rows["done"]
    assert done["state"] == "done" and done["engine"] == "qwen" and done["chat_url"].startswith("https://")
    assert 0 <= done["age_seconds"] < 60, "a done article's age comes from the journal's sent step"
    assert done["last_error"] is None and done["next_try"] is None

    back = rows["backoff"]
    next_try = datetime.fromisoformat(back["next_try"]).timestamp()
    assert time.time() < next_try <= time.time() + 31
    assert back["attempts"] == 1 and back["last_error"] == "WAF page", "one line only"
    assert 90 <= back["age_seconds"] < 200

    failed = rows["failed"]
    assert failed["state"] == "failed" and failed["hard_failures"] == 1 and "HTTP 401" in failed["last_error"]
    assert rows["dead"]["state"] == "dead" and rows["dead"]["hard_failures"] == 3
    assert rows["pending"]["age_seconds"] is None and rows["pending"]["chat_url"] is None
    assert rows["sending"]["chat_url"] is None and rows["orphan"]["state"] == "orphan"

    assert doc["totals"] == {
        "invalid": 0,
        "failed": 1,
        "dead": 1,
        "backoff": 1,
        "quota": 0,
        "sending": 1,
        "generating": 1,
        "pending": 1,
        "done": 2,
        "orphan": 1,
        "total": 9,
    }
    assert doc["shown"] == 9
    events = [e["event"] for e in batch.journal.read()]
    sends = events.count("sending") - events.count("unsent")  # a send proved unsent is given back
    assert doc["sends"] == {"today": sends, "limit": None, "remaining": None}
    assert doc["chat_quota"] == {"blocked": False, "until": None, "reason": None}
    assert doc["last_cycle"] is None
    assert any("no cycle has run yet" in w for w in doc["warnings"])
    assert any("orphan" in w for w in doc["warnings"])


def test_filters_by_state_and_glob_keep_the_whole_batch_totals(batch, project):
    doc = status_json(project, "--state", "done", "--state", "failed,dead")
    assert sorted(r["slug"] for r in doc["articles"]) == ["dead", "done", "failed", "routed"]
    assert doc["totals"]["total"] == 9 and doc["shown"] == 4
    assert [r["slug"] for r in status_json(project, "d*")["articles"]] == ["dead", "done"]
    assert status_json(project, "--state", "pending", "d*")["articles"] == []
    several = status_json(project, "d*", "rout*", "nothing-*")  # several patterns: any of them
    assert [r["slug"] for r in several["articles"]] == ["dead", "done", "routed"]
    assert "slugs matching 'd*' or 'rout*' or 'nothing-*'" in cli_out(
        project, "status", "d*", "rout*", "nothing-*"
    )


def test_sorting(batch, project):
    by_state = [r["state"] for r in status_json(project)["articles"]]
    assert by_state == sorted(by_state, key=STATES.index)
    by_slug = [r["slug"] for r in status_json(project, "--sort", "slug")["articles"]]
    assert by_slug == sorted(by_slug)
    by_age = status_json(project, "--sort", "age")["articles"]
    ages = [r["age_seconds"] for r in by_age if r["age_seconds"] is not None]
    assert ages == sorted(ages, reverse=True) and by_age[0]["slug"] == "backoff"
    assert by_age[-1]["age_seconds"] is None


def test_bad_state_or_sort_is_exit_2_naming_the_valid_ones(project, capsys):
    assert run(["--config", str(project / "config.toml"), "status", "--state", "finished"]) == 2
    message = capsys.readouterr().err
    assert "'finished'" in message and "generating" in message and "orphan" in message
    assert run(["--config", str(project / "config.toml"), "status", "--sort", "size"]) == 2


def test_chat_quota_block_makes_pending_articles_wait(project):
    ws = make_workspace(project)
    chat, router = FakeChat(), FakeRouter()
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    chat.send_error = took_nothing(QuotaSpent("daily usage limit reached", retry_after=3600))
    router.enqueue(router_answer())
    assert generate(ws, "tea", eng).status is Status.DONE  # through the router
    status = collect(ws)
    assert by_slug(status)["coffee"].state == "quota" and by_slug(status)["tea"].state == "done"
    doc = status.to_json()
    assert doc["chat_quota"]["blocked"] is True and "daily usage" in doc["chat_quota"]["reason"]
    assert datetime.fromisoformat(doc["chat_quota"]["until"]).timestamp() > time.time() + 3000
    assert any("quota is spent" in w for w in doc["warnings"])


def test_daily_send_limit_reached_makes_pending_articles_wait(project):
    ws = make_workspace(project, "max_sends_per_day = 1\n")
    chat = FakeChat()
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: FakeRouter())
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    assert generate(ws, "tea", eng).status is Status.QUEUED
    doc = collect(ws).to_json()
    assert doc["sends"] == {"today": 1, "limit": 1, "remaining": 0}
    assert {r["slug"]: r["state"] for r in doc["articles"]} == {"tea": "generating", "coffee": "quota"}
    assert any("daily send limit reached" in w for w in doc["warnings"])


def test_a_later_successful_poll_is_not_failed_any_more(project):
    ws = make_workspace(project)
    chat, router = FakeChat(), FakeRouter()
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    add_prompt(project, "tea")
    generate(ws, "tea", eng, clock=lambda: time.time() - 100)
    chat.enqueue_check(HardError("chat deleted", code="chat_deleted"))
    router.enqueue(HardError("router down", code="router_http"))
    assert generate(ws, "tea", eng).status is Status.FAILED
    assert by_slug(collect(ws))["tea"].state == "failed"
    generate(ws, "tea", eng, clock=lambda: time.time() + 100)  # polls: still generating
    assert by_slug(collect(ws))["tea"].state == "generating"


# -- the last cycle ----------------------------------------------------------------------------


def write_cycle(ws, **record):
    path = ws.state_dir / "last_cycle.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_last_cycle_and_the_stale_cycle_warning(project):
    ws = make_workspace(project)
    add_prompt(project, "tea")
    now = time.time()
    write_cycle(ws, started=now - 70, finished=now - 60, exit_code=3, summary="1 sent", pid=4242)
    doc = collect(ws, now).to_json()
    assert doc["last_cycle"] == {
        "started": datetime.fromtimestamp(now - 70).astimezone().isoformat(timespec="seconds"),
        "finished": datetime.fromtimestamp(now - 60).astimezone().isoformat(timespec="seconds"),
        "exit_code": 3,
        "summary": "1 sent",
        "pid": 4242,
        "running": False,
        "gone": False,
        "seconds_since_finished": 60,
        "chat_logged_out": False,
        "routed_while_logged_out": 0,
        "store_error": None,
        "store_failures": 0,
        "problem": None,
    }
    assert not any("cycle" in w for w in doc["warnings"])
    write_cycle(ws, started=now - 3700, finished=now - 3600, exit_code=0, summary="", pid=1)
    assert any("no cycle has finished for 1h00m" in w for w in collect(ws, now).warnings)
    write_cycle(ws, started=now - 3600, finished=None, exit_code=None, summary="", pid=7)
    assert any("has not finished" in w for w in collect(ws, now).warnings)


def test_no_stale_cycle_warning_when_nothing_is_left_to_do(project):
    ws = make_workspace(project)
    now = time.time()
    write_cycle(ws, started=now - 90000, finished=now - 86400, exit_code=0, summary="", pid=1)
    assert collect(ws, now).warnings == []


def test_slow_polls_stretch_the_expected_cycle_gap(project):
    ws = make_workspace(project)
    (project / "config.toml").write_text("[qwen]\npoll_interval = 3600\n")
    ws = open_workspace(load(project / "config.toml"))
    add_prompt(project, "tea")
    now = time.time()
    write_cycle(ws, started=now - 7300, finished=now - 7200, exit_code=0, summary="", pid=1)
    assert collect(ws, now).warnings == []  # 3 polls of an hour have not passed yet


# -- the plain output and `show`, as users run them ----------------------------------------------


def test_plain_output_off_a_terminal_has_no_colour_and_no_box(batch, project):
    result = qwenpipe("status", cwd=project, env={"NO_COLOR": None})
    assert result.returncode == 0
    out = result.stdout
    assert "\x1b[" not in out and not set("─│┃━┏┓└┘╭╮") & set(out)
    lines = out.splitlines()
    header = lines[0].split()
    assert header[:3] == ["SLUG", "STATE", "ENGINE"] and "CHAT" in header
    rows = {line.split()[0]: line.split()[1] for line in lines[1:10]}
    assert rows == {slug: slug if slug != "routed" else "done" for slug in rows} and len(rows) == 9
    state_column = lines[0].index("STATE")
    assert all(line[state_column - 2 : state_column] == "  " for line in lines[1:10]), "columns aligned"
    assert (
        "9 articles: failed 1, dead 1, backoff 1, sending 1, generating 1, pending 1, done 2, orphan 1" in out
    )
    assert "sends today:" in out and "last cycle: none recorded" in out
    assert "warning: no cycle has run yet" in result.stderr and "warning" not in out


def test_show_tells_the_whole_story(batch, project):
    result = qwenpipe_in_process("show", "backoff", cwd=project, env={"NO_COLOR": "1"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("backoff: backoff\n") and "attempts: 1" in out
    chat_url = (project / "articles" / "backoff.md.url").read_text().strip()
    assert f"chat URL: {chat_url}" in out
    assert re.search(r"\nchat URL +yes ", out) and re.search(r"\narticle +no ", out)
    assert "state" not in out.split("files:")[1].split("journal (")[0]  # no old state file: not listed
    old = project / "articles" / ".qwenpipe" / "state" / "backoff.json"
    old.parent.mkdir(exist_ok=True)
    old.write_text("{}")
    again = qwenpipe_in_process("show", "backoff", cwd=project, env={"NO_COLOR": "1"}).stdout
    assert re.search(r"\nold state file +yes ", again)  # an older version's, left behind: listed
    journal = out.split("journal (")[1]
    for event in ("sending", "sent", "transient"):
        assert f" {event} " in journal
    assert "[waf] WAF page" in journal and "qwen" in journal


def test_show_counts_every_send_of_a_dead_article(batch, project):
    out = cli_out(project, "show", "dead")
    assert out.startswith("dead: dead") and re.search(r"\ndead letter +yes ", out)
    assert out.count(" router_failed ") == 3 and " dead_letter " in out


def test_show_of_an_unknown_or_bad_slug_is_exit_2(project):
    result = qwenpipe_in_process("show", "nothing-here", cwd=project)
    assert result.returncode == 2 and "unknown article 'nothing-here'" in result.stderr
    assert qwenpipe_in_process("show", "../etc", cwd=project).returncode == 2


# -- the store ------------------------------------------------------------------------------------


def test_status_sees_a_step_as_soon_as_it_is_in_the_store(batch):
    from pipeline.contract.article import ArticleState

    assert {row.slug: row for row in collect(batch).rows}["generating"].state == "generating"
    batch.journal.append("generating", "hard", engine="qwen", error="boom", code="x")
    state = ArticleState.load(batch.store, batch.article("generating"))
    state.hard_failures = 1
    state.save(batch.store, "generating")
    assert {row.slug: row for row in collect(batch).rows}["generating"].state == "failed"


def test_sends_today_counts_sending_steps(project):
    ws = make_workspace(project)
    for _ in range(3):
        ws.journal.append("tea", "sending")
    ws.journal.append("tea", "sent")
    from pipeline.contract.quota import sends_today

    assert ws.store.send_counts(time.time() - 60).total == 3
    assert ws.store.send_counts(time.time() + 60).total == 0
    assert sends_today(ws.journal, time.time()) == collect(ws).sends_today == 3


def test_status_does_not_create_files_in_an_empty_project(project):
    ws = make_workspace(project)
    collect(ws)
    assert not (project / "articles" / ".qwenpipe").exists()


def test_a_prompt_edited_within_its_mtime_tick_is_judged_again(project):
    """An edit that keeps the size and leaves the mtime as it was (a coarse clock tick, a tool
    that preserves times: os.utime here) is still seen: the remembered check is not trusted."""
    ws = make_workspace(project)
    ws.journal.append("*", "cycle_start")  # the store exists, as after any run
    add_prompt(project, "tea", "Write about tea.")
    path = project / "prompts" / "tea.md"
    before = path.stat()
    assert [r.state for r in collect(ws).rows] == ["pending"]
    path.write_bytes(b"\xff\xfe" + path.read_bytes()[2:])  # same size, no longer UTF-8
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    [row] = collect(ws).rows
    assert row.state == "invalid" and "UTF-8" in row.last_error


def test_a_prompt_is_judged_again_whenever_its_file_changes(project, monkeypatch):
    """Status remembers which waiting prompts load (a cache of 10,000 reads): an edit, a fix or
    a replacement of the file is seen at once, and an unchanged prompt is not read again."""
    ws = make_workspace(project)
    ws.journal.append("*", "cycle_start")  # the store exists, as after any run
    add_prompt(project, "tea", "Write about tea.")
    add_prompt(project, "coffee", "")
    assert {r.slug: r.state for r in collect(ws).rows} == {"tea": "pending", "coffee": "invalid"}
    assert set(ws.store.prompt_checks()) == {"tea", "coffee"}

    (project / "prompts" / "coffee.md").write_text("Write about coffee, at last.", encoding="utf-8")
    (project / "prompts" / "tea.md").write_bytes(b"\xff\xfe not UTF-8")
    rows = {r.slug: r for r in collect(ws).rows}
    assert rows["coffee"].state == "pending"
    assert rows["tea"].state == "invalid" and "UTF-8" in rows["tea"].last_error

    import pipeline.contract.prompts  # batch.scan imports load_prompt from there where it reads one

    loaded = []
    original = pipeline.contract.prompts.load_prompt
    monkeypatch.setattr(pipeline.contract.prompts, "load_prompt", lambda *a: loaded.append(a) or original(*a))
    assert {r.slug: r.state for r in collect(ws).rows} == {"tea": "invalid", "coffee": "pending"}
    assert loaded == []  # nothing changed: nothing read
