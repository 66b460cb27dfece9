"""[metrics] textfile: the Prometheus text format written at the end of each cycle, read back
with prometheus_client's own parser; doctor's checks of [metrics] and [notify]."""

from __future__ import annotations

from accounts_project import accounts_project
from fakes import answer
from project_files import add_prompt
from prometheus_client.parser import text_string_to_metric_families

from pipeline.batch.cycle import run_cycle
from pipeline.config import load
from pipeline.setup.doctor import FAIL, OK, Report, check_metrics, check_notify


def samples(path) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_each_cycle_writes_the_batch_and_its_own_numbers(project):
    (project / "metrics").mkdir()
    ws, chats, _router, engines = accounts_project(
        project,
        "[qwen]\npoll_interval = 0\n[article]\nmin_words = 0\n[accounts.main]\n"
        '[metrics]\ntextfile = "metrics/qwenpipe.prom"\n',
    )
    add_prompt(project, "tea")
    add_prompt(project, "milk", "Write about milk.")
    (project / "articles" / "milk.md.failed").write_text('reason = "x"\n')
    prom = project / "metrics" / "qwenpipe.prom"
    assert run_cycle(ws, engines()).exit_code == 1  # milk's dead letter waits for a person
    first = samples(prom)
    assert first[("qwenpipe_last_cycle_exit_code", ())] == 1
    assert first[("qwenpipe_articles", (("engine", "qwen"), ("state", "generating")))] == 1
    assert first[("qwenpipe_sends_today", (("account", "main"),))] == 1
    assert first[("qwenpipe_account_held", (("account", "main"),))] == 0
    assert first[("qwenpipe_dead_letters", ())] == 1
    assert first[("qwenpipe_last_cycle_duration_seconds", ())] >= 0
    chats["main"].enqueue_check(answer())
    (project / "articles" / "milk.md.failed").unlink()  # replayed by hand: nothing waits for a person
    (project / "articles" / "milk.md").write_text("+++\n+++\nmilk\n")
    assert run_cycle(ws, engines()).exit_code == 0
    second = samples(prom)
    assert second[("qwenpipe_last_cycle_exit_code", ())] == 0
    assert second[("qwenpipe_articles", (("engine", "qwen"), ("state", "done")))] == 1
    assert second[("qwenpipe_articles", (("engine", ""), ("state", "generating")))] == 0
    assert not [p for p in prom.parent.iterdir() if p != prom]  # written atomically: no temporaries


def test_a_textfile_that_cannot_be_written_is_said_and_the_cycle_goes_on(project, chat, router):
    ws, _chats, _router, engines = accounts_project(project, '[metrics]\ntextfile = "gone/qwenpipe.prom"\n')
    (project / "gone").write_text("a file where the folder should be")
    said: list[str] = []
    assert run_cycle(ws, engines(), say=said.append).exit_code == 0
    assert any(line.startswith("metrics: gone/qwenpipe.prom not written") for line in said), said


def test_doctor_checks_the_metrics_folder_and_parses_notify_urls_without_sending(project):
    def doctor(urls: str) -> list:
        settings = f'[metrics]\ntextfile = "nowhere/qwenpipe.prom"\n[notify]\nurls = {urls}\n'
        (project / "config.toml").write_text(settings)
        report = Report("test")
        config = load(project / "config.toml")
        check_metrics(report, config)
        check_notify(report, config)
        return report.checks

    [metrics, notify] = doctor('["json://127.0.0.1:9/x", "nope://x"]')
    assert metrics.status == FAIL and "cannot write in" in metrics.detail
    assert notify.status == FAIL and "1 of 2 not understood by Apprise (nope://...)" in notify.detail
    (project / "nowhere").mkdir()
    assert [c.status for c in doctor('["json://127.0.0.1:9/x"]')] == [OK, OK]
