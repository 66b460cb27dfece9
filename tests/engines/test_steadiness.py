"""The completion counting both QwenEngine watch loops share (no browser needed)."""

import pytest

from pipeline.engines.base import TransientError
from pipeline.engines.qwen.engine import STALL_READS, Steadiness


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
