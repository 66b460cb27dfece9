"""Handler of an interrupted send that named no chat (see recover.named_chat_id): its chat is
found by the text that was sent (its hash in the marker, when the prompt was edited since) and
taken only when it is surely this article's (adoption.adoptable_chat); in doubt, it is sent again."""

from __future__ import annotations

from .adoption import adoptable_chat, chats_in_batch, chats_of_other_articles
from .context import Context
from .moves import Adopt, Ask, NeverSent, Search


def handle(step: Context, move: Search) -> Adopt | NeverSent | Ask:
    account, marker = move.account, move.marker
    step.say(
        f"{step.slug}: an earlier send was interrupted; looking for its chat in account {account}'s chat list"
    )
    sent_sha = marker.get("prompt_sha256")
    chat = step.engines.chat(account)
    if isinstance(sent_sha, str) and sent_sha and sent_sha != step.prompt.sha256:
        found = chat.find_chats(sha256=sent_sha)  # what was sent, not the edited text
    else:
        found = chat.find_chats(step.prompt.turns[0])
        sent_sha = step.prompt.sha256
    if not found:
        return NeverSent(account, "no chat holds what was sent")
    others = chats_of_other_articles(step.article)
    if step.lease is not None:  # a shared batch: every host's sent chats are other articles' too
        others.update(chats_in_batch(step.ws.store, step.slug))
    url, why = adoptable_chat(found, marker, sent_sha, others, account)
    if url is None:
        step.log("recovery_in_doubt", engine="qwen", account=account, reason=why)
        step.say(f"{step.slug}: not taking a chat that may not be this article's ({why}): sending again")
        step.chat_url, step.recovered = None, True
        return Ask()
    return Adopt(url, marker)
