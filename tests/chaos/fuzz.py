"""Fuzzed runs: the site answers, now and then, what nobody has reported yet, and qwenpipe's
promises are checked after every run (issue 37).

    .venv/bin/python tests/chaos/fuzz.py --trials 500 [--seed 7] [--accounts 1|2] [--keep DIR]
        [--rate 0.1] [--only INDEX] [--strict-unknown]

Each trial makes a fresh project against ONE long-lived simulator (chaos_common.run_trials: real
subprocesses, real Chromium), turns the simulator's fuzzing mode on with the trial's own seed
(pipeline/simulator/fuzz.py: at each step of the site, with probability `--rate`, an unknown
code, an HTML error, a page of an unknown widget, a redirect, a stream cut short, frames of
unknown phases, fields added, dropped or of another type, another chat's JSON, a slow answer...),
runs `cycle` and `generate` as cron and a user would, then turns it off and runs `cycle` until
every prompt is done (or HEAL_DEADLINE passed: a fault may cost an article its delay), and checks:

- duplicate_send: the site took no prompt twice, unless the journal says it was sent again
  after being in doubt for qwen.lost_chat_after (`recovery_lost`, design.md "Sent or not");
- wrong_article: every article is the chat's exact answer to its own prompt, or the router's
  (engine = "router") for a prompt the chat never took or whose send the journal gave up as
  lost (`recovery_lost`: the same allowance as a send again) (chaos.article_problem);
- send_count: the store's count of the day's sends is the site's accepted sends, per account
  (chaos_common.send_count_problem);
- struck_while_held: no account meets a second strike while held: once the journal holds an
  account ("hold"), the site sees no further send of it in the trial, and no second hold;
- traceback: no "Traceback" in any command's output;
- hang: no command outlives COMMAND_LIMIT seconds (it is killed, with its browser);
- usage_exit: no command exits 2 ("cannot run as asked") because of what the site answered;
- unknown_unjournalled: every step of the site where the trial met a fault any reader can tell
  (TELLING_KINDS; not the stream a send's page reads on its own, UNREAD_STEPS), met by the
  page's own requests or the driver's, has an `unknown_answer` journalled there (`where`, `seen`
  masked, `account`). Reported, not counted as broken, unless `--strict-unknown` (STRICT_UNKNOWN;
  the long runs of docs/reliability.md and the CI run use it).

The run prints the fault mix (counts per step and kind) and every broken invariant with the
trial's seed: `--seed S --only I` runs that trial again alone (the same prompts and the same fuzz
seed; what the faults hit depends on the order of the requests, which timing may change).

The quick CI version is tests/chaos/test_fuzz_quick.py; docs/reliability.md quotes long runs.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
if str(TESTS) not in sys.path:  # run as a script: make tests/ importable (sim_project)
    sys.path.insert(0, str(TESTS))

import chaos  # noqa: E402
import chaos_common  # noqa: E402
import tests_cli_helpers  # noqa: E402
from sim_project import make_project  # noqa: E402

INVARIANTS = (
    "duplicate_send",
    "wrong_article",
    "send_count",
    "struck_while_held",
    "traceback",
    "hang",
    "usage_exit",
    "unknown_unjournalled",
)
# Reported, not broken, unless --strict-unknown: a fault met by a request whose page was closed
# before its answer came reaches no reader at all, and only a look at the trial tells.
STRICT_UNKNOWN = False
REPORTED_ONLY = ("unknown_unjournalled",)
# The faults any reader can tell from the site's known answers, whichever request of the page's
# or the driver's meets them: an answer that is not the site's JSON or stream (HTML, a widget, a
# redirect), an error code, phase or status nobody has reported. Each must be journalled. The
# others may look like an answer the site gives every day (a dropped message reads as one not yet
# stored, a duplicated or reordered frame as the stream it is, a field the driver never reads as
# nothing): they are checked by what they must never cost (a wrong article, a second send).
TELLING_KINDS = (
    "unknown_code",
    "unknown_code_taken",
    "html_4xx",
    "html_5xx",
    "html_5xx_taken",
    "unknown_widget",
    "redirect",
    "unknown_phase",
    "unknown_status",
)
# The stream a send's page reads on its own while qwenpipe reads the chat's JSON (a cycle, a
# generate without --wait) is never read, so what it holds is not journalled (docs/reliability.md,
# "The unknown"): its faults are checked by what they must never cost.
UNREAD_STEPS = ("stream",)
# The journal's `where` of a fault's step (engines/unknown.Where): a chat's page is its JSON's.
JOURNAL_WHERE = {"chat_page": "chat_json"}
ALLOWED_RESEND = "recovery_lost"  # the journal's step for a send given up as lost, then sent again
COMMAND_LIMIT = 120  # seconds: a command still running then hangs
FUZZED_RUNS = 6  # commands run while the site is fuzzed
HEAL_DEADLINE = 90  # seconds of fault-free cycles to finish what the faults delayed
TOPICS = chaos.TOPICS


@dataclass
class Trial:
    index: int
    seed: int  # the run's seed: `--seed SEED --only INDEX` reruns this trial
    fuzz_seed: int = 0
    kind: str = "fuzz"  # for chaos_common.printer
    slugs: dict[str, str] = field(default_factory=dict)  # slug -> prompt text
    faults: list[dict] = field(default_factory=list)  # the simulator's faults met in the trial
    runs: int = 0
    exits: Counter = field(default_factory=Counter)
    broken: dict[str, list[str]] = field(default_factory=dict)  # invariant -> what broke it
    undone: list[str] = field(default_factory=list)  # not done after the fault-free runs
    dead_letters: list[str] = field(default_factory=list)
    router_articles: int = 0
    unknown_events: int = 0
    accounts_used: bool = False  # the simulator has accounts: every step names one
    started_at: float = 0.0
    seconds: float = 0.0
    # Every finding in words (the progress line shows them): the invariants broken, and what
    # went wrong in the runner itself (chaos.sign_in_accounts writes here too).
    problems: list[str] = field(default_factory=list)

    def breaks(self, invariant: str, words: str) -> None:
        self.broken.setdefault(invariant, []).append(words)
        self.problems.append(f"{invariant}: {words}")

    @property
    def ok(self) -> bool:
        """No invariant broken but those only reported (REPORTED_ONLY, unless strict), and no
        runner problem."""
        skip = () if STRICT_UNKNOWN else REPORTED_ONLY
        broken = [f"{name}: {one}" for name, words in self.broken.items() for one in words]
        counted = [name for name in self.broken if name not in skip]
        return not counted and all(problem in broken for problem in self.problems)

    def fault_words(self) -> str:
        return ", ".join(f"{f['step']}:{f['kind']}" for f in self.faults) or "no fault"


def plan_trial(index: int, seed: int, rng: random.Random, max_prompts: int) -> Trial:
    trial = Trial(index=index, seed=seed, fuzz_seed=rng.getrandbits(32))
    nonce = f"{index}-{rng.getrandbits(32):08x}"  # the chat list must never match an older trial
    for number in range(rng.randint(1, max_prompts)):
        text = f"Write a short piece on {rng.choice(TOPICS)} (fuzz trial {nonce}, prompt {number})."
        trial.slugs[f"f{index}-p{number}"] = text
    return trial


def run_command(args: list[str], project: Path) -> tuple[int | None, str]:
    """(exit code, stdout and stderr) of one command; None when it outlived COMMAND_LIMIT (then
    it is killed, with whatever it started)."""
    process = tests_cli_helpers.spawn(
        *args,
        cwd=project,
        env=chaos.qwenpipe_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=COMMAND_LIMIT)
    except subprocess.TimeoutExpired:
        chaos.reap_group(process)
        process.kill()
        out, err = process.communicate()
        return None, f"{out or ''}{err or ''}"
    return process.returncode, f"{out or ''}{err or ''}"


def pick_command(rng: random.Random, trial: Trial, project: Path) -> list[str]:
    pending = [s for s in sorted(trial.slugs) if not (chaos.articles_dir(project) / f"{s}.md").exists()]
    roll = rng.random()
    if roll < 0.6 or not pending:
        return ["cycle"]
    slug = rng.choice(pending)
    return ["generate", slug, "--wait"] if roll < 0.8 else ["generate", slug]


def run_and_watch(trial: Trial, command: list[str], project: Path) -> int | None:
    began = time.monotonic()
    code, output = run_command(command, project)
    # What each command took, in the trial's folder: where a slow trial spent its time.
    with open(project / "commands.log", "a", encoding="utf-8") as log:
        log.write(f"{time.monotonic() - began:6.1f} s  exit {code}  {' '.join(command)}\n")
    trial.runs += 1
    trial.exits[code] += 1
    words = " ".join(command)
    if code is None:
        trial.breaks("hang", f"`{words}` still ran after {COMMAND_LIMIT} s: {chaos.last_line(output)}")
    if "Traceback" in output:
        trial.breaks("traceback", f"`{words}`: {traceback_line(output)}")
    if code == 2:
        trial.breaks("usage_exit", f"`{words}` exit 2: {chaos.last_line(output)}")
    return code


def traceback_line(output: str) -> str:
    """The exception line of the first traceback in `output`."""
    lines = output.splitlines()
    start = next(n for n, line in enumerate(lines) if "Traceback" in line)
    rest = [line for line in lines[start + 1 :] if line and not line.startswith(" ")]
    return rest[0] if rest else chaos.last_line(output)


def fuzzed(trial: Trial, project: Path, sim, rng: random.Random, rate: float) -> int | None:
    """Commands as cron and a user run them, while the site is fuzzed with the trial's seed; the
    last one's exit code (None: none ran)."""
    sim.set(fuzz=trial.fuzz_seed, fuzz_rate=rate)
    code = None
    try:
        for _run in range(FUZZED_RUNS):
            if chaos.done(project, trial.slugs):
                break
            code = run_and_watch(trial, pick_command(rng, trial, project), project)
            time.sleep(rng.uniform(0, 0.5))
    finally:
        sim.set(fuzz=None, fault="")
    return code


def heal(trial: Trial, project: Path, last_code: int | None) -> None:
    """Fault-free cycles until every prompt is done, or HEAL_DEADLINE. None when the fuzzed
    commands did it all and the last of them ended 0: a cycle more would find nothing to do (it
    opens no browser) and check nothing the checks after it do not."""
    if last_code == 0 and chaos.done(project, trial.slugs):
        return
    deadline = time.monotonic() + HEAL_DEADLINE
    while time.monotonic() < deadline:
        code = run_and_watch(trial, ["cycle"], project)
        if chaos.done(project, trial.slugs) and code == 0:
            return
        time.sleep(0.5)


def check(trial: Trial, project: Path, sim, ledger: list[dict]) -> None:
    """Every invariant, over the trial's part of the site's ledger."""
    from pipeline.wiring import open_sqlite

    out = chaos.articles_dir(project)
    texts = set(trial.slugs.values())
    ours = [entry for entry in ledger if entry["prompt"] in texts]
    accepted = [entry for entry in ours if entry["accepted"]]
    with open_sqlite(out / ".qwenpipe") as store:
        events = list(store.events())
        back = given_back(trial, events, accepted, out)
        count_problem = chaos_common.send_count_problem(
            store, trial.started_at, [e for e in accepted if e not in back], per_account=bool(sim.accounts)
        )
    if count_problem:
        trial.breaks("send_count", count_problem)
    check_duplicates(trial, events, accepted)
    for slug, text in sorted(trial.slugs.items()):
        took = [entry for entry in accepted if entry["prompt"] == text and entry not in back]
        if (out / f"{slug}.md.failed").exists():
            trial.dead_letters.append(slug)
        article = out / f"{slug}.md"
        if not article.exists():
            trial.undone.append(slug)
            continue
        sender = took[0]["account"] if took else None
        problem = chaos.article_problem(article, slug, text, sim, len(took), True, sender)
        if problem:
            trial.breaks("wrong_article", f"{slug}: {problem}")
        elif 'engine = "router"' in article.read_text(encoding="utf-8"):
            trial.router_articles += 1
    check_holds(trial, events, ours, sim)
    check_unknown_journalled(trial, events)


def given_back(trial: Trial, events, accepted: list[dict], out: Path) -> list[dict]:
    """The sends the rules gave back: for each time the journal gave a send up as lost after
    qwen.lost_chat_after (ALLOWED_RESEND), one earlier send the site took (its chat unreadable
    all that time), when the prompt was taken again after it: sent again, or written by the
    router (the account held: the same allowance, another engine). The store counts it no more,
    and the article is the last taking's: the counts and the articles leave these out (as
    chaos_common.vanished_sends)."""
    back = []
    for slug, text in trial.slugs.items():
        took = sorted((e for e in accepted if e["prompt"] == text), key=lambda e: e["time"])
        resends = sum(1 for e in events if e.slug == slug and e.event == ALLOWED_RESEND)
        article = out / f"{slug}.md"
        routed = article.exists() and 'engine = "router"' in article.read_text(encoding="utf-8")
        kept = 0 if routed else 1  # the router's article took it last, else the site's last send
        back += took[: max(0, min(len(took) - kept, resends))]
    return back


def check_duplicates(trial: Trial, events, accepted: list[dict]) -> None:
    """No prompt taken twice by the site, but for each time the journal gave its send up as lost
    after qwen.lost_chat_after (ALLOWED_RESEND) and sent it again."""
    for slug, text in sorted(trial.slugs.items()):
        took = sum(1 for entry in accepted if entry["prompt"] == text)
        resends = sum(1 for e in events if e.slug == slug and e.event == ALLOWED_RESEND)
        if took > 1 + resends:
            steps = " ".join(f"{e.event}({e.account or '-'})" for e in events if e.slug == slug)
            trial.breaks(
                "duplicate_send", f"{slug}: the site took it {took} times ({resends} allowed); steps: {steps}"
            )


def check_holds(trial: Trial, events, ours: list[dict], sim) -> None:
    """No account struck more than once while held: after its first hold, no send of it reaches
    the site (accepted or not) and it is not held again."""
    holds: dict[str, list] = {}
    for event in events:
        if event.event == "hold":
            holds.setdefault(event.account or "", []).append(event)
    for account, held in holds.items():
        if len(held) > 1:
            trial.breaks(
                "struck_while_held",
                f"account {account or '-'} held {len(held)} times: {[h.fields.get('code') for h in held]}",
            )
        first = held[0].ts
        # Without accounts the site's ledger names the one account "" whatever the journal calls it.
        site_name = account if sim.accounts else ""
        later = [e for e in ours if e["account"] == site_name and e["time"] > first]
        if later:
            trial.breaks(
                "struck_while_held",
                f"account {account or '-'} held ({held[0].fields.get('code')}), then {len(later)} "
                f"send(s) of it reached the site: {[e['scenario'] for e in later]}",
            )


def check_unknown_journalled(trial: Trial, events) -> None:
    unknown = [e for e in events if e.event == "unknown_answer"]
    trial.unknown_events = len(unknown)
    seen = [f for f in trial.faults if f["kind"] in TELLING_KINDS and f["step"] not in UNREAD_STEPS]
    journalled = {e.fields.get("where") for e in unknown}
    missed = sorted({f["step"] for f in seen if JOURNAL_WHERE.get(f["step"], f["step"]) not in journalled})
    if missed:
        words = ", ".join(f"{f['step']}:{f['kind']}" for f in seen if f["step"] in missed)
        trial.breaks(
            "unknown_unjournalled", f"no `unknown_answer` journalled where {', '.join(missed)} met {words}"
        )
    for event in unknown:
        missing = [name for name in ("where", "seen") if name not in event.fields]
        if missing or not event.account and trial.accounts_used:
            trial.breaks(
                "unknown_unjournalled", f"unknown_answer without {missing or 'account'}: {event.fields}"
            )
        if "eyJ" in str(event.fields.get("seen", "")):  # a token (JWT) kept unmasked
            trial.breaks("unknown_unjournalled", "unknown_answer keeps a token in `seen`")


def run_trial(
    sim,
    root: Path,
    index: int,
    rng: random.Random,
    seed: int,
    max_prompts: int,
    rate: float,
    own_browser: bool,
) -> Trial:
    started = time.monotonic()
    trial = plan_trial(index, seed, rng, max_prompts)
    trial.accounts_used = bool(sim.accounts)
    trial.started_at = time.time()
    project = make_project(
        root / f"f{index:04d}",
        sim,
        extra=chaos_common.LOST_CHAT_AFTER,
        own_browser=own_browser,
        headless_shell=True,
    )
    with open(project / "config.toml", "a", encoding="utf-8") as config:
        config.write(chaos.ARTICLE_SECTION)
    for slug, text in trial.slugs.items():
        (project / "prompts" / f"{slug}.md").write_text(text, encoding="utf-8")
    faults_before, ledger_before = len(sim.faults()), len(sim.ledger())
    try:
        chaos.sign_in_accounts(trial, project, sim)
        last_code = fuzzed(trial, project, sim, rng, rate)
        trial.faults = sim.faults()[faults_before:]
        (project / "faults.json").write_text(json.dumps(trial.faults, indent=1), encoding="utf-8")
        heal(trial, project, last_code)
        check(trial, project, sim, sim.ledger()[ledger_before:])
    except Exception as error:  # a broken runner must show up as a problem, not a silent pass
        trial.problems.append(f"runner error: {type(error).__name__}: {error}")
    finally:
        sim.set(fuzz=None, fault="")
    trial.seconds = time.monotonic() - started
    return trial


@dataclass
class Summary:
    trials: list[Trial] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False
    accounts: int = 0
    affinity_violations: int = 0

    def add(self, trial: Trial) -> None:
        self.trials.append(trial)

    @property
    def failed(self) -> list[Trial]:
        return [t for t in self.trials if not t.ok]

    @property
    def broken(self) -> bool:
        return bool(self.failed or self.affinity_violations)

    def fault_mix(self) -> Counter:
        return Counter(f"{f['step']}:{f['kind']}" for t in self.trials for f in t.faults)

    def table(self) -> str:
        mix = self.fault_mix()
        per_kind = Counter(f["kind"] for t in self.trials for f in t.faults)
        rows = [
            ("trials", len(self.trials)),
            ("prompts", sum(len(t.slugs) for t in self.trials)),
            ("faults met", sum(mix.values())),
            *((f"  kind {kind}", n) for kind, n in sorted(per_kind.items())),
            *((f"  at {name}", n) for name, n in sorted(mix.items())),
            ("commands run", sum(t.runs for t in self.trials)),
            *((f"  exit {code}", n) for code, n in sorted(self.exits().items(), key=str)),
            ("router articles", sum(t.router_articles for t in self.trials)),
            ("articles not done after the fault-free runs", sum(len(t.undone) for t in self.trials)),
            ("articles dead-lettered", sum(len(t.dead_letters) for t in self.trials)),
            ("unknown_answer events journalled", sum(t.unknown_events for t in self.trials)),
            *((f"trials breaking {name}{only_reported(name)}", self.breaking(name)) for name in INVARIANTS),
            *(self.account_rows() if self.accounts else ()),
            *chaos_common.closing_rows(self),
        ]
        return chaos_common.table(rows)

    def breaking(self, invariant: str) -> int:
        return sum(1 for trial in self.trials if invariant in trial.broken)

    def exits(self) -> Counter:
        total = Counter()
        for trial in self.trials:
            total.update({("hang" if code is None else code): n for code, n in trial.exits.items()})
        return total

    def account_rows(self) -> list[tuple[str, int]]:
        return [("accounts", self.accounts), ("affinity violations", self.affinity_violations)]

    def problems(self) -> str:
        lines = []
        for trial in self.trials:
            for name, words in sorted(trial.broken.items()):
                for one in words:
                    lines.append(
                        f"{name}{only_reported(name)}: trial {trial.index} "
                        f"(--seed {trial.seed} --only {trial.index}; fuzz seed {trial.fuzz_seed}; "
                        f"faults: {trial.fault_words()}): {one}"
                    )
            broken = {f"{name}: {one}" for name, words in trial.broken.items() for one in words}
            lines += [
                f"runner: trial {trial.index} (--seed {trial.seed}): {p}"
                for p in trial.problems
                if p not in broken
            ]
        return "\n".join(lines)


def only_reported(invariant: str) -> str:
    return " (reported only)" if invariant in REPORTED_ONLY and not STRICT_UNKNOWN else ""


def fault_cases(steps: str) -> list[str]:
    """Every `step:kind` of the simulator's fault table at `steps` (comma-separated), in order."""
    from pipeline.simulator.fuzz import FAULTS

    wanted = [step.strip() for step in steps.split(",") if step.strip()]
    return [f"{step}:{kind}" for step in wanted for kind, fault in FAULTS.items() if step in fault.steps]


def run(
    trials: int,
    *,
    seed: int = 0,
    root: Path,
    jobs: int = 1,
    answer_seconds: float = 0.8,
    max_prompts: int = 2,
    progress=None,
    accounts: int = 1,
    rate: float = 0.1,
    only: int | None = None,
    fault: str = "",
    own_browser: bool = True,
    each: str = "",
) -> Summary:
    """`trials` fuzzed trials against one simulator with `accounts` accounts (0: none), each
    trial's site fuzzed at `rate`; `only`: that trial index alone; `fault`: forced at the start
    of every trial (fuzz.parse_forced), for a case to reproduce; `each` (steps, comma-separated):
    trial N forces the N-th fault kind that comes at those steps (fault_cases). `own_browser`: each command
    launches its own (False: they attach to the test process's shared one, which serves a run
    without accounts only: tests/shared_browser.py)."""
    names = tuple(f"acct{n}" for n in range(1, accounts + 1))

    cases = fault_cases(each)

    def trial_of(sim, index: int, rng: random.Random) -> Trial:
        forced = ",".join(part for part in (fault, cases[index % len(cases)] if cases else "") if part)
        if forced:
            sim.set(fault=forced)
        return run_trial(sim, root, index, rng, seed, max_prompts, rate, own_browser)

    return chaos_common.run_trials(
        Summary(accounts=accounts),
        trials,
        seed=seed,
        jobs=jobs,
        answer_seconds=answer_seconds,
        accounts=names,
        trial_of=trial_of,
        progress=progress,
        indices=None if only is None else [only],
    )


def main(argv: list[str] | None = None) -> int:
    global STRICT_UNKNOWN
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    chaos_common.add_run_arguments(
        parser,
        jobs_help="trials at once (1: each trial's faults are its own)",
        answer_seconds=0.8,
        max_prompts=2,
    )
    chaos_common.add_keep_argument(parser)
    parser.add_argument("--accounts", type=int, choices=(0, 1, 2), default=1, help="chat accounts")
    parser.add_argument(
        "--rate", type=float, default=0.1, help="the chance a request of the site meets a fault"
    )
    parser.add_argument("--only", type=int, help="run only this trial (its index) of the run's seed")
    parser.add_argument("--fault", default="", help="force STEP:KIND[,...] at the start of every trial")
    parser.add_argument(
        "--each",
        default="",
        help="STEP[,...]: trial N forces the N-th fault kind of those steps (with --rate 0: one each)",
    )
    parser.add_argument(
        "--strict-unknown", action="store_true", help="an unknown answer not journalled breaks the run"
    )
    args = parser.parse_args(argv)
    STRICT_UNKNOWN = args.strict_unknown
    if args.only is not None:
        args.trials = 1  # the heading counts the trials run

    def details(trial: Trial) -> str:
        return f"{len(trial.faults)} faults"

    kept = []

    def run_and_keep(*given, **options) -> Summary:
        kept.append(run(*given, **options))
        return kept[-1]

    code = chaos_common.run_and_report(
        args,
        run_and_keep,
        name="fuzz",
        setting=f", {args.accounts} account(s), rate {args.rate}",
        kind_width=4,
        details=details,
        accounts=args.accounts,
        rate=args.rate,
        only=args.only,
        fault=args.fault,
        each=args.each,
    )
    if kept and not kept[-1].failed and kept[-1].problems():  # what is only reported, still shown
        print("\nreported, not counted as broken:\n" + kept[-1].problems())
    return code


if __name__ == "__main__":
    sys.exit(main())
