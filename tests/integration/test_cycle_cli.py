"""`qwenpipe cycle` end to end: real processes, real Chromium, the simulator on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from sim_project import journal, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_at_once, qwenpipe_in_process, spawn

pytestmark = pytest.mark.browser


# Answers complete once sent: the cycle after a send finds them done (what these tests are about
# is sends, locks and kills, not an answer's growth).
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.2}  # conftest.py `sim`


def cycle_ends(project):
    return [e for e in journal(project) if e["event"] == "cycle_end"]


def test_five_prompts_repeated_cycles_each_sent_once(sim, tmp_path):
    project = make_project(
        tmp_path, sim, extra="max_sends_per_cycle = 3", own_browser=True
    )  # launches counted
    texts = {f"p{i}": prompt(project, f"p{i}", f"Write article number {i} about cycles.") for i in range(5)}
    for index, slug in enumerate(sorted(texts)):  # oldest first = p0 first
        os.utime(project / "prompts" / f"{slug}.md", (1_000_000 + index, 1_000_000 + index))
    codes = []
    for _ in range(30):
        result = qwenpipe_in_process("cycle", cwd=project)
        codes.append(result.returncode)
        assert result.returncode in (0, 3, 42), result.stderr
        assert "cycle: " in result.stderr.splitlines()[-1]
        if result.returncode == 0:
            break
    assert codes[0] == 42 and codes[1] == 42 and codes[-1] == 0, codes
    sent_order = [e["slug"] for e in journal(project) if e["event"] == "sent"]
    assert sent_order == ["p0", "p1", "p2", "p3", "p4"]
    for slug, text in texts.items():
        assert [e["prompt"] for e in sim.sends()].count(text) == 1, slug
        _, body = read_article(project / "articles" / f"{slug}.md")
        assert body == sim.expected_answer(text).strip()
    ends = cycle_ends(project)
    assert all(e["browser_launches"] == 1 for e in ends), [e["browser_launches"] for e in ends]
    idle = qwenpipe_in_process("cycle", cwd=project)
    assert idle.returncode == 0 and "no browser" in idle.stderr
    assert cycle_ends(project)[-1]["browser_launches"] == 0


def test_two_cycles_at_once_one_works_the_other_exits_3(sim, tmp_path):
    project = make_project(tmp_path, sim)
    texts = [prompt(project, f"c{i}", f"Write about concurrency {i}.") for i in range(2)]
    sim.set(url_delay=3.0)  # the first cycle's sends take 3 s each: the other starts within them
    results = sorted(qwenpipe_at_once("cycle", cwd=project, count=2))
    assert [code for code, _ in results] == [3, 42], results
    assert "another cycle is running (pid" in results[0][1]
    for text in texts:
        assert [e["prompt"] for e in sim.sends()].count(text) == 1


def test_a_killed_cycle_blocks_nothing_and_sends_nothing_twice(sim, tmp_path):
    sim.set(url_delay=3.0)
    project = make_project(tmp_path, sim, own_browser=True)  # killed: its own browser
    texts = [prompt(project, f"k{i}", f"Write about being killed {i}.") for i in range(3)]
    process = spawn("cycle", cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(e["prompt"] == texts[0] for e in sim.sends()):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    sim.set(url_delay=0.2)
    for _ in range(20):
        result = qwenpipe_in_process("cycle", cwd=project)
        assert "another cycle" not in result.stderr, "the killed cycle's lock blocked the next one"
        if result.returncode == 0:
            break
    assert result.returncode == 0, result.stderr
    for text in texts:
        assert [e["prompt"] for e in sim.sends()].count(text) == 1
