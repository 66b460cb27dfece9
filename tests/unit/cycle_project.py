"""The project the unit tests of a cycle's side-by-side work start from (fakes): the same
prompts, the same config but for its [qwen] lines, Engines over the fake chat and router, and
(for the polling tests) a first cycle that sent every prompt."""

from __future__ import annotations

from project_files import add_prompt

from pipeline.batch.cycle import run_cycle
from pipeline.config import load
from pipeline.contract.workspace import Engines
from pipeline.wiring import workspace as open_workspace


def cycle_project(project, chat, router, slugs: list[str], qwen: str = "", *, sent: bool = False):
    """(workspace, a function that makes a cycle's Engines): config.toml with no word minimum,
    no poll spacing and the [qwen] lines `qwen`; a prompt "Write about SLUG." for each of
    `slugs`. `sent`: a first cycle has sent every prompt (asserted)."""
    (project / "config.toml").write_text(f"[article]\nmin_words = 0\n[qwen]\npoll_interval = 0\n{qwen}\n")
    ws = open_workspace(load(project / "config.toml"))
    for slug in slugs:
        add_prompt(project, slug, f"Write about {slug}.")

    def engines():
        return Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)

    if sent:
        assert sorted(run_cycle(ws, engines()).sent) == sorted(slugs)
    return ws, engines
