"""The selectors that count turns or tell thinking never match a class by substring: on the "Qwen
Studio" page (docs/qwen-site.md, "Late autumn 2026") a broad [class*=chat-message] counts a turn
up to three times and the tool cards have "thinking" in their class."""

from __future__ import annotations

import re

from pipeline.engines.qwen.selectors import BUILT_IN

COUNTED = ("user_turn", "assistant_turn", "answer", "answer_markdown", "thinking", "copy_button")
SUBSTRING = re.compile(r"\[class\s*[*^$~|]?=")


def test_no_built_in_turn_or_thinking_selector_matches_a_class_by_substring():
    for selectors in BUILT_IN:
        for name in COUNTED:
            value = getattr(selectors, name)
            assert not SUBSTRING.search(value), f"{selectors.name}.{name} = {value!r}"
