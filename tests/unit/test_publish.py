"""Publishing done articles to publish.dir: only the article, atomically, only when changed,
never over a hand edit; the `after` command, its failure and its timeout."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from project_files import snapshot, write_config
from publish_helpers import CHAT_URL, done_article
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

from pipeline.batch.cycle import run_cycle
from pipeline.config import ConfigError, load
from pipeline.contract.workspace import Engines, Workspace
from pipeline.publishing.publish import publish_by_hand, publish_done, read_record
from pipeline.wiring import workspace as open_workspace

BASE = "[qwen]\npoll_interval = 0\nmax_attempts = 3\n[article]\nmin_words = 0\n"


def setup(project: Path, publish: str = "") -> Workspace:
    write_config(project, BASE + '[publish]\ndir = "site/content/posts"\n' + publish)
    return open_workspace(load(project / "config.toml"))


def page(project: Path, slug: str = "tea", bundle: bool = False) -> Path:
    posts = project / "site" / "content" / "posts"
    return posts / slug / "index.md" if bundle else posts / f"{slug}.md"


def front(path: Path) -> tuple[dict, str]:
    head, body = path.read_text(encoding="utf-8")[4:].split("\n+++\n", 1)
    return tomllib.loads(head), body.strip()


def said() -> tuple[list[str], callable]:
    lines: list[str] = []
    return lines, lines.append


def test_a_done_article_is_published_without_its_sidecars_chat_url_or_repeated_title(project):
    ws = setup(project)
    done_article(project, "tea")
    lines, say = said()
    [result] = publish_by_hand(ws, "tea", say=say)
    assert result.status == "published" and lines == [f"tea: published to {page(project)}"]
    assert sorted(p.name for p in page(project).parent.iterdir()) == ["tea.md"]
    meta, body = front(page(project))
    assert meta["title"] == "Green Tea, Brewed Well" and meta["draft"] is False
    assert meta["tags"] == ["tea"] and "chat_url" not in meta
    assert CHAT_URL not in page(project).read_text()
    assert body.startswith("Green tea wants water") and "# Green Tea" not in body
    assert (project / "articles" / "tea.md").read_text().count(CHAT_URL) == 1  # the article is as it was


def test_a_page_carries_public_fields_and_the_prompts_own_and_keep_adds_ours(project):
    from pipeline.contract.render import OWNED_KEYS

    ws = setup(project)
    done_article(project, "tea")
    article = front(project / "articles" / "tea.md")[0]
    assert {"engine", "prompt_sha256", "chat_url"} <= set(article)  # ours, in articles/
    publish_by_hand(ws, "tea", say=lambda _line: None)
    meta = front(page(project))[0]
    assert set(meta) == {"title", "date", "description", "tags", "draft"}, meta  # tags: the prompt's
    assert not (OWNED_KEYS - {"title", "date", "description"}) & set(meta)
    ws = setup(project, 'keep = ["model", "word_count"]\n')
    (project / "articles" / "tea.md").write_text(
        (project / "articles" / "tea.md")
        .read_text()
        .replace('engine = "qwen"', 'engine = "qwen"\nmodel = "m1"')
    )
    publish_by_hand(ws, "tea", say=lambda _line: None)
    meta = front(page(project))[0]
    assert meta["model"] == "m1" and meta["word_count"] > 0 and "engine" not in meta


def test_a_keep_entry_that_names_no_key_of_ours_is_refused_naming_it(project):
    ws = setup(project, 'keep = ["modle"]\n')
    done_article(project, "tea")
    with pytest.raises(
        ConfigError, match=r"publish.keep = \['modle'\].*'modle' is not one of qwenpipe's own"
    ):
        publish_by_hand(ws, "tea", say=lambda _line: None)
    assert not page(project).exists()


def test_bundle_draft_and_strip_title_settings(project):
    ws = setup(project, "bundle = true\ndraft = true\nstrip_title = false\n")
    done_article(project, "tea")
    publish_by_hand(ws, "tea", say=lambda _m: None)
    meta, body = front(page(project, bundle=True))
    assert meta["draft"] is True and body.startswith("# Green Tea, Brewed Well")


def test_publishing_again_writes_only_when_the_article_changed(project):
    ws = setup(project)
    article = done_article(project, "tea")
    publish_by_hand(ws, "tea", say=lambda _m: None)
    first = os.stat(page(project)).st_mtime_ns
    [again] = publish_by_hand(ws, "tea", say=lambda _m: None)
    assert again.status == "unchanged" and os.stat(page(project)).st_mtime_ns == first
    article.write_text(article.read_text().replace("Two minutes", "Three minutes"), encoding="utf-8")
    [changed] = publish_by_hand(ws, "tea", say=lambda _m: None)
    assert changed.status == "published" and "Three minutes" in page(project).read_text()
    assert not list(page(project).parent.glob(".qwenpipe-tmp-*"))


def test_a_page_edited_by_hand_is_not_overwritten_and_that_is_said(project):
    ws = setup(project)
    article = done_article(project, "tea")
    publish_by_hand(ws, "tea", say=lambda _m: None)
    page(project).write_text(page(project).read_text() + "\nMy own note.\n", encoding="utf-8")
    article.write_text(article.read_text().replace("Two minutes", "Three minutes"), encoding="utf-8")
    lines, say = said()
    [held] = publish_by_hand(ws, "tea", say=say)
    assert held.status == "held" and not held.failed
    assert (
        "edited by hand" in lines[0] and "not overwritten" in lines[0] and "qwenpipe publish tea" in lines[0]
    )
    assert "My own note." in page(project).read_text() and "Three minutes" not in page(project).read_text()
    page(project).unlink()  # the fix the message gives
    [result] = publish_by_hand(ws, "tea", say=lambda _m: None)
    assert result.status == "published" and "Three minutes" in page(project).read_text()


def test_a_page_qwenpipe_never_wrote_is_kept(project):
    ws = setup(project)
    done_article(project, "tea")
    page(project).parent.mkdir(parents=True)
    page(project).write_text("+++\ntitle = 'Mine'\n+++\nmine\n", encoding="utf-8")
    [held] = publish_by_hand(ws, "tea", say=lambda _m: None)
    assert held.status == "held" and page(project).read_text().endswith("mine\n")


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_publish_dir_that_is_a_file_or_a_symlink_is_refused_in_one_line(project, kind):
    ws = setup(project)
    done_article(project, "tea")
    posts = project / "site" / "content" / "posts"
    posts.parent.mkdir(parents=True)
    if kind == "file":
        posts.write_text("not a folder")
    else:
        (project / "elsewhere").mkdir()
        posts.symlink_to(project / "elsewhere")
    before = snapshot(project)
    with pytest.raises(ConfigError) as caught:
        publish_by_hand(ws, "tea", say=lambda _m: None)
    message = str(caught.value)
    assert "publish.dir = 'site/content/posts'" in message and "\n" not in message
    assert (
        ("is a symlink" in message and "elsewhere" in message)
        if kind == "symlink"
        else "not a folder" in message
    )
    assert snapshot(project) == before
    result = qwenpipe("publish", "tea", cwd=project)
    assert result.returncode == 2 and "publish.dir" in result.stderr and "Traceback" not in result.stderr


def test_a_bundle_folder_that_is_a_file_fails_that_article_only(project):
    ws = setup(project, "bundle = true\n")
    done_article(project, "tea")
    done_article(project, "oolong", "Oolong")
    posts = project / "site" / "content" / "posts"
    posts.mkdir(parents=True)
    (posts / "tea").write_text("in the way")
    results = {r.slug: r for r in publish_by_hand(ws, None, say=lambda _m: None)}
    assert results["tea"].failed and "not a folder (the page bundle)" in results["tea"].message
    assert "the article is kept" in results["tea"].message
    assert results["oolong"].status == "published" and page(project, "oolong", bundle=True).exists()
    assert (project / "articles" / "tea.md").exists()


@pytest.mark.parametrize("where", ["articles", "prompts"])
def test_publish_dir_may_not_be_the_articles_or_prompts_folder(project, where):
    write_config(project, BASE + f'[publish]\ndir = "{where}"\n')
    with pytest.raises(ConfigError, match=f"publish.dir = '{where}' .* is paths.{where}"):
        load(project / "config.toml")


def test_after_gets_only_path_and_slug(project):
    write_config(project, BASE + '[publish]\ndir = "site"\nafter = "echo {paht}"\n')
    with pytest.raises(ConfigError, match=r"publish.after = 'echo \{paht\}' uses \{paht\}: the placeholders"):
        load(project / "config.toml")


def test_after_runs_with_the_page_path_and_slug_in_the_config_folder(project):
    ws = setup(project, "after = \"printf '%s %s' {path} {slug} > after.txt\"\n")
    done_article(project, "tea")
    [result] = publish_by_hand(ws, "tea", say=lambda _m: None)
    assert result.status == "published"
    assert (project / "after.txt").read_text() == f"{page(project)} tea"
    assert read_record(project / "articles", "tea")["after"] == "ok"
    (project / "after.txt").unlink()
    publish_by_hand(ws, "tea", say=lambda _m: None)  # unchanged, after already ran: not again
    assert not (project / "after.txt").exists()


def test_a_failing_after_is_reported_kept_and_retried_next_cycle(project, chat, router):
    ws = setup(project, 'after = "test -e ok.flag && touch ran-{slug}"\n')
    done_article(project, "tea")
    engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    lines, say = said()
    report = run_cycle(ws, engines, say=say)
    assert report.exit_code == 0 and report.counts["publish_failed"] == 1  # the article is done all the same
    assert any("publish.after exited 1" in line and "the next cycle runs it again" in line for line in lines)
    assert page(project).exists() and (project / "articles" / "tea.md").exists()
    assert read_record(project / "articles", "tea")["after"] == "failed"
    (project / "ok.flag").touch()
    report = run_cycle(ws, engines, say=lambda _m: None)
    assert (project / "ran-tea").exists() and report.counts["publish_failed"] == 0
    assert read_record(project / "articles", "tea")["after"] == "ok"
    (project / "ran-tea").unlink()
    run_cycle(ws, engines, say=lambda _m: None)  # nothing changed: the cycle leaves it alone
    assert not (project / "ran-tea").exists()
    assert not chat.history  # no browser was needed for any of it


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_an_after_that_hangs_is_stopped_with_everything_it_started(project):
    ws = setup(project, 'after = "sleep 60 & echo $! > child.pid; sleep 60"\nafter_timeout = 0.5\n')
    done_article(project, "tea")
    [result] = publish_by_hand(ws, "tea", say=lambda _m: None)
    assert result.status == "after_failed"
    assert "ran longer than publish.after_timeout = 0.5 s and was stopped" in result.message
    child = int((project / "child.pid").read_text())
    assert not _alive(child)
    assert page(project).exists() and read_record(project / "articles", "tea")["after"] == "failed"


def test_an_article_finished_by_the_cycle_is_published_in_that_cycle(project, chat, router):
    from fakes import answer

    ws = setup(project)
    (project / "prompts" / "tea.md").write_text(
        "+++\ntitle = 'A Title'\n+++\nWrite about tea.", encoding="utf-8"
    )
    engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    assert run_cycle(ws, engines).exit_code == 42
    assert not page(project).exists()
    chat.enqueue_check(answer())
    report = run_cycle(ws, engines)
    assert report.counts["published"] == 1 and "1 published" in report.summary()
    meta, body = front(page(project))
    assert meta["title"] == "A Title" and "chat_url" not in meta and body.startswith("Body text here.")


def test_publishing_is_off_by_default_and_publish_says_how_to_turn_it_on(project):
    done_article(project, "tea")
    ws = open_workspace(load(project / "config.toml"))
    assert publish_done(ws, [("tea", None)], say=lambda _m: None) == []
    result = qwenpipe("publish", "--all", cwd=project)
    assert (
        result.returncode == 2 and "publishing is off" in result.stderr and "[publish] dir" in result.stderr
    )


def test_publish_on_the_command_line(project):
    setup(project)
    done_article(project, "tea")
    assert qwenpipe("publish", cwd=project).returncode == 2  # neither SLUG nor --all
    missing = qwenpipe("publish", "nope", cwd=project)
    assert missing.returncode == 2 and "nope is not done" in missing.stderr
    done = qwenpipe("publish", "--all", cwd=project)
    assert done.returncode == 0 and "tea: published to" in done.stderr and page(project).exists()


def test_strip_title_drops_a_leading_h1_worded_differently_from_the_title(project):
    ws = setup(project)
    done_article(
        project, "tea", "Green Tea", body="# All About Green Tea\n\nIt is green.\n\n## More\n\nYes.\n"
    )
    publish_by_hand(ws, "tea", say=lambda _m: None)
    _meta, body = front(page(project))
    assert body.startswith("It is green.") and "## More" in body


def test_the_cycle_publishes_again_only_an_article_that_changed(project, chat, router):
    ws = setup(project)
    article = done_article(project, "tea")
    done_article(project, "oolong", "Oolong")
    engines = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)
    assert run_cycle(ws, engines).counts["published"] == 2
    assert run_cycle(ws, engines).counts["published"] == 0
    article.write_text(article.read_text().replace("Two minutes", "Three minutes"), encoding="utf-8")
    later = os.stat(article).st_mtime + 5
    os.utime(article, (later, later))  # a clock tick coarser than this test would hide the edit
    report = run_cycle(ws, engines)
    assert report.counts["published"] == 1 and "Three minutes" in page(project).read_text()


def test_a_draft_article_stays_a_draft(project):
    ws = setup(project)
    article = done_article(project, "tea")
    text = article.read_text().replace("+++\ntitle", "+++\ndraft = true\ntitle", 1)
    article.write_text(text, encoding="utf-8")
    publish_by_hand(ws, "tea", say=lambda _m: None)
    assert front(page(project))[0]["draft"] is True


@pytest.mark.parametrize("publishing", [False, True])
def test_a_cycle_reads_done_articles_mtimes_only_when_publishing_is_on(
    project, engines, monkeypatch, publishing
):
    """10,000 finished articles: a cycle with publishing off stats none of them."""
    from pipeline.batch import scan

    ws = setup(project) if publishing else open_workspace(load(project / "config.toml"))
    for slug in ("tea", "coffee"):
        done_article(project, slug)
    asked = []
    real = scan.ArticleView.done_mtime
    monkeypatch.setattr(
        scan.ArticleView, "done_mtime", property(lambda v: asked.append(v.slug) or real.fget(v))
    )
    report = run_cycle(ws, engines)
    assert report.exit_code == 0, report.summary()
    assert sorted(asked) == (["coffee", "tea"] if publishing else [])
    assert report.counts["published"] == (2 if publishing else 0)
