"""Memory per chat account: one Chromium with a context per account, or one Chromium per account.

    .venv/bin/python bench/bench_accounts_memory.py [--accounts 1 3 5]

Against the simulator with N accounts, each signed in from its own saved login
(`Simulator.login_state`), each with one open chat page (a prompt sent, its answer shown):
(a) one `chromium.launch()` with one `browser.new_context(storage_state=...)` per account;
(b) one `launch_persistent_context` per account, each on its own profile (qwenpipe's
    BrowserSession, as a run starts it today).
Measured from /proc once every page shows its answer: the RSS of every Chromium process (all
descendants of this process but the Playwright driver) summed, and their PSS (shared pages
split between the processes that map them, so it does not count a shared library N times).
Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from pipeline.config import Browser  # noqa: E402
from pipeline.engines.qwen.browser import BrowserSession, find_executable, launch_args  # noqa: E402
from pipeline.simulator import Simulator  # noqa: E402

PROMPT = "Write a short article about owls hunting at night."
MIB = 1024 * 1024


# -- /proc ---------------------------------------------------------------------------------------
def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _kib(pid: int, path: str, key: str) -> int:
    try:
        with open(f"/proc/{pid}/{path}", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def chromium_memory() -> tuple[int, float, float]:
    """(processes, RSS MiB, PSS MiB) of every Chromium process below this one."""
    tree, seen, stack = _children(), [], [os.getpid()]
    while stack:
        for child in tree.get(stack.pop(), []):
            stack.append(child)
            if "chrom" in _comm(child) or "headless_shell" in _comm(child):
                seen.append(child)
    rss = sum(_kib(pid, "status", "VmRSS") for pid in seen) / 1024
    pss = sum(_kib(pid, "smaps_rollup", "Pss") for pid in seen) / 1024
    return len(seen), rss, pss


# -- the two ways --------------------------------------------------------------------------------
def open_chat(page, base_url: str) -> None:
    """One chat page showing a complete answer."""
    page.goto(base_url + "/", wait_until="domcontentloaded")
    page.fill("textarea.message-input-textarea", PROMPT)
    page.click("button.send-button")
    page.wait_for_url("**/c/*", timeout=30000)
    page.wait_for_selector(".qwen-chat-message-assistant .copy-response-button", timeout=60000)


def contexts_in_one_browser(sim, names, folder: Path) -> tuple[int, float, float]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        executable, _ = find_executable("", chromium=p.chromium)
        browser = p.chromium.launch(executable_path=executable, headless=True, args=launch_args())
        try:
            for name in names:
                page = browser.new_context(storage_state=sim.login_state(name)).new_page()
                open_chat(page, sim.base_url)
            time.sleep(1)  # let the pages settle (their polls stop once the answer is shown)
            return chromium_memory()
        finally:
            browser.close()


def browser_per_account(sim, names, folder: Path) -> tuple[int, float, float]:
    sessions = []
    try:
        for name in names:
            state = folder / name / "state.json"
            state.parent.mkdir(parents=True)
            state.write_text(json.dumps(sim.login_state(name)))
            profile = str(folder / name / "profile")
            config = Browser(headless=True, profile_dir=profile, storage_state=str(state))
            session = BrowserSession(config, root=folder)
            sessions.append(session)
            open_chat(session.new_page(), sim.base_url)
        time.sleep(1)
        return chromium_memory()
    finally:
        for session in sessions:
            session.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, nargs="+", default=[1, 3, 5])
    args = parser.parse_args(argv)
    head = ("accounts", "way", "procs", "RSS MiB", "/acct", "PSS MiB", "/acct")
    print("{:>8}  {:<28} {:>5}  {:>8} {:>7}  {:>8} {:>7}".format(*head))
    for count in args.accounts:
        names = [f"acct{n}" for n in range(1, count + 1)]
        with Simulator(accounts=names, answer_seconds=0.5, thinking_seconds=0.1).start() as sim:
            for label, way in (
                ("(a) 1 browser, N contexts", contexts_in_one_browser),
                ("(b) N persistent browsers", browser_per_account),
            ):
                with tempfile.TemporaryDirectory() as folder:
                    procs, rss, pss = way(sim, names, Path(folder))
                row = (count, label, procs, rss, rss / count, pss, pss / count)
                print("{:>8}  {:<28} {:>5}  {:>8.0f} {:>7.0f}  {:>8.0f} {:>7.0f}".format(*row), flush=True)
            assert sim.affinity_violations() == 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
