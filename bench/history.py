"""The made-up journal history that bench_status and bench_store fill a store with."""

from __future__ import annotations

import random

EVENTS = ["sending", "sent", "poll", "poll", "transient", "poll", "done"]  # drawn at random


def event_fields(event: str, number: int, rng: random.Random) -> dict:
    """What an event of kind `event` (the `number`th of the history) carries besides its slug,
    time and engine: a sent chat's URL, a transient failure's error, a poll's or done's duration."""
    fields: dict = {}
    if event == "sent":
        fields["chat_url"] = f"https://chat.qwen.ai/c/{number:08d}-0000-4000-8000-000000000000"
    if event == "transient":
        fields.update(error="WAF page", code="waf", attempt=1)
    if event in ("poll", "done"):
        fields["duration"] = round(rng.uniform(0.5, 9), 3)
    return fields
