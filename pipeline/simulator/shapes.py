"""The two JSON shapes of `GET /api/v2/chats/<id>` seen in public clients (see the reference).

Both are built from the plain view that ChatStore.chat_view returns, so the timeline logic lives
in one place and only the packaging differs.
"""

from __future__ import annotations


def chat_body(view: dict, shape: str, *, stream_status: bool = False) -> dict:
    """{"success": true, "data": {...}} for a chat view in the "2026-06" or "2026-08" shape.

    `stream_status`: assistant messages say only what the stream said last (see _stream_only)."""
    children = _children(view["messages"])

    def message(m: dict) -> dict:
        out = _message(m, children, shape)
        return _stream_only(out, m) if stream_status and m["role"] == "assistant" else out

    if shape == "2026-06":
        keyed = {m["id"]: message(m) for m in view["messages"]}
        current = view["messages"][-1]["id"] if view["messages"] else None
        chat = {"history": {"currentId": current, "messages": keyed}}
    else:
        chat = {
            "history": {"messages": {}},
            "messages": [message(m) for m in view["messages"]],
        }
    data = {
        "id": view["id"],
        "title": view["title"],
        "created_at": view["created_at"],
        "updated_at": view["updated_at"],
        "chat_type": "t2t",
        "models": [view["messages"][-1]["model"]] if view["messages"] else [],
        "chat": chat,
    }
    return {"success": True, "data": data}


def history_page(view: dict, query: dict[str, list[str]]) -> dict:
    """The view as `?direction=up&limit=N` asks for it (docs/qwen-site.md, "Late autumn 2026"):
    only the last N messages of the chat, the oldest of them still linking to its parent, which
    the page does not get. Without `limit`, the whole chat."""
    try:
        limit = int(query.get("limit", ["0"])[0])
    except ValueError:
        limit = 0
    if limit <= 0 or query.get("direction", ["up"])[0] != "up":
        return view
    return {**view, "messages": view["messages"][-limit:]}


def _children(messages: list[dict]) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {m["id"]: [] for m in messages}
    for m in messages:
        if m["parent_id"] in kids:
            kids[m["parent_id"]].append(m["id"])
    return kids


def _message(m: dict, children: dict[str, list[str]], shape: str) -> dict:
    out = {
        "id": m["id"],
        "role": m["role"],
        "parentId": m["parent_id"],
        "childrenIds": children.get(m["id"], []),
        "timestamp": m["timestamp"],
        "models": [m["model"]],
        "chat_type": "t2t",
    }
    if m["role"] == "user":
        out["content"] = m["content"]
        return out
    out["model"] = m["model"]
    out["done"] = m["done"]
    # 2026-06 keeps the body only in content_list; 2026-08 also has a top-level copy.
    out["content"] = "" if shape == "2026-06" else m["answer"]
    out["content_list"] = _content_list(m, shape)
    if m["error"]:
        out["error"] = m["error"]
    return out


def _stream_only(out: dict, m: dict) -> dict:
    """A message that carries the stream's last `phase` and `status` and nothing else about its
    completion: once thinking ends it reads `thinking_summary` / `finished` until the answer's
    own finish (a `finished` that ends only the thinking)."""
    out.pop("done", None)
    for item in out["content_list"]:
        item.pop("status", None)
    if m["finished"]:
        out["phase"], out["status"] = "answer", "finished"
    else:
        out["phase"] = "thinking_summary"
        out["status"] = "finished" if m["thinking_done"] else "typing"
    return out


def _content_list(m: dict, shape: str) -> list[dict]:
    """Phases in order; later phases appear only once the thinking phase is over."""
    items = []
    if m["thinking_enabled"]:
        items.append(
            {
                "phase": "thinking_summary",
                "content": m["thinking"],
                "status": "finished" if m["thinking_done"] else "typing",
                "extra": {"summary_title": {"content": ["Thinking"]}},
            }
        )
    if not m["answer_started"]:
        return items
    if shape == "2026-08":
        # Not part of the article: a client that joins every phase's text gets this too.
        items.append(
            {
                "phase": "web_search",
                "content": "Searched 0 web pages.",
                "status": "finished",
                "extra": {"web_search_info": []},
            }
        )
    items.append(
        {"phase": "answer", "content": m["answer"], "status": "finished" if m["finished"] else "typing"}
    )
    return items


def list_body(items: list[dict]) -> dict:
    return {"success": True, "data": items}
