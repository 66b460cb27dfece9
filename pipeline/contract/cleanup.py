"""Account hygiene (qwen.delete_chats): a finished article's chat is deleted from the site.

Leftover chats are a suspected ban trigger (docs/qwen-site.md). With delete_chats =
"after_collect", the step that writes an article records its chat's deletion as pending in
the same store transaction as its "done" event, then deletes the chat from the account that
made it (the only one that can). A delete that fails stays pending, and a later run tries it
again (the next cycle, or `generate` of the done article); it never changes the article's
outcome: the article is on disk. SLUG.md.url stays as history, and a deleted chat is never
read again (the step refuses to look at it before any page opens, the cycle never collects it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..accounts import all_accounts
from ..config import ConfigError
from ..engines.base import Code, EngineBusy, EngineError, HardError
from ..store.protocol import ChatDeletion, StoreBusy
from .quota import BOT_CHECK
from .unknown import JournalledChat, journal_noticed, journal_unknown

AFTER_COLLECT = "after_collect"
DELETE_CHATS = ("never", AFTER_COLLECT)
RETRIES_PER_RUN = 20  # pending deletes one run tries again (each opens a page of the site)
DELETED_EVENT, FAILED_EVENT = "chat_deleted", "delete_failed"


def wanted(config) -> bool:
    """Whether finished articles' chats are to be deleted (qwen.delete_chats = "after_collect")."""
    return config.qwen.delete_chats == AFTER_COLLECT


def due(slug: str, chat_url: str, account: str, now: float) -> ChatDeletion:
    """The pending deletion of an article's chat, recorded with its "done" step."""
    return ChatDeletion(chat_url, slug, account, since=now)


def deleted_chat(store, slug: str, chat_url: str | None) -> ChatDeletion | None:
    """The record of `chat_url` (the article's chat) when the site has deleted it, else None."""
    if not chat_url:
        return None
    found = [d for d in store.chat_deletions(slug) if d.chat_url == chat_url and not d.pending]
    return found[0] if found else None


def deleted_urls(store) -> set[str]:
    """Every chat the site has deleted (a cycle never collects one)."""
    return {d.chat_url for d in store.chat_deletions() if not d.pending}


def deleted_error(chat_url: str, article_url: object) -> HardError:
    """What a step meets when its article's chat was deleted: it is never opened again."""
    return HardError(
        f"the chat {chat_url} was deleted after its article was written (qwen.delete_chats); "
        f"it is never read again: delete {article_url} too for a new send",
        code=Code.CHAT_DELETED,
    )


# How one delete went: the chat is gone; it failed and stays pending; or it failed in a way that
# says the account cannot do anything now (logged out, a bot check, its browser held by another
# process): pending, and the account is not asked again in this run.
DELETED, FAILED, ACCOUNT_STOPPED = "deleted", "failed", "account_stopped"
STOPPING_CODES = frozenset({Code.LOGGED_OUT, Code.BOT_CHECK})


def delete(
    workspace,
    engine,
    deletion: ChatDeletion,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> str:
    """Delete one chat through `engine` (its account's) and record how it went (DELETED,
    FAILED or ACCOUNT_STOPPED). Never raises an engine's error, nor a busy store's: the
    article is done whatever happens here."""
    slug, url = deletion.slug, deletion.chat_url
    try:
        fresh = engine.delete_chat(url)
    except EngineBusy:
        return ACCOUNT_STOPPED  # nothing was tried: a later run
    except EngineError as err:
        failed = replace(deletion, tries=deletion.tries + 1, last_error=str(err))
        _record(workspace, failed, FAILED_EVENT, error=str(err), code=err.code, tries=failed.tries)
        say(f"{slug}: its chat was not deleted ({err}); a later run tries again")
        return ACCOUNT_STOPPED if err.code in STOPPING_CODES else FAILED
    done = replace(deletion, deleted_at=clock(), last_error="")
    _record(workspace, done, DELETED_EVENT, **({} if fresh else {"already_gone": True}))
    say(f"{slug}: deleted its chat {url} (account {deletion.account})")
    return DELETED


def _record(workspace, deletion: ChatDeletion, event: str, **fields: object) -> None:
    """The deletion's row and its journal event, in one step; a busy store leaves it as it was
    (a pending delete is tried again; a deleted chat then answers "not found": deleted)."""
    try:
        with workspace.store.transaction() as tx:
            tx.put_chat_deletion(deletion)
            workspace.journal.append_in(
                tx,
                deletion.slug,
                event,
                engine="qwen",
                account=deletion.account,
                chat_url=deletion.chat_url,
                **fields,
            )
    except StoreBusy:
        pass


def retry_pending(
    workspace,
    engines,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
    slug: str | None = None,
    before: float = float("inf"),
    limit: int = RETRIES_PER_RUN,
) -> int:
    """Try again the pending deletes (one article's with `slug`) that became due before
    `before`, at most `limit`, oldest first, each from its own account: only accounts of this
    config that are enabled, not held by a bot check, and not found unusable by this run. An
    account that fails hard (logged out, a bot check) is not asked again in this run. Returns
    how many chats were deleted."""
    if not wanted(workspace.config):
        return 0
    try:
        pending = workspace.store.chat_deletions(slug, pending=True)
    except StoreBusy:
        return 0
    skipped: set[str] = set(engines.unavailable)
    deleted = tried = 0
    for deletion in pending:
        if tried >= limit:
            break
        account = deletion.account
        if deletion.since >= before or account in skipped:
            continue
        tried += 1
        result = delete_now(workspace, engines, deletion, clock=clock, say=say)
        deleted += result == DELETED
        if result == ACCOUNT_STOPPED:
            skipped.add(account)
    return deleted


def delete_now(
    workspace,
    engines,
    deletion: ChatDeletion,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> str:
    """`delete` from the chat's own account when that account may be used now (can_delete_now);
    ACCOUNT_STOPPED, with nothing tried, when it may not or its engine cannot be made."""
    account = deletion.account
    try:
        if not can_delete_now(workspace, account, clock()):
            return ACCOUNT_STOPPED
    except StoreBusy:  # its holds cannot be read now: a later run
        return ACCOUNT_STOPPED
    try:
        engine = engines.chat(account)
    except (ConfigError, EngineError) as err:  # its engine cannot be made: the article stays done
        say(f"{deletion.slug}: its chat was not deleted ({err}); a later run tries again")
        return ACCOUNT_STOPPED
    journal = workspace.journal
    journalled = JournalledChat(
        engine,
        lambda err: journal_unknown(journal, deletion.slug, account, err),
        lambda found: journal_noticed(journal, deletion.slug, account, found),
    )
    return delete(workspace, journalled, deletion, clock=clock, say=say)


def can_delete_now(workspace, account: str, now: float) -> bool:
    """Whether `account`'s chats may be deleted now: configured here, enabled, and not held
    by a bot check (its page would meet the slider: leave the account alone)."""
    usable = any(a.name == account and a.enabled for a in all_accounts(workspace.config))
    return usable and not _held_by_bot_check(workspace, account, now)


def _held_by_bot_check(workspace, account: str, now: float) -> bool:
    hold = workspace.chat_quota.held(now, account)
    return hold is not None and hold.kind == BOT_CHECK
