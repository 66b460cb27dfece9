"""Eight processes at once on one batch of prompts: cron cycles overlapping by-hand `generate`s.

Real processes, real Chromium, one simulator. The promises: no prompt reaches the chat twice,
every article is written exactly once (one `done` in the journal), a chat article is the chat's
exact answer, and no prompt is paid for twice (the chat took it AND the router wrote it).

Processes share one browser profile and Chromium refuses a second browser on it: the process
that finds the profile taken steps aside (exit 3, "in use by pid N"), it never counts that as a
failure of the chat and never falls back to the router for it.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from sim_project import journal, make_project, read_article

from pipeline.simulator import Simulator

pytestmark = [pytest.mark.chaos, pytest.mark.browser]

# Eight processes overlap on every batch size; CI's run takes 20 prompts, a long run more
# (QWENPIPE_CONCURRENCY_PROMPTS=50, docs/reliability.md).
PROMPTS = int(os.environ.get("QWENPIPE_CONCURRENCY_PROMPTS", "20"))
CYCLE_WORKERS = 3
GENERATE_WORKERS = 5  # two of them by hand with --wait
CONCURRENT_SECONDS = 60  # eight processes at once, then cycles alone finish what is left
DEADLINE = 300  # a ceiling for a loaded 2-CPU machine; a quiet one needs about half
SENDS_PER_CYCLE = 10


def run_command(args, project) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        cwd=project,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.returncode, result.stderr


@pytest.mark.timeout(420)
def test_eight_processes_on_one_batch_send_each_prompt_once_and_write_each_once(tmp_path):
    with Simulator(port=0, answer_seconds=0.5, thinking_seconds=0.1, url_delay=0.1).start() as sim:
        # Short cycles (10 sends at most) overlap each other and the generates more often, and
        # none comes near the 120 s a command may take on a loaded 2-CPU machine.
        project = make_project(tmp_path, sim, extra=f"max_sends_per_cycle = {SENDS_PER_CYCLE}")
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
        results: list[tuple[list[str], int, str]] = []
        lock = threading.Lock()

        def pending() -> list[str]:
            return [s for s in texts if not (project / "articles" / f"{s}.md").exists()]

        def worker(number: int) -> None:
            rng = random.Random(number)
            while not finished.is_set() and time.monotonic() < deadline:
                left = pending()
                if not left:
                    finished.set()
                    return
                if number < CYCLE_WORKERS:
                    args = ["cycle"]
                else:
                    args = ["generate", rng.choice(left)] + (["--wait"] if number >= 6 else [])
                code, err = run_command(args, project)
                with lock:
                    results.append((args, code, err))
                if code == 3 and args == ["cycle"]:
                    time.sleep(0.2)  # another cycle holds the lock: try again soon

        threads = [
            threading.Thread(target=worker, args=(n,)) for n in range(CYCLE_WORKERS + GENERATE_WORKERS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        while pending() and time.monotonic() < started + DEADLINE:
            code, err = run_command(["cycle"], project)
            results.append((["cycle"], code, err))

        odd = [(a, c, e.strip().splitlines()[-1:]) for a, c, e in results if c not in (0, 3, 42)]
        assert not odd, odd
        assert not any("Traceback" in e for _, _, e in results)
        assert not pending(), f"not finished in {DEADLINE} s: {pending()}"
        sent = Counter(entry["prompt"] for entry in sim.sends())
        twice = {slug: sent[text] for slug, text in texts.items() if sent[text] != 1}
        twice = {slug: count for slug, count in twice.items() if count > 1}
        assert not twice, f"prompts the chat took more than once: {twice}"
        done = Counter(e["slug"] for e in journal(project) if e["event"] == "done")
        assert all(done[slug] == 1 for slug in texts), {s: done[s] for s in texts if done[s] != 1}
        entries = journal(project)
        for slug, text in texts.items():
            meta, body = read_article(project / "articles" / f"{slug}.md")
            if meta["engine"] == "qwen":
                assert body == sim.expected_answer(text).strip(), slug
                continue
            codes = {e.get("code") for e in entries if e["slug"] == slug and e["event"] == "hard"}
            assert meta["engine"] == "router" and not sent[text], f"{slug}: paid twice ({codes})"
        commands = Counter(a[0] for a, _, _ in results)
        assert commands["cycle"] and commands["generate"], commands


@pytest.mark.timeout(120)
def test_a_poll_while_another_process_has_the_browser_does_not_pay_the_router(tmp_path):
    with Simulator(port=0, answer_seconds=0.5, thinking_seconds=0.1, url_delay=0.2).start() as sim:
        project = make_project(tmp_path, sim)
        texts = {}
        for slug in ("left", "right"):
            texts[slug] = f"Write about the {slug} hand of two processes."
            (project / "prompts" / f"{slug}.md").write_text(texts[slug], encoding="utf-8")
        assert run_command(["generate", "left"], project)[0] == 42
        sim.set(answer_seconds=15)  # `right --wait` keeps its browser open a while
        holder = subprocess.Popen(
            [sys.executable, "-m", "pipeline", "generate", "right", "--wait"],
            cwd=project,
            env={**os.environ, "NO_COLOR": "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(e["prompt"] == texts["right"] for e in sim.sends()):
                time.sleep(0.1)
            code, err = run_command(["generate", "left"], project)
        finally:
            holder.kill()
            holder.wait()
        article = project / "articles" / "left.md"
        assert code == 3 and "is in use by" in err, err
        assert not article.exists(), "the router wrote a prompt the chat already took: paid twice"
