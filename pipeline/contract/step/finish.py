"""Handler of an answer that passed its checks, rendered: SLUG.md is written (in a shared batch,
from the batch's record), with its "done" step and its chat's due deletion in one store step."""

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


def handle(step: Context, move: Write) -> Outcome:
    answer, document, strip_title, edited = move.answer, move.document, move.strip_title, move.edited
    prompt = step.prompt
    if step.lease is not None:  # the batch's record first; this host's file from it
        document = record_finished(step, answer, document)
    deletion = chat_to_delete(step)
    # The article as it is: one holding a key was refused (checks.py), not masked (Verbatim).
    files.atomic_write(step.article.md, Verbatim(document), mode=files.SHARED, crash_at="mid_article")
    files.remove(step.article.sending)
    step.state.engine, step.state.progress, step.state.attempts = answer.engine, "done", 0
    step.state.next_try = 0.0
    words = count_words(article_body(prompt, answer, strip_title=strip_title))
    done = step.named(
        {
            "engine": answer.engine,
            "model": answer.model,
            "words": words,
            "turns": len(prompt.turns),
            "duration": round(step.clock() - step.state.sent_at, 3) if step.state.sent_at else None,
            **({"prompt_edited_after_send": True} if edited else {}),
        }
    )
    with step.ws.store.step() as store:  # the record and its "done" event: one commit, one fsync
        store.put_article(step.state.to_record(step.slug))
        step.ws.journal.append_in(store, step.slug, "done", **done)
        if deletion is not None:  # due with the "done" step: a crash after it leaves it pending
            store.put_chat_deletion(deletion)
    if deletion is not None:  # never fails the article: a failed delete stays pending
        cleanup.delete_now(step.ws, step.engines, deletion, clock=step.clock, say=step.say)
    if edited:
        step.say(
            f"{step.slug}: {prompt.path} was edited after it was sent; the article answers "
            f"the version sent (marked prompt_edited_after_send). For the new text: delete "
            f"{step.article.md}, then `qwenpipe replay {step.slug} --fresh` (a new send)"
        )
    message = f"{step.slug}: wrote {step.article.md} ({words} words, {answer.engine})"
    return step.outcome(Status.DONE, message, engine=answer.engine)


def chat_to_delete(step: Context) -> ChatDeletion | None:
    """The deletion of the article's chat that writing the article makes due (qwen.delete_chats
    = "after_collect": a chat the article was sent to, whichever engine wrote it), or None."""
    if not cleanup.wanted(step.ws.config):
        return None
    url = step.chat_url or read_chat_url(step.article, step.qwen.base_url)
    if not url or cleanup.deleted_chat(step.ws.store, step.slug, url):
        return None
    return cleanup.due(step.slug, url, step.sender(), step.clock())


def record_finished(step: Context, answer: Answer, document: str) -> str:
    """The finished article as a row of the shared batch; the document to write (the batch's
    own, when another host finished it first)."""
    account = step.sender() if answer.engine == "qwen" else ""
    row = Finished(step.slug, answer.engine, account, step.ws.config.store.host, step.clock(), document)
    with step.ws.store.step() as store:
        if store.put_finished(row):
            return document
    kept = step.ws.store.finished([step.slug]).get(step.slug)
    return kept.document if kept else document
