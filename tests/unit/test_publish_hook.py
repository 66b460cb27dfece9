"""publish.after within bounds (issue 27, item 11): its output never kept whole, and the processes
it started stopped on the timeout, a child in a session of its own too."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from project_files import write_config
from publish_helpers import done_article

from pipeline.config import load
from pipeline.contract.workspace import Workspace
from pipeline.publishing import hook
from pipeline.publishing.publish import publish_by_hand
from pipeline.wiring import workspace as open_workspace


def setup(project: Path, publish: str) -> Workspace:
    write_config(project, f'[publish]\ndir = "site/content/posts"\n{publish}')
    return open_workspace(load(project / "config.toml"))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.parametrize(
    "started",
    [
        "setsid sh -c 'echo $$ > child.pid; exec sleep 60' &",  # a session of its own
        "setsid sh -c 'sleep 60 & echo $! > child.pid; wait' &",  # ... and its child
        "sh -c 'setsid sleep 60 & echo $! > child.pid; wait' &",  # a grandchild's own session
    ],
)
def test_a_hook_that_hangs_is_stopped_with_the_children_that_left_its_group(project, started):
    ws = setup(project, f'after = "{started} sleep 60"\nafter_timeout = 1\n')
    done_article(project, "tea")
    began = time.monotonic()
    [result] = publish_by_hand(ws, "tea", say=lambda _m: None)
    assert result.status == "after_failed" and "was stopped" in result.message
    assert time.monotonic() - began < 10
    child = int((project / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "a child in its own session outlived the timeout"


def test_a_hook_that_prints_megabytes_costs_kilobytes(project):
    ws = setup(project, 'after = "yes 0123456789 | head -c 20000000; echo; echo the real error; exit 3"\n')
    done_article(project, "tea")
    said: list[str] = []
    [result] = publish_by_hand(ws, "tea", say=said.append)
    assert result.status == "after_failed"
    assert "exited 3" in result.message and "the real error" in result.message
    assert len(result.message) < 1500, len(result.message)
    assert "(20,000,016 bytes of output; the last lines shown)" in result.message
    entries = list(ws.journal.read(slug="tea"))
    assert all(len(str(entry)) < 3000 for entry in entries)


def test_kept_holds_the_head_and_the_tail_only():
    kept = hook.Kept()
    for _ in range(1000):
        kept.add(b"a" * 1000)
    kept.add(b"\nlast line\n")
    assert kept.size == 1_000_011 and kept.cut
    assert len(kept.head) == hook.KEEP and len(kept.tail) == hook.KEEP
    assert kept.last_lines(1) == ["last line"]
    assert len(kept.last_lines(3)[0]) == 200
