"""Multi-host chaos (issue 18): three hosts over one PostgreSQL batch, faults in their overlapping cycles.

    .venv/bin/python tests/chaos/hosts_chaos.py --hosts 3 --store postgres --trials 200 [--seed 7] [--jobs 1]

Each trial makes a fresh database and one project per host (tests/hosts.py: its own account on
ONE long-lived simulator with accounts a, b, c..., its own host_id, the same prompts), runs
`qwenpipe store init` once, then rounds of `qwenpipe cycle` on every host at once, and breaks
one round (at most a few) with one kind of fault:

- `crash`: some hosts' cycles armed with a named crash point each (pipeline/crashpoints.py, as
  chaos.py arms them), re-armed in the next rounds until each was killed there (at most 4);
- `random`: one host's process group SIGKILLed at a random moment of its cycle;
- `sigstop`: one host SIGSTOPped (in half the tries as soon as it is caught inside a step,
  else as soon as it holds a lease, else at a random moment; a cycle that ends first makes
  another round, and the fourth try freezes a cycle just starting) for longer than `lease_seconds`;
  the other hosts run a round meanwhile and must not all be refused; then SIGCONT: it must find
  its lease lost and stop before any send;
- `terminate`: `pg_terminate_backend` of a host's connection caught mid-step (inside a statement
  or a transaction; else an idle one), up to three times in a round;
- `pg_restart`: PostgreSQL restarted mid-cycle (fast: sessions rolled back; immediate: a crash);
- `pg_down`: PostgreSQL stopped mid-cycle; while it is down a round on every host must exit 3
  saying "store unreachable" and the site must take nothing; then it comes back.

Then crash-free rounds until `status --json` says the whole batch is done, `qwenpipe sync` on
every host, and hosts.check_hosts: each prompt taken by the site at most once (its ledger),
every article done once, right and the same on every host, its front matter account the
ledger's sender, the database's send row the ledger's, and the database's count of the day's
sends per account (what each host's daily limit reads) the site's accepted sends. Over the
whole run, the simulator's affinity violations (a chat read by an account that did not make it) must be 0.

Each job has a PostgreSQL server of its own (a restart must not hit another job's trial). The
quick CI run is tests/chaos/test_hosts_chaos_quick.py.
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script: make tests/ importable
    sys.path.insert(0, str(HERE.parent))

import chaos_common  # noqa: E402
import hosts  # noqa: E402
from chaos import (  # noqa: E402
    CLEAN_DEADLINE,
    Summary,
    Trial,
    check_twin,
    heal_twin,
    last_line,
    make_twin,
    plan_trial,
    twin_chat_id,
)
from pg_server import PostgresServer  # noqa: E402

from pipeline.crashpoints import NAMES  # noqa: E402

KINDS = ("crash", "random", "sigstop", "terminate", "pg_restart", "pg_down")
LEASE_SECONDS = 10  # the shortest lease the config takes: a SIGSTOP past it costs ~12 s
BREAK_ROUNDS = 4  # rounds with the fault armed, at most


@dataclass
class HostTrial(Trial):
    """A chaos.Trial over several hosts; `faults` counts what was done besides SIGKILLs."""

    hosts: int = 3
    faults: Counter = field(default_factory=Counter)
    rounds: int = 0
    done_twice: list[str] = field(default_factory=list)
    unreachable_runs: int = 0  # cycles run while the server was down (each must exit 3, send nothing)


def recovery_lost(url: str) -> Counter:
    from pipeline.store.postgres import PostgresStore

    store = PostgresStore.open(url)
    try:
        return chaos_common.recovery_lost(store)
    finally:
        store.close()


def twin_of(folder: Path, host, sim, trial: HostTrial) -> Path:
    """The twin workspace (chaos.make_twin) on `host`'s account, its profile and saved login."""
    login = host.project / ".qwenpipe" / "accounts" / host.account
    first = trial.slugs[min(trial.slugs)]
    return make_twin(
        folder, sim, first, profile=login / "profile", state=login / "state.json", account=host.account
    )


def check_send_counts(
    trial: HostTrial, url: str, sim, others=frozenset(), hidden=frozenset(), lost=None
) -> None:
    """The database's count of the day's sends per account (what each host's daily limit reads)
    against the accounts the site's ledger says sent the trial's prompts (but another
    workspace's, `others`, and the vanished sends the rules gave back before sending again)."""
    from pipeline.store.postgres import PostgresStore

    taken = hosts.senders(sim, trial.slugs.values(), others=others)
    accepted = []
    for slug, text in trial.slugs.items():
        vanished, back = chaos_common.vanished_sends(taken[text], hidden, (lost or Counter())[slug])
        trial.vanished += len(vanished)
        trial.resent += len(back)
        accepted += [entry for entry in taken[text] if entry not in back]
    store = PostgresStore.open(url)
    try:
        problem = chaos_common.send_count_problem(store, trial.started_at, accepted, per_account=True)
    finally:
        store.close()
    if problem:
        trial.count_mismatches.append(problem)
        trial.problems.append(problem)


def run_trial(
    sim,
    server: PostgresServer,
    root: Path,
    index: int,
    rng: random.Random,
    kind: str,
    count: int,
    max_prompts: int,
    site_faults: bool = True,
) -> HostTrial:
    started = time.monotonic()
    points = rng.sample(NAMES, k=rng.randint(1, min(count, len(NAMES)))) if kind == "crash" else []
    if points and "mid_journal" not in points:  # one host's kill always lands (every cycle journals
        points[0] = "mid_journal"  # its start); the others' points land where their work takes them
    base = plan_trial(index, rng, "after_router" if "after_router" in points else kind, max_prompts)
    trial = HostTrial(**{**vars(base), "kind": kind, "hosts": count, "started_at": time.time()})
    try:
        url = server.new_database()
        per_cycle = rng.choice((0, 2))  # 0: no limit, the hosts race for the prompts
        group = hosts.make_hosts(
            root / f"t{index:04d}",
            sim,
            url,
            trial.slugs,
            accounts=sim.accounts[:count],
            lease_seconds=LEASE_SECONDS,
            qwen=f"max_sends_per_cycle = {per_cycle}\n{chaos_common.LOST_CHAT_AFTER}",
            own_browser=True,  # killed commands: each its own browser, as cron runs it
            headless_shell=True,
        )
        init = hosts.run(group[0], "store", "init")
        if init.returncode != 0:
            trial.problems.append(f"store init exit {init.returncode}: {last_line(init.stderr)}")
            return trial
        sim.set(url_delay=round(rng.uniform(0.05, 1.0), 2))
        trial.site_fault = chaos_common.site_fault(rng)
        if not site_faults:  # the quick CI runs: kills alone (chaos_common.quick_run)
            trial.site_fault, trial.twin = {}, None
        if trial.twin:  # a workspace outside the batch on the first host's login
            trial.twin = twin_of(root / trial.twin, group[0], sim, trial)
        # A read lag for the whole trial, vanishing chats while breaking; alone on the site.
        with chaos_common.SITE_FAULTS.held(sim, trial.site_fault):
            BREAK[kind](trial, group, server, url, sim, rng, points)
            sim.set(**chaos_common.while_healing(trial.site_fault))
            if trial.twin:
                heal_twin(trial)
            heal(trial, group)
        for host in group:
            synced = hosts.run(host, "sync")
            if synced.returncode != 0:
                trial.problems.append(
                    f"{host.host_id}: sync exit {synced.returncode}: {last_line(synced.stderr)}"
                )
        routed = set(trial.slugs) if trial.quota else trial.router_slugs
        twin_chat = twin_chat_id(trial, sim)
        others = frozenset({twin_chat} if twin_chat else ())
        hidden = frozenset(chaos_common.hidden_chats(sim))
        lost = recovery_lost(url)
        found = hosts.check_hosts(
            group,
            sim,
            url,
            trial.slugs,
            router_slugs=routed,
            affinity=False,
            others=others,
            hidden=hidden,
            lost=lost,
        )
        check_twin(trial, [host.articles for host in group], sim, twin_chat)
        trial.duplicates, trial.lost, trial.wrong = found.duplicates, found.lost, found.wrong
        trial.done_twice = found.done_twice
        unsent = hosts.senders(sim, trial.slugs.values(), others=others)
        trial.router_articles = sum(
            not unsent[trial.slugs[slug]] for slug in routed if slug not in found.lost
        )
        trial.problems.extend(found.problems)
        check_send_counts(trial, url, sim, others, hidden, lost)
    except Exception as error:  # a broken runner must show up as a problem, not a silent pass
        trial.problems.append(f"runner error: {type(error).__name__}: {error}")
    finally:
        trial.seconds = time.monotonic() - started
    return trial


def judge(trial: HostTrial, outcomes, *, killed_ok: bool = True) -> None:
    """Count a round's kills and orphans; any other exit than 0/3/42, or a traceback, is a problem."""
    trial.rounds += 1
    trial.runs += len(outcomes)
    for outcome in outcomes:
        trial.orphans += outcome.orphans
        if outcome.code == -signal.SIGKILL and killed_ok:
            continue
        if outcome.code not in hosts.OK_CODES or "Traceback" in outcome.stderr:
            trial.problems.append(
                f"{outcome.host.host_id}: cycle exit {outcome.code}: {last_line(outcome.stderr)}"
            )
        if "not sending again" in outcome.stderr:
            trial.recovered += 1


def break_crash(trial, group, server, url, sim, rng, points) -> None:
    armed = dict(zip(rng.sample([h.host_id for h in group], k=len(points)), points, strict=True))
    for _ in range(BREAK_ROUNDS):
        outcomes = hosts.cycle_round(group, armed)
        judge(trial, outcomes)
        for outcome in outcomes:
            if outcome.code == -signal.SIGKILL and outcome.host.host_id in armed:
                trial.kills[armed.pop(outcome.host.host_id)] += 1
        if not armed or finished(trial, group):
            return
        time.sleep(rng.uniform(0, 0.8))  # let answers grow, so mid_article finds a finished one


def break_random(trial, group, server, url, sim, rng, points) -> None:
    victim = rng.choice(group)
    running = hosts.start_cycles(group)
    process = running[victim.host_id]
    try:
        process.wait(timeout=rng.uniform(0.3, 5.0))
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        trial.kills["random"] += 1
    judge(trial, hosts.finish_cycles(group, running))


def break_sigstop(trial, group, server, url, sim, rng, points) -> None:
    victim = rng.choice(group)
    others = [h for h in group if h is not victim]
    for attempt in range(BREAK_ROUNDS):
        running = hosts.start_cycles(group)
        process = running[victim.host_id]
        if attempt == BREAK_ROUNDS - 1:  # the last try lands for sure: a command just starting
            time.sleep(rng.uniform(0.05, 0.3))
            how = "stopped at a random moment"
        else:
            window = rng.uniform(1.0, 6.0)
            # Half the tries freeze it inside a step (a transaction open, the batch's lock held).
            if rng.random() < 0.5 and mid_step(server, url, process, time.monotonic() + window):
                how = "stopped mid-step"
            elif wait_for(lambda: holds_lease(url, victim.host_id), window):
                how = "stopped holding a lease"
            else:
                how = "stopped at a random moment"
        if process.poll() is None:
            break
        judge(trial, hosts.finish_cycles(group, running))  # it ended before it could be stopped
    else:
        return
    hosts.stop_group(process)
    stopped = time.monotonic()
    trial.faults[how] += 1
    try:
        judge(trial, hosts.finish_cycles(others, running))
        time.sleep(max(0.0, LEASE_SECONDS + 1.5 - (time.monotonic() - stopped)))  # its lease runs out
        meanwhile = hosts.cycle_round(others)  # they may take its article over now
        judge(trial, meanwhile)
        if all("another host holds the batch" in o.stderr for o in meanwhile):
            trial.faults["rounds held up by the stopped host (the batch lock)"] += 1
            trial.problems.append(
                f"{victim.host_id} frozen {how} for {time.monotonic() - stopped:.0f} s (lease_seconds = "
                f"{LEASE_SECONDS}): every other host's cycle was refused, another host holds the batch"
            )
    finally:
        hosts.continue_group(process)
    judge(trial, hosts.finish_cycles([victim], running))


def mid_step(server, url, process, deadline: float) -> bool:
    """Wait until one of this command's database connections is inside a statement or a
    transaction (its ports looked up again every half second: a reconnect changes them); True
    then, False at `deadline` or when it ends."""
    database, ports, looked = hosts.database_name(url), set(), 0.0
    while time.monotonic() < deadline and process.poll() is None:
        if time.monotonic() - looked > 0.5:
            ports, looked = hosts.local_ports(hosts.group_sockets(process.pid)), time.monotonic()
        try:
            if any(port in ports and state != "idle" for _pid, port, state in server.backends(database)):
                return True
        except Exception:
            pass
        time.sleep(0.002)
    return False


def break_terminate(trial, group, server, url, sim, rng, points) -> None:
    running = hosts.start_cycles(group)
    for _ in range(3):
        if all(p.poll() is not None for p in running.values()):
            break
        cut = cut_mid_step(server, url, group, running, time.monotonic() + rng.uniform(0.5, 4.0), rng)
        if cut:
            trial.faults[cut] += 1
    judge(trial, hosts.finish_cycles(group, running))


def break_pg_restart(trial, group, server, url, sim, rng, points) -> None:
    running = hosts.start_cycles(group)
    time.sleep(rng.uniform(0.5, 5.0))
    mode = rng.choice(("fast", "immediate"))
    server.restart(mode)
    trial.faults[f"server restarts ({mode})"] += 1
    judge(trial, hosts.finish_cycles(group, running))


def break_pg_down(trial, group, server, url, sim, rng, points) -> None:
    running = hosts.start_cycles(group)
    time.sleep(rng.uniform(0.5, 5.0))
    server.stop(rng.choice(("fast", "immediate")))
    trial.faults["server stops"] += 1
    try:
        judge(trial, hosts.finish_cycles(group, running))
        before = taken(sim, trial)
        outcomes = hosts.cycle_round(group)
        judge(trial, outcomes)
        trial.unreachable_runs += len(outcomes)
        for outcome in outcomes:
            if outcome.code != 3 or hosts.STORE_UNREACHABLE not in outcome.stderr:
                trial.problems.append(
                    f"{outcome.host.host_id}: cycle with the server down: exit {outcome.code}: "
                    f"{last_line(outcome.stderr)} (wanted exit 3, {hosts.STORE_UNREACHABLE!r})"
                )
        after = taken(sim, trial)
        if after != before:
            trial.problems.append(f"the site took {after - before} prompt(s) while the store was down")
    finally:
        server.start()


BREAK = {
    "crash": break_crash,
    "random": break_random,
    "sigstop": break_sigstop,
    "terminate": break_terminate,
    "pg_restart": break_pg_restart,
    "pg_down": break_pg_down,
}


def heal(trial: HostTrial, group) -> None:
    """Crash-free rounds until `status --json` says the whole batch is done (a killed host's
    lease runs out meanwhile)."""
    deadline = time.monotonic() + CLEAN_DEADLINE
    while time.monotonic() < deadline:
        outcomes = hosts.cycle_round(group)
        judge(trial, outcomes, killed_ok=False)
        if any(o.code in (1, 2) or "Traceback" in o.stderr for o in outcomes):
            return
        if finished(trial, group):
            return
    trial.problems.append(f"not finished after {CLEAN_DEADLINE} s of crash-free rounds")


def finished(trial: HostTrial, group) -> bool:
    return hosts.done_count(hosts.status(group[0])) == len(trial.slugs)


def taken(sim, trial: HostTrial) -> int:
    return sum(len(sends) for sends in hosts.senders(sim, trial.slugs.values()).values())


def wait_for(predicate, seconds: float, every: float = 0.02) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if predicate():
                return True
        except Exception:  # the database busy or briefly away: keep looking
            pass
        time.sleep(every)
    return False


def holds_lease(url: str, host_id: str) -> bool:
    """A live lease row owned by this host (an owner token is "host_id:pid:random")."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT 1 FROM leases WHERE owner LIKE %s AND expires > extract(epoch from now())",
            (host_id + ":%",),
        ).fetchone()
    return row is not None


def cut_mid_step(server, url, group, running, deadline: float, rng: random.Random) -> str:
    """pg_terminate_backend the first connection of a host's cycle seen mid-step before
    `deadline` (else one idle connection of a running host); what was cut ("" if nothing)."""
    database = hosts.database_name(url)
    while time.monotonic() < deadline:
        try:
            busy = [(pid, port) for pid, port, state in server.backends(database) if state != "idle"]
        except Exception:
            busy = []
        if busy:
            pid, port = busy[0]
            if server.terminate([pid]):
                return "connections cut mid-step"
        time.sleep(0.005)
    alive = [h for h in group if running[h.host_id].poll() is None]
    if not alive:
        return ""
    victim = rng.choice(alive)
    pids = hosts.host_backends(server, url, running[victim.host_id])
    return "connections cut idle" if pids and server.terminate(pids[:1]) else ""


@dataclass
class HostSummary(Summary):
    hosts: int = 3

    def table(self) -> str:
        kills = self.kills
        faults = Counter()
        for trial in self.trials:
            faults.update(trial.faults)
        rows = [
            ("trials", len(self.trials)),
            ("hosts per trial", self.hosts),
            ("prompts", sum(len(t.slugs) for t in self.trials)),
            *((f"trials of kind {kind}", sum(t.kind == kind for t in self.trials)) for kind in KINDS),
            *((f"kills at {name}", kills[name]) for name in NAMES),
            ("kills at a random moment", kills["random"]),
            *((name, count) for name, count in sorted(faults.items())),
            *self.site_fault_rows(),
            ("cycles run while the server was down", self.total("unreachable_runs")),
            ("rounds of cycles", self.total("rounds")),
            ("cycles run", self.total("runs")),
            ("recoveries from the chat list", self.total("recovered")),
            ("router articles", self.total("router_articles")),
            ("duplicate sends found", self.total("duplicates")),
            ("articles lost", self.total("lost")),
            ("articles done twice in the database", self.total("done_twice")),
            ("trials whose day's send count is not the site's", self.total("count_mismatches")),
            ("affinity violations", self.affinity_violations),
            ("articles wrong, incomplete or differing", self.total("wrong")),
            ("processes outliving a killed command", self.total("orphans")),
            *chaos_common.closing_rows(self),
        ]
        return chaos_common.table(rows)


def run(
    trials: int,
    *,
    seed: int = 0,
    root: Path,
    jobs: int = 1,
    count: int = 3,
    answer_seconds: float = 0.6,
    max_prompts: int = 5,
    kinds: tuple[str, ...] = KINDS,
    progress=None,
    site_faults: bool = True,
) -> HostSummary:
    """Run `trials` trials of `count` hosts against one simulator (accounts a, b, c...) and one
    PostgreSQL server per job; kinds cycle through `kinds` first, then are drawn at random."""
    lock = threading.Lock()
    servers: list[PostgresServer] = []
    local = threading.local()

    def trial_of(sim, index: int, rng: random.Random) -> HostTrial:
        if not hasattr(local, "server"):
            local.server = PostgresServer().start()
            with lock:
                servers.append(local.server)
        kind = kinds[index % len(kinds)] if index < 2 * len(kinds) else rng.choice(kinds)
        return run_trial(
            sim, local.server, root, index, rng, kind, count, max_prompts, site_faults=site_faults
        )

    def close_servers() -> None:
        for server in servers:
            server.close()

    return chaos_common.run_trials(
        HostSummary(accounts=count, hosts=count),
        trials,
        seed=seed,
        jobs=jobs,
        answer_seconds=answer_seconds,
        accounts=tuple("abcdefghij"[:count]),
        trial_of=trial_of,
        progress=progress,
        clean_up=close_servers,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--hosts", type=int, default=3, help="hosts per trial, each with an account of its own"
    )
    parser.add_argument("--store", choices=("postgres",), default="postgres", help="what the hosts share")
    chaos_common.add_run_arguments(
        parser,
        jobs_help="trials at once (one simulator, a server per job)",
        answer_seconds=0.6,
        max_prompts=5,
    )
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"faults to draw from (of {', '.join(KINDS)})"
    )
    chaos_common.add_keep_argument(parser)
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not 1 <= args.hosts <= 10:
        parser.error(f"--kinds: unknown {unknown}" if unknown else "--hosts must be 1 to 10")

    def done(trial: HostTrial) -> str:
        faults = ",".join(f"{k}x{v}" for k, v in (trial.kills + trial.faults).items()) or "no fault landed"
        return f"{faults}, {trial.rounds} rounds"

    return chaos_common.run_and_report(
        args,
        run,
        name="hosts chaos",
        setting=f", {args.hosts} hosts over PostgreSQL",
        kind_width=10,
        details=done,
        count=args.hosts,
        kinds=kinds,
    )


if __name__ == "__main__":
    sys.exit(main())
