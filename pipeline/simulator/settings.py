"""The simulator's knobs: its scenarios, API shapes, pages, sites and models, and `Settings`
(what `Simulator.set` changes at run time), without the chats and pages that follow them.

`qwenpipe` builds the `simulate` command's options from these (options.py) whatever command it
runs: a `status` must not import the whole simulator to say what `simulate` accepts."""

from __future__ import annotations

import re
from dataclasses import field

from ..records import record
from .botchecks import AFTER_SEND, BOT_CHECK_SCENARIOS

DEFAULT_RATE = 0.1  # the fuzzing mode's chance that a request meets a fault (fuzz.py)

SCENARIOS = (
    "ok",
    "logged_out",
    "bot_check",
    "quota",
    "chat_not_found",
    "waf",
    "error_banner",
    "slow",
    "refusal",
    "short",
    "chatter",
    "wrong_language",
    "slider",
    *BOT_CHECK_SCENARIOS,  # the bot check's later shapes (botchecks.py)
    AFTER_SEND,
)
# Scenarios that block every request (checked by the server before anything else).
GATE_SCENARIOS = ("waf", "bot_check", "logged_out")
# Scenarios that refuse a send: the prompt reaches the server, nothing is generated.
REFUSING_SCENARIOS = (*GATE_SCENARIOS, "quota", *BOT_CHECK_SCENARIOS)
# Scenarios that shape the answer; fixed for a chat at the moment its message is accepted.
CONTENT_SCENARIOS = ("error_banner", "slow", "refusal", "short", "chatter", "wrong_language")
API_SHAPES = ("2026-06", "2026-08")
BAD_CHAT_READS = ("error", "shape")
# "late-2026": the current UI as public clients saw it late in 2026: the send button (no
# send-button class) inside .message-input-right-button-send, a stop button known only by its
# aria-label "Stop", the copy button in a footer hidden until the turn is hovered.
# "live-2026-08": the page as captured live on 2026-08-09 (docs/qwen-site.md): the late-2026
# buttons known by aria-label "Send" / "Stop", an Ant Design select for thinking (Auto / Thinking
# / Fast) instead of the toggle, a "+" mode menu without web search, a sidebar with
# [aria-label="New Chat"], a "Search Chats" box, a.chat-item-drag-link items and the user menu.
# "studio-2026-09": the live page rebranded "Qwen Studio" (docs/qwen-site.md, "Late autumn 2026"):
# its turns inside .qwen-chat-message-select-turn(-message) wrappers, tool cards with "thinking" in
# their class, a "1/2" pager, the title "Qwen Studio" and the placeholder "Ask Qwen".
UIS = ("current", "legacy", "late-2026", "live-2026-08", "studio-2026-09")
DEFAULT_UI = "live-2026-08"  # the page as its author last saw it live
# The site as it stood at a time docs/qwen-site.md describes, as settings over the defaults (the
# page as last seen live): `qwenpipe simulate --site NAME`, and the test suite run against it
# (QWENPIPE_TEST_SITE=NAME, README). "late-2026": the late-autumn page (Qwen Studio), its paged
# history, its stream and its error codes. Its rotating login (`rotating_sessions`) is not in it:
# it serves only a signed-in page, and the suite's projects are anonymous unless a test signs
# them in (those tests set it themselves).
SITES: dict[str, dict] = {
    "live-2026-08": {},
    "late-2026": {
        "ui": "studio-2026-09",
        "history_limit": 10,
        "late_stream": True,
        "late_errors": True,
    },
}
# The model picker's models: (the id the chat's JSON names, the name the picker shows).
MODELS = (
    ("qwen3.7-plus", "Qwen3.7-Plus"),
    ("qwen3.7-max", "Qwen3.7-Max"),
    ("qwen3.6-plus", "Qwen3.6-Plus"),
    ("qwen3.5-flash", "Qwen3.5-Flash"),
)
DEFAULT_MODEL = MODELS[0][0]
VERSION_RE = re.compile(r"^\d{1,3}\.\d{1,3}\.\d{1,4}$")


@record
class Settings:
    """Run-time knobs; `Simulator.set` replaces them, a chat copies what it needs when it starts."""

    scenario: str = "ok"
    api_shape: str = "2026-08"
    answer_seconds: float = 2.0
    thinking_seconds: float = 0.5
    url_delay: float = 0.3
    toast_seconds: float = 10.0  # how long an error toast stays on the page
    ui: str = DEFAULT_UI
    require_login: bool = False
    # API calls without `Authorization: Bearer <valid token>` are refused (Unauthorized).
    require_auth_header: bool = False
    # The autumn-2026 site (docs/qwen-site.md, "The frontend's own headers"): an API call that
    # does not carry the frontend's own headers (`source: web`, `version` = the build the page
    # was served with, `bx-v`, `timezone`) and a fresh UUID `x-request-id` is answered
    # Bad_Request. `frontend_version` is that build: chosen when the simulator starts, and
    # changed at run time to play a frontend release (pages served before it go stale).
    strict_headers: bool = True
    # The completion answers as the real site's does: a server-sent-event stream the page reads
    # (stream.py), the page polling nothing while it streams. Off: the completion answers its ids
    # as JSON at once and the page polls the chat's JSON until the answer is done.
    stream: bool = True
    frontend_version: str = "0.2.68"
    # The site's clock minus ours, in seconds: the times it stamps on chats and messages
    # (`created_at`, `timestamp`). Negative: what is sent now looks made that long ago.
    clock_offset: float = 0.0
    # Answers stop just short of their end (still generating) until this is set back to False:
    # a test decides when they finish, whatever the speed of the machine.
    hold_answers: bool = False
    # The chat's JSON says an answer finished (`done`, status "finished") this many seconds
    # before its last words are stored: a stored flag ahead of the text, which no client trusts
    # alone (docs/qwen-site.md, "Reading an answer"). The stream is not affected.
    finish_early: float = 0.0
    # Login tokens: how long one the site hands out lives, and how close to its end a token is
    # renewed (a fresh one in a Set-Cookie) on a page load and on GET /api/v1/auths/ (0 = never).
    token_hours: float = 168.0
    renew_hours: float = 24.0
    # "" = chats answer with the model the page chose; a model id = with that one whatever was
    # chosen (a site that did not keep the choice).
    serve_model: str = ""
    # The next this many sends are refused with "The chat is in progress!" (each refusal counts
    # one down): the answer the site gives a send while the chat is busy.
    in_progress_sends: int = 0
    # A chat that is not there answers HTTP 200 with `x-actual-status-code: 404` and a body that
    # says nothing (instead of CHAT_NOT_FOUND), and the page shows an empty chat.
    not_found_header: bool = False
    # Assistant messages carry only the stream's last `phase` and `status` (no `done`, no status
    # per phase): a finished thinking phase reads `finished` until the answer's own finish.
    stream_status: bool = False
    # Accepted sends per account per simulated day (the site's clock, UTC days), then
    # RateLimited with `num` = the hours to the next day; 0 = no limit. `account_quotas` gives
    # single accounts their own limit (name -> sends) instead.
    quota: int = 0
    account_quotas: dict = field(default_factory=dict)
    # The next this many chat reads (GET /api/v2/chats/<id>) answer `bad_chat_read`: "error" (a
    # success: false body the client cannot place) or "shape" (a success with the messages
    # where no known shape keeps them); each counts one down. The page's own reads come after.
    bad_chat_reads: int = 0
    bad_chat_read: str = "error"
    # Chat id -> seconds: the next read of that chat (GET /api/v2/chats/<id>) waits that long
    # before the site reads the chat, as a busy server does; each is used once. A read answered
    # late then holds text older than a read started after it was sent.
    slow_reads: dict = field(default_factory=dict)
    # The slider (scenario "slider": every account) for these accounts only: their sends are
    # refused with SLIDER_BODY until it is solved (the slider page, or `solve_slider`).
    slider_accounts: list = field(default_factory=list)
    # Answers finish with no text (content null, status finished): for the run, or these accounts.
    empty_answers: bool = False
    empty_accounts: list = field(default_factory=list)
    # The next this many chat deletes (DELETE /api/v2/chats/<id>) fail with a server error and
    # delete nothing; each counts one down.
    failing_deletes: int = 0
    # Read-after-write lag: a chat reads as not there (CHAT_NOT_FOUND, and left out of the chat
    # list) until this many seconds by the site's clock after it was made. A test moves the
    # site's clock (`clock_offset`) past it instead of waiting.
    read_lag: float = 0.0
    # Chats made while this is set are never shown (read as not there, left out of the list)
    # though the site took their prompt: a chat that vanishes.
    vanish_chats: bool = False
    # The late-2026 login (sessions.py): a session cookie the page trades for an access token of
    # 900 s at GET /api/v2/auths/refresh, each trade ending the old session.
    rotating_sessions: bool = False
    # Late autumn 2026 (docs/qwen-site.md, "Late autumn 2026"). A chat's page loads only its last
    # `history_limit` messages, over XHR (`GET /api/v2/chats/<id>?direction=up&limit=N`), and
    # draws only those; 0 = it loads the whole chat with fetch.
    history_limit: int = 0
    # The late-autumn stream: `response.created` carries `response_index`, `response.updated`
    # frames come, every frame carries the cumulative `usage`, and `web_search` / `search_result`
    # phases come before the answer.
    late_stream: bool = False
    # Candidate answers interleaved in one stream, each with its own `response_id` (the page
    # shows a "1/2" pager); the chat keeps the first, and the page shows it.
    candidates: int = 1
    # The next this many sends are refused `ParallelLimited` (too many answers in the making).
    parallel_limited_sends: int = 0
    # A send into a chat still answering is refused with the late code `CHAT_IN_PROGRESS`
    # (instead of Bad_Request "The chat is in progress!").
    late_errors: bool = False

    def validated(self) -> Settings:
        """These settings, each checked (scenario, shape, UI, times, flags, quotas): ValueError
        naming the first that is out of range; else the settings themselves."""
        checks = [
            (self.scenario in SCENARIOS, f"scenario must be one of {', '.join(SCENARIOS)}"),
            (self.api_shape in API_SHAPES, f"api_shape must be one of {', '.join(API_SHAPES)}"),
            (self.ui in UIS, f"ui must be one of {', '.join(UIS)}"),
            (
                min(self.answer_seconds, self.thinking_seconds, self.url_delay, self.toast_seconds) >= 0,
                "times must be >= 0",
            ),
            (abs(self.clock_offset) < 10 * 365 * 86400, "clock_offset must be within 10 years"),
            (0 <= self.finish_early <= 3600, "finish_early must be 0 to 3600 seconds"),
            (0 < self.token_hours <= 24 * 365, "token_hours must be more than 0 and at most 8760"),
            (0 <= self.renew_hours <= 24 * 365, "renew_hours must be 0 to 8760"),
            (isinstance(self.hold_answers, bool), "hold_answers must be true or false"),
            (isinstance(self.strict_headers, bool), "strict_headers must be true or false"),
            (isinstance(self.stream, bool), "stream must be true or false"),
            (
                isinstance(self.frontend_version, str) and bool(VERSION_RE.match(self.frontend_version)),
                "frontend_version must be a build number such as 0.2.68",
            ),
            (
                isinstance(self.in_progress_sends, int) and self.in_progress_sends >= 0,
                "in_progress_sends must be a count >= 0",
            ),
            (
                isinstance(self.bad_chat_reads, int) and self.bad_chat_reads >= 0,
                "bad_chat_reads must be a count >= 0",
            ),
            (
                self.bad_chat_read in BAD_CHAT_READS,
                f"bad_chat_read must be one of {', '.join(BAD_CHAT_READS)}",
            ),
            (
                self.serve_model in ("", *(m for m, _ in MODELS)),
                f"serve_model must be empty or one of {', '.join(m for m, _ in MODELS)}",
            ),
            (_is_count(self.quota), "quota must be a count >= 0"),
            (_is_count(self.failing_deletes), "failing_deletes must be a count >= 0"),
            (
                isinstance(self.read_lag, (int, float))
                and not isinstance(self.read_lag, bool)
                and 0 <= self.read_lag <= 10 * 365 * 86400,
                "read_lag must be 0 or more seconds (within 10 years)",
            ),
            (isinstance(self.vanish_chats, bool), "vanish_chats must be true or false"),
            (_is_count(self.history_limit), "history_limit must be a count >= 0 (0 = the whole chat)"),
            (isinstance(self.late_stream, bool), "late_stream must be true or false"),
            (self.candidates in (1, 2), "candidates must be 1 or 2"),
            (_is_count(self.parallel_limited_sends), "parallel_limited_sends must be a count >= 0"),
            (isinstance(self.late_errors, bool), "late_errors must be true or false"),
            (_is_names(self.slider_accounts), "slider_accounts must be a list of account names"),
            (isinstance(self.empty_answers, bool), "empty_answers must be true or false"),
            (_is_names(self.empty_accounts), "empty_accounts must be a list of account names"),
            (
                isinstance(self.slow_reads, dict)
                and all(
                    isinstance(k, str)
                    and isinstance(v, (int, float))
                    and not isinstance(v, bool)
                    and 0 <= v <= 60
                    for k, v in self.slow_reads.items()
                ),
                "slow_reads must map chat ids to 0 to 60 seconds",
            ),
            (
                isinstance(self.account_quotas, dict)
                and all(isinstance(k, str) and _is_count(v) for k, v in self.account_quotas.items()),
                "account_quotas must map account names to counts >= 0",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        return self

    def quota_of(self, account: str) -> int:
        """The sends a day `account` may make (0 = no limit)."""
        return int(self.account_quotas.get(account, self.quota))


def _is_names(value) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
