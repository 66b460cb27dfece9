"""Smaller frictions (issue 27, item 15): apostrophes in slugs made from titles, and waits that
never say "in 0 s"."""

from __future__ import annotations

import pytest
from fakes import FakeChat
from project_files import add_prompt

from pipeline.config import load
from pipeline.contract.step import generate, wait_words
from pipeline.contract.workspace import Engines
from pipeline.publishing.templates import slug_from_title
from pipeline.wiring import router_engine
from pipeline.wiring import workspace as open_workspace


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Earl Grey's Bergamot", "earl-greys-bergamot"),
        ("Earl Grey\u2019s Bergamot", "earl-greys-bergamot"),
        ("Don't Steep It Too Long", "dont-steep-it-too-long"),
        ("O'Brien's Tea Shop", "obriens-tea-shop"),
        ("Rock 'n' Roll Tea", "rock-n-roll-tea"),
        ("'Quoted' titles", "quoted-titles"),
        ("The 1980's Tea Boom", "the-1980s-tea-boom"),
    ],
)
def test_an_apostrophe_inside_a_word_keeps_the_word_whole(title, slug):
    assert slug_from_title(title) == slug


@pytest.mark.parametrize("seconds", [0.0001, 0.3, 0.49, 0.5, 0.99])
def test_a_wait_under_a_second_is_never_in_0_s(seconds):
    assert wait_words(seconds) == "in 1 s"


def test_no_wait_is_at_once_and_long_ones_are_rounded():
    assert wait_words(0) == "at once" and wait_words(-3) == "at once"
    assert wait_words(59.6) == "in 60 s" and wait_words(60.4) == "in 60 s"


def test_a_look_due_in_a_fraction_of_a_second_says_1_s(project):
    (project / "config.toml").write_text("[qwen]\npoll_interval = 60\n[article]\nmin_words = 0\n")
    ws = open_workspace(load(project / "config.toml"))
    chat = FakeChat()
    eng = Engines(ws.config, chat_factory=lambda _c: chat, router_factory=router_engine)
    add_prompt(project, "tea")
    now = 1_800_000_000.0
    generate(ws, "tea", eng, clock=lambda: now)
    outcome = generate(ws, "tea", eng, clock=lambda: now + 59.7)
    assert outcome.reason == "spacing" and "next look in 1 s" in outcome.message, outcome.message
