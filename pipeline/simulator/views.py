"""What a chat shows at a moment: its messages as far as they are written, and its stamps.

Plain functions of a chat, the run's settings and the two clocks (`now`, monotonic; `site_clock`,
the site's epoch seconds, read just after `now`): the store (chats.py) finds the chat and decides who may
see it, shapes.py turns the plain view into the JSON of the run's API shape.
"""

from __future__ import annotations

from . import answers


def progress(message, settings, now: float, stored: bool = True) -> dict:
    """Where an assistant message stands at `now` (Message.progress with the run's settings);
    `stored`: as the chat's JSON holds it (finish_early applies), not as the stream sends it."""
    early = settings.finish_early if stored else 0.0
    return message.progress(now, held=settings.hold_answers, early=early)


def write_stamp(message, settings, now: float, site_clock: float) -> float:
    """The site's clock at `message`'s last stored change; kept once it is finished (nothing of it
    changes again), so that a later clock_offset does not move it."""
    if message.last_stamp is not None:
        return message.last_stamp
    seen = progress(message, settings, now, stored=False)
    stamp = site_clock - (now - (message.started + seen["written"]))
    if seen["finished"]:
        message.last_stamp = stamp
    return stamp


def updated_at(chat, settings, now: float, site_clock: float) -> int:
    """When the site last stored a change to the chat, by its clock (whole seconds): a send, or an
    answer's last stored words or status."""
    written = [int(write_stamp(m, settings, now, site_clock)) for m in chat.messages if m.role == "assistant"]
    return max([chat.updated, *written])


def message_view(message, settings, now: float) -> dict:
    view = {
        "id": message.id,
        "role": message.role,
        "parent_id": message.parent_id,
        "timestamp": message.timestamp,
        "turn": message.turn,
        "model": message.model,
    }
    if message.role == "user":
        view["content"] = message.text
    else:
        view.update(progress(message, settings, now))
        view["thinking_enabled"] = bool(message.thinking)
    return view


def chat_view(chat, settings, now: float, site_clock: float) -> dict:
    """A plain snapshot of a chat for shapes.py: its title once the first answer is done."""
    views = [message_view(m, settings, now) for m in chat.messages]
    first_user = next((m for m in chat.messages if m.role == "user"), None)
    first_done = any(v["role"] == "assistant" and v["done"] for v in views)
    title = answers.chat_title(first_user.text) if first_user and first_done else "New Chat"
    return {
        "id": chat.id,
        "title": title,
        "created_at": chat.created,
        "updated_at": updated_at(chat, settings, now, site_clock),
        "messages": views,
    }


def list_item(chat, view: dict | None) -> dict:
    """The chat as the chat list shows it; `view` its chat_view (None: it reads as not found)."""
    return {
        "id": chat.id,
        "title": view["title"] if view else "New Chat",
        "created_at": chat.created,
        "updated_at": view["updated_at"] if view else chat.updated,
        "chat_type": "t2t",
    }
