"""Handler of an answer that passed its checks, rendered: SLUG.md is written (in a shared batch,
from the batch's record), with its "done" step and its chat's due deletion in one store transaction."""

from __future__ import annotations

from ... import files
from ...engines.base import Answer
from ...redact import Verbatim
from ...store.protocol import ChatDeletion, Finished
from .. import cleanup
from ..article import read_chat_url
from ..checks import count_words
from ..render import article_body
from .context import Context, Outcome, Status
from .moves import Write


def handle(ctx: Context, move: Write) -> Outcome:
    answer, document, strip_title, edited = move.answer, move.document, move.strip_title, move.edited
    prompt = ctx.prompt
    if ctx.lease is not None:  # the batch's record first; this host's file from it
        document = record_finished(ctx, answer, document)
    deletion = chat_to_delete(ctx)
    # The article as it is: one holding a key was refused (checks.py), not masked (Verbatim).
    files.atomic_write(ctx.article.md, Verbatim(document), mode=files.SHARED, crash_at="mid_article")
    files.remove(ctx.article.sending)
    ctx.state.engine, ctx.state.progress, ctx.state.attempts = answer.engine, "done", 0
    ctx.state.next_try = 0.0
    words = count_words(article_body(prompt, answer, strip_title=strip_title))
    done = ctx.named(
        {
            "engine": answer.engine,
            "model": answer.model,
            "words": words,
            "turns": len(prompt.turns),
            "duration": round(ctx.clock() - ctx.state.sent_at, 3) if ctx.state.sent_at else None,
            **({"prompt_edited_after_send": True} if edited else {}),
        }
    )
    with ctx.ws.store.transaction() as store:  # the record and its "done" event: one commit, one fsync
        store.put_article(ctx.state.to_record(ctx.slug))
        ctx.ws.journal.append_in(store, ctx.slug, "done", **done)
        if deletion is not None:  # due with the "done" step: a crash after it leaves it pending
            store.put_chat_deletion(deletion)
    if deletion is not None:  # never fails the article: a failed delete stays pending
        cleanup.delete_now(ctx.ws, ctx.engines, deletion, clock=ctx.clock, say=ctx.say)
    if edited:
        ctx.say(
            f"{ctx.slug}: {prompt.path} was edited after it was sent; the article answers "
            f"the version sent (marked prompt_edited_after_send). For the new text: delete "
            f"{ctx.article.md}, then `qwenpipe replay {ctx.slug} --fresh` (a new send)"
        )
    message = f"{ctx.slug}: wrote {ctx.article.md} ({words} words, {answer.engine})"
    return ctx.outcome(Status.DONE, message, engine=answer.engine)


def chat_to_delete(ctx: Context) -> ChatDeletion | None:
    """The deletion of the article's chat that writing the article makes due (qwen.delete_chats
    = "after_collect": a chat the article was sent to, whichever engine wrote it), or None."""
    if not cleanup.wanted(ctx.ws.config):
        return None
    url = ctx.chat_url or read_chat_url(ctx.article, ctx.qwen.base_url)
    if not url or cleanup.deleted_chat(ctx.ws.store, ctx.slug, url):
        return None
    return cleanup.due(ctx.slug, url, ctx.sender(), ctx.clock())


def record_finished(ctx: Context, answer: Answer, document: str) -> str:
    """The finished article as a row of the shared batch; the document to write (the batch's
    own, when another host finished it first)."""
    account = ctx.sender() if answer.engine == "qwen" else ""
    row = Finished(ctx.slug, answer.engine, account, ctx.ws.config.store.host, ctx.clock(), document)
    with ctx.ws.store.transaction() as store:
        if store.put_finished(row):
            return document
    kept = ctx.ws.store.finished([ctx.slug]).get(ctx.slug)
    return kept.document if kept else document
