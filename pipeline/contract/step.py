"""The generate contract: move one article one step, never sending its prompt twice.

    SLUG.md exists            -> done
    SLUG.md.url exists        -> look at the chat: complete -> write SLUG.md; else still working
    SLUG.md.sending, no URL   -> a send may have happened: find the chat by its prompt first
    neither                   -> write the marker, send, write SLUG.md.url: queued
    hard failure              -> the router writes SLUG.md, else failed (dead letter after
                                 qwen.max_attempts of them)

All of it under the article's flock; another holder means "working elsewhere", never a wait.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum
from urllib.parse import urlparse

import tomli_w

from .. import files
from ..crashpoints import crashpoint
from ..engines.base import (
    ACCOUNT_REFUSALS,
    Answer,
    ChatChoice,
    Code,
    EngineBusy,
    EngineError,
    FoundChat,
    Generating,
    HardError,
    QuotaSpent,
    TransientError,
    same_model,
)
from ..errors import UsageProblem
from ..files import FileLock, LockBusy
from ..redact import mask, mask_data
from ..store.protocol import (
    DEFAULT_ACCOUNT,
    AlreadySent,
    ChatDeletion,
    Finished,
    Intent,
    LeaseLost,
    StoreBusy,
)
from . import cleanup, hosts
from .article import ArticleFiles, ArticleState, chat_url, read_chat_url, read_marker
from .checks import Verdict, check_answer, count_words
from .phases import (
    CYCLE_LIMIT,
    DAILY_LIMIT,
    Action,
    Decision,
    Facts,
    Failure,
    Files,
    Limits,
    Phase,
    Reason,
    Record,
    backoff_delay,
    decide,
)
from .prompts import Prompt, check_request_size, check_slug, load_prompt
from .quota import HOLD_CODES, Hold, SendBudget, held_words, host_accounts, screenshot_path, sends_today
from .render import article_body, render_article
from .rotation import capacity, sender_of, standings
from .workspace import Engines, Workspace

RECOVERY_CLOCK_SLACK = 10.0  # s: the site's clock (chat creation times) may run this far behind ours


class Status(Enum):
    """The outcome of one step (what `generate` exits with), not the article's phase: phases.decide
    says where the article is and what the step does; the step ends DONE (phase done), QUEUED
    (it sent), WORKING (it waits: generating, sending, backoff, quota... Outcome.reason says
    which) or FAILED (a hard failure with no engine left, or phase dead)."""

    DONE = "done"
    QUEUED = "queued"  # sent just now
    WORKING = "working"  # still generating, backing off, throttled, or locked elsewhere
    FAILED = "failed"  # hard failure and no fallback (or the fallback failed too)


@dataclass(frozen=True)
class Outcome:
    status: Status
    slug: str
    message: str
    engine: str | None = None
    chat_url: str | None = None
    sent: bool = False  # a prompt went to the chat in this step
    reason: Reason = Reason.NONE  # why WORKING (a StrEnum: its values are the words status shows)
    chat_error: str = ""  # the code of the chat's hard failure in this step (e.g. logged_out), if any
    account: str = ""  # the chat account the article's chat is (or was just sent) on


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
        state, now = ArticleState.load(workspace.article(slug).state), clock()
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
        from ..accounts import account_named

        account_named(workspace.config, account)
    article = workspace.article(slug)
    article.check()  # a symlink, FIFO or folder among its files: refused before anything is read
    if article.md.exists():  # its chat's pending delete (qwen.delete_chats) is tried again, never failing it
        cleanup.retry_pending(workspace, engines, clock=clock, say=say, slug=slug)
        return Outcome(Status.DONE, slug, f"{article.md} is already done")
    workspace.journal.check()  # before any marker or send: every step must be logged
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
            hosts.sync_article(store, article, host)
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
    """One pass of the contract for one article, with the lock held."""

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
        self.ws, self.article, self.prompt, self.engines = workspace, article, prompt, engines
        self.lease = lease  # a shared batch: this host's lease on the article (checked before a send)
        self.wait, self.choice, self.say, self.clock = wait, choice, say, clock
        self.budget = budget
        self.qwen = workspace.config.qwen
        self.state = ArticleState.load(article.state)
        self.chat_url: str | None = None
        self.chat_error = ""
        self.recovered = False  # the intent marker was answered in this step
        # The accounts a first send may go to: the one asked for (--account), or the one an
        # interrupted send went to (its chat may exist there after all); () = rotation's choice.
        self.only: tuple[str, ...] = (account,) if account else ()
        self.chosen: str | None = None  # the account rotation chose for the send being decided
        self.account = ""  # the account the article's chat is on, once known
        self.first_send = None  # its first send in the store, once read (sender())

    # -- the steps ---------------------------------------------------------------------------

    def run(self) -> Outcome:
        try:
            return self.carry_out(self.decide())
        except EngineBusy as busy:
            # Raised by prepare() before any marker or keystroke: nothing to undo.
            self.log("busy", engine="qwen", error=str(busy))
            return self.outcome(Status.WORKING, f"{self.slug}: {busy}", reason=Reason.LOCKED)
        except TransientError as err:
            return self.transient(err)
        except HardError as err:
            return self.hard(err)

    def decide(
        self, *, next_turn: int = 0, failure: Failure = Failure.NONE, budget_spent: bool = False
    ) -> Decision:
        """What the article's next step is, from its files as they are now (the chat URL is read
        once, and only when the chat is to be used), its record, and, when a send may be next, the
        chat's quota and the send limits."""
        done, dead = self.article.md.exists(), self.article.failed.exists()
        seen = Files(done=done, dead=dead)
        if not (done or dead or self.choice == "router" or failure is not Failure.NONE):
            if self.chat_url is None:
                self.chat_url = read_chat_url(self.article, self.qwen.base_url)
            sending = not self.recovered and self.article.sending.exists()
            seen = Files(sent=self.chat_url is not None, sending=sending)
        wants_send = failure is Failure.NONE and (next_turn or not (seen.sent or seen.sending))
        limits = Limits(
            router=bool(self.ws.config.router.enabled),
            engine=self.choice,
            poll_interval=self.qwen.poll_interval,
            max_attempts=self.qwen.max_attempts,
        )
        now = self.clock()
        if wants_send and not (done or dead):
            limits = self.send_limits(limits, now, budget_spent, (self.sender(),) if next_turn else self.only)
        if (seen.sent or seen.sending) and not (done or dead):  # its chat is its account's alone
            sender = self.sender()
            since = self.first_send.intent_at if self.first_send else now
            limits = hosts.chat_limits(self.ws, limits, sender, since, now)
        record = Record.of(self.state)
        return decide(Facts(seen, record, limits, now, wait=self.wait, next_turn=next_turn, failure=failure))

    def send_limits(self, limits: Limits, now: float, budget_spent: bool, names: tuple[str, ...]) -> Limits:
        """`limits` with the accounts' quotas and the send counts: read only when a send may be
        next, from the accounts `names` (() = every one). Rotation chooses the account
        (`self.chosen`); when none may send, the limits say why (the site's quota block, or
        `account_off`). The daily count is read only when the quota lets a send through."""
        able = capacity(standings(self.ws, now, self.engines.unavailable, names))
        self.chosen = able.chosen.name if able.chosen else None
        if able.quota_until is not None:
            return limits._replace(quota_until=able.quota_until, quota_reason=able.quota_reason)
        if able.off and not self.skipped_error(names):
            return limits._replace(account_off=able.off)
        per_day = self.qwen.max_sends_per_day
        budget = self.budget
        return limits._replace(
            max_sends_per_day=per_day,
            sends_today=sends_today(self.ws.journal, now, host_accounts(self.ws.config)) if per_day else 0,
            max_sends_per_cycle=budget.limit if budget else 0,
            cycle_sends=budget.limit if budget and budget_spent else (budget.used if budget else 0),
        )

    def carry_out(self, decision: Decision, what: str = "the prompt") -> Outcome:
        """Do what the decision says; a send first reserves its place in the cycle's budget."""
        if decision.replan:
            self.state.next_try, self.state.last_poll = decision.replan
            self.save()
            self.say(f"{self.slug}: the clock moved back since its last look; its next look is re-planned")
        action = decision.action
        if decision.phase is Phase.DONE:  # finished by another process while we waited for nothing
            return self.outcome(Status.DONE, f"{self.article.md} is already done")
        if decision.phase is Phase.DEAD:
            return self.outcome(
                Status.FAILED,
                f"{self.slug} is dead-lettered ({self.dead_letter_reason()}); "
                f"run `qwenpipe replay {self.slug}` to try again",
            )
        if action is Action.FALL_BACK:
            if decision.reason is Reason.ORPHANED:
                return self.fallback(f"{decision.why}: {hosts.ORPHAN_NOTE}", chat_error=None)
            if decision.reason is Reason.QUOTA:
                return self.fallback(held_words(decision.until, decision.why), chat_error=None)
            return self.fallback(decision.why, chat_error=None)
        if action is Action.WAIT:
            return self.waiting(decision, what)
        if action is Action.RECOVER:
            self.chat_url = self.recover()
            self.recovered = True  # the marker is answered: adopted, or in doubt and sent again
            return self.carry_out(self.decide())
        if action is Action.POLL:
            if cleanup.deleted_chat(self.ws.store, self.slug, self.chat_url):  # never opened again
                raise cleanup.deleted_error(self.chat_url, self.article.url)
            return self.poll()
        assert action is Action.SEND, decision
        if self.budget is not None and not self.budget.take():  # another thread took the last one
            return self.carry_out(self.decide(budget_spent=True), what)
        return self.send()

    def waiting(self, decision: Decision, what: str) -> Outcome:
        """The WORKING outcome of an article that must wait, saying why and until when."""
        until, reason = decision.until, decision.reason
        if reason is Reason.BACKOFF:
            message = f"{self.slug}: retrying after {_clock(until)} (last error: {self.state.last_error})"
        elif reason is Reason.SPACING:
            message = f"{self.slug}: generating; next look {wait_words(until - self.clock())}"
        elif reason in (Reason.ACCOUNT, Reason.ELSEWHERE, Reason.ORPHANED):
            message = f"{self.slug}: waits: {decision.why}"
        elif reason is Reason.QUOTA and Hold("", until, 0.0, decision.why).kind != "quota":
            message = f"{self.slug}: {what} waits: {held_words(until, decision.why)}; no fallback"
        elif reason is Reason.QUOTA:
            spent = f"spent until {_clock(until)}; no fallback"
            message = f"{self.slug}: {what} waits for the chat's quota ({spent})"
        elif decision.why == DAILY_LIMIT:
            message = (
                f"{self.slug}: {what} waits: daily send limit reached "
                f"({self.qwen.max_sends_per_day}, {DAILY_LIMIT})"
            )
        else:
            message = (
                f"{self.slug}: {what} waits for the next cycle: this cycle's send limit is reached "
                f"({self.budget.limit if self.budget else 0}, {CYCLE_LIMIT})"
            )
        return self.outcome(Status.WORKING, message, reason=reason)

    def send(self) -> Outcome:
        """Send the prompt from the account rotation chose; when that account refuses before it
        took anything (logged out, a bot check, its quota answered with no chat), the next one
        is offered it: the send is decided again, without that account."""
        account = self.chosen
        if account is None:  # every account this run found unusable: its refusal stands
            raise self.skipped_error(self.only) or HardError("no chat account may send", code=Code.NO_ACCOUNT)
        self.account = account
        chat = self.engines.chat(account)
        chat.prepare()  # a busy or missing browser stops us before the marker
        now = self.clock()
        self.record_intent(1, account, now)
        # What recovery needs: the chat the send goes into, named before the prompt leaves the
        # browser (name_chat), and what tells its chat from any other without it (adoptable_chat).
        marker = {"time": now, "pid": os.getpid(), "prompt_sha256": self.prompt.sha256, "account": account}
        files.atomic_write(self.article.sending, json.dumps(marker) + "\n")
        self.log(
            "sending",
            engine="qwen",
            account=account,
            attempt=self.state.attempts + 1,
            prompt_sha256=self.prompt.sha256,
        )
        self.say(f"{self.slug}: sending the prompt to the chat (account {account})")
        started = time.monotonic()
        if self.lease is not None:
            self.lease.check()  # still ours just before the click (a host paused past its lease)
        crashpoint("before_send")
        try:
            url = chat.send(self.prompt.turns[0], self.chat_choice(), on_chat_id=self.name_chat(marker))
        except EngineError as err:
            took_nothing = err.nothing_sent or (isinstance(err, QuotaSpent) and self.may_rotate())
            if took_nothing:  # nothing reached the site: nothing to look for, nothing to count
                self.unsent(err)
            if took_nothing and err.code in ACCOUNT_REFUSALS and self.may_rotate():
                return self.next_account(account, err)
            raise
        crashpoint("after_send")
        # The URL is the proof of the send: it goes to disk before anything else happens.
        files.atomic_write(self.article.url, url + "\n")
        files.remove(self.article.sending)
        with self.ws.store.step() as step:
            step.record_sent(self.slug, 1, url, self.clock())
        self.chat_url = url
        self.state.sent_at = self.state.last_poll = self.clock()
        self.state.attempts, self.state.engine, self.state.progress = 0, "qwen", "sent"
        self.state.sent_sha256 = self.prompt.sha256
        self.save()
        self.log("sent", engine="qwen", account=account, chat_url=url, duration=_since(started))
        if self.wait:
            return self.poll()
        return self.outcome(
            Status.QUEUED, f"{self.slug}: sent, the chat is {url} (account {account})", sent=True
        )

    def name_chat(self, marker: dict) -> Callable[[str], None]:
        """What the engine calls with the chat id the page's completion names, before it lets the
        request go: the id goes into the intent marker (atomically, fsynced) and the store's
        intent (with the lease checked, in a shared batch). If this raises, nothing is sent."""

        def named(chat_id: str) -> None:
            chat_url(self.qwen.base_url, chat_id, self.article.sending)  # a chat id we can open later
            files.atomic_write(self.article.sending, json.dumps({**marker, "chat_id": chat_id}) + "\n")
            with self.ws.store.step() as step:
                if self.lease is not None:
                    self.lease.check(step)
                step.name_chat(self.slug, 1, chat_id)
            crashpoint("after_naming")

        return named

    def record_intent(self, turn: int, account: str, now: float) -> None:
        """Record in the store that `turn` is about to be sent from `account`, before the click:
        the store refuses a second send of a turn (AlreadySent). In a shared batch the lease is
        checked in the same transaction, so a host that lost it records nothing and sends nothing."""
        owner = self.lease.owner if self.lease is not None else ""
        with self.ws.store.step() as step:
            if self.lease is not None:
                self.lease.check(step)
            if turn == 1 and self.lease is None:
                step.forget_sends(self.slug)  # an earlier send whose files were deleted, or in doubt
            else:  # only an intent that never got its URL (in doubt: the chat said it never arrived)
                step.withdraw_intent(self.slug, turn)
            chat_id = "" if turn == 1 else None  # a first send names its chat (name_chat)
            intent = Intent(turn, now, self.prompt.sha256, account, os.getpid(), owner, chat_id)
            step.record_intent(self.slug, intent)

    def may_rotate(self) -> bool:
        """Whether a refused first send may go to another account: there are several, and not
        when one was asked for (--account), nor after an interrupted send (its chat may be on
        that account after all)."""
        from ..accounts import several

        return not self.only and several(self.ws.config)

    def next_account(self, account: str, err: EngineError) -> Outcome:
        """`account` refused the prompt before taking it: skip it (its quota block is recorded;
        a login or bot check is skipped for the rest of this run) and decide the send again."""
        if isinstance(err, QuotaSpent):
            until = self.ws.chat_quota.block(self.clock(), err.retry_after, str(err), account=account)
            self.log("quota", engine="qwen", account=account, until=_clock(until), error=str(err))
        elif not self.hold(account, err):  # a held account is left alone by every run, not just this one
            self.engines.unavailable[account] = err
        self.say(f"{self.slug}: account {account} cannot send ({err}); offering it to the next account")
        self.account = ""
        return self.carry_out(self.decide())

    def hold(self, account: str, err: EngineError) -> bool:
        """Hold `account` back from sends when `err` is a bot check (qwen.bot_check_pause hours,
        or until `qwenpipe login --account NAME`) or an empty answer (until local midnight);
        the page the bot check showed is kept in `.qwenpipe/` (0600) for the user to see. The
        journal records it ("hold"). False for any other error (nothing held)."""
        if err.code not in HOLD_CODES:
            return False
        now = self.clock()
        pause = float(self.qwen.bot_check_pause)
        until = self.ws.chat_quota.hold(now, err.code, str(err), account, bot_check_pause=pause)
        shot = None
        if err.screenshot:
            shot = screenshot_path(self.ws.state_dir, account)
            files.atomic_write(shot, err.screenshot)  # PRIVATE: 0600
        hold = self.ws.chat_quota.held(now, account)
        self.log(
            "hold",
            engine="qwen",
            account=account,
            kind=HOLD_CODES[err.code],
            until=_clock(until),
            error=str(err),
            code=err.code,
            screenshot=str(shot) if shot else None,
        )
        self.say(f"{self.slug}: {hold.words() if hold else HOLD_CODES[err.code]}")
        if shot:
            self.say(f"{self.slug}: the page as it was is in {shot}")
        return True

    def skipped_error(self, names: tuple[str, ...]) -> EngineError | None:
        """The refusal of an account this run skipped, when every account of `names` (() = all)
        is skipped or off and one was skipped: sending then fails as that account did."""
        from ..accounts import all_accounts

        accounts = [a.name for a in all_accounts(self.ws.config) if not names or a.name in names]
        skipped = [self.engines.unavailable[a] for a in accounts if a in self.engines.unavailable]
        return skipped[0] if skipped else None

    def sender(self) -> str:
        """The account that took (or was about to take) the article's prompt (rotation.sender_of)."""
        if not self.account:
            first = [s for s in self.ws.store.sends(self.slug) if s.turn == 1]
            self.first_send = first[0] if first else None
            self.account = sender_of(self.article, self.first_send)
        return self.account

    def unsent(self, err: EngineError, turn: int = 1) -> None:
        """The send just announced ("sending") failed before anything was submitted: it is no
        send. The journal says so (the daily count drops it) and the cycle's budget gets it back."""
        self.give_back(turn, self.account, err.code)
        if self.budget is not None:
            self.budget.give_back()

    def give_back(self, turn: int, account: str, code: str, *before: tuple[str, dict]) -> None:
        """A send announced but never taken by the site: its intent goes and an `unsent` step is
        written (after the `before` events) in ONE store step, so a kill cannot leave a send
        counted against the day that the site never took; the intent marker goes after it (a
        kill between leaves a marker whose recovery finds nothing and says `unsent` again)."""
        with self.ws.store.step() as step:
            step.withdraw_intent(self.slug, turn)
            for event, fields in before:
                self.ws.journal.append_in(step, self.slug, event, **fields)
            extra = {"turn": turn} if turn > 1 else {}
            self.ws.journal.append_in(
                step, self.slug, "unsent", engine="qwen", account=account or None, code=code, **extra
            )
        if turn == 1:
            files.remove(self.article.sending)

    def recover(self) -> str | None:
        """A marker without a URL: the last send may have reached the site. The chat it named
        before the prompt left the browser says: a message in it means sent (adopt it), none or
        no chat means never sent. An intent that names no chat (killed before it was recorded,
        or written by an older version): its chat is searched for by what was sent
        (adoptable_chat). Never sent: the send is given back (the daily count drops it); never
        sent or in doubt: the prompt is sent again."""
        account = self.sender()
        self.only = (account,)  # a send after this goes to that account, where the chat may be
        marker = read_marker(self.article.sending) or {}
        chat_id = self.named_chat_id(marker)
        self.log("recovering", engine="qwen", account=account)
        if chat_id:
            url = chat_url(self.qwen.base_url, chat_id, self.article.sending)
            self.say(f"{self.slug}: an earlier send was interrupted; opening the chat it named: {url}")
            messages = self.engines.chat(account).user_messages(url)
            if messages is None:
                return self.never_sent(account, f"the chat it named ({url}) does not exist")
            if not messages:
                return self.never_sent(account, f"the chat it named ({url}) holds no message")
            return self.adopt(url, marker)
        return self.recover_by_text(account, marker)

    def named_chat_id(self, marker: dict) -> str:
        """The chat the interrupted send named, or "" when none is on record: killed before the
        click, or while the page's completion was held and the chat not yet recorded (a browser
        whose driver dies lets what it held go: that send may have reached the site), or an
        intent an older version wrote. The marker and the store's intent are written one after
        the other: either may have it."""
        named = marker.get("chat_id")
        if isinstance(named, str) and named:
            return named
        sends = [s for s in self.ws.store.sends(self.slug) if s.turn == 1 and not s.chat_url]
        return (sends[0].chat_id or "") if sends else ""

    def recover_by_text(self, account: str, marker: dict) -> str | None:
        """An intent that names no chat (see named_chat_id): find its chat by the text that was
        sent (its hash in the marker, when the prompt was edited since) and take it only when it
        is surely this article's (adoptable_chat)."""
        self.say(
            f"{self.slug}: an earlier send was interrupted; "
            f"looking for its chat in account {account}'s chat list"
        )
        sent_sha = marker.get("prompt_sha256")
        chat = self.engines.chat(account)
        if isinstance(sent_sha, str) and sent_sha and sent_sha != self.prompt.sha256:
            found = chat.find_chats(sha256=sent_sha)  # what was sent, not the edited text
        else:
            found = chat.find_chats(self.prompt.turns[0])
            sent_sha = self.prompt.sha256
        if not found:
            return self.never_sent(account, "no chat holds what was sent")
        others = chats_of_other_articles(self.article)
        if self.lease is not None:  # a shared batch: every host's sent chats are other articles' too
            others.update(chats_in_batch(self.ws.store, self.slug))
        url, why = adoptable_chat(found, marker, sent_sha, others, account)
        if url is None:
            self.log("recovery_in_doubt", engine="qwen", account=account, reason=why)
            self.say(f"{self.slug}: not taking a chat that may not be this article's ({why}): sending again")
            return None
        return self.adopt(url, marker)

    def never_sent(self, account: str, why: str) -> None:
        """The interrupted send never reached the site: its marker and intent go, and the send
        is given back (an `unsent` step: the daily count drops it)."""
        not_found = {"engine": "qwen", "account": account, "reason": why}
        self.give_back(1, account, "never_sent", ("recovery_not_found", not_found))
        self.say(f"{self.slug}: the interrupted send never reached the site ({why}): sending it")
        return None

    def adopt(self, url: str, marker: dict) -> str:
        """The interrupted send's chat is this article's: its URL goes to disk, nothing is sent."""
        sent_sha = marker.get("prompt_sha256")
        sent_sha = sent_sha if isinstance(sent_sha, str) and sent_sha else self.prompt.sha256
        edited = sent_sha != self.prompt.sha256
        files.atomic_write(self.article.url, url + "\n")
        files.remove(self.article.sending)
        self.remember_send(url, marker, sent_sha)
        self.state.sent_at = self.state.sent_at or self.clock()
        self.state.engine = "qwen"
        self.state.sent_sha256 = sent_sha  # the text the chat got, whatever the file says now
        self.save()
        self.log(
            "recovered",
            engine="qwen",
            account=self.account,
            chat_url=url,
            **({"prompt_edited_after_send": True} if edited else {}),
        )
        self.say(f"{self.slug}: found the chat the interrupted send made: {url}; not sending again")
        if edited:
            self.say(
                f"{self.slug}: {self.prompt.path} changed after it was sent; the chat answers the "
                f"version sent. To send the new text instead: `qwenpipe replay {self.slug} --fresh`"
            )
        return url

    def remember_send(self, url: str, marker: dict | None, sent_sha: str) -> None:
        """The store's record of the first send, with the chat the recovery found: an intent
        recorded by an older version (or none at all) gets the marker's account and time."""
        sends = [s for s in self.ws.store.sends(self.slug) if s.turn == 1]
        since = marker.get("time") if marker else None
        owner = self.lease.owner if self.lease is not None else ""
        with self.ws.store.step() as step:
            if not sends or sends[0].account != self.account or sends[0].chat_url not in ("", url):
                step.forget_sends(self.slug)
                when = float(since) if isinstance(since, (int, float)) else self.clock()
                intent = Intent(1, when, sent_sha, self.account, os.getpid(), owner)
                step.record_intent(self.slug, intent)
            step.record_sent(self.slug, 1, url, self.clock())

    def poll(self) -> Outcome:
        """Look at the sent chat (the decision says it is due), from the account that sent it."""
        if len(self.prompt.turns) > 1:
            return self.poll_turns()
        started = time.monotonic()
        chat = self.engines.chat(self.sender())
        if self.wait:
            result = chat.wait(
                self.chat_url,
                timeout=self.qwen.answer_timeout,
                on_progress=lambda p: self.say(f"{self.slug}: {p}"),
            )
        else:
            result = chat.check(self.chat_url)
        self.state.last_poll = self.clock()
        if isinstance(result, Answer):
            return self.finish(result)
        assert isinstance(result, Generating)
        self.state.attempts, self.state.progress = 0, result.progress
        self.save()
        self.log(
            "poll", engine="qwen", account=self.account, progress=result.progress, duration=_since(started)
        )
        return self.outcome(
            Status.WORKING, f"{self.slug}: {result.progress} ({self.chat_url})", reason=Reason.GENERATING
        )

    def poll_turns(self) -> Outcome:
        """A multi-turn prompt: the chat itself says how far it got; send the next turn only when
        the previous answer is complete and the next turn is not in the chat yet."""
        chat = self.engines.chat(self.sender())
        total = len(self.prompt.turns)
        deadline = time.monotonic() + self.qwen.answer_timeout
        while True:
            started = time.monotonic()
            view = chat.read_turns(self.chat_url)
            self.state.last_poll = self.clock()
            present = self.our_turns(view.turns)
            last = view.turns[present - 1]
            self.state.turn, self.state.turns = present, total
            if last.error:
                raise TransientError(f"turn {present} of {total}: {last.error}", code=Code.ANSWER_ERROR)
            if not last.complete:
                progress = f"turn {present} of {total}: {view.progress}"
                if not self.wait:
                    self.state.attempts, self.state.progress = 0, progress
                    self.save()
                    self.log("poll", engine="qwen", progress=progress, turn=present, duration=_since(started))
                    return self.outcome(
                        Status.WORKING, f"{self.slug}: {progress} ({self.chat_url})", reason=Reason.GENERATING
                    )
                self.say(f"{self.slug}: {progress}")
            elif present < total:
                blocked = self.send_next_turn(present + 1)
                if blocked or not self.wait:
                    return blocked or self.outcome(
                        Status.QUEUED, f"{self.slug}: sent turn {present + 1} of {total}", sent=True
                    )
            else:
                wanted = view.turns[self.prompt.article_turn - 1]
                return self.finish(Answer(wanted.answer, "qwen", title=view.title, model=view.model))
            if time.monotonic() > deadline:
                raise TransientError(
                    f"no complete answer after qwen.answer_timeout = {self.qwen.answer_timeout} s",
                    code=Code.TIMEOUT,
                )
            time.sleep(1.0)

    def our_turns(self, turns: list) -> int:
        """How many of the prompt's turns the chat holds, checking they are ours and in order."""

        def same(a: str, b: str) -> bool:
            return " ".join(a.split()) == " ".join(b.split())

        if not turns:
            raise TransientError("the chat shows no messages yet", code=Code.EMPTY_CHAT)
        ours = self.prompt.turns
        if len(turns) > len(ours) or not all(same(t.user, p) for t, p in zip(turns, ours, strict=False)):
            raise HardError(
                f"the chat {self.chat_url} holds messages that are not this prompt's turns "
                f"(was {self.prompt.path} edited after sending?)",
                code=Code.PROMPT_MISMATCH,
            )
        return len(turns)

    def send_next_turn(self, number: int) -> Outcome | None:
        """Send turn `number` in the existing chat; an Outcome when a quota stops it."""
        decision = self.decide(next_turn=number)
        if decision.action is Action.SEND and self.budget is not None and not self.budget.take():
            decision = self.decide(next_turn=number, budget_spent=True)
        if decision.action is not Action.SEND:
            return self.carry_out(decision, f"turn {number}")
        total = len(self.prompt.turns)
        try:
            self.record_intent(number, self.account, self.clock())
        except AlreadySent as sent:  # recorded sent, and the chat does not show it yet
            return self.outcome(
                Status.WORKING,
                f"{self.slug}: turn {number} of {total} was sent at {_clock(sent.send.intent_at)}; "
                "the chat does not show it yet",
                reason=Reason.GENERATING,
            )
        self.log("sending", engine="qwen", account=self.account, turn=number, chat_url=self.chat_url)
        self.say(f"{self.slug}: sending turn {number} of {total}")
        started = time.monotonic()
        if self.lease is not None:
            self.lease.check()
        try:
            self.engines.chat(self.account).send_turn(self.chat_url, self.prompt.turns[number - 1])
        except EngineError as err:
            if err.nothing_sent:
                self.unsent(err, turn=number)
            raise
        crashpoint("after_send")
        with self.ws.store.step() as step:
            step.record_sent(self.slug, number, self.chat_url, self.clock())
        self.state.turn, self.state.progress, self.state.last_poll = (
            number,
            f"turn {number} of {total}: sent",
            0.0,
        )
        self.save()
        self.log(
            "sent",
            engine="qwen",
            account=self.account,
            turn=number,
            chat_url=self.chat_url,
            duration=_since(started),
        )
        return None

    def chat_choice(self) -> ChatChoice:
        """The model and modes the chat is to answer with: config.toml's [qwen], then the prompt's."""
        return ChatChoice.of(replace(self.qwen, **self.prompt.qwen))

    def check_model(self, answer: Answer) -> None:
        """A chat answer must come from the model asked for (qwen.model): never a silent article
        from another one. Raises HardError when the chat names another model."""
        wanted = self.chat_choice().model
        if answer.engine != "qwen" or not wanted or same_model(wanted, answer.model):
            return
        if not answer.model:
            raise TransientError(
                f"the chat does not say which model answered, so qwen.model = {wanted!r} "
                "cannot be confirmed (the site's JSON was not readable)",
                code=Code.MODEL_UNKNOWN,
            )
        raise HardError(
            f"the chat answered with model {answer.model!r}, not qwen.model = {wanted!r} "
            "(the site did not keep the choice); not writing it as the article",
            code=Code.WRONG_MODEL,
        )

    def finish(self, answer: Answer) -> Outcome:
        self.check_model(answer)
        settings = replace(self.ws.config.article, **self.prompt.settings)
        verdict = check_answer(answer.markdown, settings)
        if verdict.problem:
            return self.reject(answer, verdict)
        answer = replace(answer, markdown=verdict.markdown)
        edited = self.edited_since_sent(answer)
        document = render_article(
            self.prompt,
            answer,
            chat_url=self.chat_url,
            when=datetime.fromtimestamp(self.clock()),
            strip_title=settings.strip_title,
            turns=len(self.prompt.turns),
            sent_sha256=self.state.sent_sha256 if edited else None,
            account=self.sender() if answer.engine == "qwen" else "",
        )
        if self.lease is not None:  # the batch's record first; this host's file from it
            document = self.record_finished(answer, document)
        deletion = self.chat_to_delete()
        files.atomic_write(self.article.md, document, mode=files.SHARED, crash_at="mid_article")
        files.remove(self.article.sending)
        self.state.engine, self.state.progress, self.state.attempts = answer.engine, "done", 0
        self.state.next_try = 0.0
        words = count_words(article_body(self.prompt, answer, strip_title=settings.strip_title))
        with self.ws.store.step() as step:  # the record and its "done" event: one commit, one fsync
            step.put_article(self.state.to_record(self.slug))
            self.ws.journal.append_in(
                step,
                self.slug,
                "done",
                engine=answer.engine,
                model=answer.model,
                words=words,
                turns=len(self.prompt.turns),
                duration=round(self.clock() - self.state.sent_at, 3) if self.state.sent_at else None,
                **({"prompt_edited_after_send": True} if edited else {}),
            )
            if deletion is not None:  # due with the "done" step: a crash after it leaves it pending
                step.put_chat_deletion(deletion)
        if deletion is not None:  # never fails the article: a failed delete stays pending
            cleanup.delete_now(self.ws, self.engines, deletion, clock=self.clock, say=self.say)
        if edited:
            self.say(
                f"{self.slug}: {self.prompt.path} was edited after it was sent; the article answers "
                f"the version sent (marked prompt_edited_after_send). For the new text: delete "
                f"{self.article.md}, then `qwenpipe replay {self.slug} --fresh` (a new send)"
            )
        return self.outcome(
            Status.DONE,
            f"{self.slug}: wrote {self.article.md} ({words} words, {answer.engine})",
            engine=answer.engine,
        )

    def chat_to_delete(self) -> ChatDeletion | None:
        """The deletion of the article's chat that writing the article makes due (qwen.delete_chats
        = "after_collect": a chat the article was sent to, whichever engine wrote it), or None."""
        if not cleanup.wanted(self.ws.config):
            return None
        url = self.chat_url or read_chat_url(self.article, self.qwen.base_url)
        if not url or cleanup.deleted_chat(self.ws.store, self.slug, url):
            return None
        return cleanup.due(self.slug, url, self.sender(), self.clock())

    def record_finished(self, answer: Answer, document: str) -> str:
        """The finished article as a row of the shared batch; the document to write (the batch's
        own, when another host finished it first)."""
        account = self.sender() if answer.engine == "qwen" else ""
        row = Finished(self.slug, answer.engine, account, self.ws.config.store.host, self.clock(), document)
        with self.ws.store.step() as step:
            if step.put_finished(row):
                return document
        kept = self.ws.store.finished([self.slug]).get(self.slug)
        return kept.document if kept else document

    def edited_since_sent(self, answer: Answer) -> bool:
        """A one-turn prompt changed since the chat got it: the chat's answer is to the old text.
        (A multi-turn chat is compared message by message instead: see our_turns.)"""
        return (
            answer.engine == "qwen"
            and len(self.prompt.turns) == 1
            and bool(self.state.sent_sha256)
            and self.state.sent_sha256 != self.prompt.sha256
        )

    def reject(self, answer: Answer, verdict: Verdict) -> Outcome:
        """A complete answer that is not an article: keep it beside, never as, SLUG.md."""
        record = {
            "reason": verdict.problem,
            "code": verdict.code,
            "engine": answer.engine,
            "time": datetime.fromtimestamp(self.clock()).astimezone().replace(microsecond=0),
        }
        if self.chat_url:
            record["chat_url"] = self.chat_url
        files.atomic_write(
            self.article.rejected,
            f"+++\n{tomli_w.dumps(mask_data(record))}+++\n\n{mask(answer.markdown.strip())}\n",
        )
        self.log("rejected", engine=answer.engine, error=verdict.problem, code=f"rejected_{verdict.code}")
        err = HardError(
            f"{answer.engine} answer rejected: {verdict.problem} (kept in {self.article.rejected.name})",
            code=f"rejected_{verdict.code}",
        )
        if answer.engine == "qwen":
            return self.hard(err)
        self.state.record_error(self.clock(), answer.engine, err.code, str(err))
        return self.give_up(err, str(err))  # it starts "router answer rejected"

    # -- failures ----------------------------------------------------------------------------

    def transient(self, err: TransientError) -> Outcome:
        now = self.clock()
        self.state.attempts += 1
        self.state.record_error(now, "qwen", err.code, str(err))
        self.log("transient", engine="qwen", attempt=self.state.attempts, error=str(err), code=err.code)
        limit = self.qwen.max_attempts
        if self.state.attempts >= limit:
            too_many = HardError(
                f"{self.state.attempts} transient failures in a row "
                f"(qwen.max_attempts = {limit}); last: {err}",
                code=Code.TOO_MANY_ATTEMPTS,
            )
            return self.hard(too_many)
        delay = backoff_delay(self.qwen, self.state.attempts)
        self.state.next_try = now + delay
        self.save()
        return self.outcome(
            Status.WORKING,
            f"{self.slug}: {err} (attempt {self.state.attempts} of {limit}; next try {wait_words(delay)})",
            reason=Reason.BACKOFF,
        )

    def hard(self, err: HardError) -> Outcome:
        now = self.clock()
        self.chat_error = err.code
        self.state.record_error(now, "qwen", err.code, str(err))
        self.log("hard", engine="qwen", account=self.account or None, error=str(err), code=err.code)
        self.say(f"{self.slug}: the chat failed hard: {err}")
        account = self.account or DEFAULT_ACCOUNT
        if isinstance(err, QuotaSpent):
            until = self.ws.chat_quota.block(now, err.retry_after, str(err), account=account)
            self.log("quota", engine="qwen", account=account, until=_clock(until), error=str(err))
            self.say(
                f"the chat's daily quota is spent: no sends from account {account} until {_clock(until)}"
            )
        self.hold(account, err)
        if err.code == Code.LOGGED_OUT and self.chat_url:  # a chat in flight waits for its own account
            return self.give_up(
                err, f"{err}; its chat waits for account {account}: run `qwenpipe login --account {account}`"
            )
        decision = self.decide(failure=Failure.CHAT)
        if decision.action is Action.FALL_BACK:
            return self.fallback(str(err), chat_error=err)
        return self.give_up(err, f"{err} (no fallback: {decision.why})")

    def fallback(self, reason: str, *, chat_error: EngineError | None) -> Outcome:
        self.log("fallback", engine="router", reason=reason)
        self.say(f"{self.slug}: writing it through the router ({reason})")
        started = time.monotonic()
        try:
            answer = self.route()
            crashpoint("after_router")
        except EngineError as err:
            self.state.record_error(self.clock(), "router", err.code, str(err))
            self.log(
                "router_failed", engine="router", error=str(err), code=err.code, duration=_since(started)
            )
            first = f"chat: {chat_error}; " if chat_error else ""
            return self.give_up(err, f"{first}{'' if str(err).startswith('router') else 'router: '}{err}")
        return self.finish(answer)

    def route(self) -> Answer:
        """The article through the router; a multi-turn prompt is replayed as one conversation."""
        router = self.engines.router()
        if len(self.prompt.turns) == 1:
            return router.generate(self.prompt.text)
        history: list[tuple[str, str]] = []
        answers = []
        for turn in self.prompt.turns:
            answer = router.generate(turn, history=tuple(history))
            history.append((turn, answer.markdown))
            answers.append(answer)
        return answers[self.prompt.article_turn - 1]

    def give_up(self, err: EngineError, message: str) -> Outcome:
        last = self.decide(failure=Failure.ALL).action is Action.DEAD_LETTER
        self.state.hard_failures += 1
        self.state.attempts = 0
        limit = self.qwen.max_attempts
        self.save()
        if last:
            self.dead_letter(err, message)
            return self.outcome(
                Status.FAILED,
                f"{self.slug}: {message}; dead-lettered after "
                f"{self.state.hard_failures} hard failures "
                f"(`qwenpipe replay {self.slug}` to retry)",
            )
        return self.outcome(
            Status.FAILED, f"{self.slug}: {message} (hard failure {self.state.hard_failures} of {limit})"
        )

    def dead_letter(self, err: EngineError, message: str) -> None:
        record = {
            "reason": err.code,
            "engine": "router"
            if self.state.errors and self.state.errors[-1]["engine"] == "router"
            else "qwen",
            "attempts": self.state.hard_failures,
            "last_error": message,
            "time": datetime.fromtimestamp(self.clock()).astimezone().replace(microsecond=0),
            "errors": [
                {
                    k: (datetime.fromtimestamp(v).astimezone().replace(microsecond=0) if k == "time" else v)
                    for k, v in e.items()
                }
                for e in self.state.errors
            ],
        }
        if self.chat_url:
            record["chat_url"] = self.chat_url
        files.atomic_write(self.article.failed, tomli_w.dumps(mask_data(record)))
        self.log("dead_letter", error=message, code=err.code)

    def dead_letter_reason(self) -> str:
        import tomllib

        try:
            data = tomllib.loads(self.article.failed.read_text(encoding="utf-8"))
            return str(data.get("last_error") or data.get("reason") or "see the .failed file")
        except (OSError, ValueError):
            return f"see {self.article.failed}"

    # -- helpers -----------------------------------------------------------------------------

    @property
    def slug(self) -> str:
        return self.prompt.slug

    def save(self) -> None:
        self.state.save(self.article.state)

    def log(self, event: str, **fields: object) -> None:
        self.ws.journal.append(self.slug, event, **fields)

    def outcome(
        self,
        status: Status,
        message: str,
        *,
        engine: str | None = None,
        sent: bool = False,
        reason: Reason = Reason.NONE,
    ) -> Outcome:
        return Outcome(
            status,
            self.slug,
            message,
            engine=engine,
            chat_url=self.chat_url,
            sent=sent,
            reason=reason,
            chat_error=self.chat_error,
            account=self.account,
        )


def replay(workspace: Workspace, slug: str, *, fresh: bool = False) -> str:
    """Make a dead-lettered article pending again; its history stays in the journal and state.

    The chat URL is kept, so the next run polls the existing chat before anything is sent.
    `fresh`: forget the article's chat instead (its URL, an interrupted send's marker, the
    store's sends, a dead letter, a rejected answer), so that the next run sends the prompt as
    it is now, in a new chat: the one way to send an edited prompt again (a second send).
    """
    check_slug(slug)
    article = workspace.article(slug)
    article.check()
    if fresh:
        return _replay_fresh(workspace, article)
    if not article.failed.exists():
        raise UsageProblem(f"{slug} is not dead-lettered ({article.failed} does not exist)")
    with FileLock(article.lock, purpose=f"replay {slug}"):
        state = ArticleState.load(article.state)
        state.hard_failures = state.attempts = 0
        state.next_try = 0.0
        state.save(article.state)
        files.remove(article.failed)
        workspace.journal.append(slug, "replay")
    if article.url.exists() and any(not d.pending for d in workspace.store.chat_deletions(slug)):
        return (
            f"{slug}: cleared {article.failed.name}; its chat was deleted (qwen.delete_chats) and is "
            f"not read again: the next run goes to the router (delete {article.url.name} for a new send)"
        )
    return f"{slug}: cleared {article.failed.name}; the next run " + (
        "polls its chat first" if article.url.exists() else "sends it"
    )


def _replay_fresh(workspace: Workspace, article: ArticleFiles) -> str:
    slug = article.slug
    if article.md.exists():
        raise UsageProblem(
            f"{slug} is done ({article.md}); delete it first if the prompt is to be sent again"
        )
    load_prompt(workspace.prompts_dir, slug)  # a prompt that cannot be sent is refused now
    with FileLock(article.lock, purpose=f"replay {slug} --fresh"):
        sidecars = (article.url, article.sending, article.failed, article.rejected)
        forgotten = [path.name for path in sidecars if path.exists()]
        previous = read_chat_url(article, workspace.config.qwen.base_url) if article.url.exists() else None
        for path in sidecars:
            files.remove(path)
        with workspace.store.step() as step:
            step.forget_sends(slug)
            step.put_article(ArticleState().to_record(slug))
            workspace.journal.append_in(step, slug, "replay", fresh=True, chat_url=previous)
    cleared = f"cleared {', '.join(forgotten)}; " if forgotten else ""
    return f"{slug}: {cleared}the next run sends the prompt as it is now, in a new chat"


def chats_of_other_articles(article: ArticleFiles) -> dict[str, str]:
    """Chat path (`/c/<id>`) -> slug, for every other article's `.md.url` in its folder."""
    named: dict[str, str] = {}
    try:
        with os.scandir(article.folder) as entries:
            sidecars = [e for e in entries if e.name.endswith(".md.url") and e.name != article.url.name]
    except OSError:
        return named
    for entry in sidecars:
        if not entry.is_file(follow_symlinks=False):
            continue  # never open what is not a plain file (a FIFO would hang)
        try:
            with open(entry.path, "rb") as handle:
                text = handle.read(4096).decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.split():
            named[urlparse(line).path.rstrip("/")] = entry.name[: -len(".md.url")]
    return named


def chats_in_batch(store, slug: str) -> dict[str, str]:
    """Chat path -> slug for every other article's sent chat in a shared batch's store."""
    return {
        urlparse(send.chat_url).path.rstrip("/"): send.slug
        for send in store.sends()
        if send.chat_url and send.slug != slug
    }


def adoptable_chat(
    found: list[FoundChat],
    marker: dict | None,
    prompt_sha256: str,
    taken: dict[str, str],
    account: str = DEFAULT_ACCOUNT,
) -> tuple[str | None, str]:
    """(url, "") for the one chat an interrupted send made, else (None, why it is in doubt).

    A chat is this article's only if its first message is the prompt (`found` holds only such
    chats), the site made it after the intent marker was written (less RECOVERY_CLOCK_SLACK),
    and no other article's `.md.url` names it, and the marker names `account`, whose chat list
    `found` is; and only if exactly one chat passes and none
    is undecidable (a chat whose creation time the site does not give). Two articles with the
    same text, or two workspaces on one account, must never share a chat: a second send costs
    one prompt, a shared chat costs an article.
    """
    since = marker.get("time") if marker else None
    if not isinstance(since, (int, float)) or isinstance(since, bool):
        return None, "the intent marker does not say when the send was attempted"
    if marker.get("prompt_sha256") != prompt_sha256:
        return None, "the prompt changed since the interrupted send (or the marker does not say)"
    if (marker.get("account") or DEFAULT_ACCOUNT) != account:  # `found` is `account`'s chat list
        return None, f"the interrupted send went to account {marker.get('account')!r}, not {account!r}"
    ours, unknown, others = [], [], []
    for chat in found:
        owner = taken.get(urlparse(chat.url).path.rstrip("/"))
        if owner:
            others.append(f"{chat.url} is {owner}'s")
        elif chat.created is None:
            unknown.append(chat.url)
        elif chat.created < since - RECOVERY_CLOCK_SLACK:
            others.append(f"{chat.url} was made {since - chat.created:.0f} s before this send")
        else:
            ours.append(chat.url)
    if unknown:
        return None, f"the site does not say when {_few(unknown)} was made"
    if len(ours) > 1:
        return None, f"{len(ours)} chats made since the interrupted send hold this prompt: {_few(ours)}"
    if not ours:
        return None, f"the chats that hold this prompt are other sends': {_few(others)}"
    return ours[0], ""


def _few(items: list[str]) -> str:
    return "; ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M")


def wait_words(seconds: float) -> str:
    """A wait as a message says it: "in 45 s" (never "in 0 s": under a second is "in 1 s"), or
    "at once" when there is none."""
    return "at once" if seconds <= 0 else f"in {max(1, round(seconds))} s"
