"""Topic memory: `new` and `import` refuse a title that names a known prompt's or article's
topic (the same numbers, and the share of words of meaning in common of `[topics] similar`),
naming the slug it resembles, the score and `--allow-similar`. How well it tells topics apart:
test_topic_pairs.py."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from project_files import snapshot, write_config

from pipeline.cli.app import run
from pipeline.config import ConfigError, load
from pipeline.errors import UsageProblem
from pipeline.publishing.similar import TopicMemory
from pipeline.publishing.templates import new_prompt
from pipeline.publishing.title_words import title_words
from pipeline.publishing.topics import import_topics


def new(project, slug, title, similar=0.8):
    return new_prompt(
        project / "prompts",
        project / "articles",
        slug,
        title=title,
        tags=[],
        template=None,
        sets=[],
        similar=similar,
    )


def cli(project, capfd, *args) -> tuple[int, str, str]:
    code = run(["--config", str(project / "config.toml"), *args])
    captured = capfd.readouterr()
    return code, captured.out, " ".join(captured.err.split())


def test_titles_are_compared_as_their_words_of_meaning_and_their_numbers():
    assert title_words("Benefits of GREEN tea!").words == {"benefit", "green", "tea"}
    assert title_words("Café au lait: a guide", "fr") == title_words("cafe AU LAIT, a Guide", "fr")
    assert title_words("P\u0430yp\u0430l guide") == title_words("Paypal guide")  # Cyrillic а
    assert title_words("Обзор iPhone 16").words == {"обзор", "iphon"}  # a Russian word stays Russian
    assert title_words("Python 3.13 on a Galaxy S24").numbers == ("24", "3.13")
    assert title_words("Louis XIV").numbers == ("14",) and title_words("Part II") == title_words("Part 2")
    assert title_words("How to do it").words == {"how", "to", "do", "it"}  # nothing but stop words: kept
    memory = TopicMemory(0.8)
    memory.add("green-tea-benefits", "Green tea benefits", "its prompt")
    memory.add("tea", "Tea", "its prompt")
    found = memory.closest("The Benefits of Green Tea")
    assert found is not None and found.slug == "green-tea-benefits" and found.score == 1
    found = memory.closest("Green tea health benefits")  # one word more of four: 6/7
    assert found is not None and found.slug == "green-tea-benefits" and round(found.score, 2) == 0.86
    assert memory.closest("Green coffee benefits") is None  # one word other of three: 4/6
    assert memory.closest("Green tea benefits 2026") is None  # a number the other has not
    assert memory.closest("Brewing oolong at home") is None
    # A title holding every word of a short one ("Tea") is another topic.
    assert memory.closest("Tea for beginners on a budget") is None
    assert memory.closest("!!!") is None


def test_a_typo_or_a_compound_counts_as_the_word_but_a_short_word_has_no_typo():
    memory = TopicMemory(0.8)
    memory.add("skillet", "Cast iron skillet cleaning", "its prompt")
    memory.add("network", "Setting up a home network", "its prompt")
    memory.add("iran", "Visiting Iran on a budget", "its prompt")
    assert memory.closest("cast iron skilet cleaning").slug == "skillet"
    assert memory.closest("Home network setup").slug == "network"
    assert memory.closest("Visiting Iraq on a budget") is None
    # Found when nothing but the typo or the compound joins the two titles, either way round.
    for known, new in [
        ("Lasagna", "Lasagne"),
        ("Setup", "Set up"),
        ("Set up", "Setup"),
        ("Hühnerhaltung", "Hühner halten"),
        ("Hühner halten", "Hühnerhaltung"),
    ]:
        alone = TopicMemory(0.8, "de" if "Hühner" in known else "en")
        alone.add("known", known, "its prompt")
        assert alone.closest(new) is not None and alone.closest(new).score == 1, (known, new)
    # A compound before a typo: "email" is "e mail" (1.0), not "mail" misspelt with an "e" left over.
    memory.add("email", "E-mail marketing tips", "its prompt")
    assert memory.closest("Email marketing tips").score == 1


def test_the_titles_language_stems_them_else_the_batchs():
    # German stop words ("wie", "man") tell German; without them the batch's article.language does.
    german = TopicMemory(0.8, "de")
    german.add("spanisch", "Wie man schnell Spanisch lernt", "its prompt")
    assert german.closest("Spanisch schnell lernen") is not None
    assert title_words("Spanisch schnell lernen", "de").words == {"spanisch", "schnell", "lern"}
    assert title_words("Spanisch schnell lernen", "en").words != {"spanisch", "schnell", "lern"}
    # A word of one letter does not tell: "e" is "and" in Spanish, Italian and Portuguese.
    assert title_words("e-mail marketing tips").words == {"e", "mail", "market", "tip"}


def test_new_refuses_a_title_like_a_prompt_or_an_article_and_writes_nothing(project):
    (project / "prompts" / "green-tea-benefits.md").write_text("Write it.", encoding="utf-8")  # no title
    (project / "articles" / "oolong.md").write_text(
        '+++\ntitle = "Oolong, Brewed Well"\n+++\nbody\n', encoding="utf-8"
    )
    before = snapshot(project)
    with pytest.raises(UsageProblem) as caught:
        new(project, "benefits", "Benefits of green tea")
    said = str(caught.value)
    assert "resembles 'green-tea-benefits' (its prompt: 'green tea benefits'): similarity 1.00" in said
    assert "topics.similar = 0.8" in said and "--allow-similar" in said
    with pytest.raises(UsageProblem, match=r"resembles 'oolong' \(its article: 'Oolong, Brewed Well'\)"):
        new(project, "oolong-2", "oolong brewed WELL")
    assert snapshot(project) == before
    assert new(project, "benefits", "Benefits of green tea", similar=None).exists()  # --allow-similar


def test_new_on_the_command_line_exits_2_and_allow_similar_writes_it(project, capfd):
    (project / "prompts" / "green-tea.md").write_text('+++\ntitle = "Green Tea"\n+++\nWrite.\n')
    code, out, err = cli(project, capfd, "new", "tea-green", "--title", "Green tea!")
    assert code == 2 and out == "" and not (project / "prompts" / "tea-green.md").exists()
    assert "resembles 'green-tea'" in err and "similarity 1.00" in err and "--allow-similar" in err
    assert "Traceback" not in err
    code, out, err = cli(project, capfd, "new", "tea-green", "--title", "Green tea!", "--allow-similar")
    assert code == 0 and (project / "prompts" / "tea-green.md").exists()


def test_the_threshold_is_read_from_config(project, capfd):
    write_config(project, "[topics]\nsimilar = 0.9\n")
    (project / "prompts" / "green-tea-benefits.md").write_text("Write it.", encoding="utf-8")
    code, _out, err = cli(project, capfd, "new", "benefits", "--title", "Benefits of green tea, for health")
    assert code == 0, err  # 0.86 is below 0.9


def test_the_article_language_is_read_from_config(project, capfd):
    (project / "prompts" / "spanisch.md").write_text(
        '+++\ntitle = "Wie man schnell Spanisch lernt"\n+++\nW.\n'
    )
    code, _out, err = cli(project, capfd, "new", "lernen", "--title", "Spanisch schnell lernen")
    assert code == 0, err  # stemmed as English: "lernen" is not "lernt"
    (project / "prompts" / "lernen.md").unlink()
    write_config(project, '[article]\nlanguage = "de"\n')
    code, _out, err = cli(project, capfd, "new", "lernen", "--title", "Spanisch schnell lernen")
    assert code == 2 and "resembles 'spanisch'" in err


@pytest.mark.parametrize("value", ["0", "1.5", "-0.1", '"high"', "nan"])
def test_a_bad_threshold_is_refused_naming_file_key_value_and_range(tmp_path, value):
    path = tmp_path / "config.toml"
    path.write_text(f"[topics]\nsimilar = {value}\n")
    with pytest.raises(ConfigError) as caught:
        load(path)
    said = str(caught.value)
    assert said.startswith(f"{path}: topics.similar = ") and (
        "more than 0 and at most 1" in said or "number" in said
    )


TOPICS = (
    "title,slug\n"
    "Benefits of Green Tea,\n"  # line 2: like the prompt green-tea-benefits
    "Oolong at home,oolong-home\n"  # line 3: new
    '"OOLONG, at home!",brewing\n'  # line 4: like line 3
    "Matcha whisking,matcha\n"  # line 5: new
)


def topics(project):
    (project / "prompts" / "green-tea-benefits.md").write_text("Write it.", encoding="utf-8")
    source = project / "topics.csv"
    source.write_text(TOPICS, encoding="utf-8")
    return source


def test_import_refuses_rows_like_a_known_topic_or_an_earlier_row_and_writes_the_rest(project):
    source = topics(project)
    report = import_topics(project / "prompts", project / "articles", source, None, similar=0.8)
    assert [slug for slug, _ in report.written] == ["oolong-home", "matcha"]
    assert len(report.similar) == 2
    assert report.similar[0].startswith(f"{source} line 2: refused: 'benefits-of-green-tea' resembles")
    assert "'green-tea-benefits' (its prompt" in report.similar[0]
    assert report.similar[1].startswith(f"{source} line 4: refused: 'brewing' resembles 'oolong-home'")
    assert "(line 3 of the list: 'Oolong at home')" in report.similar[1]
    assert all("--allow-similar" in line for line in report.similar)
    assert "2 refused (similar to a known topic; --allow-similar imports them)" in report.summary()
    assert not (project / "prompts" / "brewing.md").exists()


def test_import_dry_run_lists_the_similar_rows_and_allow_similar_imports_them(project, capfd):
    source = topics(project)
    before = snapshot(project)
    code, out, err = cli(project, capfd, "import", str(source), "--dry-run")
    assert code == 0 and snapshot(project) == before
    assert "line 2: refused: 'benefits-of-green-tea'" in err and "line 4: refused: 'brewing'" in err
    assert "would write 2 prompt(s), 2 refused" in err
    code, out, err = cli(project, capfd, "import", str(source), "--allow-similar")
    assert code == 0 and len(out.split()) == 4 and "refused" not in err


@settings(max_examples=100, deadline=None)
@given(title=st.text(max_size=80), language=st.sampled_from(["", "en", "de", "fr", "es", "ru", "zh", "ar"]))
def test_any_title_is_read_and_is_one_topic_with_itself_its_words_in_any_order(title, language):
    memory = TopicMemory(1.0, language)
    memory.add("it", title, "its prompt")
    form = memory.form(title)
    if form.words or form.numbers:
        assert len(memory) == 1 and memory.closest(title).score == 1
        assert memory.closest(" ".join(reversed(title.split()))) is not None
    else:
        assert len(memory) == 0 and memory.closest(title) is None
