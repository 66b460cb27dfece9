"""The test doubles fail a test by name instead of hanging it."""

from __future__ import annotations

import pytest
from fakes import FakeChat

from pipeline.engines.base import Answer, Generating

URL = "https://chat.qwen.ai/c/00000001-0000-4000-8000-000000000000"


@pytest.mark.timeout(10)
def test_fake_chat_wait_without_a_queued_answer_fails_the_test_at_once():
    with pytest.raises(pytest.fail.Exception, match="no Answer queued"):
        FakeChat().wait(URL, timeout=600)
    chat = FakeChat().enqueue_check(Generating("thinking"))
    with pytest.raises(pytest.fail.Exception, match="no Answer queued"):
        chat.wait(URL, timeout=600)


def test_fake_chat_wait_reports_progress_until_the_queued_answer():
    answer = Answer("# Title\n\nBody.\n", "qwen")
    seen = []
    chat = FakeChat().enqueue_check(Generating("thinking"), Generating("writing"), answer)
    assert chat.wait(URL, timeout=600, on_progress=seen.append) is answer
    assert seen == ["thinking", "writing"]
