"""The completion counting both QwenEngine watch loops share (no browser needed)."""

import pytest

from pipeline.config import Browser, Qwen
from pipeline.engines.base import TransientError
from pipeline.engines.qwen.steady import STALL_READS, Steadiness


def test_an_answer_is_complete_after_the_same_text_is_read_n_times_in_a_row():
    reads = Steadiness(3)
    assert not reads.steady("a")
    assert not reads.steady("a")
    assert reads.steady("a")


def test_a_changed_answer_starts_the_count_again():
    reads = Steadiness(2)
    assert not reads.steady("a")
    assert not reads.steady("ab")  # still growing
    assert reads.steady("ab")


def test_a_read_without_a_candidate_resets_the_count():
    reads = Steadiness(2)
    reads.steady("a")
    reads.unfinished(stalled=False)
    assert not reads.steady("a")


def test_stalled_reads_in_a_row_mean_the_answer_was_cut_short():
    reads = Steadiness(2)
    for _ in range(STALL_READS - 1):
        reads.unfinished(stalled=True)
    with pytest.raises(TransientError) as err:
        reads.unfinished(stalled=True)
    assert err.value.code == "cut_short"


def test_a_read_that_is_not_stalled_resets_the_stall_count():
    reads = Steadiness(2)
    for _ in range(STALL_READS - 1):
        reads.unfinished(stalled=True)
    reads.unfinished(stalled=False)
    reads.unfinished(stalled=True)  # counting again from one: no error
    assert reads.stalled == 1


# -- how far apart the reads of one answer are (observing.pause) ------------------------------


def engine():
    from pipeline.engines.qwen.engine import QwenEngine

    return QwenEngine(Qwen(base_url="http://127.0.0.1:9", stable_reads=3), Browser(headless=True))


def pause(seen, reads):
    from pipeline.engines.qwen.observing import pause

    return pause(seen, reads, engine().read_interval)


def test_reads_of_an_answer_the_stored_status_vouches_for_are_a_quarter_second_apart():
    from pipeline.engines.qwen.observing import API_STABLE_SECONDS, Observation

    reads = Steadiness(3)
    reads.steady("# Tea")
    seen = Observation("finishing", "# Tea", settled="# Tea")
    assert pause(seen, reads) == API_STABLE_SECONDS


def test_reads_of_an_answer_nothing_vouches_for_stay_a_second_apart():
    # No stored status (the JSON says nothing of completion): the page and 1 s stable reads decide.
    from pipeline.engines.qwen.observing import Observation

    qwen, reads = engine(), Steadiness(3)
    reads.steady("# Tea")
    assert pause(Observation("finishing", "# Tea"), reads) == qwen.read_interval == 1.0


def test_a_steady_settled_answer_waits_only_for_the_page_to_agree():
    from pipeline.engines.qwen.observing import WAIT_PAGE_SECONDS, Observation

    reads = Steadiness(3)
    for _ in range(3):
        reads.steady("# Tea")
    busy = Observation("generating", settled="# Tea", dom_text="# Tea")
    assert pause(busy, reads) == WAIT_PAGE_SECONDS


def test_an_unreadable_chat_json_never_makes_the_pages_text_the_article():
    from fakes import page_state

    from pipeline.engines.qwen.observing import observe_dom_only
    from pipeline.engines.qwen.selectors import CURRENT

    with pytest.raises(TransientError) as failed:
        observe_dom_only(page_state(), CURRENT, None, "HTTP 200, not JSON")
    assert failed.value.code == "api_error" and "never taken as the article" in str(failed.value)
    # A page still drawing its answer is only that: no failure, no article.
    busy = observe_dom_only(page_state(stop_visible=True), CURRENT, "writing", "not JSON")
    assert busy.markdown is None and busy.unsure
    # A page that shows no answer text yet: nothing finished to fail over; looked at again.
    blank = observe_dom_only(page_state(answer_text=""), CURRENT, None, "not JSON")
    assert blank.markdown is None and blank.stalled  # the current markup shows a copy button
