"""Handler of a complete answer that is not an article: kept beside, never as, SLUG.md; then the
chat's answer fails the chat hard (Hard), the router's fails the article (Ask, failure ALL)."""

from __future__ import annotations

from datetime import datetime

import tomli_w

from ... import files
from ...engines.base import HardError
from ..phases import Failure
from .context import Context
from .moves import Ask, Hard, Reject


def handle(ctx: Context, move: Reject) -> Hard | Ask:
    answer, verdict = move.answer, move.verdict
    record = {
        "reason": verdict.problem,
        "code": verdict.code,
        "engine": answer.engine,
        "time": datetime.fromtimestamp(ctx.clock()).astimezone().replace(microsecond=0),
    }
    if ctx.chat_url:
        record["chat_url"] = ctx.chat_url
    files.atomic_write(
        ctx.article.rejected,
        f"+++\n{tomli_w.dumps(record)}+++\n\n{answer.markdown.strip()}\n",
    )
    ctx.log("rejected", engine=answer.engine, error=verdict.problem, code=f"rejected_{verdict.code}")
    err = HardError(
        f"{answer.engine} answer rejected: {verdict.problem} (kept in {ctx.article.rejected.name})",
        code=f"rejected_{verdict.code}",
    )
    if answer.engine == "qwen":
        return Hard(err)
    ctx.state.record_error(ctx.clock(), answer.engine, err.code, str(err))
    return Ask(failure=Failure.ALL, error=err, message=str(err))  # it starts "router answer rejected"
