"""Notifications through Apprise (`[notify] urls`): one message per event that needs a person.

The events, each told once: the chat found logged out (again only after a cycle found it logged
in), a bot check holding an account (each hold once), an article dead-lettered (each time), the
router failing (once, until it writes an article again), and with `daily_summary` a summary of
the batch once a day (from `summary_hour`, local time). Dead letters and the router are read from
the journal after the last event read, so an article dead-lettered by `generate` between two
cycles is told by the next cycle.

Nothing here fails or holds up a cycle for long: each URL gets Apprise's own timeouts (4 s to
connect, 4 s to read), and a URL that failed is not tried again in this cycle. What was not
delivered waits in `articles/.qwenpipe/notify.json` (0600; written before any delivery, and
after each one) and is tried again by the next cycle; `status` says so. A message never holds
the router key, a proxy password or a login token: masked before it leaves (`clean`), and
notify.json, like every file, is masked where it is written (redact.mask_kept).

The health pings of `[notify] ping_url` are batch/notify.py's.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..contract.quota import BOT_CHECK, local_day_start
from ..redact import mask, mask_tokens, scheme_only
from .outbox import MAX_PENDING, STATE_FILE, Ledger, Message
from .status import BatchStatus, logged_out_warning

if TYPE_CHECKING:
    from ..contract.workspace import Workspace


def url_id(url: str) -> str:
    """A URL's name in notify.json: its hash (a URL may hold a bot token)."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


def clean(text: str) -> str:
    """`text` without any registered secret (the router key, proxy passwords), a password in a
    URL or a login token."""
    return mask_tokens(mask(text))


def tell(
    workspace: Workspace,
    status: BatchStatus,
    *,
    since: float,
    now: float,
    say: Callable[[str], None],
) -> int:
    """Queue this cycle's events for every [notify] URL, then deliver what is owed; the number
    of messages still owed afterwards. `since`: the wall-clock time from which the journal is
    read the first time (later: after the last event read)."""
    urls = list(workspace.config.notify.urls)
    path = workspace.state_dir / STATE_FILE
    ledger = Ledger.load(path)
    ids = [url_id(url) for url in urls]
    for message in ledger.pending:  # a URL removed from the config is owed nothing
        message.owed = [owed for owed in message.owed if owed in ids]
    where = f"{os.uname().nodename}:{workspace.config.root}"
    for key, title, body in events(workspace, ledger, status, since, now):
        text = clean(f"{body}\n\n({where})")
        ledger.pending.append(Message(key, clean(title), text, now, list(ids)))
    ledger.pending = [m for m in ledger.pending if m.owed][-MAX_PENDING:]
    ledger.save(path)  # before any delivery: a crash while sending loses no event
    deliver(ledger, urls, path, say)
    return len(ledger.pending)


def events(
    workspace: Workspace, ledger: Ledger, status: BatchStatus, since: float, now: float
) -> Iterator[tuple[str, str, str]]:
    """(key, title, body) of each event to tell, the ledger updated as they are found."""
    logged_out = logged_out_warning(status.last_cycle, status.login)
    if logged_out and not ledger.logged_out:
        yield "logged_out", "qwenpipe: the chat is logged out", logged_out
    ledger.logged_out = bool(logged_out)
    holds = {}
    for account in status.accounts:
        hold = account.hold
        if hold is None or hold.kind != BOT_CHECK:
            continue
        holds[account.name] = hold.since
        if ledger.holds.get(account.name) != hold.since:
            yield f"bot_check:{account.name}", f"qwenpipe: bot check on account {account.name}", hold.words()
    ledger.holds = holds
    yield from journal_events(workspace, ledger, since)
    if workspace.config.notify.daily_summary:
        day = datetime.fromtimestamp(now).astimezone()
        if day.hour >= workspace.config.notify.summary_hour and ledger.summary_day != day.date().isoformat():
            ledger.summary_day = day.date().isoformat()
            yield (
                f"summary:{ledger.summary_day}",
                f"qwenpipe: summary of {ledger.summary_day}",
                summary(workspace, status, now),
            )


def journal_events(workspace: Workspace, ledger: Ledger, since: float) -> Iterator[tuple[str, str, str]]:
    """Dead letters and the router's failures since the last event read (the first time: since
    this cycle began, not the whole history)."""
    store = workspace.store
    found = store.events(after=ledger.journal_seq) if ledger.journal_seq else store.events(since=since)
    for event in found:
        ledger.journal_seq = max(ledger.journal_seq or 0, event.seq)
        error = str(event.fields.get("error") or "")
        if event.event == "dead_letter":
            yield (
                f"dead_letter:{event.slug}",
                f"qwenpipe: {event.slug} dead-lettered",
                f"{event.slug} failed on every engine and is set aside: {error}\n"
                f"`qwenpipe replay {event.slug}` tries it again.",
            )
        elif event.event == "router_failed" and not ledger.router_down:
            ledger.router_down = True
            yield (
                "router_failed",
                "qwenpipe: the router is failing",
                f"the router could not write {event.slug}: {error}\n"
                "What the chat cannot write fails until it answers (router.base_url, its key).",
            )
        elif event.event == "done" and event.fields.get("engine") == "router":
            ledger.router_down = False


def summary(workspace: Workspace, status: BatchStatus, now: float) -> str:
    """The batch in a few lines: articles done by engine, yesterday's sends per account, what
    waits, and what `status` warns of."""
    done = Counter(row.engine or "?" for row in status.rows if row.state == "done")
    engines = ", ".join(f"{engine} {n}" for engine, n in sorted(done.items()))
    today = local_day_start(now)
    sent = workspace.store.send_counts(local_day_start(today - 1), today) if workspace.has_store else None
    per_account = ", ".join(f"{a.name} {sent.of(a.name) if sent else 0}" for a in status.accounts)
    waiting = ", ".join(f"{n} {state}" for state, n in status.totals.items() if n and state != "done")
    lines = [
        f"articles done: {sum(done.values())}" + (f" ({engines})" if engines else ""),
        f"sent yesterday: {per_account}",
        f"waiting: {waiting or 'nothing'}",
        *(f"look: {warning}" for warning in status.warnings),
    ]
    return "\n".join(lines)


def deliver(ledger: Ledger, urls: list[str], path: Path, say: Callable[[str], None]) -> None:
    """Each owed message to each URL, oldest first; a URL that fails is left until the next
    cycle. The ledger is saved after each delivery (a message is never told twice)."""
    if not ledger.pending:
        return
    import apprise

    failed = []
    for url in urls:
        uid = url_id(url)
        for message in [m for m in ledger.pending if uid in m.owed]:
            error = send_one(apprise, url, message)
            if error:
                message.attempts += 1
                message.error = error
                failed.append(error)
                break
            message.owed.remove(uid)
            ledger.pending = [m for m in ledger.pending if m.owed]
            ledger.save(path)
    if failed:
        ledger.save(path)
        count = len(ledger.pending)
        say(f"notify: {count} message(s) not delivered ({failed[0]}); the next cycle tries again")


# What each message is to its reader, by its key's kind: a person must act (FAILURE), an account
# waits on its own (WARNING), or news (INFO). Apprise's services show each its own way.
SEVERITY = {
    "dead_letter": "FAILURE",
    "router_failed": "FAILURE",
    "logged_out": "FAILURE",
    "bot_check": "WARNING",
    "summary": "INFO",
}


def severity(key: str) -> str:
    """The Apprise notify type's name of the message with `key` (e.g. "dead_letter:tea")."""
    return SEVERITY.get(key.split(":", 1)[0], "INFO")


def send_one(apprise, url: str, message: Message) -> str | None:
    """Deliver `message` to `url`: None when delivered, else why not (never the URL itself)."""
    import logging

    box = apprise.Apprise()
    with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as log:
        if not box.add(url):
            return f"{scheme_only(url)} is not a URL Apprise knows"
        kind = getattr(apprise.NotifyType, severity(message.key))
        delivered = box.notify(title=message.title, body=message.body, notify_type=kind)
        said = [line.strip() for line in log.getvalue().splitlines() if line.strip()]
    if delivered:
        return None
    words = said[-1].replace(url, scheme_only(url)) if said else "not delivered"
    return clean(f"{scheme_only(url)}: {words}")
