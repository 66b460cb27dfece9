"""The batch status: every article's state, the totals, the quotas and the last cycle, as data.

Read-only on the project's files (no lock, ever: a dashboard must never block a cycle). It
lists prompts/ and articles/ once (batch.scan), reads the small state file of unfinished
articles only, and learns the rest from the store (a few queries: the records, each article's
last events, today's sends, the quota block). `to_json()` is the `status --json` document; its field names are
stable and documented in docs/status.md.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from json.encoder import encode_basestring
from pathlib import Path
from typing import NamedTuple

from .. import files
from ..accounts import all_accounts
from ..config import key_file_warning
from ..contract.hosts import chat_limits, shared_batch
from ..contract.journal import NO_ARTICLE
from ..contract.phases import UNFINISHED, Limits, Phase, Record, phase_of, schedule
from ..contract.quota import Hold, held_words, host_accounts, local_day_start, sends_today
from ..contract.rotation import Standing, capacity, sender_of, standings
from ..contract.workspace import Workspace
from ..errors import UsageProblem
from ..records import record
from ..redact import first_line
from ..store.protocol import Send, SendCounts, StatusRow, StoreBusy, StoreError, Summary
from ..times import clock
from ..times import short_duration as ago  # the table's narrow durations
from . import outbox, status_cache, status_document
from . import scan as batch

SCHEMA_VERSION = 1

STATES = tuple(phase.value for phase in Phase)  # in the order the dashboard lists them
SORTS = ("state", "age", "slug")

# Events after which an article with hard failures is still "failed" (no newer progress).
FAILURE_EVENTS = frozenset({"hard", "quota", "router_failed", "dead_letter"})

CYCLE_RECORD = "last_cycle.json"
CRON_PERIOD = 5 * 60  # the cron line the README suggests: a cycle every 5 minutes
STALE_CYCLES = 3  # warn after this many missed cycles (or polls, when polls are slower)


# Row and BatchStatus have docstrings: @dataclass writes a missing one with inspect.signature,
# at import (a warm `status --json` pays for it, docs/performance.md).
@dataclass(slots=True)
class Row:
    """One article's line of `status`: an element of `status --json`'s `articles`."""

    slug: str
    state: str
    engine: str | None = None
    age_seconds: int | None = None  # since the prompt was sent
    attempts: int = 0  # transient failures in a row
    hard_failures: int = 0  # hard failures in a row
    next_try: float | None = None
    last_error: str | None = None
    chat_url: str | None = None
    turn: int | None = None  # multi-turn prompts: the turn the chat is at
    turns: int | None = None  # multi-turn prompts: how many turns the prompt has
    path: str = ""
    account: str | None = None  # the chat account its chat is on (or was sent from)
    host: str | None = None  # a shared batch: the host that sent its chat (or wrote it)

    def to_json(self) -> dict:
        return {
            "slug": self.slug,
            "state": self.state,
            "engine": self.engine,
            "age_seconds": self.age_seconds,
            "attempts": self.attempts,
            "hard_failures": self.hard_failures,
            "next_try": iso(self.next_try),
            "last_error": self.last_error,
            "chat_url": self.chat_url,
            "turn": self.turn,
            "turns": self.turns,
            "path": self.path,
            "account": self.account,
            "host": self.host,
        }

    def json_text(self, age: str | None = None, next_try: str | None = None) -> str:
        """`json.dumps(self.to_json(), ensure_ascii=False)`, written field by field: the same
        bytes (test_status_json_text walks every field) at under half the cost, which over
        100,000 rows is a quarter of a second of `status --json`. `age`, `next_try`: the text
        written for those fields instead (the holes of a kept document, status_document)."""
        age = _number(self.age_seconds) if age is None else age
        next_try = _text(iso(self.next_try)) if next_try is None else next_try
        return (
            f'{{"slug": {_text(self.slug)}, "state": {_text(self.state)}, "engine": {_text(self.engine)}, '
            f'"age_seconds": {age}, "attempts": {_number(self.attempts)}, '
            f'"hard_failures": {_number(self.hard_failures)}, "next_try": {next_try}, '
            f'"last_error": {_text(self.last_error)}, "chat_url": {_text(self.chat_url)}, '
            f'"turn": {_number(self.turn)}, "turns": {_number(self.turns)}, "path": {_text(self.path)}, '
            f'"account": {_text(self.account)}, "host": {_text(self.host)}}}'
        )


def _text(value: str | None) -> str:
    """A string field as json.dumps(ensure_ascii=False) writes it (its own C escaper)."""
    return "null" if value is None else encode_basestring(value) if type(value) is str else json.dumps(value)


def _number(value: int | None) -> str:
    """An int field as json.dumps writes it; anything else (never seen) by json.dumps itself."""
    return "null" if value is None else int.__repr__(value) if type(value) is int else json.dumps(value)


@record
class LastCycle:
    """`.qwenpipe/last_cycle.json`, written by `cycle` when one starts and when it finishes."""

    started: float | None
    finished: float | None
    exit_code: int | None
    summary: str
    pid: int | None
    chat_logged_out: bool = False  # the chat refused for want of a login (and no cycle worked since)
    routed_while_logged_out: int = 0  # articles the router wrote since then
    host: str | None = None  # the machine whose process `pid` is
    store_error: str = ""  # the cycle stopped on the store (unreachable, or busy): what it said
    store_failures: int = 0  # cycles in a row that stopped on the store (see cronexit)
    store_failing_since: float | None = None
    problem: str = ""  # the record itself cannot be read (a link, a FIFO): what and the fix

    @classmethod
    def read(cls, path: Path) -> LastCycle | None:
        try:
            data = json.loads(files.read_bytes(path))  # UnsafeFile for a symlink or a FIFO
        except FileNotFoundError:
            return None
        except files.SetupProblem as problem:  # said by status and show, never their failure
            return cls(None, None, None, "", None, problem=str(problem))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        return cls(
            started=_float_or_none(data.get("started")),
            finished=_float_or_none(data.get("finished")),
            exit_code=_int_or_none(data.get("exit_code")),
            summary=str(data.get("summary") or ""),
            pid=_int_or_none(data.get("pid")),
            chat_logged_out=data.get("chat_logged_out") is True,
            routed_while_logged_out=max(_int_or_none(data.get("routed_while_logged_out")) or 0, 0),
            host=str(data["host"]) if isinstance(data.get("host"), str) else None,
            store_error=str(data.get("store_error") or ""),
            store_failures=max(_int_or_none(data.get("store_failures")) or 0, 0),
            store_failing_since=_float_or_none(data.get("store_failing_since")),
        )

    @property
    def running(self) -> bool:
        # A start newer than the last finish: a cycle is under way (or died without finishing).
        return self.started is not None and (self.finished is None or self.started > self.finished)

    @property
    def gone(self) -> bool:
        """It started and never finished, and its process is no longer alive on this machine
        (killed, or the machine restarted): not "running"."""
        if not self.running or self.pid is None or self.pid <= 0:
            return False
        if self.host is not None and self.host != os.uname().nodename:
            return False  # another machine's process: not ours to ask about
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # alive, another user's (EPERM)
            return False
        return False

    def to_json(self, now: float) -> dict:
        return {
            "started": iso(self.started),
            "finished": iso(self.finished),
            "exit_code": self.exit_code,
            "summary": self.summary,
            "pid": self.pid,
            "running": self.running and not self.gone,
            "gone": self.gone,
            "seconds_since_finished": None if self.finished is None else int(now - self.finished),
            "chat_logged_out": self.chat_logged_out,
            "routed_while_logged_out": self.routed_while_logged_out,
            "store_error": self.store_error or None,
            "store_failures": self.store_failures,
            "problem": self.problem or None,
        }


@dataclass
class LoginInfo:
    """The saved chat login (browser.storage_state): read from the file, never from a browser."""

    state_file: Path
    expires_at: float | None  # the token's JWT `exp`; None when no file or no readable token

    @classmethod
    def read(cls, state_file: Path) -> LoginInfo:
        from ..signin.saved import state_token_expiry

        return cls(state_file, state_token_expiry(state_file))

    def to_json(self) -> dict:
        return {"state_file": str(self.state_file), "expires_at": iso(self.expires_at)}


@dataclass
class AccountLine:
    """One chat account as `status` and `qwenpipe accounts` show it: read from its saved login
    and the store, never from a browser."""

    name: str
    enabled: bool
    login: LoginInfo
    sends_today: int
    limit: int  # its own max_sends_per_day; 0 = none
    quota_until: float | None = None
    quota_reason: str | None = None
    hold: Hold | None = None  # the same block read whole: its kind and since (a bot check...)
    share: float | None = None  # its part of every account's sends today, 0-1 (None: none yet)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "enabled": self.enabled,
            "login": self.login.to_json(),
            "sends_today": self.sends_today,
            "share_today": self.share,  # of every account's sends today (None: none yet)
            "limit": self.limit or None,
            "quota": {
                "blocked": self.quota_until is not None,
                "until": iso(self.quota_until),
                "reason": self.quota_reason,
            },
            "hold": self.hold_json(),
        }

    def hold_json(self) -> dict | None:
        hold = self.hold
        if hold is None:
            return None
        return {
            "kind": hold.kind,
            "since": iso(hold.since or None),
            "until": iso(hold.until),
            "message": hold.words(),
        }


class Today(NamedTuple):
    """What the store says of today, read once for every line a status shows: the day's send
    counts and each account's standing (contract.rotation; a reader's, which never writes)."""

    counts: SendCounts
    standings: list[Standing]

    @classmethod
    def read(cls, workspace: Workspace, now: float) -> Today:
        counts = workspace.store.send_counts(local_day_start(now))
        return cls(counts, standings(workspace, now, {}, replan=False, counts=counts))


def collect_accounts(
    workspace: Workspace, now: float, *, use_store: bool = True, read: Today | None = None
) -> list[AccountLine]:
    """Every account, in config order, with its login, its sends today and its quota block.
    `read`: what the caller read of today already (`collect` reads it once for every line)."""
    store = workspace.store if workspace.has_store and use_store else None  # a reader creates no store
    if read is None and store:
        read = Today.read(workspace, now)
    counts, found = read or (None, None)
    blocks = {s.account.name: s for s in found or ()}
    lines = []
    for account in all_accounts(workspace.config):
        block = blocks.get(account.name)
        lines.append(
            AccountLine(
                account.name,
                account.enabled,
                LoginInfo.read(account.storage_state),
                counts.of(account.name) if counts else 0,
                account.max_sends_per_day,
                quota_until=block.quota_until if block else None,
                quota_reason=(block.quota_reason or None) if block else None,
                hold=workspace.chat_quota.held(now, account.name) if block and block.quota_until else None,
            )
        )
    total = sum(line.sends_today for line in lines)
    for line in lines:  # how the accounts share the day's sends ([accounts] rotation)
        line.share = round(line.sends_today / total, 3) if total else None
    return lines


@dataclass
class BatchStatus:
    """The whole batch at `now`: what `status` shows and `status --json` writes (to_json)."""

    now: float
    prompts_dir: Path
    articles_dir: Path
    rows: list[Row]  # after filters and sorting
    totals: dict[str, int]  # the whole batch, whatever the filters
    sends_today: int
    sends_limit: int  # 0 = no limit
    quota_blocked_until: float | None = None
    quota_reason: str | None = None
    last_cycle: LastCycle | None = None
    login: LoginInfo | None = None
    accounts: list[AccountLine] = field(default_factory=list)
    several_accounts: bool = False  # [accounts.*] tables: a line per account
    warnings: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # the whole batch's invalid prompts' problems
    filters: str = ""  # what `rows` is limited to, in words ("" = every article)
    store_error: str = ""  # the store could not be read: this host's files alone are shown
    rows_text: str | None = None  # the rows as `status --json` writes them, kept whole (rows empty)
    rows_shown: int = 0  # how many rows rows_text holds
    rows_unhinted: bool = False  # rows_text holds no password hint (redact.password_hinted)

    @property
    def limits(self) -> Limits:
        """The chat's quota and the daily send limit, as every article's phase sees them."""
        return Limits(
            quota_until=self.quota_blocked_until,
            quota_reason=self.quota_reason or "",
            sends_today=self.sends_today,
            max_sends_per_day=self.sends_limit,
        )

    @property
    def sends_stopped(self) -> bool:
        return self.limits.sends_stopped

    def to_json(self, *, rows: bool = True) -> dict:
        """The `status --json` document (`rows` False: its articles left out)."""
        limit = self.sends_limit or None
        return {
            "schema": SCHEMA_VERSION,
            "generated_at": iso(self.now),
            "prompts_dir": str(self.prompts_dir),
            "articles_dir": str(self.articles_dir),
            "totals": {**self.totals, "total": sum(self.totals.values())},
            "shown": self.rows_shown if self.rows_text is not None else len(self.rows),
            "sends": {
                "today": self.sends_today,
                "limit": limit,
                "remaining": None if limit is None else max(limit - self.sends_today, 0),
            },
            "chat_quota": {
                "blocked": self.quota_blocked_until is not None,
                "until": iso(self.quota_blocked_until),
                "reason": self.quota_reason,
            },
            "last_cycle": self.last_cycle.to_json(self.now) if self.last_cycle else None,
            "login": self.login.to_json() if self.login else None,
            "accounts": [account.to_json() for account in self.accounts],
            "warnings": list(self.warnings),
            "store_error": self.store_error or None,
            **({"articles": self._rows_json()} if rows else {}),
        }

    def _rows_json(self) -> list[dict]:
        if self.rows_text is not None:  # kept whole: the same dicts, read back from its text
            return json.loads(f"[{self.rows_text}]")
        return [row.to_json() for row in self.rows]

    def json_text(self) -> str:
        """`json.dumps(self.to_json(), ensure_ascii=False)` (compact: what a script reads), its
        rows written by Row.json_text."""
        head = json.dumps({**self.to_json(rows=False), "articles": []}, ensure_ascii=False)
        # "articles" is the last key: its rows go between its brackets, `[]}` at the very end.
        rows = (
            self.rows_text
            if self.rows_text is not None
            else ", ".join([row.json_text() for row in self.rows])
        )
        return f"{head[:-3]}[{rows}]}}"

    def script_json(self) -> str:
        """json_text masked (redact.masked_json_text), as a script is given it. Rows kept whole
        with no password hint in them (status_document) are not looked at for one again: over
        10,000 rows, that look was 2 % of a warm `status --json`."""
        from ..redact import masked_json_text

        text = self.json_text()
        unhinted = None
        if self.rows_unhinted and self.rows_text is not None:  # they end before the closing `]}`
            unhinted = slice(len(text) - 2 - len(self.rows_text), len(text) - 2)
        return masked_json_text(text, self.to_json, unhinted=unhinted, ensure_ascii=False)


def check_states(states: list[str] | None) -> list[str]:
    """The `--state` values, split on commas; UsageProblem names a bad one and the valid ones."""
    wanted = [s.strip() for value in states or [] for s in value.split(",") if s.strip()]
    for state in wanted:
        if state not in STATES:
            raise UsageProblem(f"--state {state!r} is not a state; choose from {', '.join(STATES)}")
    return wanted


def collect(
    workspace: Workspace,
    now: float | None = None,
    *,
    state_filter: list[str] | None = None,
    pattern: str | Sequence[str] | None = None,
    sort: str = "state",
    as_text: bool = False,
) -> BatchStatus:
    """The whole batch as data: one scan of the folders, a few queries of the store. A store
    that cannot be read (its server down, or held past its timeout) leaves what this host's
    files say, with a warning that says so. `pattern`: a glob of slugs, or several (any one).
    `as_text`: its rows may come as the text of `status --json` alone (BatchStatus.rows_text,
    `rows` empty), shown again from the document the store kept (status_document)."""
    now = time.time() if now is None else now
    patterns = [pattern] if isinstance(pattern, str) else list(pattern or ())
    wanted = check_states(state_filter)
    workspace.config.require_prompts_dir()  # the wrong folder (no config, no prompts/): exit 2, said
    if sort not in SORTS:
        raise UsageProblem(f"--sort {sort!r}: choose one of {', '.join(SORTS)}")
    files.check_folder(workspace.state_dir / "state")  # read nothing through a link of .qwenpipe
    try:
        with batch.no_collections():
            return _collect(workspace, now, wanted, patterns, sort, use_store=True, as_text=as_text)
    except StoreBusy as busy:
        with batch.no_collections():
            status = _collect(workspace, now, wanted, patterns, sort, use_store=False)
        status.store_error = str(busy)
        status.warnings.insert(
            0,
            f"the store cannot be read ({busy}): shown is what this host's files say; sends "
            "today, quota blocks, attempts and errors are unknown until it answers",
        )
        return status


def _collect(
    workspace: Workspace,
    now: float,
    wanted: list[str],
    patterns: list[str],
    sort: str,
    *,
    use_store: bool,
    as_text: bool = False,
) -> BatchStatus:
    # A project that never ran has no store: status, a reader, does not create one.
    """The batch's status at `now`: one row per article (those `wanted` or matching `patterns`,
    sorted by `sort`), the totals and the batch's lines, read from the files and, with
    `use_store` and a store there, from the store (never created or written by a reader)."""
    store = workspace.store if workspace.has_store and use_store else None
    today = Today.read(workspace, now) if store else None
    able = capacity(today.standings) if today else None  # never writes
    status = BatchStatus(
        now=now,
        prompts_dir=workspace.prompts_dir,
        articles_dir=workspace.articles_dir,
        rows=[],
        totals=dict.fromkeys(STATES, 0),
        sends_today=sends_today(workspace.journal, now, host_accounts(workspace.config), today.counts)
        if today
        else 0,
        sends_limit=int(workspace.config.qwen.max_sends_per_day),
        quota_blocked_until=able.quota_until if able else None,
        quota_reason=able.quota_reason or None if able else None,
        last_cycle=LastCycle.read(workspace.state_dir / CYCLE_RECORD),
        login=LoginInfo.read(workspace.config.resolve(workspace.config.browser.storage_state)),
        accounts=collect_accounts(workspace, now, use_store=use_store, read=today),
        several_accounts=bool(workspace.config.accounts),
    )
    limits = status.limits
    if able and able.off:
        limits = limits._replace(account_off=able.off)
    shared = store is not None and shared_batch(workspace.config)
    qwen = workspace.config.qwen
    context = RowContext(
        str(workspace.articles_dir), workspace, limits, now, None, shared, qwen.poll_interval, qwen.base_url
    )
    # The plain `status --json` of a store of its own: the document it kept, while it holds.
    whole = as_text and store is not None and not shared and not wanted and not patterns and sort == "state"
    if whole:
        context.cache_key = status_cache.context_key(workspace, shared)
        generation = store.status_generation(NO_ARTICLE)  # before the rows: a write since is seen next time
        stamps = status_document.folder_stamps(workspace)  # before the listings, likewise
        kept = status_document.read(store)
        if kept is not None and status_document.holds(kept, now, generation, stamps, context):
            status.totals, status.invalid = dict(kept.totals), list(kept.invalid)
            status.rows_text, status.rows_shown = filled(kept, now), kept.count
            status.rows_unhinted = not kept.hinted
            return _finished(status, workspace, now, use_store)
    links: list[str] = []
    views = batch.scan(workspace.prompts_dir, workspace.articles_dir, links=links)
    hosts = batch.overlay_batch(views, store, workspace.articles_dir) if shared else {}
    context.served = store.served() if shared else None
    batch.attach_unsafe(views, workspace.state_dir)
    rows, kept_rows = made_rows(views, workspace, store, context)
    for row in rows:
        row.host = hosts.get(row.slug) or None
    for row in rows:
        status.totals[row.state] += 1
    status.invalid = [row.last_error or row.slug for row in rows if row.state == Phase.INVALID]
    _finished(status, workspace, now, use_store)
    shown_by = [f"slugs matching {' or '.join(map(repr, patterns))}"] if patterns else []
    status.filters = "; ".join(shown_by + ([f"state {', '.join(wanted)}"] if wanted else []))
    status.rows = sort_rows(
        [
            r
            for r in rows
            if (not wanted or r.state in wanted)
            and (not patterns or any(fnmatch.fnmatchcase(r.slug, p) for p in patterns))
        ],
        sort,
    )
    if whole:
        made = dict(zip([view.slug for view in views], zip(kept_rows, views, strict=True), strict=True))
        document = status_document.made(
            [status_document.ShownRow(row, *made[row.slug]) for row in status.rows],
            generation,
            stamps,
            context,
            links,
            status.totals,
            status.invalid,
        )
        if document is not None:
            keep_document(store, document)
            # Its rows are already written out: the text shown is the text kept.
            status.rows_text, status.rows_shown = filled(document, now), document.count
            status.rows_unhinted = not document.hinted
    return status


def filled(document: status_document.Document, now: float) -> str:
    """The kept rows' text with each hole filled as of `now`, as Row.json_text writes it."""
    parts, age = document.text.split(status_document.HOLE), status_document.AGE
    out = [""] * (2 * len(parts) - 1)
    out[0::2] = parts
    out[1::2] = [  # an age as _number writes an int; a next try as _text(iso(...))
        str(int(now - value)) if kind == age else _text(iso(value))
        for kind, value in zip(document.holes, document.values, strict=True)
    ]
    return "".join(out)


def _finished(status: BatchStatus, workspace: Workspace, now: float, use_store: bool) -> BatchStatus:
    """The batch's warnings, once its totals and invalid prompts are known."""
    status.warnings = warnings(status, workspace.config.qwen.poll_interval)
    status.warnings += hours_warnings(workspace, now, use_store=use_store)
    exposed = key_file_warning(workspace.config)
    if exposed:
        status.warnings.append(exposed)
    undelivered = outbox.pending_warning(workspace.state_dir)
    if undelivered:
        status.warnings.append(undelivered)
    return status


def keep_document(store, document: status_document.Document) -> None:
    """Keep the document for the next status (a cache, as remember's rows: a store that cannot
    take it now, or text the store would mask, leaves it out)."""
    from ..redact import Verbatim, mask_kept

    text = document.dumps()
    if mask_kept(text) != text:  # kept masked, it would no longer be the text shown
        return
    try:
        with store.transaction() as tx:  # through the one mask above (30 MB over 100,000 rows): once
            tx.put_meta(status_document.META_KEY, Verbatim(text))
    except StoreError:
        pass


def made_rows(
    views: list[batch.ArticleView], workspace: Workspace, store, context: RowContext
) -> tuple[list[Row], list[StatusRow | None]]:
    """Every view's row, in their order: the row the store kept where nothing it was made from
    changed (status_cache), else made afresh from the store's rows of those articles alone,
    and kept for the next status. Beside them, what the store keeps of each (None: not kept)."""
    now, rows = context.now, [None] * len(views)
    keeps: list[StatusRow | None] = [None] * len(views)
    if store and not context.cache_key:
        context.cache_key = status_cache.context_key(workspace, context.shared)
    kept = status_cache.KeptRows.read(store, context.cache_key) if store else None
    stale, keep, learned = [], [], []
    if kept is None:
        stale = [(i, view, None) for i, view in enumerate(views)]
    else:
        files_key, usable = status_cache.files_key, kept.usable
        within_wait, qwen = status_cache.within_wait, workspace.config.qwen
        no_limits, forever = status_cache.NO_LIMITS, status_cache.FOREVER
        keys: dict = {}  # (account, sent, since) -> its limits' key: a few for 100,000 rows
        for i, view in enumerate(views):
            key = files_key(view, now)
            found = usable(view.slug, key, now)
            if found is not None and found.limits != no_limits:
                sent = view.sent or view.sending
                limits = keys.get((found.account, sent, found.since))
                if limits is None:
                    limits = context.limits_key(context.limits_of(found.account, sent, found.since))
                    keys[found.account, sent, found.since] = limits
                if found.limits != limits:
                    found = None
            if found is not None and (found.until == forever or within_wait(found, now, qwen)):
                rows[i], keeps[i] = shown_row(found, context), found
            else:
                stale.append((i, view, key))
    if stale:
        # A few changed articles: the store's rows of those alone; most of them: every row.
        slugs = [view.slug for _, view, _ in stale] if len(stale) * 4 < len(views) else None
        fresh = [view for _, view, _ in stale]
        summaries = store.summaries(slugs) if store else {}
        senders = store.first_sends(slugs) if store else {}
        batch.attach_store_records(fresh, store, slugs)
        learned = batch.check_waiting_prompts(
            fresh,
            workspace.prompts_dir,
            workspace.config.qwen.max_prompt_bytes,
            store.prompt_checks(slugs) if store else None,
        )
        for i, view, key in stale:
            made = build_row(view, summaries.get(view.slug), context, senders.get(view.slug))
            rows[i] = made.row
            if key is not None and kept is not None:
                keeps[i] = kept_row(made, key, kept.changes.get(view.slug, 0), kept.context)
                keep.append(keeps[i])
    gone = (
        kept.gone({view.slug for view in views})
        if kept is not None and len(kept.rows) > len(views) - len(stale)
        else []
    )
    if store is not None and (learned or keep or gone):
        remember(store, learned, keep, gone)
    return rows, keeps  # type: ignore[return-value]


def remember(store, learned: list, rows: list[StatusRow], gone: list[str]) -> None:
    """Keep the prompt checks and the rows made now, and forget the rows of articles no longer
    there, so that the next status reads only what changed. A cache: a store that cannot take
    it now skips it, never status."""
    try:
        with store.transaction() as tx:
            if learned:
                tx.put_prompt_checks(learned)
            if rows or gone:
                tx.put_status_rows(rows, gone)
    except StoreError:  # busy, or not ours to write (a read-only database): shown all the same
        pass


DONE, INVALID = Phase.DONE.value, Phase.INVALID.value  # plain strings: rows hold the values


@functools.cache
def no_summary() -> Summary:
    """The summary of an article with no step in the journal (never sent): made on first need,
    as Summary itself (a warm `status --json` makes no row)."""
    return Summary("")


class Made(NamedTuple):
    """A row made afresh, and what keeping it needs: the key of the limits its phase was
    decided by (status_cache.NO_LIMITS: none), until when the clock leaves it as it is, when its
    chat's limits count from (0: the time of the look), and what its age counts from."""

    row: Row
    limits: str = status_cache.NO_LIMITS
    until: float = status_cache.FOREVER
    since: float = 0.0
    sent_at: float | None = None


def build_row(
    view: batch.ArticleView, summary: Summary | None, context: RowContext, first_send: Send | None
) -> Made:
    """One article's row. Done articles are described by the store alone (no file read). Its
    account: the one its chat is on (its first send's, or its intent marker's)."""
    journal = summary or no_summary()
    row = Row(view.slug, DONE, journal.engine or None, path=f"{context.articles}/{view.slug}.md")
    written_by_router = journal.engine == "router" and view.done
    if not written_by_router and (view.sending or (first_send is not None and first_send.chat_url)):
        row.account = sender_of(view, first_send, may_have_marker=view.sending)
    row.chat_url = journal.chat_url or None
    sent_at = journal.sent_ts
    seen = view.seen()
    phase = phase_of(seen)
    if phase is Phase.INVALID:
        row.state, row.last_error = INVALID, view.why_invalid
        return Made(row)
    if journal.turns > 1:  # a done multi-turn article: its "done" step says how many
        row.turns = journal.turns
    made = Made(row)
    if phase is not Phase.DONE:
        record = view.record
        if view.file_problem:  # its old state file is a link or a FIFO: its problem alone
            row.state, row.last_error = INVALID, view.file_problem
            return Made(row)
        now = context.now
        if phase is Phase.GENERATING:  # the file is read only where the store has no URL
            sent_to = first_send.chat_url if first_send is not None else ""
            row.chat_url = journal.chat_url or sent_to or context.chat_url(view.slug) or row.chat_url
        row.engine = record.engine or row.engine
        row.attempts, row.hard_failures = record.attempts, record.hard_failures
        row.last_error = first_line(record.last_error) or None
        if phase is Phase.GENERATING and view.sent:  # a sidecar its step would refuse: said here
            refused = context.refused_url(view.slug)
            if refused:
                row.state, row.last_error, row.chat_url = INVALID, refused, None
                return Made(row)
        # The times as its next step plans them: one the clock left ahead (it went back since)
        # is never shown further off than its own wait (phases.schedule; the step saves it).
        planned = schedule(record, context.poll_interval, now, spaced=False)
        row.next_try = planned.next_try if planned.next_try > now else None
        sent_at = record.sent_at or sent_at
        if int(record.turns or 1) > 1:
            row.turn, row.turns = int(record.turn or 1), int(record.turns)
        since = first_send.intent_at if first_send else 0.0
        limits = context.limits_of(row.account, view.sent or view.sending, since)
        if limits.orphaned:  # said here before the next cycle's router takes it over
            row.last_error = f"{limits.orphaned}; the router writes it next"
        failing = not journal.last_event or journal.last_event in FAILURE_EVENTS
        known = Record.of(record, failing=failing)._replace(next_try=planned.next_try)
        row.state = phase_of(seen, known, limits, now).value
        # Shown as it is until its backoff ends; a time the clock left ahead (pulled in to now
        # plus its wait) moves with the clock: made afresh each time.
        until = (
            now
            if planned.replanned
            else (planned.next_try if planned.next_try > now else status_cache.FOREVER)
        )
        made = Made(row, context.limits_key(limits), until, since)
    aged = bool(sent_at) and phase is not Phase.PENDING
    row.age_seconds = int(context.now - sent_at) if aged else None
    return made._replace(sent_at=sent_at if aged else None)


def kept_row(made: Made, files: str, change: int, context_key: str) -> StatusRow:
    """What the store keeps of a row made afresh (status_cache)."""
    row = made.row
    return StatusRow(
        row.slug,
        change,
        context_key,
        files,
        made.limits,
        made.until,
        row.state,
        row.engine,
        row.attempts,
        row.hard_failures,
        row.next_try,
        row.last_error,
        row.chat_url,
        row.turn,
        row.turns,
        row.account,
        made.sent_at,
        made.since,
    )


def shown_row(kept: StatusRow, context: RowContext) -> Row:
    """The row a kept one shows now: its age counted to now."""
    sent_at = kept.sent_at
    return Row(
        kept.slug,
        kept.state,
        kept.engine,
        None if sent_at is None else int(context.now - sent_at),
        kept.attempts,
        kept.hard_failures,
        kept.next_try,
        kept.last_error,
        kept.chat_url,
        kept.turn,
        kept.turns,
        f"{context.articles}/{kept.slug}.md",
        kept.account,
    )


@dataclass
class RowContext:
    """What every row reads beside its own facts: the articles folder as a plain string (with
    10,000 articles, pathlib's joins cost more than the reads themselves), the batch's limits
    and each chat account's (the same for all of its articles: worked out once per account)."""

    articles: str
    workspace: Workspace | None = None
    limits: Limits = field(default_factory=Limits)
    now: float = 0.0
    served: dict | None = None
    shared: bool = False
    poll_interval: float = 60.0
    base_url: str = ""
    cache_key: str = ""  # status_cache.context_key, once worked out
    _by_account: dict = field(default_factory=dict)
    _keys: dict = field(default_factory=dict)

    def limits_of(self, account: str | None, sent: bool, since: float) -> Limits:
        """The limits an article's phase is decided by: its chat account's when it was sent (or
        is being sent) from one, else the batch's. `since`: its send's intent (0: now)."""
        limits = self.limits
        if account and self.workspace is not None and sent:
            return self.chat_limits(account, since or self.now)
        if sent and limits.account_off:
            return limits._replace(account_off="")
        return limits

    def limits_key(self, limits: Limits) -> str:
        """status_cache.limits_key, worked out once per distinct limits."""
        found = self._keys.get(limits)
        if found is None:
            found = self._keys[limits] = status_cache.limits_key(limits)
        return found

    def chat_limits(self, account: str, since: float) -> Limits:
        """hosts.chat_limits for an article of `account` sent at `since`. `since` matters only
        in a shared batch (an account no host served since then is orphaned)."""
        key = (account, since if self.shared else 0.0)
        found = self._by_account.get(key)
        if found is None:
            found = chat_limits(self.workspace, self.limits, account, since, self.now, self.served)
            self._by_account[key] = found
        return found

    def chat_url(self, slug: str) -> str | None:
        """The chat URL as written (for display only: never opened, so not validated here)."""
        try:
            with files.open_read(f"{self.articles}/{slug}.md.url") as handle:  # UnsafeFile: a FIFO...
                return first_line(handle.read(4096).decode("utf-8", errors="replace")) or None
        except OSError:
            return None

    def refused_url(self, slug: str) -> str | None:
        """Why the article's step would refuse its SLUG.md.url (another site, not a chat URL,
        empty, two lines, not UTF-8), with the fix; None when it would take it, or there is none
        (a shared batch: another host's chat). The same rule as the step's (read_chat_url)."""
        from ..contract.article import parse_chat_url

        path = Path(f"{self.articles}/{slug}.md.url")
        try:
            with files.open_read(path) as handle:
                raw = handle.read(64 * 1024)
        except FileNotFoundError:
            return None
        except (OSError, files.SetupProblem) as problem:
            return str(problem)
        try:
            parse_chat_url(raw.decode("utf-8"), self.base_url, path)
        except UnicodeDecodeError:
            return f"{path}: not UTF-8 text; it should hold one chat URL"
        except UsageProblem as problem:
            return str(problem)
        return None


def sort_rows(rows: list[Row], sort: str) -> list[Row]:
    if sort == "slug":
        return sorted(rows, key=lambda r: r.slug)
    if sort == "age":  # the longest-waiting first; never-sent ones last
        return sorted(rows, key=lambda r: (r.age_seconds is None, -(r.age_seconds or 0), r.slug))
    order = {state: i for i, state in enumerate(STATES)}
    return sorted(rows, key=lambda r: (order[r.state], r.slug))


def warnings(status: BatchStatus, poll_interval: float) -> list[str]:
    found = []
    cycle = status.last_cycle
    if cycle is not None and cycle.problem:
        found.append(f"the last cycle's record cannot be read: {cycle.problem}")
    if cycle is not None and cycle.store_error:
        found.append(store_warning(cycle))
    unfinished = sum(status.totals[s] for s in UNFINISHED)
    cycle_warning = stale_cycle_warning(cycle, status.now, poll_interval) if unfinished else None
    if cycle_warning:
        found.append(f"{cycle_warning}; {unfinished} article(s) waiting. Is cron running `qwenpipe cycle`?")
    found += [a.hold.words() for a in status.accounts if a.hold is not None and a.hold.kind != "quota"]
    if status.quota_blocked_until is not None:
        blocked = held_words(status.quota_blocked_until, status.quota_reason or "")
        found.append(f"{blocked}: nothing is sent to the chat")
    elif status.sends_limit and status.sends_today >= status.sends_limit:
        found.append(
            f"daily send limit reached ({status.sends_today} of {status.sends_limit},"
            " qwen.max_sends_per_day): new prompts wait for tomorrow"
        )
    orphans = status.totals[Phase.ORPHAN]
    if orphans:
        found.append(f"{orphans} orphan(s): files in articles/ without a prompt in prompts/")
    found += invalid_warnings(status.invalid)
    logged_out = logged_out_warning(status.last_cycle, status.login)
    login = logged_out or login_warning(status.login, status.now)
    if login:
        found.append(login)
    return found


def hours_warnings(workspace: Workspace, now: float, *, use_store: bool = True) -> list[str]:
    """Each account outside its send_hours now: its new prompts wait (never the router); and
    each whose bot-check hold ended with no send since: its next send is a probe, alone (known
    from the store: not when it cannot be read)."""
    from ..contract.rotation import outside_send_hours

    accounts = all_accounts(workspace.config)
    found = [f"{why}; its new prompts wait" for why in (outside_send_hours(a, now) for a in accounts) if why]
    if workspace.has_store and use_store:  # a reader creates no store
        found += [
            f"account {a.name}: its bot-check hold ended at {clock(hold.until)}; its next send is a "
            "probe that goes alone, the rest wait for it"
            for a in accounts
            if (hold := workspace.chat_quota.probing(now, a.name)) is not None
        ]
    return found


def store_warning(cycle: LastCycle) -> str:
    """The last cycle(s) stopped on the store: what it said and since when."""
    since = cycle.store_failing_since or cycle.finished or cycle.started
    times = f"{cycle.store_failures} cycle(s) in a row" if cycle.store_failures > 1 else "the last cycle"
    when = f" since {clock(since)}" if since else ""
    return f"{times} stopped on the store{when}: {cycle.store_error}"


def logged_out_warning(cycle: LastCycle | None, login: LoginInfo | None) -> str | None:
    """A cycle found the chat logged out, and no login was saved since: say so, with the fix."""
    if cycle is None or not cycle.chat_logged_out:
        return None
    when = cycle.finished or cycle.started or 0.0
    try:
        if login is not None and login.state_file.stat().st_mtime > when:
            return None  # logged in again since: the next cycle finds out
    except OSError:
        pass
    routed = cycle.routed_while_logged_out
    fallback = (
        f"the router wrote {routed} article(s) instead of the chat" if routed else "nothing goes to the chat"
    )
    return f"the chat is logged out (seen by the cycle of {clock(when)}): {fallback}; run `qwenpipe login`"


MAX_INVALID_WARNINGS = 5


def invalid_warnings(problems: list[str]) -> list[str]:
    """One line per invalid prompt (the first few): each names its file, what is wrong, the fix."""
    lines = [f"invalid prompt: {problem}" for problem in problems[:MAX_INVALID_WARNINGS]]
    if len(problems) > MAX_INVALID_WARNINGS:
        more = len(problems) - MAX_INVALID_WARNINGS
        lines.append(f"{more} more invalid prompt(s): `qwenpipe status --state invalid` lists them")
    return lines


LOGIN_WARN_SECONDS = 2 * 86400  # a person has two days to run `qwenpipe login`


def login_warning(login: LoginInfo | None, now: float) -> str | None:
    """The saved token expires within two days, or has expired: the chat will stop working."""
    if login is None or login.expires_at is None:
        return None
    from ..times import duration

    left = login.expires_at - now
    if left <= 0:
        return f"the chat login expired {duration(-left)} ago: run `qwenpipe login`"
    if left < LOGIN_WARN_SECONDS:
        return f"the chat login expires in {duration(left)}: run `qwenpipe login`"
    return None


def stale_cycle_warning(cycle: LastCycle | None, now: float, poll_interval: float) -> str | None:
    """Why the cycles look stopped, or None. Expected: one finishes every cron period."""
    expected = max(STALE_CYCLES * CRON_PERIOD, STALE_CYCLES * poll_interval)
    if cycle is not None and cycle.problem:
        return None  # said as its own warning
    if cycle is None or (cycle.finished is None and cycle.started is None):
        return "no cycle has run yet (no .qwenpipe/last_cycle.json)"
    if cycle.gone and cycle.started is not None:
        return f"the cycle started {ago(now - cycle.started)} ago (pid {cycle.pid}) stopped without finishing"
    if cycle.running and cycle.started is not None and now - cycle.started > expected:
        return f"the cycle started {ago(now - cycle.started)} ago (pid {cycle.pid}) has not finished"
    if not cycle.running and cycle.finished is not None and now - cycle.finished > expected:
        return f"no cycle has finished for {ago(now - cycle.finished)} (expected every {ago(CRON_PERIOD)})"
    return None


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def _float_or_none(value: object) -> float | None:
    try:
        return None if value is None else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _int_or_none(value: object) -> int | None:
    try:
        return None if value is None else int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


@record
class ArticleStory:
    """`show SLUG`: the article's row, its files, and every journal event about it."""

    row: Row | None
    files: list[tuple[str, Path, int | None]]  # (what it is, path, size or None when absent)
    entries: list[dict]

    @property
    def known(self) -> bool:
        return (
            self.row is not None or bool(self.entries) or any(size is not None for _, _, size in self.files)
        )


def collect_story(workspace: Workspace, slug: str, now: float | None = None) -> ArticleStory:
    from ..contract.prompts import check_slug

    check_slug(slug)
    status = collect(workspace, now, pattern=slug)  # slugs hold no glob characters
    row = next((r for r in status.rows if r.slug == slug), None)
    article = workspace.article(slug)
    paths = [
        ("prompt", workspace.prompts_dir / f"{slug}.md"),
        ("article", article.md),
        ("chat URL", article.url),
        ("send marker", article.sending),
        ("dead letter", article.failed),
        ("rejected answer", article.folder / f"{slug}.md.rejected"),  # the article checks' reject
    ]
    found = [(label, path, _size(path)) for label, path in paths]
    if _size(article.state) is not None:  # an older version's state file: only where one was left
        found.append(("old state file", article.state, _size(article.state)))
    return ArticleStory(
        row=row,
        files=found,
        entries=list(workspace.journal.read(slug=slug)) if workspace.has_store else [],
    )


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None
