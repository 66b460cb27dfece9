"""The generate contract: move one article one step, never sending its prompt twice.

    SLUG.md exists            -> done
    SLUG.md.url exists        -> look at the chat: complete -> write SLUG.md; else still working
    SLUG.md.sending, no URL   -> a send may have happened: find the chat by its prompt first
    neither                   -> write the marker, send, write SLUG.md.url: queued
    hard failure              -> the router writes SLUG.md, else failed (dead letter after
                                 qwen.max_attempts of them)

All of it under the article's flock; another holder means "working elsewhere", never a wait.
The step is a loop: phases.decide says what the article's next action is, that action's handler
does it and ends the step (an Outcome) or hands the loop what comes next (moves.py). Which
handler takes each action and each move: handlers.py, one table. Handlers never call one
another: each module here is one handler and the helpers only it uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from ...accounts import account_named
from ...crashpoints import crashpoint
from ...engines.base import EngineBusy, HardError, TransientError
from ...files import FileLock, LockBusy
from ...store.protocol import LeaseLost, StoreBusy
from .. import cleanup, hosts
from ..article import ArticleFiles, ArticleState, read_chat_url
from ..facts import engine_limits, facts, send_limits
from ..phases import Action, Decision, Failure, Files, Reason, Record, backoff_delay, decide
from ..prompts import Prompt, check_request_size, check_slug, load_prompt
from ..quota import SendBudget, host_accounts, sends_today
from ..rotation import capacity, standings
from ..workspace import Engines, Workspace
from .adoption import RECOVERY_CLOCK_SLACK, adoptable_chat, chats_in_batch, chats_of_other_articles
from .context import Context, Outcome, Status, wait_words
from .handlers import handler_of
from .moves import Ask, Busy, Hard, Move, Transient
from .replay import replay

__all__ = [
    "RECOVERY_CLOCK_SLACK",
    "Outcome",
    "Status",
    "Step",
    "adoptable_chat",
    "backoff_delay",
    "chats_in_batch",
    "chats_of_other_articles",
    "crashpoint",
    "generate",
    "replay",
    "wait_limit",
    "wait_words",
]

# A failure the step meets (raised by an engine, or by the checks of its answer), as a move.
FAILURES = ((EngineBusy, Busy), (TransientError, Transient), (HardError, Hard))


def _quiet(_message: str) -> None:
    pass


# What a by-hand `generate --wait` keeps going through: a transient failure (after its backoff)
# and an answer still being written when answer_timeout ran out. Anything else is final.
WAIT_AGAIN = (str(Reason.BACKOFF), str(Reason.GENERATING), str(Reason.SPACING))
WAIT_MARGIN_SECONDS = 30  # a --wait stops trying this long before its watchdog would stop it


def wait_limit(qwen) -> float:
    """How long a `generate --wait` may run in all (its watchdog's limit): qwen.run_timeout, and
    at least one whole answer_timeout with room to write the article."""
    return max(qwen.run_timeout, qwen.answer_timeout + 300)


def generate(
    workspace: Workspace,
    slug: str,
    engines: Engines,
    *,
    wait: bool = False,
    engine: str = "auto",
    say: Callable[[str], None] = _quiet,
    clock: Callable[[], float] = time.time,
    budget: SendBudget | None = None,
    account: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Run the contract for `slug`: once, or with `wait` (by hand) again after each transient
    failure's backoff until the article is done, fails hard, or wait_limit runs out (then the
    WORKING outcome says so: the next run goes on). Raises UsageProblem (exit 2) before writing
    anything."""
    started = clock()
    while True:
        outcome = _generate_once(
            workspace,
            slug,
            engines,
            wait=wait,
            engine=engine,
            say=say,
            clock=clock,
            budget=budget,
            account=account,
        )
        if not (wait and outcome.status is Status.WORKING and outcome.reason in WAIT_AGAIN):
            return outcome
        state, now = ArticleState.load(workspace.store, workspace.article(slug)), clock()
        if outcome.reason == Reason.BACKOFF:
            due = state.next_try or now
        elif outcome.reason == Reason.SPACING:
            due = (state.last_poll or now) + workspace.config.qwen.poll_interval
        else:
            due = now  # the answer is still being written: look again at once
        delay = max(0.0, due - now)
        if clock() + delay > started + wait_limit(workspace.config.qwen) - WAIT_MARGIN_SECONDS:
            return replace(
                outcome,
                message=f"{outcome.message}; stopped waiting (qwen.run_timeout): "
                "the next run goes on from here",
            )
        say(f"{outcome.message}; --wait tries again {wait_words(delay)}")
        sleep(delay)


def _generate_once(
    workspace: Workspace,
    slug: str,
    engines: Engines,
    *,
    wait: bool,
    engine: str,
    say: Callable[[str], None],
    clock: Callable[[], float],
    budget: SendBudget | None,
    account: str | None,
) -> Outcome:
    """Run the contract once for `slug`. Raises UsageProblem (exit 2) before writing anything.

    `budget`: the cycle's sends to the chat (every turn counts); None by hand. `account`: the
    one account a first send may go to (ConfigError, exit 2, naming the accounts, when there is
    no such account); a chat already sent stays on its own account whatever is asked."""
    check_slug(slug)
    if account is not None:
        account_named(workspace.config, account)
    article = workspace.article(slug)
    article.check()  # a symlink, FIFO or folder among its files: refused before anything is read
    if article.md.exists():  # its chat's pending delete (qwen.delete_chats) is tried again, never failing it
        cleanup.retry_pending(workspace, engines, clock=clock, say=say, slug=slug)
        return Outcome(Status.DONE, slug, f"{article.md} is already done")
    workspace.check_journal()  # before any marker or send: every step must be logged
    prompt = load_prompt(workspace.prompts_dir, slug)
    sent = read_chat_url(article, workspace.config.qwen.base_url)  # a bad sidecar: refused before locking
    if engine != "router":  # the turns still to be sent (the first is, once its chat is known)
        check_request_size(prompt, workspace.config.qwen.max_prompt_bytes, first_turn=2 if sent else 1)
    try:
        lock = FileLock(article.lock, purpose=f"generate {slug}").acquire()
    except LockBusy as busy:
        return Outcome(
            Status.WORKING, slug, f"{slug} is in progress elsewhere ({busy.owner})", reason=Reason.LOCKED
        )
    lease = None
    try:
        if hosts.shared_batch(workspace.config):  # the batch's rows first; then this host's lease
            store, host = workspace.store, workspace.config.store.host
            hosts.sync_article(store, article, host, workspace.this_host_store)
            if article.md.exists():
                return Outcome(Status.DONE, slug, f"{article.md} is already done (from the batch)")
            lease = hosts.ArticleLease(store, slug, host, workspace.config.store.lease_seconds, clock)
            holder = lease.claim()
            if holder:
                lease = None
                where = hosts.host_of(holder) or holder
                return Outcome(
                    Status.WORKING, slug, f"{slug} is in progress on {where}", reason=Reason.LOCKED
                )
            hosts.serve(workspace, clock())
        step = Step(
            workspace,
            article,
            prompt,
            engines,
            wait=wait,
            choice=engine,
            say=say,
            clock=clock,
            budget=budget,
            account=account,
            lease=lease,
        )
        return step.run()
    except StoreBusy as busy:  # nothing of the step was written, nothing sent after it: try later
        return Outcome(Status.WORKING, slug, f"{slug}: {busy}", reason=Reason.STORE_BUSY)
    except LeaseLost as lost:  # another host took the article over while this one was stopped
        return Outcome(Status.WORKING, slug, str(lost), reason=Reason.LOCKED)
    finally:
        if lease is not None:
            lease.release()
        lock.release()


class Step:
    """One pass of the contract for one article, with the lock held: the loop of decisions and
    their handlers."""

    def __init__(
        self,
        workspace,
        article: ArticleFiles,
        prompt: Prompt,
        engines: Engines,
        *,
        wait: bool,
        choice: str,
        say: Callable[[str], None],
        clock: Callable[[], float],
        budget: SendBudget | None = None,
        account: str | None = None,
        lease: hosts.ArticleLease | None = None,
    ):
        self.context = Context(
            workspace,
            article,
            prompt,
            engines,
            wait=wait,
            choice=choice,
            say=say,
            clock=clock,
            crash=lambda name: crashpoint(name),  # looked up here at each point (the chaos tests')
            budget=budget,
            lease=lease,
            only=(account,) if account else (),
        )

    def run(self) -> Outcome:
        """Decide, hand the decision to its action's handler, and go on with what it hands back
        until one ends the step. An engine's failure becomes a move (Busy, Transient, Hard);
        one met while a failure is being handled is not caught again: it ends the step."""
        move: Move = Ask()
        caught = False
        while True:
            if isinstance(move, Ask):
                move = replace(move, decision=self.decide(move))
            try:
                result = handler_of(move)(self.context, move)
            except (EngineBusy, TransientError, HardError) as err:
                if caught:
                    raise
                caught = True
                result = next(kind(err) for error, kind in FAILURES if isinstance(err, error))
            if isinstance(result, Outcome):
                return result
            move = result

    def decide(self, ask: Ask) -> Decision:
        """What the article's next step is, from its files as they are now (the chat URL is read
        once, and only when the chat is to be used), its record, and, when a send may be next, the
        chat's quota and the send limits. A decision that re-plans its times saves them first."""
        ctx, failure, next_turn = self.context, ask.failure, ask.next_turn
        done, dead = ctx.article.md.exists(), ctx.article.failed.exists()
        seen = Files(done=done, dead=dead)
        if not (done or dead or ctx.choice == "router" or failure is not Failure.NONE):
            if ctx.chat_url is None:
                ctx.chat_url = read_chat_url(ctx.article, ctx.qwen.base_url)
            sending = not ctx.recovered and ctx.article.sending.exists()
            seen = Files(sent=ctx.chat_url is not None, sending=sending)
        elif not (done or dead):
            # A sent chat waits for its account; and a send whose intent marker is still there
            # may be on the site (send.py and intents.unsent take it away only with proof that
            # nothing was sent: a failure before the click, a refusal in words; recovery only
            # when its chat is found or proven never sent): the failure never hands it to the
            # router (phases.decide), whether this step sent it or looked for it.
            sent = failure is Failure.ACCOUNT and ctx.chat_url is not None
            seen = Files(sent=sent, sending=ctx.article.sending.exists())
        wants_send = failure is Failure.NONE and (next_turn or not (seen.sent or seen.sending))
        limits = engine_limits(ctx.ws.config, ctx.choice)
        now = ctx.clock()
        if wants_send and not (done or dead):
            limits = self.send_limits(
                limits, now, ask.budget_spent, (ctx.sender(),) if next_turn else ctx.only
            )

        def sender() -> tuple[str, float]:
            account = ctx.sender()
            return account, ctx.first_send.intent_at if ctx.first_send else now

        decision = decide(
            facts(
                ctx.ws,
                seen,
                Record.of(ctx.state),
                limits,
                now,
                sender=sender,
                wait=ctx.wait,
                next_turn=next_turn,
                failure=failure,
            )
        )
        if decision.replan:
            ctx.state.next_try, ctx.state.last_poll = decision.replan
            ctx.save()
            ctx.say(f"{ctx.slug}: the clock moved back since its last look; its next look is re-planned")
        ctx.recovering = ctx.recovering or decision.action is Action.RECOVER
        return decision

    def send_limits(self, limits, now: float, budget_spent: bool, names: tuple[str, ...]):
        """`limits` with the accounts' quotas and the send counts: read only when a send may be
        next, from the accounts `names` (() = every one). Rotation chooses the account
        (`context.chosen`); when none may send, the limits say why (the site's quota block, or
        `account_off`)."""
        ctx = self.context
        found = standings(ctx.ws, now, ctx.engines.unavailable, names, probed=ctx.engines.probed)
        able = capacity(found, ctx.ws.config.rotation)
        ctx.chosen = able.chosen.name if able.chosen else None
        budget, per_day = ctx.budget, ctx.qwen.max_sends_per_day
        return send_limits(
            limits,
            able,
            skipped=bool(able.off) and ctx.skipped_error(names) is not None,
            per_day=per_day,
            sends_today=lambda: sends_today(ctx.ws.journal, now, host_accounts(ctx.ws.config)),
            per_cycle=budget.limit if budget else 0,
            cycle_sends=budget.limit if budget and budget_spent else (budget.used if budget else 0),
        )
