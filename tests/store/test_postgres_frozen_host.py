"""A host frozen inside a step (SIGSTOP, a long GC pause, a frozen VM) holds the batch's advisory
lock with its open transaction; the server keeps that transaction as long as the connection
lives (the kernel answers TCP for a stopped process). Found while building the SIGSTOP fault of
tests/chaos/hosts_chaos.py (which seldom freezes a host inside a step: a step lasts milliseconds);
The store bounds such a transaction: the server ends a session idle inside a transaction for
longer than postgres.STEP_IDLE_TIMEOUT (below the shortest lease), rolling its step back."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from pipeline.store.postgres import PostgresStore
from pipeline.store.protocol import Event

FROZEN = """
import os, signal, sys
from pipeline.store.postgres import PostgresStore
from pipeline.store.protocol import Event
with PostgresStore(sys.argv[1]).transaction() as step:
    step.append(Event("a", "sending", 1.0))
    print("inside", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
"""
PAST_THE_LEASE = 12  # seconds: longer than the shortest lease_seconds (10) and STEP_IDLE_TIMEOUT


def test_a_host_frozen_inside_a_step_does_not_hold_the_batch_past_its_lease(postgres_server):
    url = postgres_server.new_database()
    PostgresStore(url, migrate=True).close()
    frozen = subprocess.Popen([sys.executable, "-c", FROZEN, url], stdout=subprocess.PIPE, text=True)
    try:
        assert frozen.stdout.readline().strip() == "inside"
        time.sleep(PAST_THE_LEASE)  # the frozen host's lease would have run out by now
        with PostgresStore(url, busy_timeout=1.0) as other, other.transaction() as tx:
            tx.append(Event("b", "sending", 2.0))  # not StoreBusy: the frozen step was ended
    finally:
        frozen.send_signal(signal.SIGCONT)
        frozen.wait(timeout=30)
    assert frozen.returncode != 0  # it woke to a closed session: its step could not commit
    with PostgresStore(url) as store:
        assert [e.slug for e in store.events()] == ["b"]  # nothing of the frozen step was written
