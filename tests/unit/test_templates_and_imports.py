"""Prompt templates (`qwenpipe new`) and topic lists (`qwenpipe import`)."""

from __future__ import annotations

import json

import pytest
from project_files import snapshot
from tests_cli_helpers import qwenpipe_in_process as qwenpipe

from pipeline.batch.scan import scan
from pipeline.contract.prompts import list_slugs, load_prompt
from pipeline.errors import UsageProblem
from pipeline.publishing.templates import new_prompt, slug_from_title
from pipeline.publishing.topics import import_topics

BLOG = """+++
title = "{title}"
tags = "{tags}"
series = "{series}"
[article]
min_headings = 2
+++
Write about {title} for {audience} (keyword: {keyword}, slug {slug}). Keep {{braces}}.
"""


@pytest.fixture
def blog(project):
    folder = project / "prompts" / "_templates"
    folder.mkdir()
    (folder / "blog.md").write_text(BLOG, encoding="utf-8")
    return project


def new(project, slug, title="Green Tea", **kw):
    kw.setdefault("tags", [])
    kw.setdefault("template", None)
    kw.setdefault("sets", [])
    return new_prompt(project / "prompts", project / "articles", slug, title=title, **kw)


def csv_file(project, text):
    path = project / "topics.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_new_fills_every_placeholder_and_the_prompt_loads(blog):
    path = new(
        blog,
        "tea",
        'Tea "Done" Right',
        tags=["tea", "how-to"],
        template="blog",
        sets=["series=Tea 101", "audience=beginners"],
    )
    prompt = load_prompt(blog / "prompts", "tea")
    assert prompt.meta == {"title": 'Tea "Done" Right', "tags": ["tea", "how-to"], "series": "Tea 101"}
    assert prompt.settings == {"min_headings": 2}
    assert prompt.text == (
        'Write about Tea "Done" Right for beginners (keyword: Tea "Done" Right, slug tea). Keep {braces}.'
    )
    assert path == blog / "prompts" / "tea.md"


def test_new_without_a_template_uses_the_built_in_one(project):
    new(project, "tea", "Green Tea", tags=["tea"], sets=["keyword=sencha"])
    prompt = load_prompt(project / "prompts", "tea")
    assert prompt.meta == {"title": "Green Tea", "tags": ["tea"]} and "sencha" in prompt.text


@pytest.mark.parametrize(
    ("slug", "kw", "message"),
    [
        ("Bad Slug", {}, "invalid slug 'Bad Slug'"),
        ("tea", {"template": "nope"}, "no template 'nope': "),
        ("tea", {"template": "../x"}, "--template '../x'"),
        ("tea", {"template": "blog"}, "blog.md line 4: unknown placeholder {series}"),
        ("tea", {"template": "blog", "sets": ["series=1", "oops"]}, "--set 'oops': write --set NAME=VALUE"),
        ("tea", {"sets": ["title=x"]}, "title has its own option (--title)"),
    ],
)
def test_new_refuses_bad_input_in_one_line_and_writes_nothing(blog, slug, kw, message):
    before = snapshot(blog)
    with pytest.raises(UsageProblem) as caught:
        new(blog, slug, **kw)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert snapshot(blog) == before


def test_new_never_overwrites_a_prompt_or_a_done_article(project):
    (project / "prompts" / "tea.md").write_text("mine", encoding="utf-8")
    (project / "articles" / "done.md").write_text("+++\n+++\nbody", encoding="utf-8")
    for slug in ("tea", "done"):
        with pytest.raises(UsageProblem, match="exists already"):
            new(project, slug)
    assert (project / "prompts" / "tea.md").read_text() == "mine"
    assert not (project / "prompts" / "done.md").exists()


def test_new_on_the_command_line_exits_2_for_a_taken_slug(project):
    first = qwenpipe("new", "tea", "--title", "Green Tea", "--tag", "tea", cwd=project)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(project / "prompts" / "tea.md")
    again = qwenpipe("new", "tea", "--title", "Other", cwd=project)
    assert again.returncode == 2 and "exists already" in again.stderr
    assert "Traceback" not in again.stderr


def test_templates_are_never_articles(blog):
    new(blog, "tea", template="blog", sets=["series=s", "audience=a"])
    (blog / "prompts" / "_templates" / "other.md").write_text("Write {title}.", encoding="utf-8")
    assert list_slugs(blog / "prompts") == ["tea"]
    assert [view.slug for view in scan(blog / "prompts", blog / "articles")] == ["tea"]
    status = qwenpipe("status", "--json", cwd=blog)
    assert [item["slug"] for item in json.loads(status.stdout)["articles"]] == ["tea"]


def test_slug_from_title():
    assert slug_from_title("Café au lait: A Guide!") == "cafe-au-lait-a-guide"
    assert slug_from_title("緑茶") == ""
    long = slug_from_title(" ".join(["word"] * 40))
    assert len(long) <= 80 and not long.endswith("-")


def test_import_writes_one_prompt_per_row_with_its_columns(blog):
    source = csv_file(
        blog,
        'title,slug,tags,audience,series\nGreen Tea Basics,,"tea, health",beginners,Tea 101\n'
        '"Sencha, Step by Step",sencha,,experts,Tea 102\n',
    )
    report = import_topics(blog / "prompts", blog / "articles", source, "blog")
    assert [slug for slug, _ in report.written] == ["green-tea-basics", "sencha"]
    first = load_prompt(blog / "prompts", "green-tea-basics")
    assert first.meta["tags"] == ["tea", "health"] and first.meta["series"] == "Tea 101"
    assert "for beginners" in first.text
    assert load_prompt(blog / "prompts", "sencha").meta["title"] == "Sencha, Step by Step"
    assert not report.invalid and not report.existing


def test_a_value_the_template_does_not_use_is_a_warning_naming_it_never_dropped_silently(blog):
    told: list[str] = []
    new(blog, "tea", template="blog", sets=["audience=experts", "series=S", "mood=calm"], warn=told.append)
    template = blog / "prompts" / "_templates" / "blog.md"
    assert told == [
        f"warning: --set mood=... is not used: {template} has no {{mood}}; add {{mood}} to the "
        "template, or leave the value out"
    ]
    source = csv_file(
        blog,
        "title,audience,series,mood,categories,description\n"
        "Green Tea,a,s,calm,tea,Short\nOolong,b,s,,,\nSencha,c,s,dry,,\n",
    )
    report = import_topics(blog / "prompts", blog / "articles", source, "blog")
    assert len(report.written) == 3  # written all the same: a warning, line by line
    assert [line.split(": warning: ")[0] for line in report.unused] == [
        f"{source} line 2",
        f"{source} line 4",
    ]
    assert "column 'mood' = 'calm' is not used" in report.unused[0] and "{mood}" in report.unused[0]
    again = csv_file(blog, "title,audience,series,mood\nMatcha,a,s,bright\n")
    shown = qwenpipe("import", str(again), "--template", "blog", cwd=blog)
    assert shown.returncode == 0 and "line 2: warning: column 'mood' = 'bright' is not used" in shown.stderr


def test_import_reports_bad_rows_by_line_and_writes_the_rest(blog):
    source = csv_file(
        blog,
        "title,slug,audience,series\n"
        "Good One,,a,s\n"  # line 2
        "Bad,Bad Slug,a,s\n"  # line 3
        ",empty-title,a,s\n"  # line 4
        "Short,row\n"  # line 5
        '"Multi\nline",,a,s\n'  # lines 6-7
        "Good One,,a,s\n"  # line 8: same slug as line 2
        "緑茶,,a,s\n"  # line 9: no slug from this title
        "Last,,a,s\n",  # line 10
    )
    report = import_topics(blog / "prompts", blog / "articles", source, "blog")
    assert [slug for slug, _ in report.written] == ["good-one", "multi-line", "last"]
    lines = "\n".join(report.invalid)
    assert "line 3: field slug = 'Bad Slug'" in lines
    assert "line 4: field title is empty" in lines
    assert "line 5: 2 cells, but the header (line 1) has 4 columns" in lines
    assert "line 8: slug 'good-one' is also on line 2" in lines
    assert "line 9: field title = '緑茶' has no a-z or 0-9" in lines and "give the row a slug" in lines
    assert len(report.invalid) == 5
    assert sorted(p.name for p in (blog / "prompts").glob("*.md")) == [
        "good-one.md",
        "last.md",
        "multi-line.md",
    ]


def test_import_skips_existing_slugs_and_says_which(blog):
    (blog / "prompts" / "green-tea.md").write_text("mine", encoding="utf-8")
    source = csv_file(blog, "title,audience,series\nGreen Tea,a,s\nOolong,a,s\n")
    report = import_topics(blog / "prompts", blog / "articles", source, "blog")
    assert [slug for slug, _ in report.written] == ["oolong"]
    assert report.existing == [
        f"{source} line 2: skipped: 'green-tea' exists already ({blog}/prompts/green-tea.md)"
    ]
    assert (blog / "prompts" / "green-tea.md").read_text() == "mine"


def test_import_dry_run_writes_nothing(blog):
    source = csv_file(blog, "title,audience,series\nGreen Tea,a,s\n")
    before = snapshot(blog)
    report = import_topics(blog / "prompts", blog / "articles", source, "blog", dry_run=True)
    assert [slug for slug, _ in report.written] == ["green-tea"] and snapshot(blog) == before
    assert report.summary().startswith(f"import {source}: would write 1 prompt(s)")
    shown = qwenpipe("import", str(source), "--template", "blog", "--dry-run", cwd=blog)
    assert shown.returncode == 0 and snapshot(blog) == before, shown.stderr
    assert shown.stdout.splitlines() == [f"would write {blog}/prompts/green-tea.md"]  # not as if written


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty: its first line must be a header"),
        ("name,slug\nx,y\n", "line 1: no `title` column (the header is: name,slug)"),
        ("title,title\nx,y\n", "line 1: column 'title' appears twice"),
        ("title,\nx,y\n", "line 1: column 2 of the header has no name"),
        ("title,audience\nx,y\n", "blog.md line 4: unknown placeholder {series}"),
    ],
)
def test_a_bad_topic_file_stops_the_import_before_anything_is_written(blog, text, message):
    source = csv_file(blog, text)
    before = snapshot(blog)
    with pytest.raises(UsageProblem) as caught:
        import_topics(blog / "prompts", blog / "articles", source, "blog")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert snapshot(blog) == before


def test_a_1000_row_list_imports_whole(project):
    rows = "".join(f"Topic number {n},topic-{n:04d},tea\n" for n in range(1000))
    source = csv_file(project, "title,slug,tags\n" + rows)
    report = import_topics(project / "prompts", project / "articles", source, None)
    assert len(report.written) == 1000 and not report.invalid
    assert len(list_slugs(project / "prompts")) == 1000
    assert load_prompt(project / "prompts", "topic-0999").meta["title"] == "Topic number 999"
    assert not list((project / "prompts").glob(".qwenpipe-tmp-*"))


def test_import_on_the_command_line_exits_2_when_a_row_is_bad(project):
    source = csv_file(project, "title,slug\nGood,good\nBad,Bad!\n")
    result = qwenpipe("import", str(source), cwd=project)
    assert result.returncode == 2
    assert result.stdout.strip() == str(project / "prompts" / "good.md")
    assert "line 3: field slug = 'Bad!'" in result.stderr and "Traceback" not in result.stderr
    assert "wrote 1 prompt(s), 1 invalid (nothing written for them)" in result.stderr
