"""The cron cycle with fake engines: planning, limits, exit codes, no overlap, no needless browser."""

from __future__ import annotations

import http.server
import threading

import pytest
from fakes import answer
from project_files import add_prompt, snapshot

from pipeline.batch.cycle import run_cycle
from pipeline.config import load
from pipeline.contract.workspace import Engines
from pipeline.engines.base import Generating, HardError
from pipeline.files import FileLock
from pipeline.wiring import workspace as open_workspace


def setup(project, chat, router, extra=""):
    (project / "config.toml").write_text(
        f"[article]\nmin_words = 0\n[qwen]\npoll_interval = 0\nmax_attempts = 3\n{extra}\n"
    )
    ws = open_workspace(load(project / "config.toml"))
    created = []

    def chat_factory(_config):
        created.append(1)
        return chat

    def make_engines():
        return Engines(ws.config, chat_factory=chat_factory, router_factory=lambda _c: router)

    return ws, make_engines, created


def test_nothing_to_do_starts_no_browser(project, chat, router):
    ws, engines, created = setup(project, chat, router)
    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("done")
    report = run_cycle(ws, engines())
    assert report.exit_code == 0 and created == [] and not report.browser_used
    assert "1 done" in report.summary()


def test_cycles_move_every_article_to_done(project, chat, router):
    ws, engines, created = setup(project, chat, router)
    for slug in ("a", "b", "c"):
        add_prompt(project, slug, f"Write about {slug}.")
    first = run_cycle(ws, engines())
    assert first.exit_code == 42 and sorted(first.sent) == ["a", "b", "c"] and chat.sends == 3
    chat.enqueue_check(Generating(), Generating(), Generating())
    second = run_cycle(ws, engines())
    assert second.exit_code == 3 and chat.sends == 3
    chat.enqueue_check(answer(), answer(), answer())
    third = run_cycle(ws, engines())
    assert third.exit_code == 0 and chat.sends == 3
    assert all((project / "articles" / f"{s}.md").exists() for s in "abc")
    fourth = run_cycle(ws, engines())
    assert fourth.exit_code == 0 and len(created) == 3, "a cycle with nothing to do made an engine"


def test_sends_oldest_prompt_first_within_the_cycle_limit(project, chat, router):
    import os

    ws, engines, _ = setup(project, chat, router, "max_sends_per_cycle = 1")
    for index, slug in enumerate(("newest", "oldest", "middle")):
        path = add_prompt(project, slug, f"Write about {slug}.")
        os.utime(path, (1_000_000 - index * 100, 1_000_000 - index * 100))
    order = [run_cycle(ws, engines()).sent for _ in range(3)]
    assert order == [["middle"], ["oldest"], ["newest"]]


def test_daily_limit_counts_sends_from_the_journal(project, chat, router):
    ws, engines, _ = setup(project, chat, router, "max_sends_per_day = 2")
    for slug in "abcd":
        add_prompt(project, slug, f"Write about {slug}.")
    first = run_cycle(ws, engines())
    assert len(first.sent) == 2 and first.counts["throttled"] == 2
    second = run_cycle(ws, engines())
    assert second.sent == [] and chat.sends == 2 and second.exit_code == 3


def test_a_second_cycle_exits_at_once_and_touches_nothing(project, chat, router):
    ws, engines, created = setup(project, chat, router)
    add_prompt(project, "tea")
    with FileLock(ws.cycle_lock, purpose="cycle"):
        before = snapshot(project)
        report = run_cycle(ws, engines())
        after = snapshot(project)
    assert report.exit_code == 3 and "another cycle" in report.summary() and "pid" in report.summary()
    assert created == [] and after == before


def test_hard_failure_makes_the_cycle_exit_1(project, chat, router):
    ws, engines, _ = setup(project, chat, router, "[router]\nenabled = false")
    add_prompt(project, "tea")
    add_prompt(project, "coffee", "Write about coffee.")
    chat.send_error = HardError("the site refused", code="refused")  # no hold: each article tries
    report = run_cycle(ws, engines())
    assert report.exit_code == 1 and sorted(report.failed) == ["coffee", "tea"]


def test_dead_letters_are_skipped(project, chat, router):
    ws, engines, created = setup(project, chat, router)
    add_prompt(project, "tea")
    (project / "articles" / "tea.md.failed").write_text('reason = "x"\n')
    report = run_cycle(ws, engines())
    assert report.counts["dead"] == 1 and created == []
    assert report.exit_code == 1  # skipped, and still waiting for a person: not "everything is done"


def test_invalid_prompt_is_reported_and_the_rest_goes_on(project, chat, router):
    ws, engines, _ = setup(project, chat, router)
    (project / "prompts" / "bad.md").write_bytes(b"\xff\xfe")
    add_prompt(project, "good")
    report = run_cycle(ws, engines())
    assert report.invalid == ["bad"] and report.sent == ["good"] and report.exit_code == 1


class _Recorder(http.server.BaseHTTPRequestHandler):
    paths: list[str] = []

    def do_GET(self):  # noqa: N802
        _Recorder.paths.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def monitor():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.paths = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/ping/abc", _Recorder.paths
    server.shutdown()


def test_cycle_pings_start_and_exit_code(project, monitor):
    from tests_cli_helpers import qwenpipe_in_process as qwenpipe

    url, paths = monitor
    (project / "config.toml").write_text(f'[notify]\nping_url = "{url}"\n')
    result = qwenpipe("cycle", cwd=project)
    assert result.returncode == 0
    assert paths == ["/ping/abc/start", "/ping/abc/0"]


def test_a_failing_ping_never_fails_the_cycle(project):
    from tests_cli_helpers import qwenpipe_in_process as qwenpipe

    (project / "config.toml").write_text('[notify]\nping_url = "http://127.0.0.1:9/nothing"\n')
    result = qwenpipe("cycle", cwd=project)
    assert result.returncode == 0 and "ping start failed" in result.stderr


def test_cron_prints_a_working_crontab_line_and_systemd_units(project):
    from tests_cli_helpers import qwenpipe_in_process as qwenpipe

    result = qwenpipe("cron", cwd=project)
    assert result.returncode == 0
    line = next(x for x in result.stdout.splitlines() if x.startswith("*/5 "))
    assert f"cd {project}" in line and f"--config {project / 'config.toml'}" in line
    assert " cycle --cron-exit >> " in line  # 0 unless a person is needed: cron reports only that
    executable = line.split(" && ")[1].split(" --config")[0]
    assert executable.startswith("/")
    assert " cycle --cron-exit\n" in result.stdout and "OnUnitActiveSec=5min" in result.stdout
    assert f"{project / 'qwenpipe-cron.log'} {{" in result.stdout and "copytruncate" in result.stdout


def test_a_cycle_removes_old_temporary_files_a_killed_writer_left(project, chat, router):
    import os

    ws, engines, _ = setup(project, chat, router)
    state = project / "articles" / ".qwenpipe" / "state"
    state.mkdir(parents=True)
    articles = project / "articles"
    old = [
        articles / ".qwenpipe-tmp-tea.md.x1abcdef",
        articles / ".qwenpipe-tmp-tea.md.rejected",  # our shape, though it ends as a sidecar does
        state / ".qwenpipe-tmp-tea.json.x2abcdef",
    ]
    fresh = [state / ".qwenpipe-tmp-coffee.json.x3abcdef", articles / ".qwenpipe-tmp-tea.md.x4abcdef"]
    mine = [articles / ".qwenpipe-tmp-notes", articles / "notes.txt"]  # not our shape: never removed
    for path in (*old, *fresh, *mine):
        path.write_text("half")  # a writer may still be busy with the fresh ones
    for path in (*old, *mine):
        os.utime(path, (1_000_000, 1_000_000))
    run_cycle(ws, engines())
    assert not any(p.exists() for p in old) and all(p.exists() for p in (*fresh, *mine))


def test_a_cycle_lists_the_articles_folder_once(project, chat, router, monkeypatch):
    """The scan's listing of articles/ is the temporaries' sweep's too: 100,000 names listed once."""
    import os

    ws, engines, _ = setup(project, chat, router)
    add_prompt(project, "tea")
    (project / "articles" / "tea.md").write_text("done")
    run_cycle(ws, engines())  # the first one tightens what an older version wrote, once
    listed = []
    for name in ("scandir", "listdir"):
        real = getattr(os, name)

        def spy(path=".", real=real):
            listed.append(os.path.realpath(path))
            return real(path)

        monkeypatch.setattr(os, name, spy)
    assert run_cycle(ws, engines()).exit_code == 0
    assert listed.count(os.path.realpath(project / "articles")) == 1, listed


def test_a_later_turn_sent_by_a_poll_counts_against_the_cycle_send_limit(project, chat, router):
    import os

    ws, engines, _ = setup(project, chat, router, "max_sends_per_cycle = 1")
    talk = add_prompt(project, "talk", "Outline it.\n=== next turn ===\nWrite it.")
    os.utime(talk, (1_000_000, 1_000_000))
    assert run_cycle(ws, engines()).sent == ["talk"]  # turn 1
    add_prompt(project, "fresh", "Write about something new.")
    second = run_cycle(ws, engines())
    assert second.sent == ["talk"] and second.counts["throttled"] == 1, second.summary()
    sent_texts = [text for kind, text in chat.history if kind in ("send", "send_turn")]
    assert "Write about something new." not in sent_texts, "two sends in a cycle limited to one"
    assert sent_texts[-1] == "Write it."


def test_the_send_budget_never_gives_more_than_its_limit_across_threads():
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.contract.quota import SendBudget

    budget = SendBudget(3)
    with ThreadPoolExecutor(8) as pool:
        granted = sum(pool.map(lambda _: budget.take(), range(200)))
    assert granted == 3
    assert all(SendBudget(0).take() for _ in range(50))  # 0 = no limit
