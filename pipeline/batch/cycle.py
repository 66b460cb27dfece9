"""One cron cycle: move every unfinished article one step along the contract.

Decides from one scan of the folders (no browser, no lock per article) who needs what: polls
first (to collect finished answers), then sends, oldest prompt first, within the send limits.
Only then, and only if some article needs the chat, does the browser start, once for the
whole cycle. A second cycle while one runs exits at once; the flock dies with a killed cycle.

Polls of sent chats run up to `qwen.concurrency` at once: worker threads, each with engines of
its own that the chat engine's shared session hands out (for the qwen engine: its own Playwright
driver attached over CDP to the one browser this cycle launched, opening its own pages). Sends
stay in the main thread, one after the other, after the polls. Two threads never act on one
article (its flock is per open file).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .. import files
from ..accounts import all_accounts, several
from ..config import Qwen
from ..contract import cleanup
from ..contract.article import ArticleState, make_private, read_chat_url
from ..contract.facts import engine_limits, facts, send_limits
from ..contract.hosts import Synced, host_of, serve, shared_batch, sync
from ..contract.journal import NO_ARTICLE
from ..contract.phases import (
    Action,
    Decision,
    Phase,
    Reason,
    Record,
    decide,
    schedule,
    settled,
)
from ..contract.prompts import load_prompt
from ..contract.quota import SendBudget, host_accounts, sends_today
from ..contract.rotation import capacity, sender_of, standings
from ..contract.unknown import journal_noticed, journal_unknown
from ..contract.workspace import Engines, Workspace
from ..engines.base import Code
from ..errors import SetupProblem, UsageProblem
from ..exitcodes import ExitCode
from ..files import FileLock, LockBusy
from ..redact import first_line
from ..store.protocol import DEFAULT_ACCOUNT, StoreBusy
from .scan import ArticleView, attach_records, scan

if TYPE_CHECKING:
    from ..engines.base import ChatEngine
    from ..store.protocol import Store


@dataclass
class CycleReport:
    """What one cycle did; `exit_code` is what cron sees."""

    busy_owner: str | None = None
    counts: Counter = field(default_factory=Counter)
    sent: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)  # done in this cycle
    invalid: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per invalid article: what and the fix
    logged_out: list[str] = field(default_factory=list)  # articles the chat refused: not logged in
    routed_logged_out: list[str] = field(default_factory=list)  # ... that the router wrote instead
    chat_worked: bool = False  # the chat took a prompt or answered a look in this cycle
    browser_used: bool = False
    browser_launches: int = 0
    seconds: float = 0.0
    synced: Synced | None = None  # a shared batch: what the cycle's sync wrote first

    @property
    def in_progress(self) -> int:
        c = self.counts
        return c["generating"] + c["waiting"] + c["throttled"] + c["working"] + c["backoff"]

    @property
    def exit_code(self) -> ExitCode:
        if self.busy_owner:
            return ExitCode.WORKING
        # A dead letter of an earlier cycle is a hard failure still waiting for a person
        # (`qwenpipe replay`): 0 is "everything is done", never "done but for these".
        if self.failed or self.invalid or self.counts["dead"]:
            return ExitCode.FAILED
        if self.sent:
            return ExitCode.QUEUED
        if self.in_progress:
            return ExitCode.WORKING
        return ExitCode.DONE

    def summary(self) -> str:
        if self.busy_owner:
            return f"cycle: another cycle is running ({self.busy_owner}); nothing done"
        c = self.counts
        parts = [f"{c['done']} done"]
        for key, label in (
            ("finished", "finished now"),
            ("sent", "sent"),
            ("generating", "generating"),
            ("waiting", "waiting for their next poll"),
            ("backoff", "backing off"),
            ("throttled", "throttled"),
            ("working", "in progress elsewhere"),
            ("store_busy", "waiting for the store"),
            ("failed", "failed hard"),
            ("invalid", "invalid"),
            ("dead", "dead-lettered"),
            ("published", "published"),
            ("publish_failed", "not published (see above)"),
            ("chats_deleted", "chat(s) of earlier articles deleted"),
        ):
            if c[key]:
                parts.append(f"{c[key]} {label}")
        browser = "browser used" if self.browser_used else "no browser"
        line = f"cycle: {', '.join(parts)} ({browser}, {self.seconds:.1f} s, exit {self.exit_code})"
        return line + (f"; {self.logged_out_notice()}" if self.logged_out else "")

    def logged_out_notice(self) -> str:
        """The chat's login ran out: said plainly, since the router hides it (the cycle exits 0)."""
        routed = len(self.routed_logged_out)
        left = len(self.logged_out) - routed
        what = [f"the router wrote {routed} article(s) instead"] if routed else []
        what += [f"{left} article(s) could not be written"] if left else []
        return f"the chat is logged out: {' and '.join(what)}; run `qwenpipe login`"


def run_cycle(
    workspace: Workspace,
    engines: Engines,
    *,
    say: Callable[[str], None] = lambda _m: None,
    clock: Callable[[], float] = time.time,
) -> CycleReport:
    """One cron cycle under the cycle lock (none when another holds it: report.busy_owner):
    sync a shared batch, plan which articles to step and from which accounts, step them (polls
    in threads, sends one at a time), then publish what finished, alert and write the metrics.
    The report says what it did; nothing here raises for an article (each outcome is counted)."""
    report = CycleReport()
    try:
        lock = FileLock(workspace.cycle_lock, purpose="cycle").acquire()
    except LockBusy as busy:
        report.busy_owner = busy.owner
        return report
    started, began = time.monotonic(), clock()
    launched_before = engines.browser_launches  # engines may outlive a cycle: this cycle's is the rise
    previous = _previous_record(workspace)
    stopped: BaseException | None = None  # what stopped the cycle early, for last_cycle.json
    late: StoreBusy | None = None  # the store failed only at the end (the cycle_end step)
    try:
        files.ensure_folder(workspace.articles_dir)
        for folder in (workspace.state_dir / "state", workspace.state_dir / "locks"):
            files.ensure_folder(folder)  # real folders, not links: refused before anything is read
        for folder in (workspace.state_dir, workspace.state_dir / "state"):
            files.clean_stale_temporaries(folder)  # what killed writers left (never a finished file)
        make_private(workspace.articles_dir)  # what an older version wrote 0644
        _record_cycle(
            workspace,
            {
                "started": clock(),
                "pid": os.getpid(),
                "host": os.uname().nodename,
                **_logged_out_record(previous, None),
                **_store_carried(previous),
            },
        )
        workspace.journal.append(NO_ARTICLE, "cycle_start")
        if shared_batch(workspace.config):  # this host's articles/ from the batch's rows first
            report.synced = sync(
                workspace.store,
                workspace.articles_dir,
                workspace.config.store.host,
                workspace.this_host_store,
            )
            if report.synced.articles or report.synced.urls or report.synced.uploaded:
                say(report.synced.line())
            serve(workspace, clock(), again=True)
        leftovers: list[str] = []  # articles/ is listed once: for the scan and for this sweep
        views = scan(workspace.prompts_dir, workspace.articles_dir, leftovers)
        files.clean_stale_temporaries(workspace.articles_dir, names=leftovers)
        attach_records(views, workspace.state_dir, workspace.store)
        polls, sends = plan(workspace, views, report, clock())
        for problem in report.problems:
            say(problem)
        # Every send of this cycle counts, a multi-turn prompt's later turns (sent by polls) too.
        budget = SendBudget(int(workspace.config.qwen.max_sends_per_cycle))
        steps = CycleSteps(workspace, engines, report, say, clock, budget)
        with ExitStack() as sharing:
            shared = _share_browser(workspace, engines, polls, sends, sharing, say, clock())
            for view in _poll_concurrently(steps, shared, polls):
                steps.run_article(view)
            for view in _send_concurrently(steps, shared, sends):
                steps.run_article(view)
        # Chats of articles finished before this cycle whose delete failed (qwen.delete_chats).
        deleted = cleanup.retry_pending(workspace, engines, clock=clock, say=say, before=began)
        report.counts["chats_deleted"] += deleted
        _publish(workspace, views, report, say)
        report.browser_used = engines.chat_started
        report.browser_launches = engines.browser_launches - launched_before
    except BaseException as error:
        stopped = error
        raise
    finally:
        report.seconds = time.monotonic() - started
        if not isinstance(stopped, StoreBusy):  # else not asked again (unreachable: its timeout)
            try:
                workspace.journal.append(
                    NO_ARTICLE,
                    "cycle_end",
                    exit_code=report.exit_code,
                    summary=report.summary(),
                    browser=report.browser_used,
                    browser_launches=report.browser_launches,
                    duration=round(report.seconds, 3),
                )
            except StoreBusy as busy:  # the record below still says how the cycle ended
                if stopped is None:
                    stopped = late = busy
        try:
            _record_cycle(
                workspace,
                {
                    "started": clock() - report.seconds,
                    "finished": clock(),
                    "pid": os.getpid(),
                    "host": os.uname().nodename,
                    **_ending(report, stopped),
                    **_logged_out_record(previous, report),
                    **_store_record(previous, stopped, clock()),
                },
            )
            _tell(workspace, report, stopped, clock(), say)
        finally:
            lock.release()
    if late is not None:
        raise late
    return report


def _tell(
    workspace: Workspace,
    report: CycleReport,
    stopped: BaseException | None,
    now: float,
    say: Callable[[str], None],
) -> None:
    """After the cycle is recorded: what needs a person told ([notify] urls) and the numbers
    written ([metrics] textfile). Never the cycle's failure, nor for long: each says what went
    wrong, and the next cycle tries again. Nothing at all when neither is set."""
    config = workspace.config
    textfile = config.metrics.textfile
    if isinstance(stopped, KeyboardInterrupt) or not (config.notify.urls or textfile):
        return
    from . import alerts, metrics
    from .status import collect

    try:
        status = collect(workspace, now)
    except Exception as err:  # the store held, a folder gone: the next cycle tells it
        say(f"cycle: nothing notified or measured: the batch cannot be read ({first_line(err)})")
        return
    pending = 0
    if config.notify.urls:
        try:
            # The journal's times are the wall clock's: the first read starts at this cycle's start.
            since = time.time() - report.seconds - 1
            pending = alerts.tell(workspace, status, since=since, now=now, say=say)
        except Exception as err:
            say(f"notify: not sent ({first_line(err)}); the next cycle tries again")
    if textfile:
        ending = _ending(report, stopped)
        data = metrics.render(
            status, exit_code=ending["exit_code"], seconds=report.seconds, finished=now, pending=pending
        )
        try:
            metrics.write(config.resolve(textfile), data)
        except (OSError, SetupProblem) as err:
            say(f"metrics: {textfile} not written ({first_line(err)}); the next cycle writes it again")


def _ending(report: CycleReport, stopped: BaseException | None) -> dict:
    """The exit code and summary last_cycle.json keeps: the report's, or, for a cycle stopped
    early, the code its command exits with (the store: 3; Ctrl-C: 130; anything else: 1)."""
    if stopped is None:
        return {"exit_code": report.exit_code, "summary": report.summary()}
    if isinstance(stopped, StoreBusy):
        code = ExitCode.WORKING
    elif isinstance(stopped, KeyboardInterrupt):
        code = ExitCode.INTERRUPTED
    else:
        code = ExitCode.FAILED
    return {"exit_code": int(code), "summary": f"cycle: stopped early: {first_line(stopped)}"}


def _store_carried(previous: dict) -> dict:
    """While a cycle runs, what the last one said of the store stays (status shows it)."""
    return {k: previous[k] for k in ("store_failures", "store_failing_since", "store_error") if k in previous}


def _store_record(previous: dict, stopped: BaseException | None, now: float) -> dict:
    """What last_cycle.json says of the store: the cycles in a row it stopped (unreachable, or
    held), since when and its words; all cleared by a cycle that got through."""
    if not isinstance(stopped, StoreBusy):
        return {"store_failures": 0}
    count = previous.get("store_failures")
    count = count if isinstance(count, int) and count > 0 else 0
    since = previous.get("store_failing_since") if count else None
    return {
        "store_failures": count + 1,
        "store_failing_since": since if isinstance(since, (int, float)) else now,
        "store_error": first_line(stopped),
    }


def plan(
    workspace: Workspace, views: list[ArticleView], report: CycleReport, now: float
) -> tuple[list[ArticleView], list[ArticleView]]:
    """(articles to poll, articles to send), counting everything else into the report.

    Each article's next action is phases.decide's; the sends planned so far count against
    the send limits of the ones after them (oldest prompt first)."""
    qwen = workspace.config.qwen
    able = capacity(standings(workspace, now, {}))  # what the accounts can take, together
    per_cycle = int(qwen.max_sends_per_cycle)
    if shared_batch(workspace.config):  # other hosts may take some of the planned ones first: the
        per_cycle *= SHARED_PLAN_SLACK  # cycle's budget still sends at most max_sends_per_cycle
    # While the chat's quota is spent, "sending" means the router: no chat limits.
    limits = send_limits(
        engine_limits(workspace.config),
        able,
        per_day=int(qwen.max_sends_per_day),
        sends_today=lambda: sends_today(workspace.journal, now, host_accounts(workspace.config)),
        per_cycle=per_cycle,
    )
    senders = workspace.store.first_sends()
    shared = shared_batch(workspace.config)
    served = workspace.store.served() if shared else {}
    # A shared batch: articles another host holds are its (planned around, not stepped into).
    host = workspace.config.store.host
    held = (
        {s for s, lease in workspace.store.leases(now).items() if host_of(lease.owner) != host}
        if shared
        else set()
    )
    polls, sends = [], []
    counted, planned = limits, 0  # the limits, counting the sends planned so far
    counts = report.counts
    # The settled articles (most of a batch: 100,000 finished ones) are tallied by phase here
    # and counted once below: a call and a count per article was a third of a no-op plan.
    tally: Counter = Counter()
    for view in views:
        settles = settled(view.seen())
        if settles is not None:  # done, dead, an orphan, invalid: nothing moves it; counted
            if settles.phase is Phase.INVALID:
                _count_invalid(report, view)
            else:
                tally[settles.phase] += 1
            continue
        if view.slug in held:
            counts["working"] += 1  # in progress on another host
            continue
        record = Record.of(view.record)  # a state file in an unusable form makes it alone invalid
        if planned != len(sends):
            planned = len(sends)
            counted = limits._replace(sends_today=limits.sends_today + planned, cycle_sends=planned)
            if able.left is not None and planned >= able.left and not counted.account_off:
                counted = counted._replace(account_off=ACCOUNTS_SPENT)
        decision = decide(
            facts(
                workspace,
                view.seen(),
                record,
                counted,
                now,
                sender=_sender(view, senders, now),
                served=served,
                planning=True,
            )
        )
        if decision.replan:
            _replan(workspace.store, view, qwen, now)
        action, reason = decision.action, decision.reason
        if action is Action.NOTHING:  # reading its record found its old state file unusable
            _count_settled(report, view, decision)
        elif action in (Action.POLL, Action.RECOVER):
            polls.append(view)
        elif action in (Action.SEND, Action.FALL_BACK) or reason is Reason.QUOTA:
            if view.check_prompt(
                workspace.prompts_dir, qwen.max_prompt_bytes
            ):  # only now: a bad prompt takes no send slot
                sends.append(view)  # one waiting for the quota too: its step says until when
            else:
                _count_invalid(report, view)
        else:
            counts[REASON_BUCKETS[reason]] += 1
    for phase, many in tally.items():
        if phase in PHASE_BUCKETS:  # an orphan is counted in none
            counts[PHASE_BUCKETS[phase]] += many
    return polls, sends


def _sender(view: ArticleView, senders: dict, now: float) -> Callable[[], tuple[str, float]]:
    """The account an article's chat is on and when its send was recorded (facts.facts' sender)."""

    def sender() -> tuple[str, float]:
        first = senders.get(view.slug)
        return sender_of(view, first, may_have_marker=view.sending), first.intent_at if first else now

    return sender


def _count_settled(report: CycleReport, view: ArticleView, decision: Decision) -> None:
    """Count an article nothing moves: its phase's bucket (an orphan in none); an invalid one
    is also named, with its problem."""
    if decision.phase is Phase.INVALID:
        _count_invalid(report, view)
    elif decision.phase is not Phase.ORPHAN:
        report.counts[PHASE_BUCKETS[decision.phase]] += 1


def _count_invalid(report: CycleReport, view: ArticleView) -> None:
    report.invalid.append(view.slug)
    report.problems.append(invalid_line(view))
    report.counts["invalid"] += 1


SHARED_PLAN_SLACK = 3  # a shared batch plans this many times qwen.max_sends_per_cycle sends
ACCOUNTS_SPENT = "every account reached its own daily limit (max_sends_per_day in its [accounts.NAME])"

# The report's buckets: an article's phase when no step moves it, else why it waits (the
# plan's decision, or the Outcome.reason of its step).
PHASE_BUCKETS = {Phase.DONE: "done", Phase.DEAD: "dead", Phase.INVALID: "invalid"}
REASON_BUCKETS = {
    Reason.LOCKED: "working",
    Reason.BACKOFF: "backoff",
    Reason.IN_DOUBT: "backoff",
    Reason.SPACING: "waiting",
    Reason.QUOTA: "throttled",
    Reason.LIMIT: "throttled",
    Reason.ACCOUNT: "throttled",
    Reason.ORPHANED: "throttled",
    Reason.ELSEWHERE: "working",
    Reason.GENERATING: "generating",
    Reason.STORE_BUSY: "store_busy",
}


def invalid_line(view: ArticleView) -> str:
    """The line that names an invalid article: a bad prompt, or one of its own files."""
    if view.file_problem:
        return f"{view.slug}: skipped: {view.file_problem}"
    return f"invalid prompt: {view.problem or view.slug}"


def _replan(store: Store, view: ArticleView, qwen: Qwen, now: float) -> None:
    """Save the times `schedule` pulled in after the clock moved back, under the article's lock;
    when another process holds it, that one saves them (its contract follows the same rule)."""
    try:
        lock = FileLock(view.files.lock, purpose="cycle: re-plan after a clock jump").acquire()
    except LockBusy:
        return
    try:
        state = ArticleState.load(store, view.files)
        planned = schedule(state, qwen.poll_interval, now, spaced=False)
        if planned.replanned:
            planned.apply_to(state)
            state.save(store, view.slug)
    finally:
        lock.release()


def _share_browser(
    workspace: Workspace,
    engines: Engines,
    polls: list[ArticleView],
    sends: list[ArticleView],
    sharing: ExitStack,
    say: Callable[[str], None],
    now: float,
) -> dict[str, Callable[[], ChatEngine] | None]:
    """Each account's shared session (its factory of engines for other threads) where its polls
    or sends are to go side by side; None where sharing failed (said in one line; each
    article's own step then reports what stops it).

    Entered before anything else starts the browser: sharing needs it started for that. Sends
    go side by side only with one account: which account sends is rotation's choice, made in
    each send's own step."""
    qwen = workspace.config.qwen
    wanted: dict[str, str] = {}
    if int(qwen.concurrency) > 1:
        for account, group in _by_sender(workspace, polls).items():
            if _two_or_more(group, workspace):
                wanted[account] = "polling one chat"
    if (
        int(qwen.send_concurrency) > 1
        and len(sends) >= 2
        and not several(workspace.config)
        and not workspace.chat_quota.blocked_until(now)  # then "sending" is the router's: no browser
    ):
        wanted.setdefault(all_accounts(workspace.config)[0].name, "sending one prompt")
    shared: dict[str, Callable[[], ChatEngine] | None] = {}
    for account, what in wanted.items():
        try:
            shared[account] = sharing.enter_context(engines.chat(account).shared_session())
        except Exception as err:  # a busy profile, no browser...: each article's step reports it
            whose = "" if account == DEFAULT_ACCOUNT else f" (account {account})"
            say(f"cycle: {what} at a time{whose} ({first_line(err)})")
            shared[account] = None
    return shared


@dataclass(frozen=True)
class CycleSteps:
    """What the cycle steps each article with: one per cycle, and a copy per poll thread (its
    own engines, its messages and counts under the threads' guard)."""

    workspace: Workspace
    engines: Engines
    report: CycleReport
    say: Callable[[str], None]
    clock: Callable[[], float]
    budget: SendBudget
    guard: threading.Lock | None = None  # the poll threads' lock on the report and the messages

    def run_article(self, view: ArticleView) -> None:
        from ..contract.step import generate  # a no-op cycle steps nothing: not loaded for it

        slug, report, say = view.slug, self.report, self.say
        try:
            outcome = generate(
                self.workspace, slug, self.engines, say=say, clock=self.clock, budget=self.budget
            )
        except (UsageProblem, SetupProblem) as problem:  # this article's own problem: the rest go on
            with self.guard or nullcontext():
                report.invalid.append(slug)
                report.counts[PHASE_BUCKETS[Phase.INVALID]] += 1
            say(f"{slug}: skipped: {problem}")
            return
        say(outcome.message)
        with self.guard or nullcontext():
            _count(report, slug, outcome)


def _poll_concurrently(
    steps: CycleSteps, shared: dict[str, Callable[[], ChatEngine] | None], polls: list[ArticleView]
) -> list[ArticleView]:
    """For each account: collect what its chat engine can collect at once (`_collect_first`),
    then poll what can be polled side by side (given its shared session); return the polls left
    for the sequential loop. Each account's chats are looked at by engines of that account alone.

    Side by side: sent chats (a URL exists), up to `qwen.concurrency` at once, in pages of the
    cycle's one browser. Left sequential: interrupted sends (their recovery may send) and, under
    a daily send limit, multi-turn prompts (a poll may send their next turn, and the limit is
    checked before sending: two threads could both pass it).
    """
    workspace = steps.workspace
    concurrency = int(workspace.config.qwen.concurrency)
    for account, group in _by_sender(workspace, polls).items():
        left = _collect_first(steps, account, group)
        decided = {view.slug for view in group} - {view.slug for view in left}
        polls = [view for view in polls if view.slug not in decided]
        attach = shared.get(account)
        side_by_side = [view for view in left if concurrency > 1 and _may_poll_side_by_side(workspace, view)]
        if attach is None or len(side_by_side) < 2:
            continue  # the sequential loop polls them
        workers = min(concurrency, len(side_by_side))
        polls = _poll_side_by_side(steps, attach, workers, polls, side_by_side, account)
    return polls


def _send_concurrently(
    steps: CycleSteps, shared: dict[str, Callable[[], ChatEngine] | None], sends: list[ArticleView]
) -> list[ArticleView]:
    """Send up to `qwen.send_concurrency` prompts at once, each in a tab of its own thread's
    engine; return the sends left for the sequential loop. Each send is the contract's, as one
    at a time: under the article's lock, its intent marker on disk before the click, its place
    in the cycle's budget taken first; the plan already kept the sends within the daily limit.
    One account only (see _share_browser)."""
    config = steps.workspace.config
    level = int(config.qwen.send_concurrency)
    if level < 2 or len(sends) < 2 or several(config):
        return sends
    account = all_accounts(config)[0].name
    attach = shared.get(account)
    if attach is None:
        return sends
    return _poll_side_by_side(steps, attach, min(level, len(sends)), sends, sends, account)


def _by_sender(workspace: Workspace, views: list[ArticleView]) -> dict[str, list[ArticleView]]:
    """The articles by the account that sent each (the only one that may look at its chat)."""
    senders = workspace.store.first_sends()
    groups: dict[str, list[ArticleView]] = {}
    for view in views:
        groups.setdefault(sender_of(view.files, senders.get(view.slug)), []).append(view)
    return groups


def _poll_side_by_side(
    steps: CycleSteps,
    attach: Callable[[], ChatEngine],
    workers: int,
    polls: list[ArticleView],
    side_by_side: list[ArticleView],
    account: str = DEFAULT_ACCOUNT,
) -> list[ArticleView]:
    """Poll `side_by_side` (`account`'s chats) with `workers` threads, each with the chat engine of
    that account `attach` makes."""
    from concurrent.futures import ThreadPoolExecutor, wait  # with logging: only when polls run
    from queue import Empty, SimpleQueue

    todo: SimpleQueue[ArticleView] = SimpleQueue()
    for view in side_by_side:
        todo.put(view)
    guard = threading.Lock()
    stop = threading.Event()  # set when the main thread is interrupted: take no more articles
    failures: list[str] = []

    def locked_say(message: str) -> None:
        with guard:
            steps.say(message)

    def worker() -> None:
        # Engines (for qwen: a Playwright driver) of this thread, closed in this thread: Playwright
        # objects belong to the thread that made them.
        engines = steps.engines
        mine = Engines(
            engines.config,
            chat_factory=lambda _config: attach(),
            router_factory=engines.router_factory,
            on_noticed=engines.on_noticed,  # what its pages met after their steps: the run's
        )
        own = replace(steps, engines=mine, say=locked_say, guard=guard)
        try:
            try:
                mine.chat(account).prepare()  # attach before taking any article
            except Exception as err:
                with guard:
                    failures.append(first_line(err))
                return  # its articles stay queued: another worker, or the sequential loop, takes them
            while not stop.is_set():
                try:
                    view = todo.get_nowait()
                except Empty:
                    return
                own.run_article(view)
        finally:
            mine.close()

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="qwenpipe-poll") as pool:
        futures = [pool.submit(worker) for _ in range(workers)]
        try:
            wait(futures)
        except BaseException:  # Ctrl-C: let the looks under way finish, start none
            stop.set()
            raise
    for future in futures:
        future.result()  # an unexpected error fails the cycle as it would have sequentially
    left = set()
    while True:
        try:
            left.add(todo.get_nowait().slug)
        except Empty:
            break
    if failures:
        steps.say(f"cycle: {len(failures)} of {workers} poll threads could not attach ({failures[0]})")
    chosen = {view.slug for view in side_by_side} - left
    return [view for view in polls if view.slug not in chosen]


def _collect_first(steps: CycleSteps, account: str, polls: list[ArticleView]) -> list[ArticleView]:
    """Let `account`'s chat engine look at every one of its sent one-turn chats at once
    (`collect`: for qwen, their JSON through one page), step each article it decided through the
    contract as it is decided (the engine reads the others meanwhile), and return the polls
    left: those it could not decide look at their own pages."""
    engines = steps.engines
    urls: dict[str, ArticleView] = {}
    deleted = cleanup.deleted_urls(steps.workspace.store) if polls else set()
    for view in polls:
        url = _collectable_url(steps.workspace, view)
        if url is not None and url not in deleted:  # a deleted chat is never read: its step says so
            urls[url] = view
    if not urls:
        return polls
    results: dict = {}
    collected = Engines(
        engines.config,
        chat_factory=lambda _config: CollectedChat(engines.chat(account), results),
        router_factory=lambda _config: engines.router(),
    )  # owns nothing: never closed
    collecting = replace(steps, engines=collected)
    stepped: set[str] = set()
    decided = None
    try:
        while True:
            try:  # the collect's own failures only: a step's are the cycle's, as everywhere else
                decided = decided or iter(engines.chat(account).collect(list(urls)))
                url, result = next(decided)
            except StopIteration:
                break
            except Exception as err:  # the chat's page failed: every chat left has its own page say how
                journal_unknown(steps.workspace.journal, NO_ARTICLE, account, err)  # no step's: the cycle's
                steps.say(f"cycle: looking at each chat's page ({first_line(err)})")
                break
            progress = getattr(result, "progress", None)
            if progress and progress.startswith("writing") and progress == urls[url].state.progress:
                continue  # its answer did not grow since the last look: a stall only its page shows
            results[url] = result
            stepped.add(urls[url].slug)
            collecting.run_article(urls[url])
    finally:
        close = getattr(decided, "close", None)
        if close is not None:
            close()  # the collect's page, when it stopped early
        # What the collect's page met and no step took (each decided chat's step takes what was
        # met before it; the collect is no step's call: contract/unknown.py's JournalledChat is
        # not around it): journalled as the cycle's. Fuzz seed 1300 trial 162: the chat list
        # the page loaded answered HTML 503 and the collect failed before any chat was decided.
        for found in engines.chat(account).noticed():
            journal_noticed(steps.workspace.journal, NO_ARTICLE, account, found)
    return [view for view in polls if view.slug not in stepped]


def _collectable_url(workspace: Workspace, view: ArticleView) -> str | None:
    """A sent one-turn article's chat URL (a later turn's send is the poll's: not collected)."""
    if view.phase is not Phase.GENERATING:
        return None
    try:
        if len(load_prompt(workspace.prompts_dir, view.slug).turns) != 1:
            return None
        return read_chat_url(view.files, workspace.config.qwen.base_url)
    except Exception:
        return None  # its own step reports a bad prompt or sidecar


class CollectedChat:
    """The chat engine as a step sees it after a collect: `check` of a collected chat answers what
    the collect read (once); everything else, other chats included, is the engine's own."""

    launches = 0  # the cycle's engines count the engine's

    def __init__(self, engine: ChatEngine, results: dict):
        self._engine, self._results = engine, results

    def check(self, chat_url: str):
        result = self._results.pop(chat_url, None)
        return result if result is not None else self._engine.check(chat_url)

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def close(self) -> None:
        pass  # the cycle's engines close the engine


def _two_or_more(polls: list[ArticleView], workspace: Workspace) -> bool:
    """Whether two or more of `polls` may be polled side by side (stops counting at two)."""
    side_by_side = (view for view in polls if _may_poll_side_by_side(workspace, view))
    return next(side_by_side, None) is not None and next(side_by_side, None) is not None


def _may_poll_side_by_side(workspace: Workspace, view: ArticleView) -> bool:
    if view.phase is not Phase.GENERATING:
        return False
    if not workspace.config.qwen.max_sends_per_day:
        return True
    try:
        return len(load_prompt(workspace.prompts_dir, view.slug).turns) == 1
    except Exception:
        return False  # the sequential loop reports a bad prompt


def _count(report: CycleReport, slug: str, outcome) -> None:
    from ..contract.step import Status

    if outcome.chat_error == Code.LOGGED_OUT:
        report.logged_out.append(slug)
        if outcome.status is Status.DONE and outcome.engine == "router":
            report.routed_logged_out.append(slug)
    elif outcome.sent or outcome.reason is Reason.GENERATING or outcome.engine == "qwen":
        report.chat_worked = True
    if outcome.status is Status.DONE:
        report.finished.append(slug)
        report.counts["finished"] += 1
        report.counts["done"] += 1
    elif outcome.status is Status.QUEUED:
        report.sent.append(slug)
        report.counts["sent"] += 1
    elif outcome.status is Status.FAILED:
        report.failed.append(slug)
        report.counts["failed"] += 1
    else:
        report.counts[REASON_BUCKETS.get(outcome.reason, "generating")] += 1


def _publish(workspace: Workspace, views: list[ArticleView], report: CycleReport, say) -> None:
    """After the steps: the done articles to publish.dir (when set). Publishing is a step after
    done: its failures are counted and said, never the cycle's exit code or the article's fate."""
    if workspace.config.publish_dir is None:
        return  # off, as in most cron cycles: its module (subprocess, hashing) is not loaded
    from ..publishing.publish import after_cycle, publish_done

    # A generator: each article's mtime is read only when publishing is on and asks for it.
    done = ((v.slug, v.done_mtime) for v in views if v.done and not v.file_problem)
    finished = ((slug, None) for slug in report.finished)
    for result in publish_done(workspace, itertools.chain(done, finished), say=say):
        if result.status == "published":
            report.counts["published"] += 1
        elif result.failed:
            report.counts["publish_failed"] += 1
    ran = after_cycle(workspace, report.counts["published"], say=say)  # once: e.g. commit and push
    if ran is not None and ran.failed:
        report.counts["publish_failed"] += 1


def _record_cycle(workspace: Workspace, record: dict) -> None:
    """last_cycle.json, for `status` and the next cycle's login verdict. Written twice a cycle,
    without fsync (four of them were a tenth of a no-op cycle's time): a power cut may leave
    the older record or none, which only makes the next cycle look at the chat again."""
    files.atomic_write(workspace.state_dir / "last_cycle.json", json.dumps(record), sync=False)


def _logged_out_record(previous: dict, report: CycleReport | None) -> dict:
    """What last_cycle.json says about the chat's login, for `status`: logged out since some
    cycle, and how many articles the router wrote since. A cycle that never reached the chat
    (nothing to do) carries the last verdict forward; one that worked with the chat clears it."""
    was = bool(previous.get("chat_logged_out"))
    routed = previous.get("routed_while_logged_out") if was else 0
    routed = routed if isinstance(routed, int) and routed >= 0 else 0
    if report is None or not (report.logged_out or report.chat_worked):
        return {"chat_logged_out": was, "routed_while_logged_out": routed}
    if report.logged_out:
        return {"chat_logged_out": True, "routed_while_logged_out": routed + len(report.routed_logged_out)}
    return {"chat_logged_out": False, "routed_while_logged_out": 0}


def store_failures(workspace: Workspace) -> int:
    """The cycles in a row the store stopped, as last_cycle.json says (0: the last got through)."""
    count = _previous_record(workspace).get("store_failures")
    return count if isinstance(count, int) and count > 0 else 0


def _previous_record(workspace: Workspace) -> dict:
    try:
        data = json.loads((workspace.state_dir / "last_cycle.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
