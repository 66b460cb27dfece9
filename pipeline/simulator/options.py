"""The simulator's command-line options, defined once for `qwenpipe simulate` and
`python -m pipeline.simulator` (both build their options from SimulatorOptions' fields).

The times default to the simulator's own Settings; the port is fixed (8765) because a server
started by hand is one a config.toml names (`qwen.base_url = "http://127.0.0.1:8765"`).
"""

from __future__ import annotations

import errno
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

from ..config import ACCOUNT_NAME
from ..errors import UsageProblem
from .settings import API_SHAPES, DEFAULT_RATE, MODELS, SCENARIOS, SITES, UIS, VERSION_RE, Settings

if TYPE_CHECKING:
    from .server import Simulator

DEFAULT_PORT = 8765
MAX_SECONDS = 3600.0
MAX_HOURS = 24 * 365.0
_SETTINGS = Settings  # its defaults, read off the class: none built (a @record, records.py)
MODEL_IDS = tuple(model for model, _ in MODELS)


def _option(default, help: str, choices: tuple[str, ...] = ()):  # noqa: A002 - the option's help
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class SimulatorOptions:
    port: int = _option(DEFAULT_PORT, "port on 127.0.0.1 (0 = any free port)")
    site: str = _option(
        "live-2026-08", "start from the site as it stood then (options given on their own win)", tuple(SITES)
    )
    scenario: str = _option(_SETTINGS.scenario, "what the chat site does", SCENARIOS)
    api_shape: str = _option(_SETTINGS.api_shape, "shape of the chat API's JSON", API_SHAPES)
    answer_seconds: float = _option(_SETTINGS.answer_seconds, "how long an answer takes to grow")
    thinking_seconds: float = _option(_SETTINGS.thinking_seconds, "how long the thinking phase lasts")
    url_delay: float = _option(_SETTINGS.url_delay, "seconds from accepting a prompt to the /c/<id> URL")
    ui: str = _option(_SETTINGS.ui, "the chat page's markup", UIS)
    ledger: Path | None = _option(None, "also write the ledger of received prompts to this JSON file")
    require_login: bool = _option(_SETTINGS.require_login, "serve logged out until signed in on /auth")
    token_hours: float = _option(_SETTINGS.token_hours, "how long a login token the site hands out lives")
    renew_hours: float = _option(
        _SETTINGS.renew_hours, "a token with less left is renewed (page load, GET /api/v1/auths/; 0 = never)"
    )
    require_auth_header: bool = _option(
        _SETTINGS.require_auth_header, "refuse API calls without Authorization: Bearer <token>"
    )
    in_progress_sends: int = _option(
        _SETTINGS.in_progress_sends, 'refuse the next N sends with "The chat is in progress!"'
    )
    not_found_header: bool = _option(
        _SETTINGS.not_found_header, "a missing chat answers HTTP 200 with x-actual-status-code: 404"
    )
    stream_status: bool = _option(
        _SETTINGS.stream_status, "chat JSON holds only the stream's last phase/status (no done flag)"
    )
    serve_model: str = _option(
        _SETTINGS.serve_model, f"answer with this model whatever the page chose ({', '.join(MODEL_IDS)})"
    )
    accounts: str = _option(
        "", "comma-separated account names, each with its own tokens, chats and quota (empty = one anonymous)"
    )
    quota: int = _option(
        _SETTINGS.quota, "sends per account per simulated day, then RateLimited (0 = no limit)"
    )
    strict_headers: bool = _option(
        _SETTINGS.strict_headers,
        "answer Bad_Request to API calls without the frontend's own headers (version, x-request-id, ...)",
    )
    frontend_version: str = _option("", "the frontend's build number the page sends (default: a random one)")
    stream: bool = _option(
        _SETTINGS.stream,
        "answer a send with the completion's event stream the page reads (off: JSON, and polls)",
    )
    slider_accounts: str = _option(
        "", "accounts (comma-separated) whose sends meet the slider until it is slid (--scenario slider: all)"
    )
    empty_answers: bool = _option(_SETTINGS.empty_answers, "every answer finishes with no text")
    empty_accounts: str = _option("", "comma-separated accounts whose answers finish with no text")
    read_lag: float = _option(
        _SETTINGS.read_lag, "seconds a new chat reads as not found (and is not listed) after it is made"
    )
    vanish_chats: bool = _option(
        _SETTINGS.vanish_chats, "chats are never shown (not found, not listed) though their prompt is taken"
    )
    rotating_sessions: bool = _option(
        _SETTINGS.rotating_sessions,
        "late-2026 login: the page trades the session cookie for a 900 s access token at "
        "GET /api/v2/auths/refresh, each trade ending the old session",
    )
    history_limit: int = _option(
        _SETTINGS.history_limit,
        "a chat's page loads only its last N messages over XHR (?direction=up&limit=N; 0 = the whole chat)",
    )
    late_stream: bool = _option(
        _SETTINGS.late_stream,
        "the late-autumn stream: response_index, response.updated, cumulative usage, web_search phases",
    )
    candidates: int = _option(
        _SETTINGS.candidates, "candidate answers interleaved in one stream (1 or 2; the chat keeps the first)"
    )
    parallel_limited_sends: int = _option(
        _SETTINGS.parallel_limited_sends, "refuse the next N sends with ParallelLimited"
    )
    late_errors: bool = _option(
        _SETTINGS.late_errors, "a send into a chat still answering is refused CHAT_IN_PROGRESS"
    )
    fuzz: int | None = _option(
        None,
        "fuzzing mode with this seed: at each step the site answers, now and then, what nobody has "
        "reported yet (an unknown code, an HTML error, a stream cut short...; docs/qwen-site.md)",
    )
    fuzz_rate: float = _option(DEFAULT_RATE, "with --fuzz: the chance a request meets a fault")
    fault: str = _option(
        "", "force faults, once each at the next request of its step: STEP:KIND[,...] (completion:html_500)"
    )

    def account_names(self, option: str = "accounts") -> tuple[str, ...]:
        """The names a comma-separated option (--accounts, --slider-accounts...) gives."""
        return tuple(name.strip() for name in getattr(self, option).split(",") if name.strip())

    def checked(self) -> SimulatorOptions:
        """These options, or UsageProblem (exit 2) naming the option, its value and what it accepts."""
        for option in fields(self):
            value, choices = getattr(self, option.name), option.metadata["choices"]
            flag = "--" + option.name.replace("_", "-")
            if choices and value not in choices:
                raise UsageProblem(f"{flag} {value!r}: choose one of {', '.join(choices)}")
        if self.serve_model not in ("", *MODEL_IDS):
            raise UsageProblem(f"--serve-model {self.serve_model!r}: choose one of {', '.join(MODEL_IDS)}")
        if not 0 <= self.in_progress_sends <= 1000:
            raise UsageProblem(f"--in-progress-sends {self.in_progress_sends}: choose 0 to 1000")
        names = self.account_names()
        for name in names:
            if not ACCOUNT_NAME.match(name):
                raise UsageProblem(
                    f"--accounts {self.accounts!r}: {name!r} is not an account name "
                    "(lower-case letters, digits, '_' and '-', starting with a letter or digit)"
                )
        if len(set(names)) != len(names):
            raise UsageProblem(f"--accounts {self.accounts!r}: a name is given twice")
        for option in ("slider_accounts", "empty_accounts"):
            flag, value = "--" + option.replace("_", "-"), getattr(self, option)
            unknown = [name for name in self.account_names(option) if name not in names]
            if unknown:
                raise UsageProblem(
                    f"{flag} {value!r}: {unknown[0]!r} is not one of --accounts "
                    f"({', '.join(names) or 'none'})"
                )
        for name, top in (("history_limit", 1000), ("parallel_limited_sends", 1000), ("candidates", 2)):
            low = 1 if name == "candidates" else 0
            if not low <= getattr(self, name) <= top:
                raise UsageProblem(f"--{name.replace('_', '-')} {getattr(self, name)}: choose {low} to {top}")
        if not 0 <= self.quota <= 100_000:
            raise UsageProblem(f"--quota {self.quota}: choose 0 (no limit) to 100000 sends a day")
        if self.frontend_version and not VERSION_RE.match(self.frontend_version):
            raise UsageProblem(
                f"--frontend-version {self.frontend_version!r}: give a build number such as 0.2.68"
            )
        if not (math.isfinite(self.fuzz_rate) and 0 <= self.fuzz_rate <= 1):
            raise UsageProblem(f"--fuzz-rate {self.fuzz_rate}: choose a probability from 0 to 1")
        from .fuzz import parse_forced  # the fuzzing mode: imported when options are checked

        try:
            parse_forced(self.fault)
        except ValueError as err:
            raise UsageProblem(f"--fault {err}") from None
        if not 0 <= self.port <= 65535:
            raise UsageProblem(f"--port {self.port}: choose 1 to 65535, or 0 for any free port")
        for name in ("answer_seconds", "thinking_seconds", "url_delay", "read_lag"):
            seconds = getattr(self, name)
            if not (math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS):
                raise UsageProblem(
                    f"--{name.replace('_', '-')} {seconds}: choose 0 to {MAX_SECONDS:g} seconds"
                )
        for name, low in (("token_hours", 0.01), ("renew_hours", 0.0)):
            hours = getattr(self, name)
            if not (math.isfinite(hours) and low <= hours <= MAX_HOURS):
                flag = "--" + name.replace("_", "-")
                raise UsageProblem(f"{flag} {hours}: choose {low:g} to {MAX_HOURS:g} hours")
        return self

    def site_settings(self) -> dict:
        """--site's settings, but where an option was given on its own (not left at its default)."""
        defaults = {option.name: option.default for option in fields(self)}
        return {
            name: value for name, value in SITES[self.site].items() if getattr(self, name) == defaults[name]
        }

    def start(self) -> Simulator:
        """A running simulator; UsageProblem when the port cannot be had (in use, not allowed)."""
        from .server import Simulator

        sim = Simulator(
            port=self.port,
            scenario=self.scenario,
            api_shape=self.api_shape,
            answer_seconds=self.answer_seconds,
            thinking_seconds=self.thinking_seconds,
            url_delay=self.url_delay,
            ui=self.ui,
            ledger_path=self.ledger,
            require_login=self.require_login,
            token_hours=self.token_hours,
            renew_hours=self.renew_hours,
            require_auth_header=self.require_auth_header,
            in_progress_sends=self.in_progress_sends,
            not_found_header=self.not_found_header,
            stream_status=self.stream_status,
            serve_model=self.serve_model,
            accounts=self.account_names(),
            quota=self.quota,
            strict_headers=self.strict_headers,
            frontend_version=self.frontend_version,
            stream=self.stream,
            slider_accounts=self.account_names("slider_accounts"),
            empty_answers=self.empty_answers,
            empty_accounts=self.account_names("empty_accounts"),
            read_lag=self.read_lag,
            vanish_chats=self.vanish_chats,
            rotating_sessions=self.rotating_sessions,
            history_limit=self.history_limit,
            late_stream=self.late_stream,
            candidates=self.candidates,
            parallel_limited_sends=self.parallel_limited_sends,
            late_errors=self.late_errors,
            fuzz=self.fuzz,
            fuzz_rate=self.fuzz_rate,
            fault=self.fault,
        )
        sim.set(**self.site_settings())
        try:
            return sim.start()
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise UsageProblem(
                    f"--port {self.port}: 127.0.0.1:{self.port} is in use (another simulator?); "
                    "stop it, or pick another port (--port 0 takes any free one)"
                ) from None
            raise UsageProblem(
                f"--port {self.port}: cannot listen on 127.0.0.1:{self.port}: {err.strerror}"
            ) from None


@dataclass(frozen=True)
class OptionSpec:
    """One command-line option as both command lines declare it."""

    name: str  # the SimulatorOptions field
    flag: str  # --answer-seconds
    type: type  # int, str, float, bool or Path (a value that may be absent is still its type)
    default: Any
    help: str
    choices: tuple[str, ...]


def option_specs() -> list[OptionSpec]:
    """SimulatorOptions' fields as command-line options, in order."""
    hints = get_type_hints(SimulatorOptions)
    specs = []
    for option in fields(SimulatorOptions):
        kind = hints[option.name]
        present = [arg for arg in get_args(kind) if arg is not type(None)]
        specs.append(
            OptionSpec(
                name=option.name,
                flag="--" + option.name.replace("_", "-"),
                type=present[0] if present else kind,
                default=option.default,
                help=option.metadata["help"],
                choices=option.metadata["choices"],
            )
        )
    return specs


def serve(options: SimulatorOptions, *, announce: Callable[[Simulator], None]) -> None:
    """Check the options, start the simulator, tell `announce`, and serve until Ctrl-C."""
    sim = options.checked().start()
    try:
        announce(sim)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
