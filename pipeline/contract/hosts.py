"""Several hosts over one batch: the PostgreSQL store is the record, each host's files its face.

With `[store] url` set, what one machine's files prove is proved by rows instead: the intent
(before the click), the chat URL (right after) and the finished article. Each host writes its
own `articles/` from those rows (`sync`), so cron scripts and Hugo keep reading files.

- Leases, not locks: a host claims an article with a lease (owner token: host, pid, random),
  renews it in the background every lease_seconds/3, checks it inside the transaction that
  records a send's intent and again just before the click, and releases it with its token. A
  host paused past its lease finds it lost and stops before any send.
- Affinity: a chat is looked at only by a host that has the account that sent it. An account no
  host has served for `orphan_hours` sends its in-flight articles to the router.

Hosts' clocks must agree to within a few seconds (NTP): lease times are each host's clock.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from .. import files
from ..records import record
from ..redact import Verbatim
from ..store.protocol import Finished, Intent, LeaseLost, Send, Served, Store, StoreError
from ..times import duration
from .article import ArticleFiles, write_marker
from .phases import Limits

LocalStore = Callable[[], "Store | None"]  # opens this host's own SQLite store, if it has one

ORPHAN_NOTE = "the router writes it"


def shared_batch(config) -> bool:
    """Whether this workspace's batch is shared by several hosts (a PostgreSQL store)."""
    return bool(config.store.url)


def owner_token(host: str) -> str:
    """A lease owner: this host, this process, and a random part (a pid is reused)."""
    return f"{host}:{os.getpid()}:{os.urandom(4).hex()}"  # secrets.token_hex(4), without its imports


def host_of(owner: str) -> str:
    """The host part of an owner token ("" for a send recorded on one machine)."""
    return owner.rsplit(":", 2)[0] if owner.count(":") >= 2 else ""


class ArticleLease:
    """This process's lease on one article, renewed in the background while it works on it."""

    def __init__(self, store, slug: str, host: str, seconds: float, clock: Callable[[], float] = time.time):
        self.store, self.slug, self.seconds, self.clock = store, slug, float(seconds), clock
        self.owner = owner_token(host)
        self.lost = ""  # why the lease is lost ("" while held)
        self._renewed = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def claim(self) -> str:
        """Take the lease: "" when it is ours, else who holds it (the caller steps aside)."""
        now = self.clock()
        if self.store.claim_lease(self.slug, self.owner, self.seconds, now):
            self._thread = threading.Thread(target=self._renew, name=f"lease {self.slug}", daemon=True)
            self._thread.start()
            return ""
        held = self.store.lease(self.slug, now)
        return held.owner if held else "another host"

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                kept = self.store.renew_lease(self.slug, self.owner, self.seconds, self.clock())
            except StoreError as err:  # unreachable: the lease runs out unless renewed in time
                if self.clock() >= self._expiry_guess():
                    self.lost = f"the lease could not be renewed ({err})"
                    return
                continue
            if not kept:
                self.lost = "the lease expired or was taken over"
                return
            self._renewed = self.clock()

    def _expiry_guess(self) -> float:
        return (self._renewed or self.clock()) + self.seconds

    def check(self, tx=None) -> None:
        """LeaseLost unless the lease is still ours: inside `tx` (the intent's transaction), or
        by a read of the store (just before the click)."""
        if self.lost:
            raise LeaseLost(f"{self.slug}: {self.lost}; stopping before any send")
        if tx is not None:
            tx.check_lease(self.slug, self.owner, self.clock())
            return
        held = self.store.lease(self.slug, self.clock())
        if held is None or held.owner != self.owner:
            raise LeaseLost(f"{self.slug}: the lease of {self.owner} was lost; stopping before any send")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            try:
                self.store.release_lease(self.slug, self.owner)
            except StoreError:
                pass  # it expires on its own; only our token could release it anyway


# -- this host's face: files written from the batch's rows --------------------------------------


@record
class Synced:
    """What `sync` wrote into this host's articles/ (and gave the batch from it)."""

    articles: int = 0  # SLUG.md written from finished rows
    urls: int = 0  # SLUG.md.url written from sent chats
    markers: int = 0  # SLUG.md.sending written from intents without a URL yet
    uploaded: int = 0  # this host's finished or sent articles the batch did not have

    def line(self) -> str:
        parts = [f"{self.articles} article(s)", f"{self.urls} chat URL(s)"]
        if self.markers:
            parts.append(f"{self.markers} send(s) in progress")
        text = f"sync: wrote {', '.join(parts)} from the batch"
        return text + (f"; gave it {self.uploaded} of this host's" if self.uploaded else "")


def write_finished(article: ArticleFiles, finished: Finished) -> None:
    """SLUG.md from the batch's row; its intent marker has no more meaning."""
    files.atomic_write(article.md, Verbatim(finished.document), mode=files.SHARED)
    files.remove(article.sending)


def marker_of(send: Send) -> dict:
    """The intent marker an intent row stands for (what recovery compares a chat with)."""
    marker = {
        "time": send.intent_at,
        "pid": send.pid,
        "prompt_sha256": send.prompt_sha256,
        "account": send.account,
    }
    if send.chat_id:  # the chat the send named before its prompt left the browser
        marker["chat_id"] = send.chat_id
    return marker


def sync_article(store, article: ArticleFiles, host: str, this_host: LocalStore) -> None:
    """Bring one article's files in line with the batch before a step: its finished row, else
    its first send's URL or intent. What only this host knows (SLUG.md written, a URL whose
    recording a kill cut off) goes to the batch. `this_host`: opens this host's own SQLite
    store, if it has one (Workspace.this_host_store)."""
    slug = article.slug
    finished = store.finished([slug]).get(slug)
    if finished is not None:
        if not article.md.exists():
            write_finished(article, finished)
        return
    if article.md.exists():
        _upload_finished(store, article, host)
        return
    first = next((s for s in store.sends(slug) if s.turn == 1), None)
    if first is None:
        _upload_sent(store, article, host, this_host)
        return
    if first.chat_url:
        if not article.url.exists():
            files.atomic_write(article.url, first.chat_url + "\n")
        return
    local = _local_url(article)
    if local:  # sent, and killed before the URL was recorded: the file is the proof
        with store.transaction() as tx:
            tx.record_sent(slug, 1, local, time.time())
    elif not article.sending.exists():
        write_marker(article.sending, marker_of(first))


def sync(store, articles_dir, host: str, this_host: LocalStore) -> Synced:
    """Every finished article and every sent chat of the batch, written into `articles_dir`
    (only what is missing: a listing of the batch, then the documents this host lacks).
    `this_host`: opens this host's own SQLite store, if it has one (Workspace.this_host_store)."""
    done = store.finished()
    synced = Synced()
    present = _names(articles_dir)
    missing = [slug for slug in done if f"{slug}.md" not in present]
    for start in range(0, len(missing), 200):
        for finished in store.finished(missing[start : start + 200]).values():
            write_finished(ArticleFiles(finished.slug, articles_dir), finished)
            synced.articles += 1
    firsts = store.first_sends().values()  # one read of the batch's first sends
    for send in firsts:  # every sent chat's URL, finished or not (as on one machine)
        article = ArticleFiles(send.slug, articles_dir)
        if send.chat_url and f"{send.slug}.md.url" not in present:
            files.atomic_write(article.url, send.chat_url + "\n")
            synced.urls += 1
        elif send.slug in done or f"{send.slug}.md" in present:
            continue
        elif not send.chat_url and not ({f"{send.slug}.md.url", f"{send.slug}.md.sending"} & present):
            write_marker(article.sending, marker_of(send))
            synced.markers += 1
    sent = {send.slug for send in firsts}
    for name in present:
        slug = name[:-3] if name.endswith(".md") and not name.startswith(".") else ""
        if slug and slug not in done and _is_article(ArticleFiles(slug, articles_dir)):
            synced.uploaded += _upload_finished(store, ArticleFiles(slug, articles_dir), host)
        slug = name[: -len(".md.url")] if name.endswith(".md.url") else ""
        if slug and slug not in sent and slug not in done and f"{slug}.md" not in present:
            synced.uploaded += _upload_sent(store, ArticleFiles(slug, articles_dir), host, this_host)
    return synced


def _upload_sent(store, article: ArticleFiles, host: str, this_host: LocalStore) -> int:
    """This host's SLUG.md.url, which the batch lacks (sent before the store was shared): its
    send becomes the batch's, from the account this host's own SQLite store names (else
    `default`), so that no host sends the prompt again and only its account polls the chat."""
    url = _local_url(article)
    if not url:
        return 0
    account, sha, when = _local_send(article, this_host)
    intent = Intent(1, when or time.time(), sha, account, 0, owner_token(host))
    with store.transaction() as tx:
        if any(s.turn == 1 for s in store.sends(article.slug)):
            return 0
        tx.record_intent(article.slug, intent)
        tx.record_sent(article.slug, 1, url, time.time())
    return 1


def _local_send(article: ArticleFiles, this_host: LocalStore) -> tuple[str, str, float]:
    """(account, prompt hash, time) of the article's first send in this host's SQLite store."""
    from ..store.protocol import DEFAULT_ACCOUNT

    try:
        local = this_host()
        if local is None:
            return DEFAULT_ACCOUNT, "", 0.0
        with local:
            first = next((s for s in local.sends(article.slug) if s.turn == 1), None)
    except StoreError:
        return DEFAULT_ACCOUNT, "", 0.0
    return (first.account, first.prompt_sha256, first.intent_at) if first else (DEFAULT_ACCOUNT, "", 0.0)


def _upload_finished(store, article: ArticleFiles, host: str) -> int:
    """This host's SLUG.md, which the batch lacks (written before the store was shared)."""
    try:
        document = article.md.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return 0
    engine = _front_matter_value(document, "engine")
    account = _front_matter_value(document, "account")
    with store.transaction() as tx:
        return int(tx.put_finished(Finished(article.slug, engine, account, host, time.time(), document)))


def _is_article(article: ArticleFiles) -> bool:
    return article.md.is_file() and not article.md.is_symlink()


def _front_matter_value(document: str, key: str) -> str:
    for line in document.split("\n+++", 1)[0].splitlines()[1:]:
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip().strip("\"'")
    return ""


def _local_url(article: ArticleFiles) -> str:
    try:
        return article.url.read_text(encoding="utf-8").strip().split()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return ""


def _names(folder) -> set[str]:
    try:
        with os.scandir(folder) as entries:
            return {entry.name for entry in entries}
    except FileNotFoundError:
        return set()


# -- affinity across hosts ---------------------------------------------------------------------

_SERVED_ONCE: set[tuple[str, str]] = set()  # (state folder, host) this process said it serves


def serve(workspace, now: float, *, again: bool = False) -> None:
    """Say in the batch that this host serves its enabled accounts now (once a process unless
    `again`: a cycle says it every time)."""
    from ..accounts import all_accounts

    key = (str(workspace.state_dir), workspace.config.store.host)
    if key in _SERVED_ONCE and not again:
        return
    names = [a.name for a in all_accounts(workspace.config) if a.enabled]
    with workspace.store.transaction() as tx:
        tx.serve(workspace.config.store.host, names, now)
    _SERVED_ONCE.add(key)


def chat_limits(
    workspace, limits: Limits, sender: str, since: float, now: float, served: dict[str, Served] | None = None
) -> Limits:
    """`limits` for an article whose chat is `sender`'s: this host's account (disabled or gone:
    it waits, rotation.sender_problem), or, in a shared batch, another host's (it waits for that
    host), or an account no host served for store.orphan_hours (the router takes it over).
    `since`: when its send was recorded (an account never said served counts from then)."""
    from ..accounts import all_accounts
    from .rotation import sender_problem

    config = workspace.config
    if not shared_batch(config) or any(a.name == sender for a in all_accounts(config)):
        problem = sender_problem(workspace, sender)
        return limits if problem == limits.account_off else limits._replace(account_off=problem)
    if served is None:
        served = workspace.store.served()
    seen = served.get(sender)
    last = max(seen.seen if seen else 0.0, since)
    hours = config.store.orphan_hours
    if now - last > hours * 3600:
        by = f"host {seen.host}, {duration(now - seen.seen)} ago" if seen else "no host ever"
        return limits._replace(
            orphaned=f"its chat's account {sender} has not been served for store.orphan_hours = "
            f"{hours:g} h (last: {by})",
        )
    where = f"host {seen.host}" if seen else "another host"
    return limits._replace(elsewhere=f"its chat is on account {sender}, which {where} serves")
