"""`qwenpipe cycle` polls up to `qwen.concurrency` chats at once, in pages of its one browser.

Real processes, real Chromium, the simulator on loopback. The journal proves the overlap: each
`poll` entry is written at the end of its look at the chat (`ts`) and says how long the look
took (`duration`), so [ts - duration, ts] is when it ran (a little late, never early: two
looks made one after the other by one thread never seem to overlap).
"""

from __future__ import annotations

import pytest
from sim_project import journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

# Its projects launch their own browser (tests/sim_project.py):
# the launch count and a browser shared by a cycle's threads.
OWN_BROWSER = True

pytestmark = pytest.mark.browser

PROMPTS = 6


# Answers complete once sent (a test that needs them unfinished holds them): the cycles after
# the sends have nothing to wait for.
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.2}  # conftest.py `sim`


def cycles(project) -> list[list[dict]]:
    """The journal cut into cycles: the entries from each cycle_start to its cycle_end."""
    found, current = [], None
    for entry in journal(project):
        if entry["event"] == "cycle_start":
            current = []
        elif entry["event"] == "cycle_end":
            found.append((current or []) + [entry])
            current = None
        elif current is not None:
            current.append(entry)
    return found


def most_at_once(entries: list[dict]) -> int:
    """The largest number of `poll` looks (of different articles) running at one moment."""
    edges = []
    for entry in entries:
        if entry["event"] == "poll":
            edges += [(entry["ts"] - entry["duration"], 1), (entry["ts"], -1)]
    running = peak = 0
    for _, step in sorted(edges):  # at a tie, an end (-1) sorts before a start (+1)
        running += step
        peak = max(peak, running)
    return peak


def write_prompts(project, topic: str) -> dict[str, str]:
    return {f"a{i}": prompt(project, f"a{i}", f"Write article {i} about {topic}.") for i in range(PROMPTS)}


def run_until_done(project, *, limit: int = 40) -> list[int]:
    codes = []
    for _ in range(limit):
        result = qwenpipe_in_process("cycle", cwd=project, timeout=180)
        codes.append(result.returncode)
        assert result.returncode in (0, 3), result.stderr
        if result.returncode == 0:
            break
    assert codes[-1] == 0, codes
    return codes


def check_articles(project, sim, texts: dict[str, str]) -> None:
    for slug, text in texts.items():
        assert [e["prompt"] for e in sim.sends()].count(text) == 1, slug
        _, body = read_article(project / "articles" / f"{slug}.md")
        assert body == sim.expected_answer(text).strip(), slug
    ends = [c[-1] for c in cycles(project)]
    assert all(e["browser_launches"] == 1 for e in ends), [e["browser_launches"] for e in ends]


def test_one_cycle_polls_up_to_concurrency_chats_at_once(sim, tmp_path):
    # The answers are held short of their end until released, so the cycle after the sends finds
    # every chat still generating and journals a `poll` (with its duration) for each, however
    # slow the machine is. Each chat's page is looked at (qwen.collect = "page"): read through the
    # JSON first, held answers would all be told "generating" without opening a page.
    sim.set(hold_answers=True)  # at once at their held end (no growing time: SIMULATOR)
    try:
        project = make_project(tmp_path, sim, extra='concurrency = 4\ncollect = "page"')
        texts = write_prompts(project, "polling chats side by side")
        sent = qwenpipe_in_process("cycle", cwd=project, timeout=180)
        assert sent.returncode == 42, sent.stderr
        looked = qwenpipe_in_process("cycle", cwd=project, timeout=180)
        assert looked.returncode == 3, looked.stderr
        assert "one chat at a time" not in looked.stderr, looked.stderr
    finally:
        sim.set(hold_answers=False)
    polling = cycles(project)[1]
    seen = [(e["slug"], e["event"], e.get("error") or e.get("progress")) for e in polling]
    looks = sorted(slug for slug, event, _ in seen if event == "poll")
    assert looks == sorted(texts), (seen, looked.stderr)  # each chat looked at once, none skipped
    peak = most_at_once(polling)
    assert 2 <= peak <= 4, f"{peak} looks at once (concurrency = 4): {seen}"
    run_until_done(project)
    check_articles(project, sim, texts)
    assert all(c[-1]["browser_launches"] == 1 for c in cycles(project))
    idle = qwenpipe_in_process("cycle", cwd=project)
    assert idle.returncode == 0 and "no browser" in idle.stderr
    assert cycles(project)[-1][-1]["browser_launches"] == 0


def test_concurrency_one_polls_one_chat_at_a_time(sim, tmp_path):
    project = make_project(tmp_path, sim, extra="concurrency = 1")
    texts = write_prompts(project, "polling one chat after another")
    sent = qwenpipe_in_process("cycle", cwd=project, timeout=180)
    assert sent.returncode == 42, sent.stderr
    run_until_done(project)
    check_articles(project, sim, texts)
    for cycle in cycles(project):
        assert most_at_once(cycle) <= 1, cycle


def test_a_cycle_that_cannot_share_its_browser_polls_one_at_a_time(sim, tmp_path, monkeypatch, capsys):
    """No DevTools port announced: one line says so, and the sequential loop does the work."""
    from pipeline import config as config_module
    from pipeline.batch.cycle import run_cycle
    from pipeline.engines.qwen.browser import BrowserSession
    from pipeline.wiring import engines as wired
    from pipeline.wiring import workspace as open_workspace

    project = make_project(tmp_path, sim, extra="concurrency = 4")
    texts = {f"b{i}": prompt(project, f"b{i}", f"Write article {i} about one browser.") for i in range(3)}
    assert qwenpipe_in_process("cycle", cwd=project, timeout=180).returncode == 42
    monkeypatch.chdir(project)
    monkeypatch.setattr(BrowserSession, "cdp_endpoint", lambda self, timeout=5.0: None)
    workspace = open_workspace(config_module.load(project / "config.toml"))
    said: list[str] = []
    launches = BrowserSession.launches
    with wired(workspace.config) as engines:
        report = run_cycle(workspace, engines, say=said.append)
    assert report.exit_code == 0, (report.summary(), said)
    assert BrowserSession.launches - launches == 1 == report.browser_launches  # the engines count it
    assert [m for m in said if "one chat at a time" in m] == [
        "cycle: polling one chat at a time (the browser announced no DevTools port "
        "(DevToolsActivePort) in 5 s)"
    ], said
    check_articles(project, sim, texts)
