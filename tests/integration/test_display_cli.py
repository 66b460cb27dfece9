"""Headed on a server: `browser.display` starts a real Xvfb for a headed run without a screen,
stops it afterwards (also when qwenpipe is SIGKILLed), or refuses clearly ("none")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from browser_helpers import wait_until
from sim_project import make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process, spawn

# Its projects launch their own browser (tests/sim_project.py):
# a headed launch, its Xvfb and what a kill leaves.
OWN_BROWSER = True

pytestmark = pytest.mark.browser


SIMULATOR = {"answer_seconds": 0.3, "thinking_seconds": 0.1}  # conftest.py `sim`


@pytest.fixture(autouse=True)
def _no_screen(monkeypatch):
    """A server: no X or Wayland screen in the environment qwenpipe inherits."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)


def headed_project(folder: Path, sim, display: str) -> Path:
    project = make_project(folder, sim, router=False)
    config = project / "config.toml"
    config.write_text(
        config.read_text().replace("[browser]\n", f'[browser]\nheadless = false\ndisplay = "{display}"\n')
    )
    return project


def xvfb_of(project: Path) -> list[int]:
    """The live Xvfb processes started from `project` (they inherit qwenpipe's folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "Xvfb" or os.readlink(entry / "cwd") != str(project):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # dead, waiting to be reaped
        except OSError:
            continue  # gone while we looked
        found.append(int(entry.name))
    return found


def test_headed_generate_without_a_screen_runs_under_its_own_xvfb_and_stops_it(sim, tmp_path):
    project = headed_project(tmp_path, sim, "auto")
    text = prompt(project, "headed", "Write about a browser with a window on a server.")
    result = qwenpipe_in_process("generate", "headed", "--wait", cwd=project)
    assert result.returncode == 0, result.stderr
    meta, body = read_article(project / "articles" / "headed.md")
    assert meta["engine"] == "qwen" and body
    assert [e["prompt"] for e in sim.sends()].count(text) == 1
    assert xvfb_of(project) == [], "the run left its Xvfb running"


def test_sigkill_of_a_headed_run_leaves_no_xvfb_behind(sim, tmp_path):
    project = headed_project(tmp_path, sim, "xvfb")
    text = prompt(project, "killed", "Write about a run killed in the middle.")
    sim.set(hold_answers=True)  # the run stays on the page, its browser and Xvfb up, until killed
    run = spawn(
        "generate", "killed", "--wait", cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        sent = wait_until(lambda: text in [e["prompt"] for e in sim.sends()] or run.poll() is not None)
        died = run.poll() is not None
        assert sent and not died, run.stderr.read().decode() if died else "no send"
        assert xvfb_of(project), "the headed run has no Xvfb of its own"
        run.send_signal(signal.SIGKILL)
        run.wait(30)
        assert wait_until(lambda: not xvfb_of(project), 10), f"orphaned Xvfb: {xvfb_of(project)}"
    finally:
        sim.set(hold_answers=False)
        if run.poll() is None:
            run.kill()
            run.wait()
        run.stderr.close()


def test_display_none_without_a_screen_is_a_clear_usage_error(sim, tmp_path):
    project = headed_project(tmp_path, sim, "none")
    text = prompt(project, "noscreen", "Write about a window with no screen.")
    result = qwenpipe_in_process("generate", "noscreen", cwd=project)
    assert result.returncode == 2, result.stderr
    assert 'browser.display = "none"' in result.stderr and "browser.headless" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not list((project / "articles").glob("noscreen.md*")), "something was written"
    assert text not in [e["prompt"] for e in sim.ledger()]


def test_doctor_says_the_run_uses_xvfb_or_how_to_install_it(sim, tmp_path):
    project = headed_project(tmp_path, sim, "auto")
    report = json.loads(qwenpipe_in_process("doctor", "--json", cwd=project).stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["display"]["status"] == "ok" and checks["display"]["use"] == "xvfb"
    assert checks["display"]["xvfb"] and "Xvfb started for the run" in checks["display"]["detail"]
    assert checks["login"]["status"] == "ok", checks["login"]  # the headed browser opened the site
    assert xvfb_of(project) == []

    no_xvfb = {"PATH": str(tmp_path / "empty-bin")}  # a machine without the xvfb package
    text = qwenpipe_in_process("doctor", cwd=project, env=no_xvfb).stdout
    line = next(line for line in text.splitlines() if " display " in f" {line} ")
    assert line.startswith("FAIL") and "apt-get install -y xvfb" in text
