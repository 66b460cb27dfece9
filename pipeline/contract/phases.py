"""One article's phase and its next action, decided in one place from what is known about it.

Pure: nothing is read or written here, and no clock is asked. The callers gather the facts (the
files as batch.scan sees them, the state record, the chat's quota, the send limits and counts,
the time) and carry the decision out: the contract steps the article as told, the cycle plans
whom to step and counts the rest, `status` shows the phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..config import Qwen

MAX_BACKOFF = 3600.0


class Phase(StrEnum):
    """Where an article is, in the order the dashboard lists them: what needs a person first.
    The values are the states `status` shows (and `status --json` writes: docs/status.md)."""

    INVALID = "invalid"  # a bad prompt (name or content), or a file of the article that is a
    # symlink, a FIFO or a folder: it can never move as it is (`why` says which, with the fix)
    FAILED = "failed"  # hard failure on every engine, not yet dead-lettered
    DEAD = "dead"  # SLUG.md.failed: skipped until `qwenpipe replay`
    BACKOFF = "backoff"  # a transient failure: next try in the future
    QUOTA = "quota"  # nothing sent yet, and the chat's quota is spent or the daily send limit reached;
    # or its chat account (or, for a new send, every account) is disabled or at its own limit
    SENDING = "sending"  # intent marker without a URL: a send in progress or interrupted
    GENERATING = "generating"  # sent (SLUG.md.url): the chat is writing (or done, not yet collected)
    PENDING = "pending"  # nothing sent yet
    DONE = "done"  # SLUG.md
    ORPHAN = "orphan"  # files in articles/ without a prompt (prompt deleted or renamed)


UNFINISHED = frozenset(
    {Phase.FAILED, Phase.BACKOFF, Phase.QUOTA, Phase.SENDING, Phase.GENERATING, Phase.PENDING}
)


class Action(Enum):
    """What the next step of the article does."""

    NOTHING = "nothing"  # done, dead-lettered, orphan or invalid: no step moves it
    WAIT = "wait"  # not now: `reason` says why, `until` until when (None: a later cycle or day)
    POLL = "poll"  # look at the sent chat
    SEND = "send"  # write the intent marker and send the prompt (or the next turn in its chat)
    RECOVER = "recover"  # a marker without a URL: look for the chat by its prompt before any send
    FALL_BACK = "fall_back"  # the router writes the article
    FAIL = "fail"  # a hard failure and no engine left: counted; a later run tries again
    DEAD_LETTER = "dead_letter"  # ... and it is the qwen.max_attempts-th: write SLUG.md.failed


class Reason(StrEnum):
    """Why an article waits, or why it falls back; the values are contract.Outcome.reason's."""

    NONE = ""
    GENERATING = "generating"  # the chat is writing (a look found no complete answer)
    LOCKED = "locked"  # another process holds the article (or the browser profile)
    BACKOFF = "backoff"  # after a transient failure, until next_try
    IN_DOUBT = "in_doubt"  # an interrupted send neither found nor proven unsent: looked at again
    # at next_try (a backoff no `generate --wait` sits through), sent again after qwen.lost_chat_after
    SPACING = "spacing"  # its chat was looked at less than poll_interval ago
    QUOTA = "quota"  # the chat's own daily quota is spent
    LIMIT = "limit"  # our send limit: `why` names it (qwen.max_sends_per_day or _per_cycle)
    ACCOUNT = "account"  # its chat account may not go on (disabled, removed), or no account may
    # send: `why` says which, with the fix
    ELSEWHERE = "elsewhere"  # its chat's account is another host's (a shared batch): that host goes on
    ORPHANED = "orphaned"  # its chat's account has had no host for store.orphan_hours: the router
    ASKED = "asked"  # --engine router
    HARD = "hard"  # the chat failed hard in this step
    STORE_BUSY = "store_busy"  # the store was held or unreachable: nothing written, try later


class Failure(Enum):
    """What the step in progress just learned (NONE: the article at rest)."""

    NONE = "none"
    CHAT = "chat"  # the chat failed hard
    ALL = "all"  # every engine it may use failed hard (or their answer was rejected)
    ACCOUNT = "account"  # the chat's account cannot go on (logged out, a bot check, its quota):
    # the account's trouble, not the article's: never counted, never dead-lettered


DAILY_LIMIT = "qwen.max_sends_per_day"
IN_DOUBT_WHY = "its send may be on the site: its chat is looked for first, at the next run"
CYCLE_LIMIT = "qwen.max_sends_per_cycle"


class Files(NamedTuple):
    """The article's files, as the scan (or the step under its lock) sees them. A named tuple:
    a scan builds one per article, 10,000 a run, and a frozen dataclass costs ten times more."""

    prompt: bool = True  # prompts/SLUG.md exists
    done: bool = False  # SLUG.md
    sent: bool = False  # SLUG.md.url (the step: a valid chat URL in it)
    sending: bool = False  # SLUG.md.sending, the intent marker
    dead: bool = False  # SLUG.md.failed
    unsafe: str = ""  # one of its own files is a symlink, a FIFO or a folder: wins even over done
    bad_prompt: str = ""  # the prompt can never be sent as it is: what is wrong and the fix


class Record(NamedTuple):
    """What the state record (and the journal) says of it (a named tuple, as Files)."""

    attempts: int = 0  # transient failures in a row
    hard_failures: int = 0  # hard failures on every engine, in a row
    next_try: float = 0.0
    last_poll: float = 0.0
    failing: bool = True  # no progress since its last hard failure (the journal's last step for it
    # is a failure, or the journal knows none)

    @classmethod
    def of(cls, state, *, failing: bool = True) -> Record:
        """From an article.ArticleState."""
        attempts, hard = int(state.attempts), int(state.hard_failures)
        return cls(attempts, hard, _time(state.next_try), _time(state.last_poll), failing)


def _time(value) -> float:
    try:
        return float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0  # a state file edited by hand: as if never set


class Limits(NamedTuple):
    """The chat's quota, the send limits and counts, and the config's waits. (Named tuples, as
    Facts and Decision: a plan builds some for each unfinished article, and a frozen dataclass
    costs several times more to build, and to compile at import.)"""

    quota_until: float | None = None  # the chat's quota is spent until then (None: it is not)
    quota_reason: str = ""
    router: bool = False  # router.enabled
    engine: str = "auto"  # what was asked: auto, qwen or router
    sends_today: int = 0
    max_sends_per_day: int = 0  # 0: no limit
    cycle_sends: int = 0  # sends this cycle has made (or planned)
    max_sends_per_cycle: int = 0  # 0: no limit (a run by hand has none)
    poll_interval: float = 60.0
    max_attempts: int = 5
    account_off: str = ""  # why the article's account (a new send: every account) may not go on
    elsewhere: str = ""  # a shared batch: its chat's account is another host's (which, said here)
    orphaned: str = ""  # a shared batch: no host served its chat's account for store.orphan_hours

    @property
    def sends_stopped(self) -> bool:
        """Nothing new may go to the chat today: its quota is spent or our daily limit reached."""
        return self.quota_until is not None or bool(
            self.max_sends_per_day and self.sends_today >= self.max_sends_per_day
        )


NO_RECORD, NO_LIMITS = Record(), Limits()


class Facts(NamedTuple):
    files: Files
    record: Record = NO_RECORD
    limits: Limits = NO_LIMITS
    now: float = 0.0
    planning: bool = False  # the cycle chooses whom to step: every wait counts, a send's backoff
    # too; the step itself (a run by hand, or the cycle's) waits only between looks at a sent chat
    wait: bool = False  # `generate --wait`: look at the chat at once, no spacing, no backoff
    next_turn: int = 0  # a multi-turn chat whose last answer is complete wants this turn sent
    failure: Failure = Failure.NONE


class Decision(NamedTuple):
    """What decide() returns. A named tuple: as cheap to build as a slots dataclass, and
    immutable, so one decision may serve every article it fits (see settled)."""

    phase: Phase
    action: Action
    reason: Reason = Reason.NONE
    until: float | None = None  # WAIT: the next step's time; quota: when it is no longer spent
    why: str = ""  # invalid: the problem; quota: the site's words; limit: its key; fail: no fallback
    replan: tuple[float, float] | None = None  # (next_try, last_poll) pulled in: save them


@dataclass(slots=True)
class Schedule:
    """When an article may next be stepped: `reason` "backoff" or "spacing" until `until`, or
    "" when it is due now. `replanned`: times were pulled in (the clock moved back); the
    pulled-in `next_try` and `last_poll` are what to save (whoever holds the article's lock)."""

    reason: str
    until: float
    replanned: bool = False
    next_try: float = 0.0
    last_poll: float = 0.0

    def apply_to(self, state) -> None:
        state.next_try, state.last_poll = self.next_try, self.last_poll


def backoff_delay(qwen: Qwen, attempts: int) -> float:
    """How long an article waits after `attempts` transient failures in a row."""
    return _backoff(qwen.poll_interval, attempts)


def _backoff(poll_interval: float, attempts: int) -> float:
    return min(poll_interval * 2 ** (max(attempts, 1) - 1), MAX_BACKOFF)


def schedule(record, poll_interval: float, now: float, *, spaced: bool) -> Schedule:
    """The timing rule the contract and the cycle both follow. `spaced`: polls of its chat are
    kept poll_interval apart. `record`: a Record or an ArticleState (attempts, next_try,
    last_poll), never changed.

    No time lies further ahead of `now` than its own wait allows: a retry no further than its
    backoff delay, the next poll no further than poll_interval. A time beyond that was set
    before the clock moved back (a day, or two days forward and back again): it is pulled in
    to that limit and `replanned` says so, so the article waits its own wait once, never days.
    """
    longest = _backoff(poll_interval, record.attempts) if record.attempts else MAX_BACKOFF
    next_try, last_poll, replanned = record.next_try, record.last_poll, False
    if next_try > now + longest:
        next_try, replanned = now + longest, True
    if last_poll > now:
        last_poll, replanned = now, True
    if next_try > now:
        return Schedule("backoff", next_try, replanned, next_try, last_poll)
    next_look = last_poll + poll_interval
    if spaced and next_look > now:
        return Schedule("spacing", next_look, replanned, next_try, last_poll)
    return Schedule("", now, replanned, next_try, last_poll)


def phase_of(f: Files, r: Record = NO_RECORD, limits: Limits = NO_LIMITS, now: float = 0.0) -> Phase:
    """The article's phase: the most pressing thing about it wins. From its files alone (the
    defaults): where they say it is, its record, the quota and the time not considered."""
    if f.unsafe:
        return Phase.INVALID
    if f.done:
        return Phase.DONE
    if f.dead:
        return Phase.DEAD
    if f.bad_prompt:
        return Phase.INVALID
    if not f.prompt:
        return Phase.ORPHAN
    # `failed` needs both a hard-failure count and no progress since (a later successful poll
    # leaves the count, but the article is generating again).
    if r.hard_failures and r.failing:
        return Phase.FAILED
    if limits.account_off or (not (f.sent or f.sending) and limits.sends_stopped):
        return Phase.QUOTA
    if r.next_try > now:
        return Phase.BACKOFF
    if f.sent:
        return Phase.GENERATING
    return Phase.SENDING if f.sending else Phase.PENDING


SETTLED = frozenset({Phase.INVALID, Phase.DONE, Phase.DEAD, Phase.ORPHAN})  # no step moves these


@lru_cache(maxsize=256)
def settled(f: Files) -> Decision | None:
    """The decision when the files alone settle it (done, dead, orphan, invalid: nothing to do),
    else None. decide's first rule. Pure, and a batch's articles mostly share a few kinds of
    files (finished: a prompt and SLUG.md), so each kind is worked out once; a decision is a
    named tuple: the articles that share it cannot change it."""
    phase = phase_of(f)
    if phase not in SETTLED:
        return None
    return Decision(phase, Action.NOTHING, why=f.unsafe or f.bad_prompt if phase is Phase.INVALID else "")


def decide(facts: Facts) -> Decision:
    """The article's phase and what its next step does, with the reason."""
    f, r, limits = facts.files, facts.record, facts.limits
    done = settled(f)
    if done:
        return done
    phase = phase_of(f, r, limits, facts.now)
    if facts.failure in (Failure.ACCOUNT, Failure.CHAT) and f.sending and not f.sent:
        # Its send may be on the site (the marker: its chat neither found nor proven never
        # sent): a hard failure, of the account or the chat, never hands it to the router nor
        # dead-letters it; the next run looks for its chat first (RECOVER), uncounted. Fuzz
        # seed 2200 trial 55: a recovery that met an unknown page held the account, and the
        # router wrote the article while the send was in doubt.
        return Decision(phase, Action.FAIL, Reason.IN_DOUBT, why=IN_DOUBT_WHY)
    if facts.failure is Failure.ACCOUNT:
        # A sent chat is its account's alone: it waits for it. An unsent prompt may go to the
        # router; without one it fails this run (exit 1), uncounted: its account is to blame.
        if not f.sent and limits.engine != "qwen" and limits.router:
            return Decision(phase, Action.FALL_BACK, Reason.HARD)
        return Decision(phase, Action.FAIL, Reason.ACCOUNT, why="" if f.sent else _no_fallback(limits))
    if facts.failure is not Failure.NONE:
        if facts.failure is Failure.CHAT and limits.engine != "qwen" and limits.router:
            return Decision(phase, Action.FALL_BACK, Reason.HARD)
        last = r.hard_failures + 1 >= limits.max_attempts  # this failure is counted first
        why = "" if facts.failure is Failure.ALL else _no_fallback(limits)
        return Decision(phase, Action.DEAD_LETTER if last else Action.FAIL, Reason.HARD, why=why)
    if limits.engine == "router":
        return Decision(phase, Action.FALL_BACK, Reason.ASKED, why="asked for the router (--engine router)")
    if limits.orphaned and (f.sent or f.sending):  # no host has its account any more
        action = Action.FALL_BACK if limits.engine == "auto" and limits.router else Action.WAIT
        return Decision(phase, action, Reason.ORPHANED, why=limits.orphaned)
    if limits.elsewhere and (f.sent or f.sending):  # the host with its account goes on with it
        return Decision(phase, Action.WAIT, Reason.ELSEWHERE, why=limits.elsewhere)
    if limits.account_off and (f.sent or f.sending):  # its chat is its account's alone: it waits
        return Decision(phase, Action.WAIT, Reason.ACCOUNT, why=limits.account_off)
    if f.sent and facts.next_turn:
        return _send_gate(facts, phase)
    if f.sent and facts.wait:
        return Decision(phase, Action.POLL)
    if f.sent or facts.planning:
        planned = schedule(r, limits.poll_interval, facts.now, spaced=f.sent)
        replan = (planned.next_try, planned.last_poll) if planned.replanned else None
        if planned.reason:
            return Decision(phase, Action.WAIT, Reason(planned.reason), planned.until, replan=replan)
        if f.sent:
            return Decision(phase, Action.POLL, replan=replan)
        if replan:
            return _with_replan(_next_send(facts, phase), replan)
    return _next_send(facts, phase)


def _next_send(facts: Facts, phase: Phase) -> Decision:
    if facts.files.sending:
        return Decision(phase, Action.RECOVER)
    return _send_gate(facts, phase)


def _send_gate(facts: Facts, phase: Phase) -> Decision:
    """May a prompt (or a next turn) go to the chat now? The chat's own quota first (the router
    takes over, or it waits), then our daily limit, then the cycle's."""
    limits = facts.limits
    if limits.quota_until is not None:
        action = Action.FALL_BACK if limits.engine == "auto" and limits.router else Action.WAIT
        return Decision(phase, action, Reason.QUOTA, limits.quota_until, why=limits.quota_reason)
    if limits.account_off:
        return Decision(phase, Action.WAIT, Reason.ACCOUNT, why=limits.account_off)
    if limits.max_sends_per_day and limits.sends_today >= limits.max_sends_per_day:
        return Decision(phase, Action.WAIT, Reason.LIMIT, why=DAILY_LIMIT)
    if limits.max_sends_per_cycle and limits.cycle_sends >= limits.max_sends_per_cycle:
        return Decision(phase, Action.WAIT, Reason.LIMIT, why=CYCLE_LIMIT)
    return Decision(phase, Action.SEND)


def _with_replan(decision: Decision, replan: tuple[float, float]) -> Decision:
    return decision._replace(replan=replan)


def _no_fallback(limits: Limits) -> str:
    return "--engine qwen" if limits.engine == "qwen" else "router.enabled = false"
