"""The quick multi-host chaos run for CI: one trial of each fault only several hosts have, three
hosts over one PostgreSQL batch (tests/chaos/hosts_chaos.py).

Long runs: `.venv/bin/python tests/chaos/hosts_chaos.py --hosts 3 --store postgres --trials 200`.
"""

from __future__ import annotations

import os

import chaos_common
import hosts_chaos
import pytest

pytestmark = [pytest.mark.chaos, pytest.mark.browser]

# One trial each of the faults only several hosts have: SIGKILLs at crash points with leases
# held, a host frozen past its lease, the server restarted under them. A connection killed
# mid-step is tests/store/test_postgres_store.py's; it, a random SIGKILL and a stopped server
# are in the long runs (a trial costs 40 s of both cores here: the suite's budget).
QUICK_KINDS = ("crash", "sigstop", "pg_restart")
TRIALS = int(os.environ.get("QWENPIPE_HOSTS_CHAOS_TRIALS", str(len(QUICK_KINDS))))


@pytest.mark.timeout(900)
def test_faulty_hosts_over_one_database_never_send_twice_nor_lose_an_article(tmp_path):
    kinds = QUICK_KINDS if len(QUICK_KINDS) >= TRIALS else hosts_chaos.KINDS
    summary = chaos_common.quick_run(
        hosts_chaos.run,
        TRIALS,
        seed_variable="QWENPIPE_HOSTS_CHAOS_SEED",
        root=tmp_path,
        max_prompts=3,
        kinds=kinds,
    )
    assert not summary.broken, summary.problems() or f"{summary.affinity_violations} affinity violations"
    # `not broken` says something only if the faults landed: every trial ran, with prompts and
    # rounds, and each kind did what it is named after.
    assert len(summary.trials) == TRIALS, summary.table()
    assert all(trial.slugs and trial.rounds for trial in summary.trials), summary.table()
    landed = {
        trial.kind for trial in summary.trials if sum(trial.kills.values()) or sum(trial.faults.values())
    }
    assert landed >= set(kinds[:TRIALS]), summary.table()  # the kinds go round in order first
