"""Processes at once on one batch of prompts: cron cycles overlapping by-hand `generate`s.

Real processes, real Chromium, one simulator. The promises: no prompt reaches the chat twice,
every article is written exactly once (one `done` in the journal), a chat article is the chat's
exact answer, and no prompt is paid for twice (the chat took it AND the router wrote it). The
journal proves the processes did overlap: two of them, running at the same time, each wrote an
event about the same article.

Processes share one browser profile and Chromium refuses a second browser on it: the process
that finds the profile taken steps aside (exit 3, "in use by pid N"), it never counts that as a
failure of the chat and never falls back to the router for it.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import combinations

import pytest
from sim_project import journal, make_project, read_article
from tests_cli_helpers import spawn

from pipeline.simulator import Simulator

pytestmark = [pytest.mark.chaos, pytest.mark.browser]

# CI's run: four processes (two looping `cycle`, two looping `generate`, one of those with
# --wait) on four prompts, the fewest that still overlap on the same articles (asserted from the
# journal). A long run: QWENPIPE_CONCURRENCY_PROCESSES=8 QWENPIPE_CONCURRENCY_PROMPTS=50
# (docs/reliability.md); eight processes are three cycles and five generates, two with --wait.
PROMPTS = int(os.environ.get("QWENPIPE_CONCURRENCY_PROMPTS", "4"))
PROCESSES = int(os.environ.get("QWENPIPE_CONCURRENCY_PROCESSES", "4"))
CYCLE_WORKERS = max(2, PROCESSES * 3 // 8)
GENERATE_WORKERS = max(2, PROCESSES - CYCLE_WORKERS)
WAITING_GENERATES = max(1, GENERATE_WORKERS * 2 // 5)  # the last ones: by hand with --wait
CONCURRENT_SECONDS = 60  # all processes at once, then cycles alone finish what is left
DEADLINE = 300  # a ceiling for a loaded 2-CPU machine; a quiet one needs a fraction
SENDS_PER_CYCLE = max(2, PROMPTS // 2)


@dataclass
class Run:
    """One command: what it was, how it ended, its pid and when it ran (time.time())."""

    args: list[str]
    code: int
    err: str
    pid: int
    started: float
    ended: float

    def overlaps(self, other: Run) -> bool:
        return self.started < other.ended and other.started < self.ended


def run_command(args, project) -> Run:
    started = time.time()
    process = spawn(*args, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        _out, err = process.communicate()
        err += "\n(killed after 120 s)"
    return Run(args, process.returncode, err, process.pid, started, time.time())


def shared_articles(runs: list[Run], entries: list[dict]) -> set[str]:
    """The articles about which two processes that ran at the same time each wrote an event."""
    runs_of = defaultdict(list)  # pid -> its runs (a pid may come back after many processes)
    for run in runs:
        runs_of[run.pid].append(run)
    writers = defaultdict(set)  # slug -> pids
    for entry in entries:
        if entry["slug"] and entry["pid"] in runs_of:
            writers[entry["slug"]].add(entry["pid"])
    return {
        slug
        for slug, pids in writers.items()
        for one, other in combinations(sorted(pids), 2)
        if any(a.overlaps(b) for a in runs_of[one] for b in runs_of[other])
    }


@pytest.mark.timeout(420)
def test_processes_at_once_on_one_batch_overlap_send_each_prompt_once_and_write_each_once(tmp_path):
    with Simulator(port=0, answer_seconds=0.5, thinking_seconds=0.1, url_delay=0.1).start() as sim:
        # Short cycles overlap each other and the generates more often, and none comes near the
        # 120 s a command may take on a loaded 2-CPU machine.
        sends = f"max_sends_per_cycle = {SENDS_PER_CYCLE}"
        # killed: own browsers
        project = make_project(tmp_path, sim, extra=sends, own_browser=True, headless_shell=True)
        with open(project / "config.toml", "a", encoding="utf-8") as config:
            config.write("\n[article]\nmin_words = 0\n")
        texts = {}
        for number in range(PROMPTS):
            slug = f"c{number:02d}"
            texts[slug] = f"Write a short piece about concurrency, number {number}."
            (project / "prompts" / f"{slug}.md").write_text(texts[slug], encoding="utf-8")
        finished = threading.Event()
        started = time.monotonic()
        deadline = started + CONCURRENT_SECONDS
        results: list[Run] = []
        lock = threading.Lock()

        def pending() -> list[str]:
            return [s for s in texts if not (project / "articles" / f"{s}.md").exists()]

        def worker(number: int) -> None:
            rng = random.Random(number)
            waits = number >= CYCLE_WORKERS + GENERATE_WORKERS - WAITING_GENERATES
            while not finished.is_set() and time.monotonic() < deadline:
                left = pending()
                if not left:
                    finished.set()
                    return
                if number < CYCLE_WORKERS:
                    args = ["cycle"]
                else:
                    args = ["generate", rng.choice(left)] + (["--wait"] if waits else [])
                run = run_command(args, project)
                with lock:
                    results.append(run)
                if run.code == 3 and args == ["cycle"]:
                    time.sleep(
                        1
                    )  # another cycle holds the lock: try again in a second (each try is a process)

        threads = [
            threading.Thread(target=worker, args=(n,)) for n in range(CYCLE_WORKERS + GENERATE_WORKERS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        while pending() and time.monotonic() < started + DEADLINE:
            results.append(run_command(["cycle"], project))

        odd = [(r.args, r.code, r.err.strip().splitlines()[-1:]) for r in results if r.code not in (0, 3, 42)]
        assert not odd, odd
        assert not any("Traceback" in r.err for r in results)
        assert not pending(), f"not finished in {DEADLINE} s: {pending()}"
        sent = Counter(entry["prompt"] for entry in sim.sends())
        twice = {slug: sent[text] for slug, text in texts.items() if sent[text] != 1}
        twice = {slug: count for slug, count in twice.items() if count > 1}
        assert not twice, f"prompts the chat took more than once: {twice}"
        entries = journal(project)
        done = Counter(e["slug"] for e in entries if e["event"] == "done")
        assert all(done[slug] == 1 for slug in texts), {s: done[s] for s in texts if done[s] != 1}
        for slug, text in texts.items():
            meta, body = read_article(project / "articles" / f"{slug}.md")
            if meta["engine"] == "qwen":
                assert body == sim.expected_answer(text).strip(), slug
                continue
            codes = {e.get("code") for e in entries if e["slug"] == slug and e["event"] == "hard"}
            assert meta["engine"] == "router" and not sent[text], f"{slug}: paid twice ({codes})"
        commands = Counter(r.args[0] for r in results)
        assert commands["cycle"] and commands["generate"], commands
        # What makes this a concurrency test: processes were at work on the same articles at once.
        assert shared_articles(results, entries), [(r.args, r.code, r.err.strip()[-200:]) for r in results]


@pytest.mark.timeout(120)
def test_a_poll_while_another_process_has_the_browser_does_not_pay_the_router(tmp_path):
    with Simulator(port=0, answer_seconds=0.5, thinking_seconds=0.1, url_delay=0.2).start() as sim:
        # processes racing for one profile
        project = make_project(tmp_path, sim, own_browser=True, headless_shell=True)
        texts = {}
        for slug in ("left", "right"):
            texts[slug] = f"Write about the {slug} hand of two processes."
            (project / "prompts" / f"{slug}.md").write_text(texts[slug], encoding="utf-8")
        assert run_command(["generate", "left"], project).code == 42
        sim.set(hold_answers=True)  # `right --wait` keeps its browser open until it is killed
        holder = spawn(
            "generate", "right", "--wait", cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(e["prompt"] == texts["right"] for e in sim.sends()):
                time.sleep(0.1)
            left = run_command(["generate", "left"], project)
        finally:
            holder.kill()
            holder.wait()
        article = project / "articles" / "left.md"
        assert left.code == 3 and "is in use by" in left.err, left.err
        assert not article.exists(), "the router wrote a prompt the chat already took: paid twice"
