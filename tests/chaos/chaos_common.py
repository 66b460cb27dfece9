"""What the two chaos runners share: chaos.py (one host) and hosts_chaos.py (several hosts over
PostgreSQL) each plan, break and check trials their own way, and run them the same way:

- `run_trials`: ONE long-lived simulator for the whole run (its router slow enough for a call to
  be hit), trials `jobs` at a time, each with its own random.Random(f"{seed}-{index}"); Ctrl-C
  or SIGTERM stops a long run with the trials it completed, then the simulator's affinity
  violations over the whole run;
- `add_run_arguments`, `printer`, `run_and_report`: the command line's common options, its
  progress line a trial, its temporary (or `--keep`) folder, its heading, table and problems,
  and its exit code (1 when a promise was broken);
- `table`, `closing_rows`: the summary table's layout and its last rows;
- `quick_run`: the quick CI test's run of either (tests/chaos/test_*chaos_quick.py);
- `send_count_problem`: the store's count of the day's sends (what `qwen.max_sends_per_day`
  counts) against the site's own record of the sends it accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def run_trials(
    summary,
    trials: int,
    *,
    seed: int,
    jobs: int,
    answer_seconds: float,
    accounts: tuple[str, ...],
    trial_of: Callable,
    progress=None,
    set_up: Callable | None = None,
    clean_up: Callable[[], None] | None = None,
    indices: list[int] | None = None,
):
    """Run trial_of(sim, index, rng) for index 0 to `trials` - 1 (or for `indices`: a trial of a
    run rerun alone), `jobs` at a time, against one simulator with `accounts`; each trial goes
    into `summary` (then `progress(trial, summary)`). `set_up(sim)` before the first trial;
    `clean_up()` after the simulator stopped."""
    from pipeline.simulator import Simulator

    lock = threading.Lock()
    started = time.monotonic()
    sim = Simulator(
        port=0, answer_seconds=answer_seconds, thinking_seconds=0.2, url_delay=0.3, accounts=accounts
    ).start()
    try:
        sim.set(router_scenario="slow", router_delay=0.5)  # a router call lasts long enough to be hit
        if set_up:
            set_up(sim)
        stop = threading.Event()

        def one(index: int) -> None:
            if stop.is_set():
                return  # interrupted: start no more trials
            trial = trial_of(sim, index, random.Random(f"{seed}-{index}"))
            with lock:
                summary.add(trial)
                if progress:
                    progress(trial, summary)

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            try:
                list(pool.map(one, range(trials) if indices is None else indices))
            except KeyboardInterrupt:
                # A long run stopped by hand still reports every trial it completed; the
                # trials under way finish (their commands are reaped) before the table.
                stop.set()
                summary.interrupted = True
                pool.shutdown(wait=True, cancel_futures=True)
        summary.affinity_violations = sim.affinity_violations()
    finally:
        sim.stop()
        if clean_up:
            clean_up()
    summary.trials.sort(key=lambda t: t.index)
    summary.seconds = time.monotonic() - started
    return summary


def closing_rows(summary) -> list[tuple[str, int | float]]:
    """The last rows of either runner's table: trials that broke a promise, and the time."""
    return [
        ("trials with a broken promise", len(summary.failed)),
        ("wall time (s)", round(summary.seconds, 1)),
        ("seconds per trial", round(summary.seconds / max(1, len(summary.trials)), 2)),
    ]


def table(rows: list[tuple[str, int | float]]) -> str:
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value:>8}" for name, value in rows)


def add_run_arguments(
    parser: argparse.ArgumentParser, *, jobs_help: str, answer_seconds: float, max_prompts: int
) -> None:
    """--trials, --seed, --jobs, --answer-seconds and --max-prompts, in that order."""
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help=jobs_help)
    parser.add_argument("--answer-seconds", type=float, default=answer_seconds)
    parser.add_argument("--max-prompts", type=int, default=max_prompts, help="prompts per trial: 1 to this")


def add_keep_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep", type=Path, help="keep the trial folders here instead of a temp folder")


def printer(total: int, kind_width: int, details: Callable[..., str]) -> Callable:
    """A progress line a trial: how far the run is, the trial, `details(trial)`, its verdict."""

    def progress(trial, summary) -> None:
        verdict = "ok" if trial.ok else "PROBLEM: " + "; ".join(trial.problems)
        print(
            f"[{len(summary.trials):>4}/{total}] trial {trial.index:>4} {trial.kind:<{kind_width}} "
            f"{len(trial.slugs)} prompts, {details(trial)}, {trial.seconds:5.1f} s: {verdict}",
            flush=True,
        )

    return progress


def interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def run_and_report(
    args: argparse.Namespace,
    run: Callable,
    *,
    name: str,
    setting: str = "",
    kind_width: int,
    details: Callable[..., str],
    **options,
) -> int:
    """The runner's `run` with the common options (and `options`), a progress line a trial
    (`printer`), in args.keep or else a temporary folder named after `name`; then the heading
    (`setting` after the trial count), the table and any problems. The exit code."""
    # Ctrl-C, or SIGTERM from `timeout` or a scheduler, ends a long run with its table; SIGINT
    # is set explicitly because a shell starts background jobs with it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)

    def go(root: Path):
        return run(
            args.trials,
            seed=args.seed,
            root=root,
            jobs=args.jobs,
            answer_seconds=args.answer_seconds,
            max_prompts=args.max_prompts,
            progress=printer(args.trials, kind_width, details),
            **options,
        )

    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        summary = go(args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix=f"qwenpipe-{name.replace(' ', '-')}-") as folder:
            summary = go(Path(folder))
    stopped = f" (interrupted: {len(summary.trials)} completed)" if summary.interrupted else ""
    print(f"\n{name} run: {args.trials} trials{stopped}{setting}, seed {args.seed}, {args.jobs} at once")
    print(summary.table())
    if summary.failed:
        print("\nproblems:\n" + summary.problems())
    return 1 if summary.broken else 0


def quick_run(run: Callable, trials: int, *, seed_variable: str, root: Path, **options):
    """A quick CI run of a runner's `run`: `trials` trials two at a time, the seed from the
    environment variable `seed_variable` (0 without it); its table printed, its summary returned.
    The kills alone: a site fault holds the simulator for its trial alone (SITE_FAULTS) and
    would run the pair one after the other; each fault has its own CI test
    (tests/integration/test_in_doubt_cli.py: the read lag, chats that vanish, two workspaces on
    one login), and the long runs carry them all (docs/reliability.md)."""
    seed = int(os.environ.get(seed_variable, "0"))
    summary = run(trials, seed=seed, root=root, jobs=2, site_faults=False, **options)
    print("\n" + summary.table())
    return summary


def send_count_problem(store, since: float, accepted: list[dict], *, per_account: bool) -> str:
    """ "" when the store's sends of the day that began before `since` (a trial's start) are the
    site's accepted sends (`accepted`: ledger entries of the trial's prompts), per account when
    `per_account`; else what differs. A send the store counts that the site never took would
    hold back a later send under the daily limit; one it misses would let the account overrun it."""
    from pipeline.contract.quota import local_day_start

    counts = store.send_counts(local_day_start(since))
    site = Counter(entry["account"] or "" for entry in accepted)
    if per_account:
        ours = {account: n for account, n in counts.by_account.items() if n}
        if ours != dict(site):
            ours, theirs = dict(sorted(ours.items())), dict(sorted(site.items()))
            return f"the store counts the day's sends {ours}, the site took {theirs}{send_steps(store)}"
    elif counts.total != sum(site.values()):
        took = sum(site.values())
        return f"the store counts {counts.total} sends today, the site took {took}{send_steps(store)}"
    return ""


SEND_STEPS = (
    "sending",
    "unsent",
    "recovering",
    "recovery_not_found",
    "recovery_in_doubt",
    "recovery_lost",
    "recovered",
    "sent",
    "failed",
    "held",
)
# A send killed before its chat was named is in doubt until qwen.lost_chat_after (30 min by
# default): short in the chaos runs, so that their crash-free re-runs see it sent again in time.
LOST_CHAT_AFTER = "lost_chat_after = 15"
# The site's faults a trial may add to its kills:
# - a read-after-write lag (a new chat reads as not found, and is not listed, for a few seconds:
#   under LOST_CHAT_AFTER, so that nothing may be sent again for it);
# - chats that vanish: the chats made while the commands are being killed are never shown
#   (not found, not listed) though the site took their prompts. Such a send may be taken as
#   lost after LOST_CHAT_AFTER and sent again (the journal's `recovery_lost` says so, and the
#   day's count gives it back), or its article handed to the router (`fallback`): the rules of
#   docs/reliability.md allow both, and nothing else.
# The bot check as a page is a prompt token (chaos.ROUTER_TOKENS).
READ_LAG_SHARE = 0.3  # of the trials
READ_LAG_SECONDS = (1.0, 5.0)
VANISH_SHARE = 0.1  # of the trials


def site_fault(rng, *, vanish: bool = True) -> dict:
    """The simulator settings of one trial's site fault ({} for none); `no_site_fault` undoes it.
    `vanish`: chats that vanish are among the faults (a runner whose checks allow for them)."""
    roll = rng.random()
    if roll < READ_LAG_SHARE:
        return {"read_lag": round(rng.uniform(*READ_LAG_SECONDS), 1)}
    if vanish and roll < READ_LAG_SHARE + VANISH_SHARE:
        return {"vanish_chats": True}
    return {}


class SiteFaults:
    """The simulator's settings are the whole site's: with trials side by side (`--jobs`), one
    trial's fault would reach the other's sends (a chat made while another trial lets chats
    vanish is hidden too). A trial with a fault holds the site alone; trials without one share it.
    Leaving an exclusive hold undoes the fault."""

    def __init__(self) -> None:
        self._turn = threading.Condition()
        self._sharing = 0
        self._alone = False
        self._waiting_alone = 0

    @contextlib.contextmanager
    def held(self, sim, fault: dict):
        alone = bool(fault)
        with self._turn:
            if alone:
                self._waiting_alone += 1
                self._turn.wait_for(lambda: not self._alone and not self._sharing)
                self._waiting_alone -= 1
                self._alone = True
            else:  # a trial with a fault waiting goes first, so that it is not starved
                self._turn.wait_for(lambda: not self._alone and not self._waiting_alone)
                self._sharing += 1
        try:
            if alone:
                sim.set(**fault)
            yield
        finally:
            with self._turn:
                if alone:
                    sim.set(**no_site_fault())
                    self._alone = False
                else:
                    self._sharing -= 1
                self._turn.notify_all()


SITE_FAULTS = SiteFaults()  # one simulator a run: one of these


def while_healing(fault: dict) -> dict:
    """The fault as the crash-free runs see it: a read lag stays, chats no longer vanish (those
    made meanwhile stay hidden)."""
    return {**fault, "vanish_chats": False} if fault.get("vanish_chats") else fault


def no_site_fault() -> dict:
    return {"read_lag": 0.0, "vanish_chats": False}


def hidden_chats(sim) -> set[str]:
    """The ids of the chats the simulator never shows (made while vanish_chats was set)."""
    with sim.store.lock:
        return {chat_id for chat_id, chat in sim.store.chats.items() if chat.hidden}


def recovery_lost(store) -> Counter:
    """Slug -> the interrupted sends the store's journal records as taken for lost (and sent
    again)."""
    return Counter(e.slug for e in store.events() if e.event == "recovery_lost")


def vanished_sends(accepted: list[dict], hidden: set[str], lost: int) -> tuple[list[dict], list[dict]]:
    """(vanished, given back) of one prompt's accepted sends (ledger entries): those into chats
    the site never shows, and of those the ones the rules allowed to send again: one for each
    recorded recovery_lost (a loss is not told apart from that of a send the site never took:
    the allowance is the smaller count). A given-back send is not counted by the
    store (the rules count the prompt once), so the send counts leave them out."""
    vanished = [entry for entry in accepted if entry["chat_id"] in hidden]
    return vanished, vanished[: min(len(vanished), lost)]


def send_steps(store) -> str:
    """The store's steps around sends, to tell where a count went wrong."""
    steps = []
    for e in store.events():
        if e.event in SEND_STEPS:
            code, host = e.fields.get("code"), e.fields.get("host")
            where = f"{e.account or '-'}{f'/{code}' if code else ''}{f'@{host}' if host else ''}"
            steps.append(f"{e.slug}:{e.event}({where})")
    return "; steps: " + " ".join(steps)
