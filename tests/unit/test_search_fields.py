"""Fields search engines and site generators use: `description` (the prompt's own, else the first
paragraph without its markdown, within 160 characters), `tags`/`categories`, and a topic list's
`publish_at` as Hugo's `publishDate`."""

from __future__ import annotations

import tomllib
from datetime import UTC, date, datetime
from pathlib import Path

from project_files import write_config
from publish_helpers import article_of_prompt

from pipeline.cli.app import run
from pipeline.contract.prompts import Prompt, load_prompt
from pipeline.contract.render import description, render_article
from pipeline.engines.base import Answer
from pipeline.publishing.topics import import_topics


def front(text: str) -> dict:
    return tomllib.loads(text.split("+++\n")[1])


def article(meta: dict, markdown: str) -> dict:
    prompt = Prompt(slug="tea", path=Path("prompts/tea.md"), text="Write it.", meta=meta)
    return front(
        render_article(prompt, Answer(markdown, "router"), chat_url=None, when=datetime(2026, 12, 1))
    )


def test_the_prompts_own_description_wins_over_the_first_paragraph():
    markdown = "# Tea\n\nThe first paragraph.\n"
    assert article({"description": " Mine, for search engines. "}, markdown)["description"] == (
        "Mine, for search engines."
    )
    assert article({}, markdown)["description"] == "The first paragraph."
    assert article({"description": ""}, markdown)["description"] == "The first paragraph."


def test_the_description_has_no_markdown_and_is_cut_at_a_word_within_160():
    paragraph = (
        r"Green tea\* is <em>calm</em>, see [the guide][guide] and <https://tea.example/x>, a note[^1], "
        "__strong__ snake_case words " + "steeping " * 30
    )
    said = description(f"# Tea\n\n{paragraph}\n\n[guide]: https://tea.example\n")
    assert said.startswith(
        "Green tea* is calm, see the guide and https://tea.example/x, a note, strong snake_case"
    )
    assert len(said) <= 160 and said.endswith("steeping…")
    assert not any(mark in said for mark in ("<", ">", "[", "]", "**", "__", "\\"))


def test_a_topic_list_gives_categories_description_and_publish_at_to_the_prompt(project):
    source = project / "topics.csv"
    source.write_text(
        "title,tags,categories,publish_at,description\n"
        'Green Tea,"tea, how-to","guides, drinks",2027-03-01,For people in a hurry.\n'
        "Oolong,tea,,2027-03-01T09:30:00+01:00,\n"
        "Sencha,tea,,2027-03-01 09:30,\n"
        "Matcha,,,,\n",
        encoding="utf-8",
    )
    report = import_topics(project / "prompts", project / "articles", source, None)
    assert not report.invalid and len(report.written) == 4
    green = load_prompt(project / "prompts", "green-tea").meta
    assert green["categories"] == ["guides", "drinks"] and green["tags"] == ["tea", "how-to"]
    assert green["description"] == "For people in a hurry." and green["publishDate"] == date(2027, 3, 1)
    oolong = load_prompt(project / "prompts", "oolong").meta
    assert oolong["publishDate"] == datetime.fromisoformat("2027-03-01T09:30:00+01:00")
    assert "categories" not in oolong and "description" not in oolong
    assert load_prompt(project / "prompts", "sencha").meta["publishDate"] == datetime(2027, 3, 1, 9, 30)
    assert "publishDate" not in load_prompt(project / "prompts", "matcha").meta
    written = front(article_of_prompt(project, "green-tea", "# Green Tea\n\nBody text.\n").read_text())
    assert written["publishDate"] == date(2027, 3, 1) and written["categories"] == ["guides", "drinks"]
    assert written["description"] == "For people in a hurry." and written["tags"] == ["tea", "how-to"]


def test_a_bad_publish_at_is_an_invalid_row_naming_line_and_value(project, capfd):
    source = project / "topics.csv"
    source.write_text("title,publish_at\nGreen Tea,tomorrow\nOolong,2027-13-01\nSencha,\n", encoding="utf-8")
    code = run(["--config", str(project / "config.toml"), "import", str(source)])
    err = " ".join(capfd.readouterr().err.split())
    assert code == 2
    assert f"{source} line 2: field publish_at = 'tomorrow' is not an ISO date" in err
    assert f"{source} line 3: field publish_at = '2027-13-01' is not an ISO date" in err
    assert "e.g. 2027-03-01 or 2027-03-01T09:00:00+01:00" in err and "Traceback" not in err
    assert err.count(f"{source} line 2") == 1, "one prefix per error"
    assert sorted(p.name for p in (project / "prompts").iterdir()) == ["sencha.md"]


def test_a_published_page_keeps_publish_date_and_taxonomies_and_gains_a_description(project, capfd):
    write_config(project, '[article]\nmin_words = 0\n[publish]\ndir = "site/posts"\ndraft = true\n')
    (project / "articles" / "old.md").write_text(  # written before articles had a description
        '+++\ntitle = "Old"\ntags = ["tea"]\ncategories = ["guides"]\npublishDate = 2099-01-01T08:00:00Z\n'
        "+++\n\n# Old\n\nAn *old* article's first paragraph.\n",
        encoding="utf-8",
    )
    assert run(["--config", str(project / "config.toml"), "publish", "old"]) == 0
    meta = front((project / "site" / "posts" / "old.md").read_text())
    assert meta["description"] == "An old article's first paragraph."
    assert meta["publishDate"] == datetime(2099, 1, 1, 8, 0, tzinfo=UTC)
    assert meta["tags"] == ["tea"] and meta["categories"] == ["guides"] and meta["draft"] is True
