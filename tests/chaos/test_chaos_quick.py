"""The quick chaos run for CI: one trial per kind of kill (each named crash point, and a kill at
a random moment), and each of those trials must see its kill.

Long runs: `.venv/bin/python tests/chaos/chaos.py --trials 500` (docs/reliability.md), or this
test with QWENPIPE_CHAOS_TRIALS=N (the first 2 x 6 trials go through the kinds in turn).
"""

from __future__ import annotations

import os

import chaos
import chaos_common
import pytest

pytestmark = [pytest.mark.chaos, pytest.mark.browser]

TRIALS = int(os.environ.get("QWENPIPE_CHAOS_TRIALS", str(len(chaos.KINDS))))  # one per kind of kill


@pytest.mark.timeout(420)
def test_killed_commands_never_send_twice_nor_lose_an_article(tmp_path):
    summary = chaos_common.quick_run(
        chaos.run,
        TRIALS,
        seed_variable="QWENPIPE_CHAOS_SEED",
        root=tmp_path,
        answer_seconds=0.6,
        max_prompts=2,
    )
    assert not summary.failed, summary.problems()
    kills = summary.kills
    if len(chaos.KINDS) <= TRIALS:
        missing = [name for name in chaos.KINDS if not kills[name]]
        assert not missing, f"no kill happened at {missing}: the trials did not reach those points"
    # `not summary.failed` covers duplicates and lost articles; it says something only if the
    # work was done: every trial ran, with prompts and commands, and commands were killed.
    assert len(summary.trials) == TRIALS, summary.table()
    assert all(trial.slugs and trial.runs for trial in summary.trials), summary.table()
    assert sum(kills.values()) > 0, summary.table()
