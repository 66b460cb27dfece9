"""The loopback HTTP server: pages, the chat API, /sim/ controls, and the router's /v1/ paths.

Stdlib only. `Simulator` is the object tests and `qwenpipe simulate` hold; the handler looks it
up through the server instance.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections import Counter
from collections.abc import Sequence
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import answers, api, botchecks, pages
from .chats import ANONYMOUS, SLIDER_PATH, ChatStore
from .settings import CONTENT_SCENARIOS, DEFAULT_RATE, DEFAULT_UI, SCENARIOS, Settings

APP_PATH = re.compile(r"^/(c/[^/]+)?$")
SETTING_KEYS = {
    "scenario",
    "api_shape",
    "answer_seconds",
    "thinking_seconds",
    "url_delay",
    "toast_seconds",
    "ui",
    "require_login",
    "require_auth_header",
    "clock_offset",
    "hold_answers",
    "finish_early",
    "token_hours",
    "renew_hours",
    "serve_model",
    "in_progress_sends",
    "not_found_header",
    "stream_status",
    "strict_headers",
    "stream",
    "frontend_version",
    "quota",
    "account_quotas",
    "bad_chat_reads",
    "bad_chat_read",
    "slow_reads",
    "slider_accounts",
    "empty_answers",
    "empty_accounts",
    "failing_deletes",
    "read_lag",
    "vanish_chats",
    "rotating_sessions",
    "history_limit",
    "late_stream",
    "candidates",
    "parallel_limited_sends",
    "late_errors",
}
# What /sim/config (and Simulator.set) can also do to the accounts, besides settings.
ACCOUNT_ACTIONS = {"log_out", "clear_accounts", "solve_slider"}
# The fuzzing mode's settings (fuzz.py): its seed (None = off), its rate, the faults forced.
FUZZ_KEYS = {"fuzz", "fuzz_rate", "fault"}


class Simulator:
    """A replica of chat.qwen.ai (and the router) on 127.0.0.1, with a ledger of every prompt."""

    def __init__(
        self,
        port: int = 0,
        scenario: str = "ok",
        api_shape: str = "2026-08",
        answer_seconds: float = 2.0,
        thinking_seconds: float = 0.5,
        url_delay: float = 0.3,
        ui: str = DEFAULT_UI,
        ledger_path=None,
        require_login: bool = False,
        token_hours: float = 168.0,
        renew_hours: float = 24.0,
        require_auth_header: bool = False,
        in_progress_sends: int = 0,
        not_found_header: bool = False,
        stream_status: bool = False,
        serve_model: str = "",
        accounts: Sequence[str] = (),
        quota: int = 0,
        strict_headers: bool = True,
        frontend_version: str = "",
        stream: bool = True,
        slider_accounts: Sequence[str] = (),
        empty_answers: bool = False,
        empty_accounts: Sequence[str] = (),
        read_lag: float = 0.0,
        vanish_chats: bool = False,
        rotating_sessions: bool = False,
        history_limit: int = 0,
        late_stream: bool = False,
        candidates: int = 1,
        parallel_limited_sends: int = 0,
        late_errors: bool = False,
        fuzz: int | None = None,
        fuzz_rate: float = DEFAULT_RATE,
        fault: str = "",
    ):
        """A simulator on 127.0.0.1:`port` (0: any free port), its settings (pipeline/simulator/options.py
        says what each does) as given; started by `start()`."""
        settings = Settings(
            scenario=scenario,
            api_shape=api_shape,
            answer_seconds=answer_seconds,
            thinking_seconds=thinking_seconds,
            url_delay=url_delay,
            ui=ui,
            require_login=require_login,
            token_hours=token_hours,
            renew_hours=renew_hours,
            require_auth_header=require_auth_header,
            in_progress_sends=in_progress_sends,
            not_found_header=not_found_header,
            stream_status=stream_status,
            serve_model=serve_model,
            quota=quota,
            strict_headers=strict_headers,
            stream=stream,
            # A build number of its own for every run: nothing may have it written in.
            frontend_version=frontend_version or f"0.{random.randint(2, 9)}.{random.randint(10, 999)}",
            slider_accounts=list(slider_accounts),
            empty_answers=empty_answers,
            empty_accounts=list(empty_accounts),
            read_lag=read_lag,
            vanish_chats=vanish_chats,
            rotating_sessions=rotating_sessions,
            history_limit=history_limit,
            late_stream=late_stream,
            candidates=candidates,
            parallel_limited_sends=parallel_limited_sends,
            late_errors=late_errors,
        )
        self.store = ChatStore(settings, ledger_path, accounts=tuple(accounts))
        self.store.fuzzer.configure(fuzz=fuzz, fuzz_rate=fuzz_rate, fault=fault)
        for name in (*slider_accounts, *empty_accounts) if self.store.accounts else ():
            self.store.require_account(name)
        self.port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._router = None
        self._router_lock = threading.Lock()
        self._requests: Counter[str] = Counter()  # see requests()
        self._chat_reads: Counter[str] = Counter()  # see chat_reads()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Simulator:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        self._httpd.sim = self
        self.port = self._httpd.server_address[1]
        # A short poll interval: stop() (shutdown) waits for the loop to notice.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="qwen-sim", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Simulator:
        return self if self._httpd else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the Python API ---------------------------------------------------------------------
    def ledger(self) -> list[dict]:
        return self.store.ledger()

    def sends(self) -> list[dict]:
        return [entry for entry in self.store.ledger() if entry["accepted"]]

    def requests(self) -> dict[str, int]:
        """Requests served so far, by kind: "chat_page" (a /c/<id> page load), "chat_json" (a
        GET /api/v2/chats/<id>), "app_page" (the root page), "chat_delete" (a DELETE of a chat,
        carried out or not): how a test tells a chat read through the API from one that opened
        the chat's page."""
        with self._router_lock:
            return dict(self._requests)

    def count_request(self, kind: str, chat_id: str | None = None) -> None:
        with self._router_lock:
            self._requests[kind] += 1
            if kind == "chat_json" and chat_id:
                self._chat_reads[chat_id] += 1

    def chat_reads(self) -> dict[str, int]:
        """GET /api/v2/chats/<id> served so far, by chat id (the page's own loads and a
        client's reads alike): how often each chat was read."""
        with self._router_lock:
            return dict(self._chat_reads)

    def faults(self) -> list[dict]:
        """Every fault of the fuzzing mode met so far (fuzz.py), in order: its step, kind, account,
        chat, whether the site carried the request out (`taken`), whether a test forced it, and
        what exactly it did (`detail`)."""
        return self.store.fuzzer.ledger()

    def header_refusals(self) -> list[tuple[str, str, str]]:
        """Every API request refused for not carrying the frontend's own headers (strict_headers):
        (method, path, why). A client that looks like the frontend makes none."""
        with self.store.lock:
            return list(self.store.header_refusals)

    def release_frontend(self, version: str | None = None) -> str:
        """Play a frontend release: a new build number (`version`, else the next one); pages
        served before it send the old one and are refused Bad_Request until reloaded."""
        old = self.store.snapshot().frontend_version
        major, minor, patch = old.split(".")
        new = version or f"{major}.{minor}.{int(patch) + 1}"
        self.store.configure(frontend_version=new)
        return new

    def deleted_chats(self) -> list[str]:
        """The chats deleted so far (DELETE /api/v2/chats/<id> that the site carried out), in order."""
        with self.store.lock:
            return list(self.store.deleted)

    def chat_ids(self) -> list[str]:
        with self.store.lock:
            return list(self.store.chats)

    def set(self, **changes) -> None:
        """Change settings at run time; `router_*` keys go to the router simulator.

        Besides settings: `log_out` (an account name or a list of them) revokes every token those
        accounts hold; `clear_accounts` (true) forgets each account's sends today, the
        `account_quotas` overrides and the affinity violations; `solve_slider` (an account name or
        a list of them; "" in a run without accounts) slides the slider for them, as a person on
        the slider page does. `slider_accounts`, `empty_answers` and `empty_accounts`: see Settings.
        """
        router_changes = {k[7:]: v for k, v in changes.items() if k.startswith("router_")}
        own = {k: v for k, v in changes.items() if not k.startswith("router_")}
        actions = {k: own.pop(k) for k in ACCOUNT_ACTIONS & set(own)}
        fuzzing = {k: own.pop(k) for k in FUZZ_KEYS & set(own)}
        unknown = set(own) - SETTING_KEYS
        if unknown:
            raise ValueError(f"unknown simulator setting(s): {', '.join(sorted(unknown))}")
        for name in own.get("account_quotas") or {}:
            self.store.require_account(name)
        for name in _names(own.get("slider_accounts")) + _names(own.get("empty_accounts")):
            if self.store.accounts:
                self.store.require_account(name)
        for name in _names(actions.get("solve_slider")):
            self.store.solve_slider(self.store.require_account(name) if self.store.accounts else ANONYMOUS)
        names = actions.get("log_out") or []
        for name in [names] if isinstance(names, str) else names:
            self.store.log_out(name)
        if actions.get("clear_accounts"):
            self.store.clear_accounts()
        if fuzzing:
            self.store.fuzzer.configure(**fuzzing)
        if router_changes:
            router = self.router
            if router is None:
                raise ValueError("router settings given but pipeline.simulator.router is not available")
            router.set(**router_changes)
        if own:
            self.store.configure(**own)

    @property
    def accounts(self) -> tuple[str, ...]:
        return self.store.accounts

    def login_state(self, account: str = "") -> dict:
        """A Playwright storage state signed in as `account` (its `token` cookie and
        localStorage entry), as `qwenpipe login --import FILE` takes it. A run without accounts
        takes no name and gives the anonymous user's login."""
        if self.store.accounts or account:
            self.store.require_account(account)
        token = api.issue_token(self.store, account)
        page_token = token
        if self.store.settings.rotating_sessions:  # the page's access token, beside the session
            page_token = api.access_token(self.store, account, self.store.site_clock())
        cookie = {
            "name": "token",
            "value": token,
            "domain": "127.0.0.1",
            "path": "/",
            "expires": api.token_exp(token),
            "httpOnly": False,
            "secure": False,
            "sameSite": "Lax",
        }
        storage = [{"name": "token", "value": page_token}]
        return {"cookies": [cookie], "origins": [{"origin": self.base_url, "localStorage": storage}]}

    def account_report(self) -> dict:
        """Each account (`""` for a run without accounts): its sends today, its quota (0 = none)
        and its affinity violations (requests refused as CHAT_NOT_FOUND for another's chat)."""
        return self.store.accounts_view()

    def affinity_violations(self) -> int:
        """All requests, by any account, for a chat another account made."""
        return sum(entry["affinity_violations"] for entry in self.account_report().values())

    def expected_answer(self, prompt_text: str, turn: int = 1) -> str:
        """The raw markdown the chat answers for this prompt now (its `[sim:]` token, else the run's
        content scenario). For error_banner: the full answer, of which only half is stored."""
        named = answers.prompt_scenario(prompt_text)
        scenario = named if named in CONTENT_SCENARIOS else self.store.snapshot().scenario
        return answers.expected_answer(prompt_text, turn, scenario if scenario in CONTENT_SCENARIOS else "ok")

    @property
    def router(self):
        """The router simulator, made on first use; None when router.py is not there."""
        with self._router_lock:
            if self._router is None:
                try:
                    from .router import RouterSim
                except ImportError:
                    return None
                self._router = RouterSim()
            return self._router

    def config(self) -> dict:
        settings = self.store.snapshot()
        return {**{key: getattr(settings, key) for key in sorted(SETTING_KEYS)}, **self.store.fuzzer.config()}

    def health(self) -> dict:
        return {
            "ok": True,
            "scenarios": list(SCENARIOS),
            **self.config(),
            "accounts": self.account_report(),
            "affinity_violations": self.affinity_violations(),
            "header_refusals": len(self.header_refusals()),
        }


class Handler(BaseHTTPRequestHandler):
    server_version = "QwenSim/1.0"
    # HTTP/1.0: one request per connection, so a stream ends when the connection closes.
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args) -> None:  # noqa: A002 - keep test output quiet
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    @property
    def sim(self) -> Simulator:
        return self.server.sim

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header by the site's clock (clock_offset included), as the real site's
        servers stamp it: the clock its `updated_at` and `timestamp` are read against."""
        return formatdate(self.sim.store.site_clock() if timestamp is None else timestamp, usegmt=True)

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            if url.path.startswith("/v1/") or url.path == "/api/health":
                return self._router(method, body)
            if url.path.startswith("/sim/"):
                return self._send(*self._sim_control(method, url.path, url.query, body))
            if url.path.startswith("/_____tmd_____/"):
                return self._send(*self._slider(method, url.path, url.query))
            if url.path == "/favicon.ico":
                return self._send(204, "image/x-icon", b"")
            if url.path.startswith("/static/"):
                return self._static(url.path[len("/static/") :])
            if url.path.startswith("/api/"):
                read = api.CHAT_PATH.match(url.path)
                if method == "GET" and read:
                    self.sim.count_request("chat_json", read.group(1))
                if method == "DELETE" and api.CHAT_PATH.match(url.path):
                    self.sim.count_request("chat_delete")
                return self._send(
                    *api.handle(self.sim.store, method, url.path, url.query, body, self.headers)
                )
            return self._send(*self._page(url.path))
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, status: int, content_type: str, payload, headers=(), location=None) -> None:
        """One response; `payload` is bytes, or an iterator of chunks (a stream, written as each
        arrives and ended by closing the connection)."""
        streaming = not isinstance(payload, bytes)
        if streaming:
            # Chunked (HTTP/1.1), so the stream has a clean end of its own: a stream ended only by
            # closing the connection is, now and then, a request the browser calls aborted.
            self.protocol_version = "HTTP/1.1"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if streaming:
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
        else:
            self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        if not streaming:
            self.wfile.write(payload)
            return
        for chunk in payload:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def _page(self, path: str):
        if APP_PATH.match(path):
            self.sim.count_request("chat_page" if path.startswith("/c/") else "app_page")
        settings = self.sim.store.snapshot()
        account = api.session_account(self.sim.store, settings, self.headers)
        if self.sim.store.checked_everywhere(account):
            return botchecks.page_refusal("punish_page")
        blocked = api.gate(settings, account)
        if blocked == "waf":
            return api.html_response(pages.WAF_PAGE)
        if blocked == "bot_check" or path == "/punish":
            return api.html_response(pages.BOT_PAGE)
        if path == "/auth":
            return api.html_response(pages.login_page())
        if path == botchecks.AUTH_VERIFY_PATH:
            return api.html_response(botchecks.AUTH_VERIFY_PAGE)
        if not APP_PATH.match(path):
            return api.html_response("<h1>404 Not Found</h1>", status=404)
        if blocked == "logged_out":
            return 302, "text/html", b"", [("Location", "/auth?action=signin")]
        met = self.sim.store.fuzzer.choose("chat_page", account, path[3:]) if path.startswith("/c/") else None
        if met is not None and met.kind == "slow":
            met.delay()
        elif met is not None:
            return met.instead()
        status, kind, html, headers = api.html_response(pages.app_page(settings))
        fresh = api.renewed_token(settings, self.headers)  # the app renews a token near its end
        return status, kind, html, [api.token_cookie(fresh, settings)] if fresh else headers

    def _slider(self, method: str, path: str, query: str = ""):
        """The slider's own page (what the overlay's iframe shows; another `action`, another
        check: botchecks.py), and its POST when it is slid: the account of the request's login
        cookie goes through again."""
        if path == SLIDER_PATH:
            return api.html_response(botchecks.punish_page(query) or pages.SLIDER_PAGE)
        if path == SLIDER_PATH.replace("punish", "slide") and method == "POST":
            settings = self.sim.store.snapshot()
            account = api.session_account(self.sim.store, settings, self.headers)
            if account is None:
                return api.json_response({"ok": False, "error": "not logged in"}, status=403)
            self.sim.store.solve_slider(account)
            return api.json_response({"ok": True})
        return api.html_response("<h1>404 Not Found</h1>", status=404)

    def _static(self, name: str) -> None:
        found = pages.static_file(name)
        if found is None:
            return self._send(404, "text/plain", b"not found")
        return self._send(200, found[1], found[0])

    def _sim_control(self, method: str, path: str, query: str, body: bytes):
        if path == "/sim/ledger":
            return api.json_response(self.sim.ledger())
        if path == "/sim/login-state":
            # For users of `qwenpipe simulate`: curl it to a file, then `qwenpipe login --import`.
            account = parse_qs(query).get("account", [""])[0]
            try:
                return api.json_response(self.sim.login_state(account))
            except ValueError as err:
                return api.json_response({"ok": False, "error": str(err)}, status=400)
        if path == "/sim/faults":
            return api.json_response(self.sim.faults())
        if path == "/sim/health":
            return api.json_response(self.sim.health())
        if path == "/sim/config" and method == "GET":
            return api.json_response(self.sim.config())
        if path == "/sim/config" and method == "POST":
            try:
                self.sim.set(**json.loads(body or b"{}"))
            except (ValueError, TypeError) as err:
                return api.json_response({"ok": False, "error": str(err)}, status=400)
            return api.json_response({"ok": True, **self.sim.config()})
        return api.json_response({"ok": False, "error": "unknown"}, status=404)

    def _router(self, method: str, body: bytes) -> None:
        router = self.sim.router
        if router is None:
            return self._send(404, "application/json", b'{"error": "router simulator not available"}')
        status, headers, chunks = router.handle(method, self.path, dict(self.headers.items()), body)
        self.send_response(status)
        names = {name.lower() for name, _ in headers}
        for name, value in headers:
            self.send_header(name, value)
        if "content-length" not in names:
            self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True


def _names(value) -> list[str]:
    """An account name or a list of them, as a list (what /sim/config may be given)."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
