"""When one read of a chat's JSON is enough: an answer the site stored as finished, and whose chat
the site's own clock says last changed well before the time the stability reads would span
(steady.finished_long_ago). Every way a read can fail that test is enumerated here, through the
collector's judging of one body (collect.judge_body), as a cycle judges it."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from pipeline.engines.base import Answer, Generating
from pipeline.engines.qwen.api import parse_chat
from pipeline.engines.qwen.collect import judge_body
from pipeline.engines.qwen.steady import finished_long_ago, settled_after, site_time

SENT = 2_000_000_000  # the send, by the site's clock
NOW = SENT + 600  # the site's clock at the read: ten minutes on
LONG_AGO = settled_after(3)  # 5 s with stable_reads = 3
ARTICLE = "# Tea\n\nTea is a drink made from leaves.\n"
MISSING = object()


def chat(
    *,
    updated_at=SENT + 30,
    user_at=SENT,
    reply_at=SENT,
    status="finished",
    done=True,
    answer=ARTICLE,
    error=None,
) -> dict:
    """A 2026-08 chat of one turn; MISSING leaves a field out."""
    reply = {"id": "a1", "role": "assistant", "parentId": "u1", "model": "qwen3.7-plus", "done": done}
    reply["content_list"] = [{"phase": "answer", "content": answer, "status": status}]
    if error:
        reply["error"] = error
    user = {"id": "u1", "role": "user", "parentId": None, "content": "Tea?"}
    for message, stamp in ((user, user_at), (reply, reply_at)):
        if stamp is not MISSING:
            message["timestamp"] = stamp
    data = {"id": "c1", "title": "Tea", "created_at": SENT, "chat": {"messages": [user, reply]}}
    if updated_at is not MISSING:
        data["updated_at"] = updated_at
    return {"success": True, "data": data}


def judged(body: dict, date: str | None = formatdate(NOW, usegmt=True)):
    """(what one read says, whether it is complete from that read alone), as the collector judges."""
    return judge_body(body, "c1", engine="qwen", extra={}, site_now=site_time(date), stable_reads=3)


def test_an_answer_the_site_stored_finished_long_ago_is_taken_from_one_read():
    seen, settled = judged(chat())
    assert isinstance(seen, Answer) and seen.markdown == ARTICLE
    assert settled


@pytest.mark.parametrize(
    ("body", "why"),
    [
        # The site still writes the answer, or says it finished only a moment ago: its text may
        # still move (a stored flag ahead of the last words: docs/qwen-site.md).
        (chat(updated_at=NOW), "changed at the very second of the read"),
        (chat(updated_at=NOW - LONG_AGO + 1), "changed a second short of the stability reads' span"),
        # What the site stamped says nothing of when the answer last changed.
        (chat(updated_at=MISSING, reply_at=SENT), "only the send is stamped"),
        (chat(updated_at=SENT), "updated_at is the send itself"),
        (chat(updated_at=MISSING, user_at=MISSING, reply_at=MISSING), "no timestamps at all"),
        (chat(user_at=MISSING), "the send is not stamped: nothing is known to come after it"),
        (chat(updated_at="yesterday"), "updated_at is not a time"),
        (chat(updated_at=True, reply_at=SENT), "updated_at is a boolean"),
        (chat(updated_at=0, reply_at=SENT), "updated_at is zero"),
        # The chat's clock and the read's disagree: a stamp in the site's future.
        (chat(updated_at=NOW + 30), "updated_at in the future"),
        (chat(updated_at=MISSING, reply_at=NOW + 3600), "the answer stamped in the future"),
        (chat(updated_at=(NOW + 86400) * 1000), "updated_at in milliseconds, in the future"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_finished_answer_whose_last_change_is_not_well_in_the_past_is_not_taken_from_one_read(body, why):
    seen, settled = judged(body)
    assert isinstance(seen, Answer), why  # a candidate: the stability reads decide it
    assert not settled, why


@pytest.mark.parametrize(
    "date",
    [
        pytest.param(None, id="no-date-header"),
        pytest.param("", id="empty-date-header"),
        pytest.param("soon", id="not-a-date"),
        pytest.param(formatdate(NOW, usegmt=True).replace(" GMT", ""), id="date-without-a-zone"),
        pytest.param("Fri, 31 Feb 2033 05:40:00 GMT", id="no-such-day"),
    ],
)
def test_without_the_sites_own_clock_nothing_is_taken_from_one_read(date):
    # Never the local clock: this machine's may be hours off the site's.
    seen, settled = judged(chat(), date)
    assert isinstance(seen, Answer) and not settled


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(chat(status="typing", done=False), Generating, id="still-streaming"),
        pytest.param(chat(status="finished", done=False), Generating, id="done-false"),
        pytest.param(chat(answer="   "), None, id="finished-but-empty"),
        pytest.param(chat(error={"code": "internal_error"}), None, id="error"),
        pytest.param({"success": False, "data": {"code": "Internal_Error"}}, None, id="error-body"),
    ],
)
def test_an_answer_that_is_not_finished_and_whole_is_never_taken_however_old(body, expected):
    seen, settled = judged(body)
    assert (seen is None) if expected is None else isinstance(seen, expected)
    assert not settled


def test_the_answers_own_later_timestamp_vouches_when_updated_at_is_missing():
    seen, settled = judged(chat(updated_at=MISSING, reply_at=SENT + 40))
    assert isinstance(seen, Answer) and settled


def test_stamps_in_milliseconds_are_read_as_seconds():
    seen, settled = judged(chat(updated_at=(SENT + 30) * 1000, user_at=SENT * 1000))
    assert settled


def test_the_time_to_wait_is_the_stability_reads_span_and_the_stamps_whole_seconds():
    assert settled_after(3) == 3 * 1.0 + 2.0
    assert settled_after(1) < settled_after(3) < settled_after(10)
    view = parse_chat(chat(updated_at=NOW - settled_after(10)))
    assert finished_long_ago(view, NOW, stable_reads=10)
    assert not finished_long_ago(view, NOW - 1, stable_reads=10)
