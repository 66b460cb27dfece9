"""Handler of a complete answer: it must come from the model asked for, and be an article
(checks.check_answer); then it is rendered as the article to write (Write), else rejected (Reject)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ...engines.base import Answer, Code, HardError, TransientError, same_model
from ..checks import check_answer
from ..render import render_article
from .context import Context
from .moves import Collect, Reject, Write


def handle(ctx: Context, move: Collect) -> Write | Reject:
    answer = move.answer
    check_model(ctx, answer)
    settings = ctx.ws.config.article.replace(**ctx.prompt.settings)
    verdict = check_answer(answer.markdown, settings)
    if verdict.problem:
        return Reject(answer, verdict)
    answer, prompt = replace(answer, markdown=verdict.markdown), ctx.prompt
    edited = (  # a one-turn prompt changed since the chat got it (multi-turn: see turns.our_turns)
        answer.engine == "qwen"
        and len(prompt.turns) == 1
        and bool(ctx.state.sent_sha256)
        and ctx.state.sent_sha256 != prompt.sha256
    )
    document = render_article(
        prompt,
        answer,
        chat_url=ctx.chat_url,
        when=datetime.fromtimestamp(ctx.clock()),
        strip_title=settings.strip_title,
        turns=len(prompt.turns),
        sent_sha256=ctx.state.sent_sha256 if edited else None,
        account=ctx.sender() if answer.engine == "qwen" else "",
    )
    return Write(answer, document, settings.strip_title, edited)


def check_model(ctx: Context, answer: Answer) -> None:
    """A chat answer must come from the model asked for (qwen.model): never a silent article
    from another one. Raises HardError when the chat names another model."""
    wanted = ctx.chat_choice().model
    if answer.engine != "qwen" or not wanted or same_model(wanted, answer.model):
        return
    if not answer.model:
        raise TransientError(
            f"the chat does not say which model answered, so qwen.model = {wanted!r} "
            "cannot be confirmed (the site's JSON was not readable)",
            code=Code.MODEL_UNKNOWN,
        )
    raise HardError(
        f"the chat answered with model {answer.model!r}, not qwen.model = {wanted!r} "
        "(the site did not keep the choice); not writing it as the article",
        code=Code.WRONG_MODEL,
    )
