"""What a cycle, the journal and `status` say agrees with itself (issue 36, item 10): a plain
`cycle` exits 0 only when everything is done, a chat step names the account it was about, a
router-written article names none, and one hold has one end wherever it is shown."""

from __future__ import annotations

from accounts_project import accounts_project
from fakes import answer
from project_files import add_prompt

from pipeline.batch.cycle import run_cycle
from pipeline.batch.status import collect
from pipeline.contract.step import generate
from pipeline.engines.base import HardError
from pipeline.exitcodes import ExitCode
from pipeline.store.protocol import QuotaBlock

NOW = 1_800_000_000.0
BASE = "[qwen]\npoll_interval = 0\nmax_attempts = 3\n[article]\nmin_words = 0\n"


def test_a_plain_cycle_with_a_dead_letter_waiting_for_replay_is_no_exit_0(project):
    ws, chats, router, engines = accounts_project(project, BASE + "[router]\nenabled = false\n")
    add_prompt(project, "tea")
    add_prompt(project, "milk", "Write about milk.")
    for slug in ("tea", "milk"):
        generate(ws, slug, engines())
    chats["default"].enqueue_check(answer())
    generate(ws, "tea", engines())
    (project / "articles" / "milk.md.failed").write_text('reason = "hard"\nengine = "qwen"\n')
    report = run_cycle(ws, engines(), say=lambda _line: None)
    assert report.counts["dead"] == 1 and report.exit_code is ExitCode.FAILED
    (project / "articles" / "milk.md.failed").unlink()
    (project / "articles" / "milk.md").write_text("+++\n+++\nby hand\n")
    assert run_cycle(ws, engines(), say=lambda _line: None).exit_code is ExitCode.DONE


def test_every_chat_step_names_its_account_and_a_router_article_names_none(project):
    tables = "[accounts.a]\nmax_sends_per_day = 1\n[accounts.b]\nmax_sends_per_day = 1\n"
    ws, chats, router, engines = accounts_project(project, BASE + tables)
    add_prompt(project, "tea")
    add_prompt(project, "milk", "Write about milk.")
    assert generate(ws, "tea", engines()).account == "a"
    chats["a"].enqueue_check(answer())
    generate(ws, "tea", engines())
    assert generate(ws, "milk", engines()).account == "b"
    chats["b"].enqueue_check(HardError("this chat was deleted", code="chat_deleted"))
    assert generate(ws, "milk", engines()).engine == "router"
    chat_steps = [e for e in ws.store.events() if e.fields.get("engine") == "qwen"]
    assert chat_steps and all(e.account in ("a", "b") for e in chat_steps), chat_steps
    done = {e.slug: e.account for e in ws.store.events() if e.event == "done"}
    assert done == {"tea": "a", "milk": ""}
    rows = {row["slug"]: row for row in collect(ws).to_json()["articles"]}
    assert (rows["tea"]["account"], rows["milk"]["account"]) == ("a", None)


def test_a_hold_recorded_before_the_clock_went_back_has_one_end_in_status(project):
    ws, chats, router, engines = accounts_project(project, BASE + "[accounts.a]\n[accounts.b]\n")
    add_prompt(project, "tea")
    since = NOW + 5 * 3600  # recorded five hours "later": the clock went back since
    with ws.store.transaction() as tx:
        tx.block_quota(QuotaBlock("a", until=since + 1800, reason="bot_check: slider", since=since))
    status = collect(ws, NOW)
    line = next(a for a in status.accounts if a.name == "a")
    assert line.hold is not None and line.quota_until is not None
    assert line.hold.until == line.quota_until == NOW + 1800
    account = next(a for a in status.to_json()["accounts"] if a["name"] == "a")
    assert account["hold"]["until"] == account["quota"]["until"]
