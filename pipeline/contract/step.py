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
    Answer,
    ChatChoice,
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
from ..store.protocol import StoreBusy
from .article import ArticleFiles, ArticleState, read_chat_url
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
from .prompts import PROMPT_QWEN_KEYS, Prompt, check_slug, load_prompt
from .quota import SendBudget, sends_today
from .render import article_body, render_article
from .workspace import Engines, Workspace

ENGINE_CHOICES = ("auto", "qwen", "router")
ACCOUNT = "default"  # the chat account an intent marker's send went to (one, until accounts exist)
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
    reason: str = ""  # why WORKING: generating, locked, backoff, spacing, quota, limit
    chat_error: str = ""  # the code of the chat's hard failure in this step (e.g. logged_out), if any


def _quiet(_message: str) -> None:
    pass


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
) -> Outcome:
    """Run the contract once for `slug`. Raises UsageProblem (exit 2) before writing anything.

    `budget`: the cycle's sends to the chat (every turn counts); None by hand."""
    check_slug(slug)
    if engine not in ENGINE_CHOICES:
        raise UsageProblem(f"--engine {engine!r}: choose one of {', '.join(ENGINE_CHOICES)}")
    article = workspace.article(slug)
    article.check()  # a symlink, FIFO or folder among its files: refused before anything is read
    if article.md.exists():
        return Outcome(Status.DONE, slug, f"{article.md} is already done")
    workspace.journal.check()  # before any marker or send: every step must be logged
    prompt = load_prompt(workspace.prompts_dir, slug)
    read_chat_url(article, workspace.config.qwen.base_url)  # refuse a bad sidecar before locking
    try:
        lock = FileLock(article.lock, purpose=f"generate {slug}").acquire()
    except LockBusy as busy:
        return Outcome(
            Status.WORKING, slug, f"{slug} is in progress elsewhere ({busy.owner})", reason="locked"
        )
    try:
        step = Step(
            workspace, article, prompt, engines, wait=wait, choice=engine, say=say, clock=clock, budget=budget
        )
        return step.run()
    except StoreBusy as busy:  # nothing of the step was written, nothing sent after it: try later
        return Outcome(Status.WORKING, slug, f"{slug}: {busy}", reason="store_busy")
    finally:
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
    ):
        self.ws, self.article, self.prompt, self.engines = workspace, article, prompt, engines
        self.wait, self.choice, self.say, self.clock = wait, choice, say, clock
        self.budget = budget
        self.qwen = workspace.config.qwen
        self.state = ArticleState.load(article.state)
        self.chat_url: str | None = None
        self.chat_error = ""
        self.recovered = False  # the intent marker was answered in this step

    # -- the steps ---------------------------------------------------------------------------

    def run(self) -> Outcome:
        try:
            return self.carry_out(self.decide())
        except EngineBusy as busy:
            # Raised by prepare() before any marker or keystroke: nothing to undo.
            self.log("busy", engine="qwen", error=str(busy))
            return self.outcome(Status.WORKING, f"{self.slug}: {busy}", reason="locked")
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
            limits = self.send_limits(limits, now, budget_spent)
        record = Record.of(self.state)
        return decide(Facts(seen, record, limits, now, wait=self.wait, next_turn=next_turn, failure=failure))

    def send_limits(self, limits: Limits, now: float, budget_spent: bool) -> Limits:
        """`limits` with the chat's quota and the send counts: read only when a send may be next.
        The daily count is read only when the quota lets a send through (as the gate asks)."""
        blocked = self.ws.chat_quota.blocked_until(now)
        if blocked:
            return replace(limits, quota_until=blocked[0], quota_reason=blocked[1])
        per_day = self.qwen.max_sends_per_day
        budget = self.budget
        return replace(
            limits,
            max_sends_per_day=per_day,
            sends_today=sends_today(self.ws.journal, now) if per_day else 0,
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
            if decision.reason is Reason.QUOTA:
                why = f"the chat's daily quota is spent until {_clock(decision.until)} ({decision.why})"
                return self.fallback(why, chat_error=None)
            return self.fallback(decision.why, chat_error=None)
        if action is Action.WAIT:
            return self.waiting(decision, what)
        if action is Action.RECOVER:
            self.chat_url = self.recover()
            self.recovered = True  # the marker is answered: adopted, or in doubt and sent again
            return self.carry_out(self.decide())
        if action is Action.POLL:
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
            message = f"{self.slug}: generating; next look in {until - self.clock():.0f} s"
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
        return self.outcome(Status.WORKING, message, reason=str(reason))

    def send(self) -> Outcome:
        self.engines.chat().prepare()  # a busy or missing browser stops us before the marker
        # What recovery needs to tell this send's chat from any other: see adoptable_chat.
        marker = {
            "time": self.clock(),
            "pid": os.getpid(),
            "prompt_sha256": self.prompt.sha256,
            "account": ACCOUNT,
        }
        files.atomic_write(self.article.sending, json.dumps(marker) + "\n")
        self.log("sending", engine="qwen", attempt=self.state.attempts + 1, prompt_sha256=self.prompt.sha256)
        self.say(f"{self.slug}: sending the prompt to the chat")
        started = time.monotonic()
        crashpoint("before_send")
        try:
            url = self.engines.chat().send(self.prompt.turns[0], self.chat_choice())
        except EngineError as err:
            if err.nothing_sent:
                files.remove(self.article.sending)  # nothing reached the site: nothing to look for
                self.unsent(err)
            raise
        crashpoint("after_send")
        # The URL is the proof of the send: it goes to disk before anything else happens.
        files.atomic_write(self.article.url, url + "\n")
        files.remove(self.article.sending)
        self.chat_url = url
        self.state.sent_at = self.state.last_poll = self.clock()
        self.state.attempts, self.state.engine, self.state.progress = 0, "qwen", "sent"
        self.state.sent_sha256 = self.prompt.sha256
        self.save()
        self.log("sent", engine="qwen", chat_url=url, duration=_since(started))
        if self.wait:
            return self.poll()
        return self.outcome(Status.QUEUED, f"{self.slug}: sent, the chat is {url}", sent=True)

    def unsent(self, err: EngineError, **fields: object) -> None:
        """The send just announced ("sending") failed before anything was submitted: it is no
        send. The journal says so (the daily count drops it) and the cycle's budget gets it back."""
        self.log("unsent", engine="qwen", code=err.code, **fields)
        if self.budget is not None:
            self.budget.give_back()

    def recover(self) -> str | None:
        """A marker without a URL: the last send may have reached the site. Look before sending,
        and take a chat only when it is surely this article's (adoptable_chat); in doubt, send."""
        self.say(f"{self.slug}: an earlier send was interrupted; looking for its chat in the chat list")
        self.log("recovering", engine="qwen")
        found = self.engines.chat().find_chats(self.prompt.turns[0])
        if not found:
            self.log("recovery_not_found", engine="qwen")
            self.say(f"{self.slug}: no chat holds this prompt, so it never reached the site: sending it")
            return None
        url, why = adoptable_chat(
            found,
            read_marker(self.article.sending),
            self.prompt.sha256,
            chats_of_other_articles(self.article),
        )
        if url is None:
            self.log("recovery_in_doubt", engine="qwen", reason=why)
            self.say(f"{self.slug}: not taking a chat that may not be this article's ({why}): sending again")
            return None
        files.atomic_write(self.article.url, url + "\n")
        files.remove(self.article.sending)
        self.state.sent_at = self.state.sent_at or self.clock()
        self.state.engine = "qwen"
        self.state.sent_sha256 = self.prompt.sha256  # found by this very text
        self.save()
        self.log("recovered", engine="qwen", chat_url=url)
        self.say(f"{self.slug}: found the chat the interrupted send made: {url}; not sending again")
        return url

    def poll(self) -> Outcome:
        """Look at the sent chat (the decision says it is due)."""
        if len(self.prompt.turns) > 1:
            return self.poll_turns()
        started = time.monotonic()
        chat = self.engines.chat()
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
        self.log("poll", engine="qwen", progress=result.progress, duration=_since(started))
        return self.outcome(
            Status.WORKING, f"{self.slug}: {result.progress} ({self.chat_url})", reason="generating"
        )

    def poll_turns(self) -> Outcome:
        """A multi-turn prompt: the chat itself says how far it got; send the next turn only when
        the previous answer is complete and the next turn is not in the chat yet."""
        chat = self.engines.chat()
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
                raise TransientError(f"turn {present} of {total}: {last.error}", code="answer_error")
            if not last.complete:
                progress = f"turn {present} of {total}: {view.progress}"
                if not self.wait:
                    self.state.attempts, self.state.progress = 0, progress
                    self.save()
                    self.log("poll", engine="qwen", progress=progress, turn=present, duration=_since(started))
                    return self.outcome(
                        Status.WORKING, f"{self.slug}: {progress} ({self.chat_url})", reason="generating"
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
                    code="timeout",
                )
            time.sleep(1.0)

    def our_turns(self, turns: list) -> int:
        """How many of the prompt's turns the chat holds, checking they are ours and in order."""

        def same(a: str, b: str) -> bool:
            return " ".join(a.split()) == " ".join(b.split())

        if not turns:
            raise TransientError("the chat shows no messages yet", code="empty_chat")
        ours = self.prompt.turns
        if len(turns) > len(ours) or not all(same(t.user, p) for t, p in zip(turns, ours, strict=False)):
            raise HardError(
                f"the chat {self.chat_url} holds messages that are not this prompt's turns "
                f"(was {self.prompt.path} edited after sending?)",
                code="prompt_mismatch",
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
        self.log("sending", engine="qwen", turn=number, chat_url=self.chat_url)
        self.say(f"{self.slug}: sending turn {number} of {total}")
        started = time.monotonic()
        try:
            self.engines.chat().send_turn(self.chat_url, self.prompt.turns[number - 1])
        except EngineError as err:
            if err.nothing_sent:
                self.unsent(err, turn=number)
            raise
        crashpoint("after_send")
        self.state.turn, self.state.progress, self.state.last_poll = (
            number,
            f"turn {number} of {total}: sent",
            0.0,
        )
        self.save()
        self.log("sent", engine="qwen", turn=number, chat_url=self.chat_url, duration=_since(started))
        return None

    def chat_choice(self) -> ChatChoice:
        """The model and modes the chat is to answer with: config.toml's [qwen], then the prompt's."""
        return ChatChoice.of({**{k: getattr(self.qwen, k) for k in PROMPT_QWEN_KEYS}, **self.prompt.qwen})

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
                code="model_unknown",
            )
        raise HardError(
            f"the chat answered with model {answer.model!r}, not qwen.model = {wanted!r} "
            "(the site did not keep the choice); not writing it as the article",
            code="wrong_model",
        )

    def finish(self, answer: Answer) -> Outcome:
        self.check_model(answer)
        settings = {**self.ws.config.article.as_dict(), **self.prompt.settings}
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
            strip_title=settings["strip_title"],
            turns=len(self.prompt.turns),
            sent_sha256=self.state.sent_sha256 if edited else None,
        )
        files.atomic_write(self.article.md, document, mode=files.SHARED, crash_at="mid_article")
        files.remove(self.article.sending)
        self.state.engine, self.state.progress, self.state.attempts = answer.engine, "done", 0
        self.state.next_try = 0.0
        self.save()
        words = count_words(article_body(self.prompt, answer, strip_title=settings["strip_title"]))
        self.log(
            "done",
            engine=answer.engine,
            model=answer.model,
            words=words,
            turns=len(self.prompt.turns),
            duration=round(self.clock() - self.state.sent_at, 3) if self.state.sent_at else None,
            **({"prompt_edited_after_send": True} if edited else {}),
        )
        if edited:
            self.say(
                f"{self.slug}: {self.prompt.path} was edited after it was sent; the article answers "
                f"the version sent (marked prompt_edited_after_send). For the new text: delete "
                f"{self.article.md} and {self.article.url}, then run again (a new send)"
            )
        return self.outcome(
            Status.DONE,
            f"{self.slug}: wrote {self.article.md} ({words} words, {answer.engine})",
            engine=answer.engine,
        )

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
                code="too_many_attempts",
            )
            return self.hard(too_many)
        delay = backoff_delay(self.qwen, self.state.attempts)
        self.state.next_try = now + delay
        self.save()
        return self.outcome(
            Status.WORKING,
            f"{self.slug}: {err} (attempt {self.state.attempts} of {limit}; next try in {delay:.0f} s)",
            reason="backoff",
        )

    def hard(self, err: HardError) -> Outcome:
        now = self.clock()
        self.chat_error = err.code
        self.state.record_error(now, "qwen", err.code, str(err))
        self.log("hard", engine="qwen", error=str(err), code=err.code)
        self.say(f"{self.slug}: the chat failed hard: {err}")
        if isinstance(err, QuotaSpent):
            until = self.ws.chat_quota.block(now, err.retry_after, str(err))
            self.log("quota", engine="qwen", until=_clock(until), error=str(err))
            self.say(f"the chat's daily quota is spent: no sends to the chat until {_clock(until)}")
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
        self, status: Status, message: str, *, engine: str | None = None, sent: bool = False, reason: str = ""
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
        )


def replay(workspace: Workspace, slug: str) -> str:
    """Make a dead-lettered article pending again; its history stays in the journal and state.

    The chat URL is kept, so the next run polls the existing chat before anything is sent.
    """
    check_slug(slug)
    article = workspace.article(slug)
    article.check()
    if not article.failed.exists():
        raise UsageProblem(f"{slug} is not dead-lettered ({article.failed} does not exist)")
    with FileLock(article.lock, purpose=f"replay {slug}"):
        state = ArticleState.load(article.state)
        state.hard_failures = state.attempts = 0
        state.next_try = 0.0
        state.save(article.state)
        files.remove(article.failed)
        workspace.journal.append(slug, "replay")
    return f"{slug}: cleared {article.failed.name}; the next run " + (
        "polls its chat first" if article.url.exists() else "sends it"
    )


def read_marker(path) -> dict | None:
    """The intent marker's record, or None when it is missing or unreadable."""
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(4096))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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


def adoptable_chat(
    found: list[FoundChat], marker: dict | None, prompt_sha256: str, taken: dict[str, str]
) -> tuple[str | None, str]:
    """(url, "") for the one chat an interrupted send made, else (None, why it is in doubt).

    A chat is this article's only if its first message is the prompt (`found` holds only such
    chats), the site made it after the intent marker was written (less RECOVERY_CLOCK_SLACK),
    and no other article's `.md.url` names it; and only if exactly one chat passes and none
    is undecidable (a chat whose creation time the site does not give). Two articles with the
    same text, or two workspaces on one account, must never share a chat: a second send costs
    one prompt, a shared chat costs an article.
    """
    since = marker.get("time") if marker else None
    if not isinstance(since, (int, float)) or isinstance(since, bool):
        return None, "the intent marker does not say when the send was attempted"
    if marker.get("prompt_sha256") != prompt_sha256:
        return None, "the prompt changed since the interrupted send (or the marker does not say)"
    if marker.get("account", ACCOUNT) != ACCOUNT:
        return None, f"the interrupted send went to account {marker.get('account')!r}"
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
