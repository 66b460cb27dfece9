"""Handler of an interrupted send that never reached the site: its marker and intent go, the
send is given back (an `unsent` step: the daily count drops it), and the article is decided
again (it is sent)."""

from __future__ import annotations

from .context import Context
from .intents import give_back
from .moves import Ask, NeverSent


def handle(step: Context, move: NeverSent) -> Ask:
    not_found = {"engine": "qwen", "account": move.account, "reason": move.why}
    give_back(step, 1, move.account, "never_sent", ("recovery_not_found", not_found))
    step.say(f"{step.slug}: the interrupted send never reached the site ({move.why}): sending it")
    step.chat_url, step.recovered = None, True
    return Ask()
