"""Work done by other processes against one store (multiprocessing "spawn": nothing inherited),
and `run_at_once`, which starts them."""

from __future__ import annotations

import multiprocessing
import os

from store_places import Place, open_place

from pipeline.store.protocol import AlreadySent, ArticleRecord, Event, Intent

SPAWN = multiprocessing.get_context("spawn")


def run_at_once(target, arguments: list[tuple], *, start=None, timeout: float = 60) -> None:
    """A spawned process running `target` for each tuple of `arguments`, all started before
    `start` (an Event they wait on) is set; each must end with exit code 0 within `timeout` s."""
    procs = [SPAWN.Process(target=target, args=args) for args in arguments]
    for proc in procs:
        proc.start()
    if start is not None:
        start.set()
    for proc, args in zip(procs, arguments, strict=True):
        proc.join(timeout)
        assert proc.exitcode == 0, f"{target.__name__}{args}: exit code {proc.exitcode}"


def append_and_update(place: Place, worker: int, steps: int) -> None:
    """Each step: one event and this worker's article record, in one transaction."""
    store = open_place(place)
    try:
        for n in range(steps):
            with store.transaction() as tx:
                tx.append(Event(f"w{worker}", "poll", 1000.0 + n, pid=os.getpid(), fields={"n": n}))
                tx.put_article(ArticleRecord(f"w{worker}", attempts=n + 1, progress=f"step {n}"))
    finally:
        store.close()


def try_to_send(place: Place, worker: int, start, results) -> None:
    """Race the others to record the intent of the same (slug, turn); report whether we won."""
    store = open_place(place)
    try:
        start.wait()
        try:
            with store.transaction() as tx:
                tx.append(Event("race", "sending", 1000.0, pid=os.getpid()))
                tx.record_intent("race", Intent(1, 1000.0, "sha", account=f"a{worker}", pid=os.getpid()))
            results.put(("won", worker))
        except AlreadySent:
            results.put(("refused", worker))
    finally:
        store.close()


def die_inside_a_step(place: Place, ready, how: str) -> None:
    """Write a lot inside one step, then die before it commits: by os._exit, or wait for SIGKILL."""
    store = open_place(place)
    with store.transaction() as tx:
        for n in range(200):
            tx.append(Event("cut", "poll", 1000.0 + n))
        tx.put_article(ArticleRecord("cut", attempts=7))
        tx.record_intent("cut", Intent(1, 1000.0, "sha"))
        ready.set()
        if how == "exit":
            os._exit(1)
        while True:  # SIGKILLed here by the test
            os.sched_yield()


def import_and_die(state_dir: str) -> None:
    """Import a legacy workspace, killed (os._exit) at its last write, inside the transaction."""
    from pipeline.store.sqlite import SQLiteTransaction
    from pipeline.wiring import open_sqlite

    def die(*_args: object) -> None:
        os._exit(1)

    SQLiteTransaction.block_quota = die  # the import's last write: everything else is written by then
    open_sqlite(state_dir)


def open_at_once(state_dir: str, start) -> None:
    """Open (and so upgrade) a legacy workspace at the same moment as other processes."""
    from pipeline.wiring import open_sqlite

    start.wait()
    open_sqlite(state_dir).close()
