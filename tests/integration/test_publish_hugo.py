"""A real Hugo (Debian's `hugo`) builds a site from what qwenpipe published: zero errors, no
sidecar and no chat URL in public/, each page's title shown once, page bundles too. The
hugo.toml is the README's own snippet, so the docs cannot drift from what works."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from project_files import write_config
from publish_helpers import CHAT_URL, article_of_prompt, done_article
from sim_project import make_project
from tests_cli_helpers import qwenpipe_in_process

from pipeline.cli.app import run
from pipeline.publishing.templates import slug_from_title
from pipeline.simulator import Simulator

HUGO = shutil.which("hugo")
README = Path(__file__).parents[2] / "README.md"
SIDECARS = (".url", ".sending", ".failed", ".rejected")
# What a theme does: the page's title as its one <h1>, then the content.
SINGLE = (
    "<!DOCTYPE html><html><head><title>{{ .Title }}</title>"
    '<meta name="description" content="{{ .Description }}"></head>'
    "<body><h1>{{ .Title }}</h1>{{ .Content }}"
    # Many themes put a page's params in the page (meta tags, JSON-LD): all of them, here.
    '<script type="application/json">{{ jsonify .Params }}</script></body></html>\n'
)
PRIVATE = ("account", "engine", "model", "prompt_sha256", "chat_url", "word_count", "turns")
LIST = (
    "<!DOCTYPE html><html><body>"
    '{{ range .Pages }}<a href="{{ .RelPermalink }}">{{ .Title }}</a>{{ end }}</body></html>\n'
)


def readme_topic_list() -> str:
    section = README.read_text(encoding="utf-8").split("### Scheduled posts from a topic list", 1)[1]
    return section.split("```csv\n", 1)[1].split("```", 1)[0]


def readme_hugo_toml() -> str:
    section = README.read_text(encoding="utf-8").split("## Publishing to Hugo", 1)[1]
    return (
        section.split("with a `hugo.toml` such as this one", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    )


def make_site(root: Path) -> Path:
    """blog/ with the README's hugo.toml and a minimal theme; qwenpipe's project in blog/qwenpipe."""
    (root / "layouts" / "_default").mkdir(parents=True)
    (root / "hugo.toml").write_text(readme_hugo_toml(), encoding="utf-8")
    (root / "layouts" / "_default" / "single.html").write_text(SINGLE, encoding="utf-8")
    (root / "layouts" / "_default" / "list.html").write_text(LIST, encoding="utf-8")
    (root / "qwenpipe" / "prompts").mkdir(parents=True)
    return root / "qwenpipe"


def build(site: Path, *flags: str) -> Path:
    if HUGO is None:  # never skipped quietly: CI installs it (scripts/setup.sh)
        pytest.fail("hugo is not installed: run scripts/setup.sh (apt-get install hugo)")
    result = subprocess.run([HUGO, "--source", str(site), *flags], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ERROR" not in result.stdout + result.stderr, result.stdout + result.stderr
    return site / "public"


def assert_clean(public: Path, chat_urls: list[str]) -> None:
    found = [p for p in public.rglob("*") if p.is_file()]
    assert not [p for p in found if p.name.endswith(SIDECARS)]
    assert not [p for p in found if ".qwenpipe" in p.parts]
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in found)
    for url in chat_urls:
        assert url not in text
    assert "/c/" not in text and "chat.qwen" not in text
    params = re.findall(r'<script type="application/json">(.*?)</script>', text, re.S)
    assert params, "the theme shows each page's params"
    for key in PRIVATE:  # qwenpipe's bookkeeping stays in articles/
        assert not [p for p in params if f'"{key}"' in p], (key, params)


def assert_title_once(html_page: Path, title: str) -> None:
    body = html_page.read_text(encoding="utf-8").split("<body>", 1)[1]
    headings = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", body, re.S)]
    assert body.count("<h1") == 1, body
    assert headings.count(title) == 1 and headings[0] == title, headings


@pytest.mark.parametrize("bundle", [False, True])
def test_hugo_builds_the_published_folder_with_no_sidecar_and_each_title_once(tmp_path, bundle):
    project = make_site(tmp_path / "blog")
    bundles = "bundle = true\n" if bundle else ""
    write_config(project, f'[article]\nmin_words = 0\n[publish]\ndir = "../content/posts"\n{bundles}')
    done_article(project, "green-tea", "Green Tea, Brewed Well")
    done_article(
        project,
        "oolong",
        "Oolong",
        body="# All About Oolong\n\nOolong is half-oxidised.\n\n## Brewing\n\nHot.\n",
    )
    result = qwenpipe_in_process("publish", "--all", cwd=project)
    assert result.returncode == 0, result.stderr
    public = build(tmp_path / "blog")
    assert_clean(public, [CHAT_URL])
    assert_title_once(public / "posts" / "green-tea" / "index.html", "Green Tea, Brewed Well")
    assert_title_once(public / "posts" / "oolong" / "index.html", "Oolong")
    posts = tmp_path / "blog" / "content" / "posts"
    wanted = ["green-tea/index.md", "oolong/index.md"] if bundle else ["green-tea.md", "oolong.md"]
    assert sorted(str(p.relative_to(posts)) for p in posts.rglob("*") if p.is_file()) == wanted


def test_the_readme_ignore_files_keeps_sidecars_out_even_with_articles_below_content(tmp_path):
    site = tmp_path / "blog"
    make_site(site)
    posts = site / "content" / "posts"
    posts.mkdir(parents=True)
    done_article(posts.parent / "posts-project", "tea")  # the setup the docs warn against...
    shutil.copytree(posts.parent / "posts-project" / "articles", posts, dirs_exist_ok=True)
    shutil.rmtree(posts.parent / "posts-project")
    (posts / ".qwenpipe").mkdir()
    (posts / ".qwenpipe" / "journal.jsonl").write_text(f'{{"chat_url": "{CHAT_URL}"}}\n')
    public = build(site)
    found = [p.name for p in public.rglob("*") if p.is_file()]
    assert not [name for name in found if name.endswith(SIDECARS)] and "journal.jsonl" not in found


@pytest.mark.browser
def test_from_a_new_prompt_to_a_hugo_page_through_the_simulator(tmp_path):
    with Simulator(port=0, answer_seconds=1.0, thinking_seconds=0.2, url_delay=0.1).start() as sim:
        project = make_site(tmp_path / "blog")
        make_project(
            project, sim, extra='[publish]\ndir = "../content/posts"\nafter = "touch published-{slug}"\n'
        )
        made = qwenpipe_in_process(
            "new", "green-tea", "--title", "Brewing Green Tea", "--tag", "tea", cwd=project
        )
        assert made.returncode == 0, made.stderr
        result = qwenpipe_in_process("generate", "green-tea", "--wait", cwd=project)
        assert result.returncode == 0, result.stderr
        assert "published to" in result.stderr and (project / "published-green-tea").exists()
        chat_url = (project / "articles" / "green-tea.md.url").read_text().strip()
        assert [s["prompt"] for s in sim.sends()] == [
            (project / "prompts" / "green-tea.md").read_text().split("+++\n")[-1].strip()
        ]
    public = build(tmp_path / "blog")
    assert_clean(public, [chat_url, sim.base_url])
    assert_title_once(public / "posts" / "green-tea" / "index.html", "Brewing Green Tea")
    again = qwenpipe_in_process("cycle", cwd=project)
    assert "published" not in again.stderr.replace("not published", "")  # unchanged: not again


BODY = "# Heading\n\nA **first** [paragraph](http://x) about tea.\n\n## More\n\nText."


def test_the_readme_topic_list_builds_a_site_whose_future_post_waits_for_its_date(tmp_path):
    project = make_site(tmp_path / "blog")
    write_config(project, '[article]\nmin_words = 0\n[publish]\ndir = "../content/posts"\n')
    topics = project / "topics.csv"
    topics.write_text(readme_topic_list(), encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(topics.read_text(encoding="utf-8"))))
    config = ["--config", str(project / "config.toml")]
    assert run([*config, "import", str(topics)]) == 0
    now = datetime.now(UTC)
    when = {slug_from_title(row["title"]): datetime.fromisoformat(row["publish_at"]) for row in rows}
    future = {slug for slug, at in when.items() if (at if at.tzinfo else at.replace(tzinfo=UTC)) > now}
    assert future and future != set(when), "the README's list should show a past and a future date"
    for slug in when:
        article_of_prompt(
            project, slug, "# Heading\n\nA **first** [paragraph](http://x) about tea.\n\n## More\n\nText."
        )
    assert run([*config, "publish", "--all"]) == 0
    posts = tmp_path / "blog" / "content" / "posts"
    for row in rows:
        slug = slug_from_title(row["title"])
        meta = tomllib.loads((posts / f"{slug}.md").read_text(encoding="utf-8").split("+++\n")[1])
        assert meta["categories"] == ["guides"] and meta["draft"] is False
        assert str(meta["publishDate"]).replace(" ", "T") == row["publish_at"]
        assert meta["description"] == (row["description"] or "A first paragraph about tea.")
    public = build(tmp_path / "blog")
    built = {slug for slug in when if (public / "posts" / slug / "index.html").exists()}
    assert built == set(when) - future
    public = build(tmp_path / "blog", "--buildFuture")
    assert {slug for slug in when if (public / "posts" / slug / "index.html").exists()} == set(when)
    for row in rows:
        page = (public / "posts" / slug_from_title(row["title"]) / "index.html").read_text(encoding="utf-8")
        assert (
            f'<meta name="description" content="{row["description"] or "A first paragraph about tea."}">'
            in page
        )
