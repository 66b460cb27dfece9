"""The Store protocol: what qwenpipe remembers besides the sidecar files, as typed records.

One store holds one batch (one `articles/` folder's history): the journal (events), one record
per article, the sends (an intent before the click, the chat URL after it), the chat's quota
blocks per account, and leases. A server store that several hosts share keys its rows by batch
as well, so that its unique send is (batch, slug, turn). On one machine the sidecar files stay
the truth about "sent" and "done"; the store is the history and the bookkeeping, and holds no
article body.

Reads are methods of the Store. Writes happen in a `transaction()`: one short transaction, so a step
that writes several rows (an event, the record, the intent) is all there or not at all.

The sends table is the last guard against a second send: one row per (slug, turn), enforced by
a unique constraint of the database, never by a read-then-write in Python. A send is counted
for quotas when its `sending` event is written (it may have reached the site), as the journal
counted it before the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol

from ..errors import SetupProblem
from ..records import record

DEFAULT_ACCOUNT = "default"  # the one account of a setup without [accounts.*] tables
SEND_EVENT = "sending"  # the step before a click: what the daily send counts count
SENT_EVENTS = ("sent", "recovered")  # the steps that learned a chat URL
ENGINE_EVENTS = ("sent", "recovered", "fallback", "done")  # the steps that say which engine wrote it
UNSENT_EVENT = "unsent"  # the engine proved a send never reached the site: it takes one back
IMPORT_KEY = "legacy_import"  # the meta key that says an older qwenpipe's files were imported


class StoreError(SetupProblem):
    """The store cannot do what was asked; the message says what and the fix (a SetupProblem:
    a person must look, exit 1, one line)."""


class AlreadySent(StoreError):
    """A send of this (slug, turn) is already recorded: a second one must never happen."""

    def __init__(self, send: Send):
        super().__init__(
            f"{send.slug}: turn {send.turn} was already "
            + (
                f"sent ({send.chat_url})"
                if send.chat_url
                else f"about to be sent (intent at {send.intent_at})"
            )
            + "; refusing to send it again"
        )
        self.send = send


class StoreBusy(StoreError):
    """Another process held the store past the busy timeout: nothing was written; try later."""


class StoreUnreachable(StoreBusy):
    """The store's server cannot be reached (or the connection died mid-step, which the server
    rolls back): nothing was written; like a busy store, nothing is sent and a later run goes on."""


class LeaseLost(StoreError):
    """The caller no longer holds the article's lease: it must stop before any send."""


# Event and ArticleRecord are read 10,000 at a time by `status`: plain (not frozen) dataclasses
# build about four times faster. Treat them as values all the same: change a copy (replace).
@record
class Event:
    """One journal step. `fields` holds whatever else the step said (engine, chat_url, error...)."""

    slug: str
    event: str
    ts: float
    pid: int = 0
    account: str = ""  # the chat account the step was about; "" when none
    fields: Mapping[str, object] = field(default_factory=dict)
    seq: int = 0  # given by the store, in append order; 0 before it is appended

    def to_entry(self) -> dict:
        """The journal-line form (`time`, `ts`, `slug`, `event`, `pid` and the fields)."""
        entry: dict = {
            "time": datetime.fromtimestamp(self.ts).astimezone().isoformat(timespec="seconds"),
            "ts": self.ts,
            "slug": self.slug,
            "event": self.event,
            "pid": self.pid,
        }
        entry.update(self.fields)
        if self.account:
            entry["account"] = self.account
        return entry

    @classmethod
    def from_entry(cls, entry: Mapping[str, object], account: str = "") -> Event:
        """An event from a journal line (`journal.is_entry` checked it). A written `time` is kept."""
        rest = {k: v for k, v in entry.items() if k not in ("ts", "slug", "event", "pid", "account")}
        pid = entry.get("pid")
        return cls(
            slug=str(entry["slug"]),
            event=str(entry.get("event", "")),
            ts=float(entry["ts"]),  # type: ignore[arg-type]
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else 0,
            account=str(entry.get("account") or account),
            fields=rest,
        )


class Intent(NamedTuple):
    """What the intent marker says: a send of `turn` was about to happen (written before the click)."""

    turn: int
    time: float
    prompt_sha256: str
    account: str = DEFAULT_ACCOUNT
    pid: int = 0
    owner: str = ""  # the lease owner token that recorded it (several hosts); "" on one machine
    # The chat the send goes into, recorded before the page's completion request may leave the
    # browser: "" until the page names it (then nothing was sent while it is ""), None for an
    # intent an older version recorded (it never named its chat: recovery searches by text).
    chat_id: str | None = None


@dataclass(slots=True)
class Send:
    """One (slug, turn) send: its intent, and the chat URL once the site took it. Read, never
    changed (not frozen only because a frozen dataclass costs several times more to build, and
    status builds one per article)."""

    slug: str
    turn: int
    account: str
    prompt_sha256: str
    intent_at: float
    pid: int = 0
    owner: str = ""
    sent_at: float = 0.0
    chat_url: str = ""  # "" while only the intent is recorded
    chat_id: str | None = None  # Intent.chat_id

    @property
    def intent(self) -> Intent:
        return Intent(
            self.turn, self.intent_at, self.prompt_sha256, self.account, self.pid, self.owner, self.chat_id
        )


@record
class ArticleRecord:
    """What the contract remembers about one article between runs (was state/SLUG.json).

    `intent` is read, never written, through this record: it is the open intent among the
    article's sends (recorded with `Transaction.record_intent`), None when every send has its URL.
    The one list of these fields: the contract's working copy (contract.article.ArticleState)
    is this record with a list of errors it can append to.
    """

    slug: str = ""
    attempts: int = 0  # transient failures in a row
    hard_failures: int = 0  # hard failures on every engine, in a row
    next_try: float = 0.0
    last_poll: float = 0.0
    sent_at: float = 0.0
    engine: str = ""
    last_error: str = ""
    last_error_code: str = ""
    progress: str = ""
    turn: int = 0  # multi-turn prompts: the turn the chat is at
    turns: int = 1
    sent_sha256: str = ""  # the prompt's hash when it went to the chat
    errors: tuple[Mapping[str, object], ...] = ()  # the last errors: time, engine, code, error
    intent: Intent | None = None


@record
class Summary:
    """What status needs of an article's history, kept up to date by every `append` (the
    store's own index: status reads one row per article, never the events)."""

    slug: str
    last_event: str = ""  # the article's last step
    sent_ts: float = 0.0  # its last SENT_EVENTS step
    chat_url: str = ""  # the chat URL that step named
    engine: str = ""  # the engine of its last ENGINE_EVENTS step
    turns: int = 0  # the turns its last ENGINE_EVENTS step said, when that was a "done" (else 0)


class PromptCheck(NamedTuple):
    """Whether a prompt file could be sent, as last read: valid while `stamp` (its size, its
    mtime, its ctime and the code that judged it) is unchanged. Status reads 10,000 waiting prompts
    in the time of a few hundred this way."""

    slug: str
    stamp: str
    problem: str = ""  # empty: the prompt loads


class StatusRow(NamedTuple):
    """What `status` showed of one article, kept to be shown again while nothing it was made
    from changed (batch/status_cache.py says what each key holds). The row's own fields are
    status.Row's; `sent_at` is what its age counts from (None: no age shown)."""

    slug: str
    change: int  # the article's status_changes.n (Store.status_changes) when it was made
    context: str  # the workspace's settings it was made under
    files: str  # its files as the listing saw them (names, kinds, stamps)
    limits: str  # the limits its phase was decided by
    until: float  # it may change by the clock alone from then on
    state: str
    engine: str | None = None
    attempts: int = 0
    hard_failures: int = 0
    next_try: float | None = None
    last_error: str | None = None
    chat_url: str | None = None
    turn: int | None = None
    turns: int | None = None
    account: str | None = None
    sent_at: float | None = None
    since: float = 0.0  # when its chat's limits count from (its send's intent; 0: the look's time)


class QuotaBlock(NamedTuple):
    """The site said an account's daily quota is spent: no sends from it until `until`."""

    account: str
    until: float
    reason: str = ""
    since: float = 0.0  # 0 when not known (imported from a quota.json without it)


class SendCounts(NamedTuple):
    """Sends (`sending` steps) in a time range, in total and per account."""

    by_account: Mapping[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_account.values())

    def of(self, account: str) -> int:
        return self.by_account.get(account, 0)


class Lease(NamedTuple):
    """An article claimed by one worker until `expires`; only its `owner` token renews or releases it."""

    slug: str
    owner: str
    expires: float


@dataclass(slots=True)
class Finished:
    """A finished article as the batch's record holds it (a store shared by several hosts: each
    host writes its SLUG.md from this row). `document` is "" when only the listing was read.
    Read, never changed (slots, not frozen, as Send)."""

    slug: str
    engine: str
    account: str = ""
    host: str = ""
    ts: float = 0.0
    document: str = ""


@record
class ChatDeletion:
    """A finished article's chat to delete from the site (qwen.delete_chats = "after_collect"):
    pending until the site deleted it, then kept as its history: a deleted chat is never read
    again. Read, never changed (not frozen, as Send; a few at a time: made on first use)."""

    chat_url: str
    slug: str
    account: str  # the account the chat is on: the only one that can delete it
    since: float  # when the article was written and the delete became due
    deleted_at: float = 0.0  # when the site deleted it (or said it had it no more); 0: pending
    tries: int = 0  # deletes that failed so far
    last_error: str = ""  # the last failed delete's error

    @property
    def pending(self) -> bool:
        return not self.deleted_at


class Served(NamedTuple):
    """An account as the hosts serve it: the last host that said it serves it, and when."""

    account: str
    host: str
    seen: float


class Transaction(Protocol):
    """The writes of one transaction; the context manager commits them together or none."""

    def append(self, event: Event) -> int:
        """Add an event; returns its seq."""

    def article(self, slug: str) -> ArticleRecord | None:
        """The record as this transaction sees it (for a read-modify-write in one step)."""

    def put_article(self, record: ArticleRecord) -> None:
        """Insert or replace the article's record (its `intent` is ignored: see record_intent)."""

    def record_intent(self, slug: str, intent: Intent) -> None:
        """Record that `intent.turn` is about to be sent. AlreadySent when that turn has a row
        (the database's unique constraint says so); it leaves the step, undoing all of it."""

    def record_sent(self, slug: str, turn: int, chat_url: str, when: float) -> None:
        """The site took the turn: its chat URL. StoreError without an intent; AlreadySent when
        the turn already has another URL (the same URL again is a no-op)."""

    def name_chat(self, slug: str, turn: int, chat_id: str) -> None:
        """The page named the chat the open intent of `turn` sends into (before its request
        leaves the browser). StoreError when the turn has no open intent (nothing may be sent)."""

    def withdraw_intent(self, slug: str, turn: int) -> bool:
        """Remove an intent that never got a URL (the chat list showed it never reached the site)."""

    def forget_sends(self, slug: str) -> int:
        """Remove every send of the article (its files were deleted on purpose: a new send)."""

    def block_quota(self, block: QuotaBlock) -> None:
        """Record (or replace) the account's quota block."""

    def check_lease(self, slug: str, owner: str, now: float) -> None:
        """LeaseLost unless `owner` holds the article's lease at `now` (checked inside this step)."""

    def put_prompt_checks(self, checks: list[PromptCheck]) -> None:
        """Remember prompt checks (replacing the earlier ones of the same slugs)."""

    def put_status_rows(self, rows: list[StatusRow], gone: list[str] = ()) -> None:
        """Keep what status showed of these articles (replacing what it kept of them), and
        forget what it kept of the articles `gone`."""

    def put_finished(self, finished: Finished) -> bool:
        """Record the finished article (its whole document); False, and nothing changed, when
        the article is already recorded finished (the first one stays the batch's)."""

    def serve(self, host: str, accounts: list[str], now: float) -> None:
        """`host` serves these accounts now (each cycle says so: see Store.served)."""

    def put_chat_deletion(self, deletion: ChatDeletion) -> None:
        """Record (or replace) what is known of deleting one chat (keyed by its URL)."""

    def claim_meta(self, key: str, value: str) -> bool:
        """Write a named value once: False (nothing written) when `key` is already there. Lets two
        processes race to do a one-time job (the legacy import) and only one do it."""

    def put_meta(self, key: str, value: str) -> None:
        """Write (or replace) a named value: a cache the next reader may use (the status
        document, batch/status_document.py)."""


class Store(Protocol):
    def transaction(self) -> AbstractContextManager[Transaction]:
        """One write transaction: every write in the block, or none (on an error or a kill)."""

    def events(self, slug: str | None = None, *, after: int = 0, since: float = 0.0) -> Iterator[Event]:
        """Events with seq > `after` and ts >= `since`, oldest first; one article's with `slug`."""

    def summaries(self, slugs: list[str] | None = None) -> dict[str, Summary]:
        """Every article's Summary (articles without events have none); `slugs`: of these only."""

    def prompt_checks(self, slugs: list[str] | None = None) -> dict[str, PromptCheck]:
        """The remembered prompt checks, by slug; `slugs`: of these only."""

    def status_rows(self) -> dict[str, StatusRow]:
        """What status kept of each article (Transaction.put_status_rows), by slug."""

    def status_changes(self, slugs: list[str] | None = None) -> dict[str, int]:
        """Slug -> how many writes of its articles, summaries and sends rows the store has seen
        (raised by the store itself; an article never written has none); `slugs`: these only."""

    def status_generation(self, but: str) -> int:
        """The sum of every slug's status_changes but `but`'s (journal.NO_ARTICLE: a run's own
        events, which no article's row shows): raised by every write of the articles,
        summaries and sends rows (their counters only rise, and none is ever removed), so an
        equal generation means none of those rows was written since."""

    def article(self, slug: str) -> ArticleRecord | None:
        """The article's record, None when the store knows nothing of it."""

    def articles(self, slugs: list[str] | None = None) -> dict[str, ArticleRecord]:
        """Every article's record; `slugs`: of these only."""

    def sends(self, slug: str | None = None) -> list[Send]:
        """The article's sends, by turn; every article's (by slug, then turn) with no slug."""

    def first_sends(self, slugs: list[str] | None = None) -> dict[str, Send]:
        """Every article's first send (turn 1), by slug: what status and the plan read of
        10,000 articles (an article's later turns are its own step's); `slugs`: of these only."""

    def send_counts(self, start: float, end: float = float("inf")) -> SendCounts:
        """Sends with start <= ts < end (a local day: quota.local_day_start and the next one),
        less those an `unsent` step in the range took back."""

    def quota_block(self, account: str, now: float) -> QuotaBlock | None:
        """The account's quota block while it lasts (until > now), else None."""

    def quota_blocks(self, now: float) -> list[QuotaBlock]:
        """Every account's quota block that lasts past `now`."""

    def claim_lease(self, slug: str, owner: str, seconds: float, now: float) -> bool:
        """Take the article's lease (free, expired, or already ours) until now + seconds."""

    def renew_lease(self, slug: str, owner: str, seconds: float, now: float) -> bool:
        """Extend our lease; False when it expired or another owner holds it (it is lost)."""

    def release_lease(self, slug: str, owner: str) -> bool:
        """Give the lease up; only its owner can (False otherwise)."""

    def lease(self, slug: str, now: float) -> Lease | None:
        """Who holds the article's lease at `now`."""

    def leases(self, now: float) -> dict[str, Lease]:
        """Every lease held at `now`, by slug (a cycle plans around other hosts' articles)."""

    def meta(self, key: str) -> str | None:
        """A value written with Transaction.claim_meta or put_meta."""

    def finished(self, slugs: list[str] | None = None) -> dict[str, Finished]:
        """The finished articles: with `slugs`, those (and their documents); else every one,
        without documents (a listing: cheap for 10,000)."""

    def served(self) -> dict[str, Served]:
        """Each account's last serving host and time (Transaction.serve)."""

    def chat_deletions(self, slug: str | None = None, *, pending: bool = False) -> list[ChatDeletion]:
        """The chats recorded for deletion (one article's with `slug`), oldest first; with
        `pending`, only those the site has not deleted yet."""

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None:
        """Closes the store."""


def dumps(value: object) -> str:
    """The JSON form a store keeps fields and errors in (compact, any value as a string)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
