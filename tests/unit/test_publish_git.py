"""Publishing through git (README "Publishing through git"): the README's own script and config,
run as printed, against a real bare repository: one commit per cycle that published, none
otherwise, and a push the remote refused is pushed by the next cycle, which is not held up."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from project_files import write_config
from publish_helpers import done_article

from pipeline.batch.cycle import run_cycle
from pipeline.config import load
from pipeline.contract.workspace import Engines
from pipeline.wiring import workspace as open_workspace

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(name: str) -> str:
    """The fenced block right after `<!-- name -->` in the README."""
    found = re.search(
        rf"<!-- {re.escape(name)} -->\n```\w*\n(.*?)```", README.read_text(encoding="utf-8"), re.S
    )
    assert found, f"README has no <!-- {name} --> block"
    return found.group(1)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def commits(repo: Path) -> int:
    return int(git("rev-list", "--count", "--all", cwd=repo).strip() or 0)


def test_the_readme_recipe_commits_once_per_publishing_cycle_and_pushes_again_after_a_refusal(
    tmp_path, chat, router
):
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    refuse = tmp_path / "refuse"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\ntest ! -e {refuse} || {{ echo 'remote says no'; exit 1; }}\n")
    hook.chmod(0o755)
    site = tmp_path / "site"
    (site / "content" / "posts").mkdir(parents=True)
    (site / "hugo.toml").write_text('title = "Tea"\n')
    git("init", "-q", "-b", "main", cwd=site)
    git("config", "user.name", "Cron", cwd=site)
    git("config", "user.email", "cron@example.org", cwd=site)
    git("add", "-A", cwd=site)
    git("commit", "-q", "-m", "site", cwd=site)
    git("remote", "add", "origin", str(remote), cwd=site)
    git("push", "-q", "origin", "main", cwd=site)
    project = site / "qwenpipe"
    (project / "prompts").mkdir(parents=True)
    (project / "publish-git.sh").write_text(readme_block("publish-git.sh"))
    write_config(project, "[article]\nmin_words = 0\n" + readme_block("publish-git.toml"))
    ws = open_workspace(load(project / "config.toml"))
    engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)

    def cycle():
        lines: list[str] = []
        report = run_cycle(ws, engines, say=lines.append)
        return report, lines

    done_article(project, "tea")
    done_article(project, "oolong", "Oolong")
    refuse.touch()
    report, lines = cycle()  # two pages, one commit; the push is refused
    assert report.counts["published"] == 2 and report.exit_code == 0
    assert report.counts["publish_failed"] == 1
    assert any("publish.after_cycle exited" in line and "declined" in line for line in lines), lines
    assert commits(site) == 2 and commits(remote) == 1
    report, _ = cycle()  # still refused: tried again, nothing new to commit
    assert report.counts["publish_failed"] == 1 and commits(site) == 2 and commits(remote) == 1
    refuse.unlink()
    report, _ = cycle()  # published nothing: the refused push goes out, no commit is made
    assert report.counts["published"] == 0 and report.counts["publish_failed"] == 0
    assert commits(site) == 2 and commits(remote) == 2
    assert git("log", "-1", "--format=%s", "main", cwd=remote).startswith("qwenpipe: publish ")
    assert "content/posts/oolong.md" in git("show", "--name-only", "--format=", "main", cwd=remote)
    report, _ = cycle()  # nothing published, nothing failed: the command is not even run
    assert commits(site) == 2 and commits(remote) == 2
    done_article(project, "sencha", "Sencha")
    report, _ = cycle()
    assert report.counts["published"] == 1 and commits(site) == 3 and commits(remote) == 3
    assert not chat.history
