"""Reading chat.qwen.ai's own JSON: pure functions, no browser.

`/api/v2/chats/<id>` comes in two shapes (docs/qwen-site.md, "Reading an answer"): 2026-06 keeps the
messages in `data.chat.history.messages`, an object keyed by id; 2026-08 lists them in
`data.chat.messages`. Both link messages by `parentId`, and only the "answer" phase of an
assistant message is the article (never "thinking_summary" or "web_search").

The API always answers HTTP 200; failures are `success: false` bodies, classified here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..base import Code, EngineError, HardError, QuotaSpent, TransientError
from ..unknown import FIRST_BYTES, unknown

CHAT_ID_RE = re.compile(r"[a-f0-9-]{20,}")  # a chat id as the site makes them (UUID-like)
CHAT_URL_RE = re.compile(rf"/c/({CHAT_ID_RE.pattern})")

LOGIN_HINT = "run `qwenpipe login`"
BOT_MARKERS = ("FAIL_SYS_USER_VALIDATE", "RGV587", "/punish?")
NEW_CHAT_TITLE = "New Chat"


def chat_id_from_url(url: str) -> str | None:
    """The chat id in a chat URL (`.../c/<id>`), or None (the root page, `/c/local`, elsewhere)."""
    match = CHAT_URL_RE.search(url or "")
    return match.group(1) if match else None


class Turn(NamedTuple):
    """One exchange: what the user sent and what the assistant answered so far."""

    user_text: str
    answer: str  # raw markdown of the "answer" phase; "" until it starts
    finished: bool  # the stored status says finished, or the message stores no status at all
    error: str | None


@dataclass(frozen=True)
class ChatView:
    """A chat as the API shows it, turns in conversation order (following parent links)."""

    chat_id: str | None
    title: str | None
    turns: list[Turn]
    model: str | None = None
    created: float | None = None  # epoch seconds by the site's clock; None when it does not say
    # The newest time the site stamped on the chat (its `updated_at`, a message's `timestamp`),
    # when that is later than the last send; None when nothing was stamped after the send (the
    # site says nothing of when the answer last changed: steady.finished_long_ago).
    last_write: float | None = None
    # Each turn's stored completion status alone, in turn order: True finished, False not (or no
    # reply yet), None when the answer carries none (then only the page's signals can tell).
    stored: tuple[bool | None, ...] = ()
    # What the chat holds that nobody has reported, read past: a phase, a role ("" when none).
    unknown: str = ""

    @property
    def first_user_text(self) -> str | None:
        return self.turns[0].user_text if self.turns else None

    @property
    def real_title(self) -> str | None:
        """The title the site gave the chat, unless it is still the placeholder."""
        title = (self.title or "").strip()
        return title if title and title != NEW_CHAT_TITLE else None


class ChatShapeError(ValueError):
    """The payload is not a chat (or a chat list) in any shape we know: `field` names what it
    lacks (the site changed: an unknown answer, engines/unknown.py)."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.field = field


def missing_field(err: ChatShapeError, answer: str, where: str, body: Any = None) -> TransientError:
    """What a body without a field the engine needs means: a clear error naming the field and the
    answer it was missing from (`answer`: "chat <id>'s JSON", "the chat list, page 2"), marked as
    an unknown answer met at `where`. Transient: the look (or the search) is made again later,
    and never reads a missing list as an empty one."""
    field = err.field or "?"
    error = TransientError(
        f"{answer} has no field {field} ({err}): the site changed", code=Code.MISSING_FIELD
    )
    text = json.dumps(body, ensure_ascii=False)[:FIRST_BYTES] if body is not None else None
    return unknown(error, where, field=field, body=text)


def parse_chat(payload: dict, chat_id: str | None = None) -> ChatView:
    """Turn a successful `/api/v2/chats/<id>` body into a ChatView. Raises ChatShapeError, also
    when the body names a chat other than `chat_id` (when given): another chat's answer is never
    this one's, and another chat's messages never prove this one's send."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("chat"), dict):
        raise ChatShapeError("no data.chat in the chat JSON", field="data.chat")
    named = data.get("id")
    if chat_id is not None and named is not None and named != chat_id:
        raise ChatShapeError(f"the JSON read for chat {chat_id} is chat {str(named)[:60]}'s", field="data.id")
    chat = data["chat"]
    messages, current_id = _messages_of(chat)
    ordered = _conversation_order(messages, current_id)
    turns, stored, model = _pair_turns(ordered)
    first = ordered[0].get("timestamp") if ordered else None
    created = epoch_seconds(data.get("created_at"))
    return ChatView(
        chat_id=data.get("id"),
        title=data.get("title"),
        turns=turns,
        model=model,
        created=created if created is not None else epoch_seconds(first),
        stored=tuple(stored),
        last_write=_last_write(data.get("updated_at"), ordered),
        unknown=_unknown_in(messages),
    )


def _last_write(updated_at: Any, ordered: list[dict]) -> float | None:
    """The newest stamp on the chat, if it is later than the last user message's (the send):
    a stamp of the send itself says nothing of when the answer stopped changing."""
    sent = next((m.get("timestamp") for m in reversed(ordered) if m.get("role") == "user"), None)
    sent_at = epoch_seconds(sent)
    stamps = [epoch_seconds(updated_at), *(epoch_seconds(m.get("timestamp")) for m in ordered)]
    known = [stamp for stamp in stamps if stamp is not None]
    if sent_at is None or not known or max(known) <= sent_at:
        return None
    return max(known)


KNOWN_ROLES = frozenset({"user", "assistant", "system"})
# The phases and the answer's statuses public clients have reported (docs/qwen-site.md): any
# other is read past (only the answer phase is the article) and named if the answer then fails.
KNOWN_PHASES = frozenset(
    {
        "think",
        "thinking",
        "thinking_summary",
        "answer",
        "web_search",
        "search_result",
        "tool_call",
        "code_interpreter",
        "fetch_page",
        "generate_image",
    }
)
KNOWN_STATUSES = frozenset({"typing", "finished", "error"})


def _unknown_in(messages: list[dict]) -> str:
    """The first role, or phase of a message's content, nobody has reported; "" when none."""
    for message in messages:
        if message.get("role") not in KNOWN_ROLES:
            return f"role {str(message.get('role'))[:40]!r}"
        parts = message.get("content_list")
        for part in parts if isinstance(parts, list) else ():
            phase = part.get("phase") if isinstance(part, dict) else None
            if phase is not None and phase not in KNOWN_PHASES:
                return _phase_named(phase)
    return ""


def _phase_named(phase: Any) -> str:
    """A phase as the unknown answers name it (cut: the site chose its length)."""
    return f"phase {str(phase)[:40]!r}"


def epoch_seconds(value: Any) -> float | None:
    """A time the site sent (epoch seconds; milliseconds in some payloads), or None when it is
    missing or not a plausible time: a chat's age is never guessed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = value / 1000 if value > 1e11 else float(value)  # 1e11 s is the year 5138
    return seconds if 1e9 < seconds < 1e11 else None  # after 2001, a finite number


def _messages_of(chat: dict) -> tuple[list[dict], str | None]:
    """The message objects of either shape, plus the id of the current leaf when known."""
    history = chat.get("history") if isinstance(chat.get("history"), dict) else {}
    current_id = history.get("currentId") or chat.get("currentId")
    listed = chat.get("messages")
    # A field of another type is no empty chat: read as one it would say "never sent".
    if listed is not None and not isinstance(listed, list):
        raise ChatShapeError("data.chat.messages is not a list", field="data.chat.messages")
    if listed:  # 2026-08
        return _objects(listed, "data.chat.messages"), current_id
    keyed = history.get("messages")
    if keyed is not None and not isinstance(keyed, dict):
        raise ChatShapeError(
            "data.chat.history.messages is not an object", field="data.chat.history.messages"
        )
    if isinstance(keyed, dict):  # 2026-06 (or 2026-08 with nothing said yet)
        found = []
        for key, message in zip(
            keyed, _objects(list(keyed.values()), "data.chat.history.messages"), strict=True
        ):
            found.append({"id": key, **message} if "id" not in message else message)
        return found, current_id
    if isinstance(listed, list):
        return [], current_id
    raise ChatShapeError(
        "neither data.chat.messages nor data.chat.history.messages", field="data.chat.messages"
    )


def _objects(messages: list, where: str) -> list[dict]:
    """`messages`, each an object with a role (a role nobody listed is read past: `system`), or
    ChatShapeError naming the first that is not: a message dropped unread could be ours."""
    for number, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ChatShapeError(f"{where}[{number}] is not a message", field=f"{where}[{number}]")
        if not isinstance(message.get("role"), str):
            raise ChatShapeError(f"{where}[{number}] has no role", field=f"{where}[{number}].role")
    return messages


def _conversation_order(messages: list[dict], current_id: str | None) -> list[dict]:
    """Messages from the first to the current leaf, by parent links (dict order means nothing).

    A chat can branch (an answer regenerated): the current branch is the one ending at
    `currentId`, else at the newest leaf.
    """
    by_id = {m.get("id"): m for m in messages if m.get("id") is not None}
    linked = any(m.get("parentId") in by_id for m in messages)
    if not linked:
        # Nothing links the messages: their timestamps are all the order there is.
        return sorted(messages, key=lambda m: _timestamp(m))
    leaf = by_id.get(current_id) if current_id else None
    if leaf is None:
        parents = {m.get("parentId") for m in messages}
        leaves = [m for m in messages if m.get("id") not in parents]
        leaf = max(leaves or messages, key=_timestamp)
    path, seen = [], set()
    node = leaf
    while node is not None and node.get("id") not in seen:  # a loop in bad data must not hang
        seen.add(node.get("id"))
        path.append(node)
        node = by_id.get(node.get("parentId"))
    return list(reversed(path))


def _timestamp(message: dict) -> float:
    value = message.get("timestamp")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _pair_turns(ordered: list[dict]) -> tuple[list[Turn], list[bool | None], str | None]:
    turns: list[Turn] = []
    stored: list[bool | None] = []
    model = None
    for message in ordered:
        role = message.get("role")
        if role == "user":
            turns.append(Turn(_user_text(message), "", False, None))
            stored.append(False)
        elif role == "assistant" and turns:
            answer, stored[-1], error = _assistant_reply(message)
            finished = True if stored[-1] is None else stored[-1]
            turns[-1] = turns[-1]._replace(answer=answer, finished=finished, error=error)
            model = message.get("model") or message.get("modelName") or model
    return turns, stored, model


def _text(value: Any, field: str) -> str:
    """A text of the chat (a message's `content`, or a part's): a string, or nothing yet (None,
    absent). Any other type is a field the readers need in a shape nobody has reported: never
    written as its str() (an int where the answer was: the article "664")."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ChatShapeError(f"{field} is a {type(value).__name__}, not text", field=field)
    return value


def _finished_with_text(part: dict, field: str) -> None:
    """A part (or message) the site stored as finished carries its `content`: without the key it
    is a field the readers need missing, never an answer that finished empty (fuzz seed 1500
    trial 97: the answer part's `content` dropped read as an empty answer, which is hard: the
    router wrote an article the chat held). `content: null` is the site's own empty answer
    (docs/qwen-site.md: an account past its real limit)."""
    if (part.get("status") == "finished" or part.get("done") is True) and "content" not in part:
        raise ChatShapeError(f"{field} is stored as finished without its content", field=f"{field}.content")


def _parts_text(parts: list, field: str) -> str:
    return "".join(_text(p.get("content"), f"{field}.content") for p in parts)


def _user_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = message.get("content_list")
    if isinstance(parts, list):
        return _parts_text([p for p in parts if isinstance(p, dict)], "a user message's content_list[]")
    return _text(content, "a user message's content")


def _assistant_reply(message: dict) -> tuple[str, bool | None, str | None]:
    parts = message.get("content_list")
    if isinstance(parts, list):
        answer_parts = [p for p in parts if isinstance(p, dict) and p.get("phase") == "answer"]
        for part in answer_parts:
            _finished_with_text(part, "an answer's content_list[]")
        answer = _parts_text(answer_parts, "an answer's content_list[]")
    elif parts is not None:
        # Where the answer's parts should be, something else: its text may be in it.
        raise ChatShapeError(
            f"an answer's content_list is a {type(parts).__name__}, not a list", field="content_list"
        )
    else:
        # No phases at all: the top-level content is all there is.
        answer_parts = []
        _finished_with_text(message, "an answer")
        answer = _text(message.get("content"), "an answer's content")
    error = _error_text(message.get("error")) or next(
        (_error_text(p.get("error")) for p in answer_parts if _error_text(p.get("error"))), None
    )
    stored = _stored_completion(message, answer_parts)
    if stored is True and isinstance(parts, list) and not answer_parts:
        _answer_not_lost(parts)
    return answer, stored, error


def _answer_not_lost(parts: list) -> None:
    """A message stored as finished whose parts hold no "answer" phase reads as an answer that
    finished empty (hard: the router writes the article) only when every part is one we know.
    A part of a phase nobody has reported, of another type, or without its phase may hold the
    answer's text: a field the readers need in a shape nobody has reported (fuzz seed 8100
    trial 25: the answer part's `phase` turned into a number; the router wrote an article the
    chat held). A message still being written concludes nothing from its parts: not called."""
    for i, part in enumerate(parts):
        phase = part.get("phase") if isinstance(part, dict) else None
        if not isinstance(part, dict) or phase not in KNOWN_PHASES:
            shown = _phase_named(phase) if isinstance(part, dict) else f"a {type(part).__name__}"
            raise ChatShapeError(
                f"an answer stored as finished has no 'answer' phase, but its content_list[{i}] is {shown}",
                field="content_list[].phase",
            )


def _stored_completion(message: dict, answer_parts: list[dict]) -> bool | None:
    """What the stored message says of its own completion (None: it says nothing).

    A "typing" status or `done: false` anywhere that matters means not finished. A message whose
    own `phase` is not "answer" is not finished either, whatever its `status` says: the stream's
    `finished` in the thinking phase ends only the thinking. With no marker at all the API cannot
    tell (None), and the page's signals plus stable reads decide alone.
    """
    if message.get("phase") not in (None, "answer") and message.get("done") is not True:
        return False
    statuses = [message.get("status")] + [p.get("status") for p in answer_parts]
    if message.get("done") is False or "typing" in statuses:
        return False
    if message.get("done") is True or "finished" in statuses:
        return True
    if all(s is None for s in statuses) and "done" not in message:
        return None
    return False


def _error_text(error: Any) -> str | None:
    if not error:
        return None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("details") or error.get("code") or error)
    return str(error)


def classify_api_error(payload: Any) -> EngineError | None:
    """The failure a `/api/v2/...` body reports, or None for a success."""
    if not isinstance(payload, dict):
        error = TransientError(
            "the chat API answered with something that is not a JSON object", code=Code.API_ERROR
        )
        return unknown(error, body=json.dumps(payload, ensure_ascii=False)[:FIRST_BYTES])
    if payload.get("success") is True:
        return None
    text = json.dumps(payload, ensure_ascii=False)
    if any(marker in text for marker in BOT_MARKERS):
        # Late 2026: {"ret": ["FAIL_SYS_USER_VALIDATE", ...], "data": {"url": the slider's page}}
        # (no `success` key); the page lays the slider over itself (docs/qwen-site.md).
        data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
        url = data.get("url") if isinstance(data.get("url"), str) else ""
        where = f"; its slider: {url}" if url else ""
        return HardError(f"the site asks for a human verification (bot check{where})", code=Code.BOT_CHECK)
    if payload.get("success") is not False:
        return None
    data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
    code = str(data.get("code") or payload.get("code") or "")
    details = str(data.get("details") or data.get("message") or payload.get("message") or "")
    if code == "ParallelLimited":
        # The account has too many answers in the making (docs/qwen-site.md): the site took
        # nothing; again after a pause.
        return TransientError(
            f"the site has too many answers in the making for this account ({code}: {details})",
            code=Code.BUSY,
        )
    if code == "CHAT_IN_PROGRESS" or "in progress" in details.lower():
        # A send while the chat is still answering: the site took nothing; again in a few seconds.
        return TransientError(f"the site says the chat is busy ({details})", code=Code.CHAT_IN_PROGRESS)
    if is_stale_headers(payload):
        return TransientError(
            f"the site refused a read as not its frontend's ({code}: {details or 'no details'}); "
            "the page's headers went stale (a frontend release?)",
            code=Code.STALE_HEADERS,
        )
    if code == "CHAT_NOT_FOUND":
        return HardError(f"the chat no longer exists ({details or code})", code=Code.CHAT_NOT_FOUND)
    if code == "RateLimited":
        hours = _number(data.get("num"))
        when = f"; it resets in about {hours:g} h" if hours is not None else ""
        return QuotaSpent(
            f"the daily chat quota is spent{when}",
            retry_after=hours * 3600 if hours is not None else None,
        )
    if _means_logged_out(code, details):
        return HardError(f"not logged in to the chat site: {LOGIN_HINT}", code=Code.LOGGED_OUT)
    # None of the site's words we know: an unknown answer (its step names it: engines/unknown.py).
    error = TransientError(f"the chat API failed: {code or 'no code'} {details}".strip(), code=Code.API_ERROR)
    return unknown(error, code=code or None, body=text[:FIRST_BYTES])


def is_stale_headers(payload: Any) -> bool:
    """A body the site gives a call that does not look like its frontend's own (docs/qwen-site.md:
    a stale `version`, no `x-request-id`): `Bad_Request`, unless it says the chat is busy."""
    if not isinstance(payload, dict) or payload.get("success") is not False:
        return False
    data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
    code = str(data.get("code") or payload.get("code") or "")
    details = str(data.get("details") or data.get("message") or "")
    return code == "Bad_Request" and "in progress" not in details.lower()


def missing_chat_body(what: str) -> dict:
    """The body a chat read means when the site answers it "not found" some other way (the
    x-actual-status-code header): what classify_api_error calls chat_not_found."""
    return {"success": False, "data": {"code": "CHAT_NOT_FOUND", "details": f"{what} is not there"}}


def _means_logged_out(code: str, details: str) -> bool:
    words = f"{code} {details}".lower()
    return any(
        w in words for w in ("unauthorized", "not logged in", "not login", "notlogin", "token expired")
    )


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def is_logged_in_status(payload: Any) -> bool | None:
    """`/api/v2/users/status` -> True / False, or None when the body says nothing usable."""
    if not isinstance(payload, dict):
        return None
    if payload.get("success") is True:
        data = payload.get("data")
        return data if isinstance(data, bool) else None  # without its answer: nothing said
    error = classify_api_error(payload)
    if error is not None and error.code == Code.LOGGED_OUT:
        return False
    return None


class ListedChat(NamedTuple):
    """One item of the chat list: its id, and when the site says it was made (or None)."""

    chat_id: str
    created: float | None


def chat_list_items(payload: Any) -> list[ListedChat]:
    """One page of `/api/v2/chats/?page=N`, newest first as the site lists them. Items on the
    real site carry `created_at` / `updated_at` (epoch seconds); without them `created` is None.

    A page without its `data` list, or an item without its `id`, raises ChatShapeError: read as
    an empty page it would mean "no such chat", and that is what lets a prompt be sent again."""
    listed = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(listed, list):
        raise ChatShapeError("no data list in the chat list", field="data")
    items = []
    for number, item in enumerate(listed):
        chat_id = item.get("id") if isinstance(item, dict) else None
        if not isinstance(chat_id, str) or not chat_id:
            raise ChatShapeError(f"item {number} of the chat list has no id", field=f"data[{number}].id")
        items.append(ListedChat(chat_id, epoch_seconds(item.get("created_at"))))
    return items
