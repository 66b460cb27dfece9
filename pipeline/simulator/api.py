"""The chat.qwen.ai JSON API as the simulator answers it, and the session (login) rules.

Each request is answered for one account: the one its token names (a run with accounts), the
one anonymous account (a run without), or none: then it is logged out.

Every function returns (status, content_type, body_bytes, extra_headers); like the real site the
status is 200 even for failures, whose real status is in the JSON body.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from . import botchecks, chats, pages, sessions, shapes, stream
from .settings import Settings

TOKEN_DAYS = 7
ANONYMOUS_USER = "sim-user"  # the `id` of a token in a run without accounts
CHAT_PATH = re.compile(r"^/api/v2/chats/([^/?]+)$")
REQUEST_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
# Calls the sign-in page makes before there is a frontend session to speak for.
UNCHECKED_PATHS = ("/api/v1/auths/signin",)
STOP_PATH = re.compile(r"^/api/v2/chats/([^/?]+)/stop$")
AUTHS_PATHS = ("/api/v1/auths/", "/api/v1/auths")

# The body is bytes, or an iterator of chunks for a stream (server.py writes each as it comes).
Response = tuple[int, str, Any, list[tuple[str, str]]]


def json_response(body, headers: list[tuple[str, str]] | None = None, status: int = 200) -> Response:
    return status, "application/json", json.dumps(body).encode(), headers or []


def html_response(html: str, status: int = 200) -> Response:
    return status, "text/html; charset=utf-8", html.encode(), []


# -- session -------------------------------------------------------------------------------------
def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def make_token(
    now: float | None = None,
    *,
    hours: float = TOKEN_DAYS * 24,
    account: str = chats.ANONYMOUS,
    generation: int = 0,
    claims: dict | None = None,
) -> str:
    """A fake JWT shaped like the site's: header.payload.signature with `exp` `hours` ahead
    (7 days unless the run's Settings.token_hours says otherwise). Its `id` names the account
    (as the site's names the user); `gen` is that account's generation (ChatStore.log_out)."""
    now = time.time() if now is None else now
    payload = {
        "id": account or ANONYMOUS_USER,
        "gen": generation,
        "last_password_change": int(now),
        "exp": int(now + hours * 3600),
        **(claims or {}),
    }
    return f"{_b64({'alg': 'HS256', 'typ': 'JWT'})}.{_b64(payload)}.c2ltdWxhdG9y"


def token_payload(token: str | None) -> dict | None:
    """A token's payload with a numeric `exp`, None when it is not one of ours."""
    try:
        payload = token.split(".")[1]
        data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        data["exp"] = float(data["exp"])
        return data
    except (AttributeError, IndexError, ValueError, KeyError, TypeError):
        return None


def token_exp(token: str | None) -> float | None:
    """A token's `exp` (epoch seconds), None when it is not one of ours."""
    payload = token_payload(token)
    return None if payload is None else payload["exp"]


def token_valid(token: str | None) -> bool:
    """A token counts while its `exp` is in the future (so tests can make expired ones)."""
    exp = token_exp(token)
    return exp is not None and exp > time.time()


def renewed_token(settings: Settings, headers) -> str | None:
    """A fresh token (for the same account) when the request's own is valid and ends within
    Settings.renew_hours. Rotating sessions are renewed by the page only (sessions.py)."""
    if settings.rotating_sessions:
        return None
    payload = token_payload(request_token(headers))
    now = time.time()
    if payload is None or payload["exp"] <= now or payload["exp"] - now >= settings.renew_hours * 3600:
        return None
    account = "" if payload.get("id") == ANONYMOUS_USER else str(payload.get("id"))
    return make_token(now, hours=settings.token_hours, account=account, generation=payload.get("gen", 0))


def issue_token(store: chats.ChatStore, account: str) -> str:
    """A new login token for `account`, valid until it expires or the account is logged out
    (with rotating sessions: a new session, every older one ended)."""
    with store.lock:
        generation = store.generations.get(account, 0)
    if store.settings.rotating_sessions:
        now = store.site_clock()
        return session_token(store, account, store.sessions.sign_in(account, now), now)
    return make_token(hours=store.snapshot().token_hours, account=account, generation=generation)


def session_token(store: chats.ChatStore, account: str, number: int, now: float) -> str:
    """Session `number` of `account` (rotating sessions: the `token` cookie), 30 days."""
    with store.lock:
        generation = store.generations.get(account, 0)
    hours = sessions.SESSION_SECONDS / 3600
    return make_token(now, hours=hours, account=account, generation=generation, claims={"sid": number})


def access_token(store: chats.ChatStore, account: str, now: float) -> str:
    """An access token of `account` (rotating sessions: what the page keeps in localStorage), 900 s."""
    with store.lock:
        generation = store.generations.get(account, 0)
    hours = sessions.ACCESS_SECONDS / 3600
    return make_token(now, hours=hours, account=account, generation=generation, claims={"access": True})


def token_account(store: chats.ChatStore, token: str | None) -> str | None:
    """The account a token is good for now, or None (expired, not ours, revoked, or naming no
    account of the run). In a run without accounts any valid token is the anonymous account's.
    With rotating sessions the site's clock decides, and a session must be the account's
    current one (sessions.py)."""
    payload = token_payload(token)
    rotating = store.settings.rotating_sessions
    now = store.site_clock() if rotating else time.time()
    if payload is None or payload["exp"] <= now:
        return None
    name = payload.get("id") if store.accounts else chats.ANONYMOUS
    if store.accounts:
        with store.lock:
            current = store.generations.get(name) if isinstance(name, str) else None
        if current is None or payload.get("gen") != current:
            return None
    if rotating and not (payload.get("access") is True or store.sessions.good(name, payload.get("sid"), now)):
        return None
    return name


def session_account(store: chats.ChatStore, settings: Settings, headers) -> str | None:
    """The account this request is answered for, None when it is logged out (no token, or one
    not good now). A run without accounts answers every request for its one account unless it
    requires a login (or has rotating sessions)."""
    if not store.accounts and not settings.require_login and not settings.rotating_sessions:
        return chats.ANONYMOUS
    if settings.rotating_sessions:  # the access token, else the session cookie
        return token_account(store, bearer_token(headers)) or token_account(store, cookie_token(headers))
    return token_account(store, request_token(headers))


def token_cookie(token: str, settings: Settings) -> tuple[str, str]:
    seconds = sessions.SESSION_SECONDS if settings.rotating_sessions else int(settings.token_hours * 3600)
    return "Set-Cookie", f"token={token}; Path=/; Max-Age={seconds}; SameSite=Lax"


def refresh_session(store: chats.ChatStore, settings: Settings, headers) -> Response:
    """GET /api/v2/auths/refresh (rotating sessions): the cookie's session traded for an access
    token of 900 s and a new session in the cookie; signed out: HTTP 200, "401 Unauthorized"."""
    cookie = cookie_token(headers)
    payload = token_payload(cookie)
    account = token_account(store, cookie) if payload and "sid" in payload else None
    if account is None:
        return json_response(sessions.SIGNED_OUT_BODY)
    now = store.site_clock()
    session = session_token(store, account, store.sessions.rotate(account, payload["sid"], now), now)
    data = {"access_token": access_token(store, account, now), "token_type": "Bearer"}
    body = {"success": True, "data": {**data, "expires_in": sessions.ACCESS_SECONDS}}
    return json_response(body, headers=[token_cookie(session, settings)])


def cookie_token(headers) -> str | None:
    """The `token` cookie's value, or None."""
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("Cookie", ""))
    except Exception:
        pass
    return cookie["token"].value if "token" in cookie else None


def request_token(headers) -> str | None:
    """The session token from the `token` cookie, or an `Authorization: Bearer` header."""
    return cookie_token(headers) or bearer_token(headers)


def bearer_token(headers) -> str | None:
    """The token of an `Authorization: Bearer` header, or None."""
    auth = headers.get("Authorization", "")
    return auth[7:] if auth.startswith("Bearer ") else None


def gate(settings: Settings, account: str | None) -> str | None:
    """What stops a request of `account` (session_account) before the app sees it: "waf",
    "bot_check", "logged_out" or None."""
    if settings.scenario in ("waf", "bot_check"):
        return settings.scenario
    if settings.scenario == "logged_out" or account is None:
        return "logged_out"
    return None


def gated_api(gate_name: str) -> Response:
    if gate_name == "waf":
        return html_response(pages.WAF_PAGE)
    return json_response(chats.refusal_body(gate_name))


def frontend_headers_problem(store: chats.ChatStore, settings: Settings, headers) -> str | None:
    """Why a request does not carry the frontend's own headers (docs/qwen-site.md), or None.

    The page sends `source: web`, its build as `version`, the anti-bot script's `bx-v`, its
    `timezone` and a fresh UUID `x-request-id` with every API call; the autumn-2026 site answers
    anything else Bad_Request. A request id seen before counts as missing."""
    if not settings.strict_headers:
        return None
    if headers.get("source") != "web":
        return "no `source: web`"
    version = headers.get("version")
    if version != settings.frontend_version:
        return f"version {version!r} is not the frontend's build {settings.frontend_version}"
    if headers.get("bx-v") != chats.BX_V:
        return f"bx-v {headers.get('bx-v')!r} is not {chats.BX_V}"
    if not headers.get("timezone"):
        return "no timezone"
    request_id = headers.get("x-request-id") or ""
    if not REQUEST_ID.match(request_id):
        return f"x-request-id {request_id!r} is not a UUID"
    if not store.fresh_request_id(request_id):
        return f"x-request-id {request_id} was used before"
    return None


# -- routes --------------------------------------------------------------------------------------
def handle(store: chats.ChatStore, method: str, path: str, query: str, body: bytes, headers) -> Response:
    settings = store.snapshot()
    if method == "POST" and path == "/api/v1/auths/signin":
        return sign_in(store, settings, body)
    stale = None if path in UNCHECKED_PATHS else frontend_headers_problem(store, settings, headers)
    if stale is not None:
        store.refuse_headers(method, path, stale)
        if method == "POST" and path == "/api/v2/chat/completions":
            store.send(*_send_args(query, body), gate="bad_request", choice=send_choice(body), account=None)
        return json_response(chats.BAD_REQUEST_BODY)
    if settings.rotating_sessions and method == "GET" and path == sessions.REFRESH_PATH:
        return refresh_session(store, settings, headers)
    bearer = token_account(store, bearer_token(headers))
    if settings.require_auth_header and bearer is None:
        # The late-2026 site: cookies alone are not enough, API calls carry the JWT as a header.
        if method == "POST" and path == "/api/v2/chat/completions":
            store.send(*_send_args(query, body), gate="logged_out", choice=send_choice(body), account=None)
        return json_response(chats.UNAUTHORIZED_BODY)
    account = session_account(store, settings, headers)
    if store.checked_everywhere(account):
        return botchecks.page_refusal("punish_page")
    blocked = gate(settings, account)
    if path == "/api/v2/users/status" and blocked == "logged_out":
        return json_response({"success": True, "data": False})
    if blocked:
        if method == "POST" and path == "/api/v2/chat/completions":
            # The prompt reached the server: it goes in the ledger as refused.
            store.send(*_send_args(query, body), gate=blocked, choice=send_choice(body), account=account)
        return gated_api(blocked)
    return _fuzzed(store, settings, account, method, path, query, body, headers)


def fuzz_step(method: str, path: str) -> str | None:
    """The step of the site (fuzz.STEPS) an API request is, or None."""
    if method == "POST" and path == "/api/v2/chats/new":
        return "new_chat"
    if method == "POST" and path == "/api/v2/chat/completions":
        return "completion"
    if method == "GET" and path in ("/api/v2/chats", "/api/v2/chats/"):
        return "chat_list"
    if method == "GET" and (path == "/api/v2/users/status" or path in AUTHS_PATHS):
        return "login_check"
    if CHAT_PATH.match(path) and method in ("GET", "DELETE"):
        return "chat_json" if method == "GET" else "delete"
    return None


def _fuzzed(store, settings, account, method, path, query, body, headers) -> Response:
    """The answer to a request that reached the app, or the fault it meets (fuzz.py): a fault the
    site did not carry out answers instead of it (a send it refused goes in the ledger so); one it
    did spoils its answer."""
    step = fuzz_step(method, path)
    match = CHAT_PATH.match(path)
    chat_id = _send_args(query, body)[0] if step == "completion" else match.group(1) if match else ""
    met = store.fuzzer.choose(step, account, chat_id) if step else None
    if met is None:
        return _answer(store, settings, account, method, path, query, body, headers)
    if met.kind == "slow":
        met.delay()
    elif not met.taken:
        if step == "completion":
            store.refuse_send(
                *_send_args(query, body), choice=send_choice(body), account=account, fault=met.kind
            )
        return met.instead()
    answer = _answer(store, settings, account, method, path, query, body, headers, fault=met.kind)
    if met.kind == "slow":
        return answer
    return met.spoil(answer, lambda: _other_chat(store, settings, account, chat_id, query, met.rng))


def _other_chat(store, settings, account, chat_id: str, query: str, rng) -> dict | None:
    """The JSON of another chat of `account` than `chat_id` (one made up from this one when it
    has no other), as GET /api/v2/chats/<chat_id> would answer it."""
    with store.lock:
        others = [c for c in store.chats.values() if c.account == account and c.id != chat_id]
        others = sorted((c for c in others if not store.unseen(c)), key=lambda c: c.touched)
    view = store.chat_view(rng.choice(others).id, account) if others else None
    if view is None:
        view = store.chat_view(chat_id, account)
        if view is None:
            return None
        made_up = []
        for message in view["messages"]:
            text = (
                {"content": "Another question."}
                if message["role"] == "user"
                else {"answer": "Another answer."}
            )
            made_up.append({**message, "id": str(uuid.uuid4()), **text})
        view = {**view, "id": str(uuid.uuid4()), "messages": made_up}
    return _chat_body(settings, view, query)


def _chat_body(settings, view: dict, query: str) -> dict:
    view = shapes.history_page(view, parse_qs(query))
    return shapes.chat_body(view, settings.api_shape, stream_status=settings.stream_status)


def _answer(store, settings, account, method, path, query, body, headers, fault=None) -> Response:
    """The site's own answer to a request that reached the app; `fault`: the one a send met."""
    if method == "GET" and path in AUTHS_PATHS:
        return session_user(settings, headers, account)
    return _route(store, settings, account, method, path, query, body, fault)


def _route(store, settings, account, method, path, query, body, fault=None) -> Response:
    """The simulated site's API: the response to one request (method and path), as the
    reference describes the site's (login status, new chat, completions, a chat's messages);
    `fault`: the fuzz fault a send met."""
    if method == "GET" and path == "/api/v2/users/status":
        return json_response({"success": True, "data": True})
    if method == "POST" and path == "/api/v2/chats/new":
        return json_response({"success": True, "data": {"id": store.new_chat(account)}})
    if method == "POST" and path == "/api/v2/chat/completions":
        chat_id, prompt, parent_id = _send_args(query, body)
        reply = store.send(
            chat_id, prompt, parent_id, gate=None, choice=send_choice(body), account=account, fault=fault
        )
        if reply is None:
            return html_response(pages.WAF_PAGE)
        if isinstance(reply, botchecks.PageRefusal):
            return botchecks.page_refusal(reply.scenario)
        if settings.stream and reply.get("success") is True:
            frames = _fuzzed_stream(store, account, chat_id, stream.completion_stream(store, chat_id, reply))
            return 200, "text/event-stream; charset=utf-8", frames, []
        return json_response(reply)
    if method == "GET" and path in ("/api/v2/chats", "/api/v2/chats/"):
        page = _int(parse_qs(query).get("page", ["1"])[0], 1)
        return json_response(shapes.list_body(store.list_chats(page, account=account)))
    match = STOP_PATH.match(path)
    if method == "POST" and match:
        return json_response({"success": store.stop(match.group(1), account), "data": {}})
    match = CHAT_PATH.match(path)
    if method == "DELETE" and match:
        return json_response(store.delete_chat(match.group(1), account))
    if method == "GET" and match:
        delay = store.read_delay(match.group(1))
        if delay:
            time.sleep(delay)  # a busy server: the chat is read only now
        spoiled = store.bad_read()
        if spoiled is not None:
            return json_response(spoiled)
        view = store.chat_view(match.group(1), account)
        if view is None and settings.not_found_header:
            return json_response({"detail": "Not Found"}, headers=[("x-actual-status-code", "404")])
        if view is None:
            return json_response(chats.not_found_body(match.group(1)))
        return json_response(_chat_body(settings, view, query))
    return json_response({"success": False, "data": {"code": "NOT_FOUND", "details": path}}, status=404)


def _fuzzed_stream(store, account, chat_id: str, frames):
    """The stream's frames, through the fault its first frame meets (chosen when it starts: a
    completion answered otherwise never streams)."""
    met = store.fuzzer.choose("stream", account, chat_id)
    yield from met.spoil_stream(frames) if met else frames


def _send_args(query: str, body: bytes) -> tuple[str, str, str | None]:
    """(chat_id, prompt, parent_id) from a completions request; missing parts read as empty."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    chat_id = parse_qs(query).get("chat_id", [""])[0] or str(data.get("chat_id") or "")
    messages = data.get("messages") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    prompt = str(users[-1].get("content", "")) if users else ""
    return chat_id, prompt, data.get("parent_id")


def send_choice(body: bytes) -> dict:
    """What the page chose for a completions request: the model id, whether thinking is on
    (`feature_config.thinking_enabled`), whether web search is (`chat_type: "search"`)."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        return {}
    features = data.get("feature_config") if isinstance(data.get("feature_config"), dict) else {}
    choice = {"web_search": data.get("chat_type") == "search"}
    if isinstance(data.get("model"), str) and data["model"]:
        choice["model"] = data["model"]
    if isinstance(features.get("thinking_enabled"), bool):
        choice["thinking"] = features["thinking_enabled"]
    return choice


def sign_in(store: chats.ChatStore, settings: Settings, body: bytes) -> Response:
    """The sign-in form posts here. Without accounts any email and password work; with accounts
    the email's local part names the account (`b@example.com` signs in as `b`, any password)
    and one that names no account is refused. The token lives token_hours (7 days)."""
    account = chats.ANONYMOUS
    if store.accounts:
        account = _email_account(body)
        if account not in store.accounts:
            return json_response(
                {"success": False, "data": {"code": "Unauthorized", "details": "Incorrect email or password"}}
            )
    token = issue_token(store, account)
    page_token = access_token(store, account, store.site_clock()) if settings.rotating_sessions else token
    body = {
        "success": True,
        "data": {"token": page_token, "token_type": "Bearer", "expires_at": token_exp(page_token)},
    }
    return json_response(body, headers=[token_cookie(token, settings)])


def _email_account(body: bytes) -> str:
    """The account a sign-in names: its email's local part, lower case ("" when there is none)."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return ""
    email = data.get("email") if isinstance(data, dict) else None
    return email.split("@", 1)[0].strip().lower() if isinstance(email, str) else ""


def session_user(settings: Settings, headers, account: str | None = chats.ANONYMOUS) -> Response:
    """GET /api/v1/auths/: the signed-in user with a token and its expiry, renewed (and set as
    the cookie) when the request's token is near its end."""
    fresh = renewed_token(settings, headers)
    token = fresh or request_token(headers)
    if not token_valid(token) or account is None:
        return json_response(chats.UNAUTHORIZED_BODY)
    if account:
        user = {"id": account, "email": f"{account}@example.com", "name": account, "role": "user"}
    else:
        user = {"id": ANONYMOUS_USER, "email": "writer@example.com", "name": "Sim Writer", "role": "user"}
    session = {"token": token, "token_type": "Bearer", "expires_at": token_exp(token)}
    body = {"success": True, "data": {**user, **session}}
    return json_response(body, headers=[token_cookie(fresh, settings)] if fresh else [])


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default
