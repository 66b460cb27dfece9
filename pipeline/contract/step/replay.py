"""`qwenpipe replay`: a dead-lettered article made pending again, or (`--fresh`) its chat forgotten."""

from __future__ import annotations

from ... import files
from ...errors import UsageProblem
from ...files import FileLock
from ..article import ArticleFiles, ArticleState, read_chat_url
from ..prompts import check_slug, load_prompt
from ..workspace import Workspace


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
        state = ArticleState.load(workspace.store, article)
        state.hard_failures = state.attempts = 0
        state.next_try = 0.0
        state.save(workspace.store, slug)
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
        with workspace.store.transaction() as tx:
            tx.forget_sends(slug)
            tx.put_article(ArticleState().to_record(slug))
            workspace.journal.append_in(tx, slug, "replay", fresh=True, chat_url=previous)
    cleared = f"cleared {', '.join(forgotten)}; " if forgotten else ""
    return f"{slug}: {cleared}the next run sends the prompt as it is now, in a new chat"
