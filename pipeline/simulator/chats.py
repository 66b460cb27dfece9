"""The simulated accounts: chats, their generation timelines, scenarios and quotas. What a chat
shows at a moment is views.py's; every prompt received goes into the ledger (ledger.py).

A run without accounts has one anonymous account (`ANONYMOUS`, every request is answered for
it). With accounts (`--accounts a,b`) each chat belongs to the account that made it: another
account reading it, sending into it or stopping it gets the site's CHAT_NOT_FOUND, exactly as for
a chat that does not exist, and the store counts that as an affinity violation.

Plain Python, no HTTP. Each assistant message stores only its start time and its full text;
what the chat shows at any moment is computed from time.monotonic(), so a reload in the middle
of an answer sees the partial answer, exactly like the real site.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
import uuid
from dataclasses import dataclass, field, replace

from . import answers, views
from .botchecks import (
    AFTER_SEND,
    PAGE_CHECKS,
    PageRefusal,
    connect_body,
)
from .fuzz import Fuzzer
from .ledger import Ledger
from .sessions import Sessions
from .settings import (  # the site's knobs, light enough for the command line to import
    CONTENT_SCENARIOS,
    DEFAULT_MODEL,
    REFUSING_SCENARIOS,
    SCENARIOS,
    Settings,
)

ANONYMOUS = ""  # the one account of a run without --accounts
DAY = 86400
SLOW_FACTOR = 100
# The stored `done` flag flips when the last chunk is stored; the stream's status says
# "finished" only this much later (and the page settles later still: app.js).
FINISH_LAG = 0.3
# After the API says "finished" the page still shows the stop button (and no copy button) for
# this long (app.js, handed it by pages.app_page): completion is read from the page AND the API.
PAGE_SETTLE = 0.7

QUOTA_BODY = {
    "success": False,
    "data": {"code": "RateLimited", "details": "You've reached the upper limit for today's usage.", "num": 5},
}
BOT_BODY = {
    "success": False,
    "data": {"code": "FAIL_SYS_USER_VALIDATE", "details": "RGV587_ERROR", "url": "/punish?x5step=1"},
}
# The late-2026 slider (docs/qwen-site.md): the send is answered with this (no `success` key),
# the page lays the slider over itself in an iframe, and nothing was taken.
SLIDER_PATH = "/_____tmd_____/punish"
SLIDER_BODY = {
    "ret": [
        "FAIL_SYS_USER_VALIDATE",
        "RGV587_ERROR::SM::\u54ce\u54df\u5582,\u88ab\u6324\u7206\u5566,\u8bf7\u7a0d\u540e\u91cd\u8bd5",
    ],
    "data": {"url": SLIDER_PATH + "?x5secdata=SIMULATED&action=captcha"},
}
UNAUTHORIZED_BODY = {"success": False, "data": {"code": "Unauthorized"}}
BAD_REQUEST_BODY = {"success": False, "data": {"code": "Bad_Request", "details": "Bad_Request"}}
BX_V = "2.5.36"  # the anti-bot script's version the page sends as `bx-v`
IN_PROGRESS_BODY = {"success": False, "data": {"code": "Bad_Request", "details": "The chat is in progress!"}}
# Late autumn 2026: the same refusal with its own code, and the account's answers-in-the-making limit.
CHAT_IN_PROGRESS_BODY = {
    "success": False,
    "data": {"code": "CHAT_IN_PROGRESS", "details": "The last message is still being answered"},
}
PARALLEL_LIMITED_BODY = {
    "success": False,
    "data": {"code": "ParallelLimited", "details": "Too many answers are being generated at once"},
}
ERROR_OBJECT = {"code": "internal_error", "details": "Something went wrong, please try again later."}


# What a send chose when its request does not say: the default model, thinking on, no search.
SEND_DEFAULTS = {"model": DEFAULT_MODEL, "thinking": True, "web_search": False}


def not_found_body(ident: str) -> dict:
    return {
        "success": False,
        "data": {"code": "CHAT_NOT_FOUND", "details": f"Invalid input chat parent_id {ident} is not exist"},
    }


def refusal_body(scenario: str) -> dict | PageRefusal | None:
    """The JSON body a refused request gets (None for "waf": that answer is an HTML page; a
    PageRefusal for the bot checks answered with a page, botchecks.py)."""
    if scenario in PAGE_CHECKS:
        return PageRefusal(scenario)
    if scenario == "connect_puzzle":
        return connect_body()
    bodies = {
        "quota": QUOTA_BODY,
        "bot_check": BOT_BODY,
        "logged_out": UNAUTHORIZED_BODY,
        "bad_request": BAD_REQUEST_BODY,
    }
    return bodies.get(scenario)


def slider_body() -> dict:
    """The refusal of a send the slider stops (its x5secdata differs each time, as the site's)."""
    url = f"{SLIDER_PATH}?x5secdata={uuid.uuid4().hex}&action=captcha"
    return {"ret": list(SLIDER_BODY["ret"]), "data": {"url": url}}


@dataclass
class Message:
    id: str
    role: str
    parent_id: str | None
    timestamp: int
    text: str  # the user's prompt, or the assistant's full intended answer
    turn: int = 1
    started: float = 0.0
    thinking: str = ""
    thinking_seconds: float = 0.0
    answer_seconds: float = 0.0
    cut_short: bool = False  # error_banner: stops at about half, with an error
    stopped_at: float | None = None
    model: str = DEFAULT_MODEL  # the model that answers (its id)
    empty: bool = False  # Settings.empty_answers: it finishes with no text (content null)
    # The site's clock at its last stored change, kept once it changes no more (a later move of
    # the clock, clock_offset, does not move a stamp the site already made).
    last_stamp: float | None = None
    released: float | None = None  # when hold_answers let it finish (monotonic), if it held it

    def progress(self, now: float, held: bool = False, early: float = 0.0) -> dict:
        """What the chat holds for this assistant message at monotonic time `now`; `held`
        (Settings.hold_answers): an answer that would be complete waits one word short of it;
        `early` (Settings.finish_early): the stored flags say finished that long before the text
        is all there. `written`: seconds from its start to the last change stored so far."""
        clock = min(now, self.stopped_at) if self.stopped_at is not None else now
        elapsed = clock - self.started
        thinking_done = elapsed >= self.thinking_seconds
        words = answers.split_words(self.text)
        limit = len(words) // 2 if self.cut_short else len(words)
        share = limit / len(words) if words else 1.0
        end = self.thinking_seconds + self.answer_seconds * share
        if not thinking_done:
            shown = 0
        elif self.answer_seconds <= 0:
            shown = limit
        else:
            shown = min(limit, int(len(words) * (elapsed - self.thinking_seconds) / self.answer_seconds))
        done = elapsed >= end or self.stopped_at is not None
        if done and held and self.stopped_at is None:
            done, shown = False, max(limit - 1, 0)
        elif done:
            shown = limit if self.stopped_at is None else shown
        think_words = answers.split_words(self.thinking)
        think_share = 1.0 if thinking_done else elapsed / max(self.thinking_seconds, 1e-9)
        finished = done and (elapsed >= end + FINISH_LAG or self.stopped_at is not None)
        written = clock - self.started if self.stopped_at is not None else min(elapsed, end + FINISH_LAG)
        if self.released is not None and self.stopped_at is None:
            written = max(written, min(elapsed, self.released - self.started))  # its last word came then
        whole = not (held or self.cut_short or self.stopped_at is not None)  # an answer to its end
        if early > 0 and whole and not finished and thinking_done and elapsed >= end - early:
            done = finished = True  # the flags ahead of the text: it is still being written
        return {
            "thinking": "".join(think_words[: int(len(think_words) * think_share)]),
            "thinking_done": thinking_done,
            "answer": None if self.empty and finished else "".join(words[:shown]),
            "answer_started": thinking_done,
            "done": done,
            "finished": finished,
            "error": dict(ERROR_OBJECT) if done and self.cut_short else None,
            "written": max(written, 0.0),
        }


@dataclass
class Chat:
    id: str
    created: int
    updated: int
    override: str | None = None  # the `[sim:NAME]` scenario of its first prompt
    account: str = ANONYMOUS  # the account that made it: the only one that can see it
    touched: int = 0  # orders the chat list when two updates fall in the same second
    hidden: bool = False  # made while `vanish_chats` was set: never shown
    messages: list[Message] = field(default_factory=list)

    def last_assistant(self) -> Message | None:
        return next((m for m in reversed(self.messages) if m.role == "assistant"), None)

    def user_turns(self) -> int:
        return sum(1 for m in self.messages if m.role == "user")


class ChatStore:
    """All chats, the accounts and the ledger, behind one lock (the HTTP server is threaded)."""

    def __init__(
        self,
        settings: Settings,
        ledger_path: str | os.PathLike | None = None,
        accounts: tuple[str, ...] = (),
    ):
        self.settings = settings.validated()
        self.lock = threading.RLock()
        self.chats: dict[str, Chat] = {}
        self._touches = itertools.count(1)
        self.accounts = tuple(accounts)
        # A token names its account and that account's generation when it was handed out;
        # logging an account out moves its generation on, so every token it had stops working.
        self.generations = {name: 0 for name in self.accounts}
        self._sent: dict[tuple[str, int], int] = {}  # (account, site day) -> accepted sends
        self.violations = {name: 0 for name in self.accounts or (ANONYMOUS,)}
        # Request ids seen (a repeated one is refused like a missing one), and every request
        # refused for not carrying the frontend's headers: (method, path, why).
        self._request_ids: set[str] = set()
        self.header_refusals: list[tuple[str, str, str]] = []
        self.solved: set[str] = set()  # accounts that slid the slider since it was put up
        self.punished: set[str] = set()  # accounts checked everywhere (botchecks.AFTER_SEND)
        self.deleted: list[str] = []  # the chats deleted (DELETE /api/v2/chats/<id>), in order
        self.sessions = Sessions()  # each account's current session (rotating_sessions)
        self.fuzzer = Fuzzer()  # the unknown answers of the fuzzing mode (fuzz.py)
        self.received = Ledger(ledger_path)  # every prompt that reached the site

    # -- settings ---------------------------------------------------------------------------
    def configure(self, **changes) -> Settings:
        with self.lock:
            now = time.monotonic()
            if "clock_offset" in changes:  # what was stored before keeps the stamp it had then
                for chat in self.chats.values():
                    views.updated_at(chat, self.settings, now, self.site_clock())
            if self.settings.hold_answers and changes.get("hold_answers") is False:
                for chat in self.chats.values():  # the held answers' last words are stored now
                    for message in chat.messages:
                        if (
                            message.role == "assistant"
                            and not self._progress(message, now, stored=False)["done"]
                        ):
                            message.released = now
            self.settings = replace(self.settings, **changes).validated()
            if "scenario" in changes or "slider_accounts" in changes:
                self.solved.clear()  # a slider put up (again) waits for its own solving
            return self.settings

    def slider_up(self, account: str | None) -> bool:
        """Whether `account`'s sends meet the slider now."""
        with self.lock:
            settings = self.settings
            wanted = settings.scenario == "slider" or account in settings.slider_accounts
            return account is not None and wanted and account not in self.solved

    def checked_everywhere(self, account: str | None) -> bool:
        """Whether every page and API call of `account` meets the check (botchecks.AFTER_SEND)."""
        with self.lock:
            return account is not None and account in self.punished

    def solve_slider(self, account: str) -> None:
        """The user slid it: `account`'s sends go through again."""
        with self.lock:
            self.solved.add(account)
            self.punished.discard(account)
            left = [name for name in self.settings.slider_accounts if name != account]
            self.settings = replace(self.settings, slider_accounts=left)

    def snapshot(self) -> Settings:
        with self.lock:
            return replace(self.settings)

    # -- the frontend's headers -----------------------------------------------------------
    def fresh_request_id(self, request_id: str) -> bool:
        """Whether `request_id` was never seen before (and remember it)."""
        with self.lock:
            if request_id in self._request_ids:
                return False
            self._request_ids.add(request_id)
            return True

    def refuse_headers(self, method: str, path: str, why: str) -> None:
        with self.lock:
            self.header_refusals.append((method, path, why))

    # -- accounts ---------------------------------------------------------------------------
    def require_account(self, name: str) -> str:
        """`name` when it is one of the run's accounts; ValueError naming them otherwise."""
        if name not in self.accounts:
            known = ", ".join(self.accounts) or "none: the run has one anonymous account"
            raise ValueError(f"no account {name!r} (the accounts are: {known})")
        return name

    def log_out(self, name: str) -> None:
        """Revoke every token `name` was given (a sign-in or login_state makes a new one)."""
        with self.lock:
            self.generations[self.require_account(name)] += 1

    def clear_accounts(self) -> None:
        """Forget the sends counted today, the quota overrides and the affinity violations."""
        with self.lock:
            self._sent.clear()
            self.punished.clear()
            self.violations = dict.fromkeys(self.violations, 0)
            self.settings = replace(self.settings, account_quotas={})

    def day(self) -> int:
        return self.site_time() // DAY

    def sent_today(self, account: str) -> int:
        with self.lock:
            return self._sent.get((account, self.day()), 0)

    def accounts_view(self) -> dict:
        """Each account's sends today, its quota (0 = none) and its affinity violations."""
        with self.lock:
            return {
                name: {
                    "sends_today": self.sent_today(name),
                    "quota": self.settings.quota_of(name),
                    "affinity_violations": self.violations[name],
                }
                for name in self.violations
            }

    def _quota_spent(self, account: str) -> dict | None:
        """The RateLimited body once `account` has had its sends today, else None."""
        limit = self.settings.quota_of(account)
        if not limit or self.sent_today(account) < limit:
            return None
        to_next_day = DAY - (time.time() + self.settings.clock_offset) % DAY
        return {**QUOTA_BODY, "data": {**QUOTA_BODY["data"], "num": max(1, math.ceil(to_next_day / 3600))}}

    def _owned(self, chat_id: str, account: str | None) -> Chat | None:
        """The chat when `account` made it; another account's chat is not there for it (and
        asking for it is counted as an affinity violation of the asking account)."""
        chat = self.chats.get(chat_id)
        if chat is None or account is None or chat.account == account:
            return chat
        self.violations[account] = self.violations.get(account, 0) + 1
        return None

    # -- chats ------------------------------------------------------------------------------
    def site_clock(self) -> float:
        """Epoch seconds by the site's clock (the run's clock_offset ahead of ours)."""
        return time.time() + self.settings.clock_offset

    def site_time(self) -> int:
        """Epoch seconds by the site's clock, whole seconds as the site stamps them."""
        return int(time.time() + self.settings.clock_offset)

    def new_chat(self, account: str = ANONYMOUS) -> str:
        now = self.site_time()
        chat = Chat(
            id=str(uuid.uuid4()), created=now, updated=now, account=account, hidden=self.settings.vanish_chats
        )
        with self.lock:
            chat.touched = next(self._touches)
            self.chats[chat.id] = chat
        return chat.id

    def read_delay(self, chat_id: str) -> float:
        """How long this read of `chat_id` waits before the site reads the chat (`slow_reads`,
        used once), 0 for most."""
        with self.lock:
            if chat_id not in self.settings.slow_reads:
                return 0.0
            left = dict(self.settings.slow_reads)
            delay = float(left.pop(chat_id))
            self.settings = replace(self.settings, slow_reads=left)
            return delay

    def bad_read(self) -> dict | None:
        """The body of a chat read that `bad_chat_reads` spoils (counting it), or None."""
        with self.lock:
            if self.settings.bad_chat_reads <= 0:
                return None
            self.settings = replace(self.settings, bad_chat_reads=self.settings.bad_chat_reads - 1)
            if self.settings.bad_chat_read == "shape":
                return {"success": True, "data": {"id": "?", "conversation": {"turns": []}}}
            return {"success": False, "data": {"code": "Internal_Error", "details": "try again later"}}

    def opens_as_missing(self, chat: Chat | None) -> bool:
        """chat_not_found (run-wide or for this chat) hides a chat that exists."""
        if chat is None or self.unseen(chat):
            return True
        return "chat_not_found" in (self.settings.scenario, chat.override)

    def unseen(self, chat: Chat) -> bool:
        """A chat the site took but does not show (yet): hidden, or within its read lag."""
        return chat.hidden or self.site_time() < chat.created + self.settings.read_lag

    def chat_view(self, chat_id: str, account: str = ANONYMOUS) -> dict | None:
        """A plain snapshot of a chat for shapes.py (views.py), or None when it reads as not found
        (also when another account made it)."""
        now = time.monotonic()
        with self.lock:
            chat = self._owned(chat_id, account)
            if self.opens_as_missing(chat):
                return None
            return views.chat_view(chat, self.settings, now, self.site_clock())

    def _progress(self, message: Message, now: float, stored: bool = True) -> dict:
        return views.progress(message, self.settings, now, stored)

    def message_progress(self, chat_id: str, message_id: str) -> dict | None:
        """Where one assistant message stands now (Message.progress, its model, whether it
        thinks), or None when the chat or the message is not there (any account)."""
        with self.lock:
            chat = self.chats.get(chat_id)
            message = next((m for m in chat.messages if m.id == message_id), None) if chat else None
            if message is None or self.opens_as_missing(chat):
                return None
            seen = self._progress(message, time.monotonic(), stored=False)
            return {**seen, "model": message.model, "thinking_enabled": bool(message.thinking)}

    def list_chats(self, page: int, per_page: int = 10, account: str = ANONYMOUS) -> list[dict]:
        """`account`'s chat list, most recently updated first, `per_page` a page (page 1 first)."""
        with self.lock:
            own = [c for c in self.chats.values() if c.account == account and not self.unseen(c)]
            chats = sorted(own, key=lambda c: (c.updated, c.touched), reverse=True)
            chosen = chats[(max(page, 1) - 1) * per_page : max(page, 1) * per_page]
            return [views.list_item(c, self.chat_view(c.id, c.account)) for c in chosen]

    def delete_chat(self, chat_id: str, account: str = ANONYMOUS) -> dict:
        """DELETE /api/v2/chats/<id> (docs/qwen-site.md): the chat leaves its account's list and
        reads as not found from then on. Another account's chat is not there for this one
        (CHAT_NOT_FOUND, an affinity violation); `failing_deletes` fails the next ones."""
        with self.lock:
            if self.settings.failing_deletes > 0:
                self.settings = replace(self.settings, failing_deletes=self.settings.failing_deletes - 1)
                return {"success": False, "data": dict(ERROR_OBJECT)}
            chat = self._owned(chat_id, account)
            if chat is None:
                return not_found_body(chat_id)
            del self.chats[chat_id]
            self.deleted.append(chat_id)
            return {"success": True, "data": {"status": True}}

    def stop(self, chat_id: str, account: str = ANONYMOUS) -> bool:
        """The stop button: freeze the running answer where it is."""
        with self.lock:
            chat = self._owned(chat_id, account)
            last = chat.last_assistant() if chat else None
            if last is None or self._progress(last, time.monotonic(), stored=False)["done"]:
                return False
            last.stopped_at = time.monotonic()
            return True

    # -- sending ----------------------------------------------------------------------------
    def send(
        self,
        chat_id: str,
        prompt: str,
        parent_id: str | None,
        gate: str | None,
        choice: dict | None = None,
        account: str | None = ANONYMOUS,
        fault: str | None = None,
    ) -> dict | PageRefusal | None:
        """Receive one user message from `account` (None: a request logged out). Returns the
        JSON body, None for a WAF page, or a PageRefusal (a bot check answered with a page).

        `choice`: what the page chose for it (model id, thinking on/off, web search on/off).
        Every call is a ledger entry: the prompt reached the server even when it is refused.
        `fault`: the fuzzing mode's fault the request met (its ledger entry names it).
        """
        choice = {**SEND_DEFAULTS, **(choice or {})}
        with self.lock:
            settings = self.settings
            chat = self.chats.get(chat_id) if gate else self._owned(chat_id, account)
            named = answers.prompt_scenario(prompt)
            per_prompt = named if named in SCENARIOS else None
            scenario = gate or per_prompt or settings.scenario
            turn = (chat.user_turns() + 1) if chat else 1
            refused = self._refusal(chat, chat_id, parent_id, scenario, gate)
            if refused is False and (per_prompt == "slider" or self.slider_up(account)):
                refused, scenario = slider_body(), "slider"
            spent = self._quota_spent(account) if refused is False and account is not None else None
            if spent:
                refused, scenario = spent, "quota"
            if refused is not False:
                self.received.record(chat_id, prompt, turn, False, scenario, choice, account, fault)
                return refused
            empty = settings.empty_answers or account in settings.empty_accounts
            reply = self._accept(chat, prompt, parent_id, per_prompt, turn, settings, choice, empty)
            self._sent[(account, self.day())] = self.sent_today(account) + 1
            if scenario == AFTER_SEND and account is not None:
                self.punished.add(account)
            self.received.record(chat_id, prompt, turn, True, scenario, choice, account, fault)
            return reply

    def refuse_send(
        self,
        chat_id: str,
        prompt: str,
        parent_id: str | None,
        *,
        choice: dict,
        account: str | None,
        fault: str,
    ) -> None:
        """A send the fuzzing mode's `fault` answered instead of the site: in the ledger, refused."""
        with self.lock:
            chat = self.chats.get(chat_id)
            turn = (chat.user_turns() + 1) if chat else 1
            self.received.record(
                chat_id, prompt, turn, False, "fuzz", {**SEND_DEFAULTS, **choice}, account, fault
            )

    def _refusal(self, chat, chat_id, parent_id, scenario, gate) -> dict | None | bool:
        """Why a send is refused (a body, or None for WAF), or False when it is accepted."""
        if gate or scenario in REFUSING_SCENARIOS:
            return refusal_body(gate or scenario)
        if self.settings.in_progress_sends > 0:
            self.settings = replace(self.settings, in_progress_sends=self.settings.in_progress_sends - 1)
            return dict(CHAT_IN_PROGRESS_BODY if self.settings.late_errors else IN_PROGRESS_BODY)
        if self.settings.parallel_limited_sends > 0:
            count = self.settings.parallel_limited_sends - 1
            self.settings = replace(self.settings, parallel_limited_sends=count)
            return dict(PARALLEL_LIMITED_BODY)
        if chat is None or (chat.messages and self.opens_as_missing(chat)):
            return not_found_body(parent_id or chat_id)
        last = chat.last_assistant()
        if last is not None and not self._progress(last, time.monotonic(), stored=False)["done"]:
            return dict(CHAT_IN_PROGRESS_BODY if self.settings.late_errors else IN_PROGRESS_BODY)
        expected_parent = chat.messages[-1].id if chat.messages else None
        if parent_id != expected_parent:
            return not_found_body(parent_id)
        return False

    def _accept(self, chat, prompt, parent_id, per_prompt, turn, settings, choice, empty=False) -> dict:
        now_epoch = self.site_time()
        if not chat.messages:
            chat.override = per_prompt
        # This prompt's own token wins, then the chat's, then the run's.
        choices = (per_prompt, chat.override, settings.scenario)
        content = next((c for c in choices if c in CONTENT_SCENARIOS), None)
        user = Message(
            id=str(uuid.uuid4()),
            role="user",
            parent_id=parent_id,
            timestamp=now_epoch,
            text=prompt,
            turn=turn,
        )
        factor = SLOW_FACTOR if content == "slow" else 1
        model = settings.serve_model or choice["model"]
        user.model = model
        reply = Message(
            id=str(uuid.uuid4()),
            role="assistant",
            parent_id=user.id,
            timestamp=now_epoch,
            text="" if empty else answers.expected_answer(prompt, turn, content or "ok"),
            turn=turn,
            started=time.monotonic(),
            thinking=answers.thinking_text(prompt, turn) if choice["thinking"] else "",
            thinking_seconds=settings.thinking_seconds if choice["thinking"] else 0.0,
            answer_seconds=settings.answer_seconds * factor,
            cut_short=content == "error_banner",
            model=model,
            empty=empty,
        )
        chat.messages += [user, reply]
        chat.updated = now_epoch
        chat.touched = next(self._touches)
        return {"success": True, "data": {"chat_id": chat.id, "parent_id": user.id, "message_id": reply.id}}

    # -- ledger -----------------------------------------------------------------------------
    def ledger(self) -> list[dict]:
        """Every prompt that reached the site, taken or refused (ledger.py)."""
        with self.lock:
            return self.received.entries()
