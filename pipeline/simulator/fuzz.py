"""The fuzzing mode: at each step the site takes, now and then, an answer nobody has reported yet.

A real site changes without notice (issue 37). With a seed (`--fuzz SEED`) each request a step
serves (STEPS) meets, with probability `fuzz_rate`, one of the fault kinds that apply to that
step (FAULTS), chosen by a generator seeded with (seed, step, how many times the step was served):
the n-th chat read of a run meets the same fault whatever the order of the other steps' requests.
A test forces one fault at one step instead (`fault = "completion:html_5xx"`, or a list): it
comes at the next request of that step, once, seed or no seed.

FAULTS is the one table of the kinds: the steps each applies to, and whether the site carried the
request out before it answered so (`taken`: took and counted the send, made or deleted the chat;
for a read, served it). Every fault goes into the fuzzer's ledger (Simulator.faults()) with what
the site really did; a send's own ledger entry names its fault too (Simulator.ledger()).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from .settings import DEFAULT_RATE

# The steps the site takes, each a kind of request the page (or a client reading what the page
# reads) makes.
STEPS = {
    "new_chat": "POST /api/v2/chats/new",
    "completion": "POST /api/v2/chat/completions (the answer before its stream)",
    "stream": "the completion's event-stream frames",
    "chat_json": "GET /api/v2/chats/<id>",
    "chat_list": "GET /api/v2/chats/?page=N",
    "login_check": "GET /api/v2/users/status and GET /api/v1/auths/",
    "delete": "DELETE /api/v2/chats/<id>",
    "chat_page": "GET /c/<id> (the chat's page)",
}
JSON_STEPS = ("new_chat", "completion", "chat_json", "chat_list", "login_check", "delete")
HTTP_STEPS = (*JSON_STEPS, "chat_page")
ACTIONS = ("new_chat", "completion", "delete")  # steps that change the site
BODY_STEPS = ("new_chat", "chat_json", "chat_list", "login_check", "delete", "stream")


@dataclass(frozen=True)
class Fault:
    """One kind of unknown answer: where it can come and whether the site did the work first."""

    kind: str
    steps: tuple[str, ...]
    taken: bool  # the request was carried out (send taken and counted, chat made or deleted)
    what: str


FAULTS = {
    fault.kind: fault
    for fault in (
        Fault("unknown_code", JSON_STEPS, False, "HTTP 200, the site's JSON error shape, an unknown code"),
        Fault("unknown_code_taken", ACTIONS, True, "done, then answered with an unknown error code"),
        Fault("html_4xx", HTTP_STEPS, False, "HTTP 4xx with an HTML body"),
        Fault("html_5xx", HTTP_STEPS, False, "HTTP 5xx with an HTML body"),
        Fault("html_5xx_taken", ACTIONS, True, "done, then HTTP 5xx with an HTML body (a gateway gave up)"),
        Fault("unknown_widget", HTTP_STEPS, False, "HTTP 200, a page of a widget nobody has seen"),
        Fault("redirect", HTTP_STEPS, False, "a redirect (302) to an unknown path"),
        Fault("unknown_field", BODY_STEPS, True, "the answer with a field nobody has seen"),
        Fault("missing_field", BODY_STEPS, True, "the answer without one of its fields"),
        Fault("wrong_type", BODY_STEPS, True, "the answer with one field of another type"),
        Fault("other_chat", ("chat_json",), True, "the JSON of another chat"),
        Fault("cut_stream", ("stream",), True, "the stream ends before its last frame"),
        Fault("unknown_phase", ("stream",), True, "a frame of a phase nobody has seen, with text"),
        Fault("unknown_status", ("stream",), True, "a status nobody has seen (added, or for `finished`)"),
        Fault("duplicate_frame", ("stream",), True, "one frame comes twice"),
        Fault("reorder_frames", ("stream",), True, "two frames come in the other order"),
        Fault("slow", tuple(STEPS), True, "the answer (or a frame of the stream) comes seconds late"),
    )
}
SLOW_SECONDS = (1.0, 6.0)
HTML_4XX = (400, 403, 404, 409, 429)
HTML_5XX = (500, 502, 503, 504)
UNKNOWN_CODES = ("SessionMigrating", "RegionLocked", "ModelRetired", "ShardBusy", "Risk_Review", "E_40917")
HTML_STATUS = re.compile(r"^html_(?P<status>\d{3})(?P<taken>_taken)?$")
REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

# (status, content type, body, headers) as api.py answers
Response = tuple


def parse_forced(text: str) -> list[tuple[str, str, int | None]]:
    """`step:kind` items (comma-separated) as (step, kind, status); ValueError naming the bad one.
    `html_NNN` (and `html_NNN_taken`) is html_4xx / html_5xx (_taken) with that status."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        step, _, kind = item.partition(":")
        status = None
        pinned = HTML_STATUS.match(kind)
        if pinned and int(pinned["status"]) in REASONS:
            status = int(pinned["status"])
            kind = f"html_{status // 100}xx{pinned['taken'] or ''}"
        if step not in STEPS:
            raise ValueError(f"{item!r}: no step {step!r} (steps: {', '.join(STEPS)})")
        fault = FAULTS.get(kind)
        if fault is None:
            raise ValueError(
                f"{item!r}: no fault kind {kind!r} (kinds: {', '.join(FAULTS)}; "
                f"html_NNN for a status of {', '.join(map(str, REASONS))})"
            )
        if step not in fault.steps:
            raise ValueError(
                f"fault {item!r}: {kind} does not come at {step} (only at {', '.join(fault.steps)})"
            )
        out.append((step, kind, status))
    return out


class Fuzzer:
    """Which request meets which fault, and the ledger of the faults met."""

    def __init__(self, seed: int | None = None, rate: float = DEFAULT_RATE, forced: str = ""):
        self.lock = threading.Lock()
        self.seed, self.rate = seed, rate
        self.forced = parse_forced(forced)
        self.served: dict[str, int] = {}  # step -> requests served so far
        self.records: list[dict] = []

    def configure(self, **changes) -> None:
        """`fuzz` (the seed, None = off), `fuzz_rate`, `fault` (forced faults, replacing any left)."""
        with self.lock:
            if "fault" in changes:
                self.forced = parse_forced(changes["fault"] or "")
            if "fuzz" in changes:
                seed = changes["fuzz"]
                if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
                    raise ValueError("fuzz must be a seed (an integer) or null")
                self.seed, self.served = seed, {}
            if "fuzz_rate" in changes:
                rate = changes["fuzz_rate"]
                if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
                    raise ValueError("fuzz_rate must be a probability from 0 to 1")
                self.rate = float(rate)

    def config(self) -> dict:
        with self.lock:
            forced = ",".join(f"{s}:{k}" + (f"({n})" if n else "") for s, k, n in self.forced)
            return {"fuzz": self.seed, "fuzz_rate": self.rate, "fault": forced}

    def choose(self, step: str, account: str | None, chat_id: str = "") -> Met | None:
        """The fault this request of `step` meets (recorded), or None."""
        with self.lock:
            number = self.served.get(step, 0)
            self.served[step] = number + 1
            rng = random.Random(f"{self.seed}:{step}:{number}")
            forced = next((f for f in self.forced if f[0] == step), None)
            if forced is not None:
                self.forced.remove(forced)
                fault, status = FAULTS[forced[1]], forced[2]
            elif self.seed is not None and rng.random() < self.rate:
                fault, status = FAULTS[rng.choice([k for k, f in FAULTS.items() if step in f.steps])], None
            else:
                return None
            record = {
                "time": time.time(),
                "step": step,
                "kind": fault.kind,
                "taken": fault.taken,
                "account": account,
                "chat_id": chat_id,
                "forced": forced is not None,
                "detail": "",
            }
            self.records.append(record)
            return Met(fault, rng, record, status)

    def ledger(self) -> list[dict]:
        with self.lock:
            return [dict(record) for record in self.records]


class Met:
    """A fault one request met: it answers the request instead, or spoils its answer."""

    def __init__(self, fault: Fault, rng: random.Random, record: dict, status: int | None = None):
        self.fault, self.rng, self.record, self.status = fault, rng, record, status

    @property
    def kind(self) -> str:
        return self.fault.kind

    @property
    def taken(self) -> bool:
        return self.fault.taken

    def note(self, detail: str) -> None:
        self.record["detail"] = detail

    def delay(self) -> None:
        seconds = round(self.rng.uniform(*SLOW_SECONDS), 1)
        self.note(f"{seconds} s late")
        time.sleep(seconds)

    def instead(self) -> Response:
        """The answer to a request the site did not carry out (or carried out, then answered so)."""
        kind = self.kind.removesuffix("_taken")
        if kind == "unknown_code":
            code = self.rng.choice(UNKNOWN_CODES)
            self.note(code)
            body = {"success": False, "data": {"code": code, "details": f"{code}: please try again later"}}
            return 200, "application/json", json.dumps(body).encode(), []
        if kind in ("html_4xx", "html_5xx"):
            status = self.status or self.rng.choice(HTML_4XX if kind == "html_4xx" else HTML_5XX)
            self.note(f"HTTP {status}")
            title = f"{status} {REASONS[status]}"
            html = f"<html><head><title>{title}</title></head><body><center><h1>{title}</h1></center>"
            return (
                status,
                "text/html; charset=utf-8",
                (html + "<hr><center>Tengine</center></body></html>").encode(),
                [],
            )
        if kind == "unknown_widget":
            name = f"fuzz-widget-{self.rng.getrandbits(24):06x}"
            self.note(name)
            html = (
                f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>One moment</title></head><body>'
                f'<div class="{name}" role="dialog"><p>Please hold on while we check something.</p>'
                "<button>Continue</button></div></body></html>"
            )
            return 200, "text/html; charset=utf-8", html.encode(), []
        if kind == "redirect":
            where = f"/fuzz/{self.rng.getrandbits(32):08x}/moved"
            self.note(where)
            return 302, "text/html; charset=utf-8", b"", [("Location", where)]
        raise ValueError(f"{self.kind} does not answer instead of the site")

    def spoil(self, response: Response, other_chat: Callable[[], dict | None] | None = None) -> Response:
        """The site's own answer, spoiled by this (taken) fault."""
        if self.kind in ("unknown_code_taken", "html_5xx_taken"):
            return self.instead()
        status, content_type, body, headers = response
        if not isinstance(body, bytes) or not content_type.startswith("application/json"):
            self.note("the answer is not JSON: left as it is")
            return response
        data = json.loads(body)
        if self.kind == "other_chat":
            data = other_chat() if other_chat else None
            if data is None:
                self.note("no other chat: left as it is")
                return response
            self.note(f"the JSON of chat {data.get('data', {}).get('id')}")
        else:
            data = self.mutate(data)
        return status, content_type, json.dumps(data).encode(), headers

    def mutate(self, data):
        """`data` with a field added, dropped or of another type (unknown_field, missing_field,
        wrong_type): at a place chosen by the fault's generator."""
        places = list(_places(data))
        if self.kind == "unknown_field":
            holders = [value for _path, value in [("", data), *places] if isinstance(value, dict)]
            if not holders:
                self.note("no object to add a field to")
                return data
            holder = self.rng.choice(holders)
            name = f"fuzz_{self.rng.getrandbits(16):04x}"
            holder[name] = self.rng.choice([1, "x", None, [1, 2], {"nested": True}, False])
            self.note(f"added {name}")
            return data
        keyed = [(path, parent, key) for path, (parent, key) in _keyed(data)]
        if not keyed:
            self.note("no field to change")
            return data
        path, parent, key = self.rng.choice(keyed)
        if self.kind == "missing_field":
            del parent[key]
            self.note(f"dropped {path}")
        else:
            parent[key] = _other_type(parent[key])
            self.note(f"{path} is now {type(parent[key]).__name__}")
        return data

    def spoil_stream(self, frames: Iterable[bytes]) -> Iterator[bytes]:
        """The stream's frames spoiled by this fault (a stream fault), at one data frame chosen by
        the fault's generator (the last one when the stream is shorter). Each frame is held back
        until the next comes, so that the last one is known as such."""
        target = self.rng.randint(1, 3 if self.kind == "reorder_frames" else 8)
        index, pending, held, spoiled = 0, None, None, False
        for chunk in frames:
            if not chunk.startswith(b"data:"):
                yield chunk  # a keep-alive
                continue
            if pending is not None:
                hit = not spoiled and index >= target
                spoiled = spoiled or hit
                out, stop = self._frame(pending, index, hit=hit, last=False)
                if hit and self.kind == "reorder_frames":
                    held = pending  # it goes after the next frame
                elif held is not None:
                    out, held = [*out, held], None
                yield from out
                if stop:
                    return
                index += 1
            pending = chunk
        if pending is not None:
            out, _stop = self._frame(pending, index, hit=not spoiled, last=True)
            yield from out
        if held is not None:
            yield held

    def _frame(self, chunk: bytes, index: int, *, hit: bool, last: bool) -> tuple[list[bytes], bool]:
        """What to send for one data frame: (frames, whether the stream stops here)."""
        if not hit:
            return [chunk], False
        kind = self.kind
        where = f"frame {index}{' (the last)' if last else ''}"
        if kind == "cut_stream":
            self.note(f"cut before {where}")
            return [], True
        if kind == "duplicate_frame":
            self.note(f"{where} twice")
            return [chunk, chunk], False
        if kind == "reorder_frames":
            if last:
                self.note("the stream was too short to reorder")
                return [chunk], False
            self.note(f"{where} after the next")
            return [], False
        if kind == "slow":
            self.delay()
            self.note(f"{self.record['detail']} before {where}")
            return [chunk], False
        if kind == "unknown_phase":
            phase = f"fuzz_{self.rng.choice(['reflect', 'plan', 'cite', 'draft'])}"
            self.note(f"a {phase} frame before {where}")
            extra = {
                "role": "assistant",
                "content": "Text of a phase that is not the answer.",
                "phase": phase,
            }
            return [_frame({"choices": [{"delta": {**extra, "status": "typing"}}]}), chunk], False
        if kind == "unknown_status":
            data = _data(chunk)
            change = _delta(data)
            if last and change is not None and change.get("status") == "finished":
                change["status"] = "completed"
                self.note(f"{where}: `completed` for `finished`")
                return [_frame(data)], False
            status = f"fuzz_{self.rng.choice(['paused', 'queued', 'review'])}"
            self.note(f"a frame of status {status} before {where}")
            extra = {"role": "assistant", "content": "", "phase": "answer", "status": status}
            return [_frame({"choices": [{"delta": extra}]}), chunk], False
        data = _data(chunk)
        if data is None:
            return [chunk], False
        data = self.mutate(data)
        self.note(f"{where}: {self.record['detail']}")
        return [_frame(data)], False


def _frame(data) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _data(chunk: bytes):
    try:
        return json.loads(chunk[len(b"data:") :])
    except ValueError:
        return None


def _delta(data) -> dict | None:
    try:
        change = data["choices"][0]["delta"]
    except (TypeError, KeyError, IndexError):
        return None
    return change if isinstance(change, dict) else None


def _places(value, path: str = ""):
    """Every (path, value) below `value`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key}", item
            yield from _places(item, f"{path}.{key}")
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield f"{path}[{number}]", item
            yield from _places(item, f"{path}[{number}]")


def _keyed(value, path: str = ""):
    """Every (path, (object, key)) of a field below `value`."""
    if isinstance(value, dict):
        for key, item in list(value.items()):
            yield f"{path}.{key}", (value, key)
            yield from _keyed(item, f"{path}.{key}")
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from _keyed(item, f"{path}[{number}]")


def _other_type(value):
    """`value` as another JSON type, as a site that changed a field's type would send it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return len(value) if not value.isdigit() else [value]
    if value is None:
        return 0
    if isinstance(value, list):
        return {str(n): item for n, item in enumerate(value)}
    return [value]
