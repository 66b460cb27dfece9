"""Reading one chat.qwen.ai page: failure screens, completion signals, the in-page API.

Every read is one `page.evaluate` returning plain data, so the engine's decisions are plain
Python over that data. Nothing here clicks or types.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..base import Code, EngineError, HardError, QuotaSpent, TransientError
from ..unknown import Where
from .api import (
    LOGIN_HINT,
    classify_api_error,
    is_stale_headers,
    missing_chat_body,
)
from .botcheck import is_sign_in, is_verification, names_verification
from .headers import NoHeaders, headers_for_call, headers_for_calls, watch
from .selectors import FAILURE_TEXTS, FailureTexts, Selectors
from .stream import COMPLETIONS_PATH

# Visible text of the page minus the conversation itself, so a prompt or an article that
# quotes "Something went wrong" is not taken for the site's own banner.
_SCREEN_JS = """
(args) => {
  const skip = args.skip.join(', ');
  const parts = [];
  const root = document.body || document.documentElement;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest('script, style, noscript, template, textarea')) continue;
    if (skip && el.closest(skip)) continue;
    if (el.checkVisibility && !el.checkVisibility()) continue;
    parts.push(n.nodeValue);
  }
  const login = args.login ? document.querySelector(args.login) : null;
  return {
    url: location.href,
    title: document.title || '',
    text: parts.join(' '),
    waf: document.documentElement.outerHTML.includes(args.waf),
    login: !!(login && (!login.checkVisibility || login.checkVisibility())),
    captcha: !!(args.captcha && document.querySelector(args.captcha)),
  };
}
"""

_DOM_STATE_JS = """
(s) => {
  const visible = (el) => !!el && (!el.checkVisibility || el.checkVisibility());
  const q = (sel, root) => (sel ? (root || document).querySelector(sel) : null);
  const all = (sel) => (sel ? Array.from(document.querySelectorAll(sel)) : []);
  const composer = q(s.composer);
  const send = q(s.send_button);
  const turns = all(s.assistant_turn);
  const last = turns.length ? turns[turns.length - 1] : null;
  const answer = last ? q(s.answer_text, last) || q(s.answer, last) : null;
  const thinking = last ? q(s.thinking, last) : null;
  const skipButton = last ? Array.from(last.querySelectorAll('button, [role=button], span, div'))
      .find((el) => el.children.length === 0 && /^\\s*skip\\s*$/i.test(el.textContent) && visible(el)) : null;
  return {
    composer: visible(composer),
    composer_text: composer ? (composer.value || '') : '',
    send_present: !!send,
    send_disabled: !!send && (send.disabled || send.getAttribute('aria-disabled') === 'true'),
    stop_visible: visible(q(s.stop_button)),
    user_turns: all(s.user_turn).length,
    assistant_turns: turns.length,
    copy_button: !!(last && s.copy_button && q(s.copy_button, last)),
    thinking_visible: visible(thinking),
    skip_visible: !!skipButton,
    answer_present: visible(answer),
    answer_text: answer ? answer.innerText : '',
  };
}
"""

# One paced call: `wait` ms after it is asked for, a GET (or `method`: a chat's DELETE) whose
# outcome is a small object. Its headers are the page's own (headers.py): learned from the
# page's traffic, never written here.
_READ_JS = """async (path, ms, wait, headers, method, spacing) => {
  if (wait > 0) await new Promise((done) => setTimeout(done, wait));  // paced
  // `spacing` ms: a path read again waits that long from the moment its last read was answered
  // here. Two reads' bodies are then at least that far apart by the site's own reading, however
  // late either was served or started (the stability reads compare them: collect.py).
  const answered = window.__qwenpipeAnswered || (window.__qwenpipeAnswered = {});
  const since = spacing && path in answered ? performance.now() - answered[path] : Infinity;
  if (since < spacing) await new Promise((done) => setTimeout(done, spacing - since));
  try {
    const init = {method: method || 'GET', credentials: 'include', headers, signal: AbortSignal.timeout(ms)};
    const r = await fetch(path, init);
    if (spacing) answered[path] = performance.now();
    const body = await r.text();
    const actual = r.headers.get('x-actual-status-code');
    if (actual === '404') return {missing: true};
    // The JSON goes back as text (parsed by Python): a parsed object crosses Playwright's pipe
    // value by value, and for 200 chats that costs more than reading them. The Date header is
    // the site's clock at the read (steady.finished_long_ago).
    try { JSON.parse(body); return {json_text: body, date: r.headers.get('date')}; }
    catch (e) { return {text: body.slice(0, 4000), status: r.status, url: r.url}; }
  } catch (e) { return {error: String(e)}; }
}"""
# Every read at once, one start every `gap` ms; answers when the last one is done.
_FETCH_JS = (
    "async ({paths, ms, gap, headers, method}) => { const read = "
    + _READ_JS
    + "; return Promise.all(paths.map((path, i) => read(path, ms, i * gap, headers[i], method))); }"
)
# The same reads started in the page and left running (the first `delay` ms from now): the call
# answers at once, and _COLLECT_FETCH_JS later hands over what they read.
_START_FETCH_JS = (
    "({paths, ms, gap, delay, spacing, key, headers}) => { const read = "
    + _READ_JS
    + """;
  const reads = window.__qwenpipeReads || (window.__qwenpipeReads = {});
  const one = (path, i) => read(path, ms, delay + i * gap, headers[i], 'GET', spacing);
  reads[key] = Promise.all(paths.map(one));
  return key;
}"""
)
_COLLECT_FETCH_JS = """async (key) => {
  const reads = window.__qwenpipeReads, pending = reads && reads[key];
  if (!pending) return null;  // the page navigated: what it read is gone
  delete reads[key];
  return await pending;
}"""


LEARN_WAIT_SECONDS = 10  # how long a read waits for the page's first API call to learn from

_PRESENT_JS = "(selectors) => selectors.map((s) => !!s && !!document.querySelector(s))"

# What Playwright says when the page navigated while we were reading it (the app redirecting
# to /auth or /punish is exactly such a moment): read the new page instead of failing.
_NAVIGATED = ("Execution context was destroyed", "Cannot find context", "navigating", "frame was detached")
NAVIGATION_RETRIES = 5


def evaluate(page: Any, script: str, arg: Any = None) -> Any:
    """page.evaluate that reads the new page when the old one navigates away under it."""
    from playwright.sync_api import Error as PlaywrightError

    for attempt in range(NAVIGATION_RETRIES):
        try:
            return page.evaluate(script, arg)
        except PlaywrightError as err:
            if attempt == NAVIGATION_RETRIES - 1 or not any(m in str(err) for m in _NAVIGATED):
                raise
            try:
                page.wait_for_load_state("domcontentloaded", timeout=5000)
            except PlaywrightError:
                pass  # still navigating: the next attempt tells


def present(page: Any, selectors: list[str]) -> list[bool]:
    """For each CSS selector, whether the page has a matching element ("" never matches)."""
    return evaluate(page, _PRESENT_JS, selectors)


@dataclass(frozen=True)
class DomState:
    """The completion signals of the page, read in one go."""

    ui: str
    composer: bool
    composer_text: str
    send_present: bool
    send_disabled: bool
    stop_visible: bool
    user_turns: int
    assistant_turns: int
    copy_button: bool
    thinking_visible: bool
    skip_visible: bool
    answer_present: bool
    answer_text: str

    def busy_reason(self, selectors: Selectors, assistant_turns_before: int) -> str | None:
        """Why the page says the answer is not complete yet, or None when it looks done."""
        if self.assistant_turns <= assistant_turns_before:
            return "waiting for the answer to start"
        if self.stop_visible:
            return self.progress()
        if self.send_disabled and self.composer_text.strip():
            # Both UIs also disable send whenever the composer is empty, so a disabled button
            # only means "busy" while text waits in the composer.
            return self.progress()
        if self.thinking_visible and (self.skip_visible or not self.answer_present):
            return "thinking"
        if selectors.copy_button and not self.copy_button:
            return self.progress()
        return None

    def progress(self) -> str:
        if self.answer_text:
            return f"writing: {len(self.answer_text):,} chars"
        return "thinking" if self.thinking_visible else "generating"


def read_dom_state(page: Any, selectors: Selectors) -> DomState:
    data = evaluate(page, _DOM_STATE_JS, {**selectors.named(), "answer_text": selectors.answer_text()})
    return DomState(ui=selectors.name, **data)


def detect_ui(page: Any, selector_sets: tuple[Selectors, ...]) -> Selectors | None:
    """The first selector set whose composer (or, on a chat page, assistant turn) is on the page."""
    composers = present(page, [s.composer for s in selector_sets])
    turns = present(page, [s.assistant_turn for s in selector_sets])
    for found in (composers, turns):
        for selectors, here in zip(selector_sets, found, strict=True):
            if here:
                return selectors
    return None


def screen_failure(
    page: Any, selector_sets: tuple[Selectors, ...], texts: FailureTexts = FAILURE_TEXTS
) -> EngineError | None:
    """The failure screen the page shows (login, bot check, WAF, quota, banners), or None."""
    skip = [s for sel in selector_sets for s in (sel.user_turn, sel.answer, sel.thinking) if s]
    seen = evaluate(
        page,
        _SCREEN_JS,
        {
            "skip": skip,
            "waf": texts.waf_marker,
            "login": selector_sets[0].login,
            "captcha": texts.bot_check_frame,
        },
    )
    return failure_in(seen, texts)


def failure_in(seen: dict, texts: FailureTexts = FAILURE_TEXTS) -> EngineError | None:
    """Classify what screen_failure read (kept apart so the rules are testable without a page)."""
    url = seen.get("url", "")
    text = _normalise(seen.get("text", ""))
    if is_sign_in(url) or seen.get("login"):
        return HardError(f"not logged in to the chat site: {LOGIN_HINT}", code=Code.LOGGED_OUT)
    title = seen.get("title", "").lower()
    phrases = (texts.bot_check, *texts.bot_check_more)
    bot_page = texts.bot_check_title.lower() in title or any(_has(text, phrase) for phrase in phrases)
    # The page's address first: a verification page is one whatever it draws (botcheck.py).
    if is_verification(url) or bot_page or seen.get("captcha"):
        return HardError(
            "the site asks for a human verification (bot check); try later, headed, "
            "or attached to your own Chrome (browser.cdp_url)",
            code=Code.BOT_CHECK,
        )
    if seen.get("waf"):
        return TransientError("the site answered with its firewall (WAF) page", code=Code.WAF)
    if _has(text, texts.quota):
        return QuotaSpent("the daily chat quota is spent (the site says so)")
    if _has(text, texts.chat_not_found):
        return HardError(
            "the chat no longer exists (the site says it is not there)", code=Code.CHAT_NOT_FOUND
        )
    if _has(text, texts.error_banner):
        return TransientError(f"the site shows an error: {texts.error_banner!r}", code=Code.ERROR_BANNER)
    return None


def _normalise(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").split()).lower()


def _has(text: str, phrase: str) -> bool:
    return bool(phrase) and _normalise(phrase) in text


class ApiUnusable(Exception):
    """The in-page API did not give JSON we understand (fall back to the page)."""


def fetch_json(page: Any, paths: list[str], *, timeout: float = 30, method: str = "GET") -> list[Any]:
    """GET (or `method`) each path from inside the page (its cookies, its origin); JSON bodies,
    in order.

    A body that is not JSON raises the failure it shows (WAF, bot check) or ApiUnusable.
    """
    bodies = fetch_bodies(page, paths, timeout=timeout, method=method)
    for body in bodies:
        if isinstance(body, (ApiUnusable, EngineError)):
            raise body
    return bodies


def fetch_bodies(
    page: Any, paths: list[str], *, timeout: float = 30, gap: float = 0, method: str = "GET"
) -> list[Any]:
    """fetch_json, where a read that gave no JSON is in the list as the error it means, not
    raised (one failed read does not lose the others): the EngineError of a firewall page or a
    bot check, else ApiUnusable. `gap`: seconds between the starts of two reads (0: at once).

    The reads carry the page's own headers (headers.py); with none learned there is no read and
    every path is ApiUnusable. Reads the site refuses as stale (Bad_Request: a frontend release
    since the page loaded) reload the page, learn its headers again, and are made once more."""
    bodies = _read_now(page, paths, timeout=timeout, gap=gap, method=method)
    stale = [i for i, body in enumerate(bodies) if is_stale_headers(body)]
    if stale and relearn_headers(page, timeout=timeout):
        again = _read_now(page, [paths[i] for i in stale], timeout=timeout, gap=gap, method=method)
        for i, body in zip(stale, again, strict=True):
            bodies[i] = body
    return bodies


def _read_now(page: Any, paths: list[str], *, timeout: float, gap: float, method: str = "GET") -> list[Any]:
    try:
        headers = headers_for_calls(page, len(paths), wait=min(timeout, LEARN_WAIT_SECONDS))
    except NoHeaders as err:
        return [ApiUnusable(f"{path}: {err}") for path in paths]
    # A server that never answers must not hang a cron job: every fetch is aborted in time.
    arg = {"paths": paths, "ms": int(timeout * 1000), "gap": gap * 1000, "headers": headers, "method": method}
    return _bodies(paths, evaluate(page, _FETCH_JS, arg))


def relearn_headers(page: Any, *, timeout: float) -> bool:
    """The site called our headers stale: reload the page (as a user would after a frontend
    release) and learn them again from its own calls. Whether any were learned."""
    from playwright.sync_api import Error as PlaywrightError

    book = watch(page)
    book.forget()
    try:
        page.reload(wait_until="domcontentloaded", timeout=timeout * 1000)
        headers_for_call(page, wait=min(timeout, LEARN_WAIT_SECONDS))
    except (PlaywrightError, NoHeaders):
        return False
    return True


def start_fetches(
    page: Any, paths: list[str], *, timeout: float = 30, gap: float = 0, delay: float = 0, spacing: float = 0
) -> str:
    """fetch_bodies started in the page and left running: the first read `delay` seconds from
    now, one every `gap`; a path this page read before starts no sooner than `spacing` seconds
    after that read was answered (measured in the page: a plan made here cannot promise it).
    Returns at once; `fetched_reads` (with the key returned) waits for them. Between the two the
    caller is free: the page reads meanwhile."""
    key = secrets.token_hex(8)
    try:
        headers = headers_for_calls(page, len(paths), wait=min(timeout, LEARN_WAIT_SECONDS))
    except NoHeaders:
        return key  # nothing started: fetched_reads finds nothing under the key (ApiUnusable)
    arg = {
        "paths": paths,
        "ms": int(timeout * 1000),
        "gap": gap * 1000,
        "delay": max(0.0, delay) * 1000,
        "spacing": spacing * 1000,
    }
    return page.evaluate(_START_FETCH_JS, {**arg, "key": key, "headers": headers})


class Fetched(NamedTuple):
    """One read `start_fetches` started: its body (as fetch_bodies gives it), and the HTTP Date
    header the site answered it with (None when it sent none, or the read was made again)."""

    body: Any
    date: str | None


def fetched_reads(page: Any, key: str, paths: list[str], *, timeout: float = 30) -> list[Fetched]:
    """What the reads `start_fetches` started (`key`, for `paths`) gave; every body ApiUnusable
    when the page lost them (it navigated away)."""
    results = page.evaluate(_COLLECT_FETCH_JS, key)
    if results is None:
        return [
            Fetched(ApiUnusable(f"{path}: the page navigated away during the read"), None) for path in paths
        ]
    reads = [
        Fetched(body, result.get("date"))
        for body, result in zip(_bodies(paths, results), results, strict=True)
    ]
    stale = [i for i, read in enumerate(reads) if is_stale_headers(read.body)]
    if stale and relearn_headers(page, timeout=timeout):
        again = _read_now(page, [paths[i] for i in stale], timeout=timeout, gap=0)
        for i, body in zip(stale, again, strict=True):
            reads[i] = Fetched(body, None)
    return reads


def _bodies(paths: list[str], results: list[dict]) -> list[Any]:
    bodies = []
    for path, result in zip(paths, results, strict=True):
        if result.get("missing"):
            # HTTP 200 whose real status (the header x-actual-status-code) is 404: the chat is gone.
            bodies.append(missing_chat_body(f"{path} (x-actual-status-code: 404)"))
            continue
        if "json_text" in result:
            bodies.append(json.loads(result["json_text"]))
            continue
        why = result.get("error") or f"HTTP {result.get('status')}, not JSON"
        refused = refusal_in(result.get("text", ""), result.get("url", ""))
        bodies.append(refused or ApiUnusable(f"{path}: {why}"))
    return bodies


def refusal_in(raw: str, url: str = "") -> EngineError | None:
    """The failure an API body that is not JSON shows (the firewall's page, a bot check: a page
    that names the verification, or a read redirected to one, `url` where it ended), or None."""
    if FAILURE_TEXTS.waf_marker in raw:
        return TransientError("the site answered with its firewall (WAF) page", code=Code.WAF)
    if names_verification(raw, url):
        return HardError("the site asks for a human verification (bot check)", code=Code.BOT_CHECK)
    return None


def fetch_api(page: Any, path: str, *, timeout: float = 30, method: str = "GET") -> dict:
    """One API body that must be a success; failures raised as the engine errors they mean.
    `method`: "DELETE" for the one call of another kind qwenpipe makes (a chat's deletion)."""
    (body,) = fetch_json(page, [path], timeout=timeout, method=method)
    if not isinstance(body, dict):
        raise ApiUnusable(f"{path}: {json.dumps(body)[:80]}")
    error = classify_api_error(body)
    if error is not None:
        raise error
    return body


# Refusals of a send that took nothing and ask for a later try (api.classify_api_error).
TOOK_NOTHING = frozenset({Code.CHAT_IN_PROGRESS, Code.BUSY})


NEW_CHAT_PATH = "/api/v2/chats/new"  # where the page makes the chat a first send goes into


def _send_step(url: str) -> str:
    """The step of a send a request of the page is (engines/unknown.py), or ""."""
    if COMPLETIONS_PATH in url:
        return Where.COMPLETION
    return Where.NEW_CHAT if NEW_CHAT_PATH in url else ""


class SendReplies:
    """The site's answers to the page's own API calls while a message is being sent.

    A refused send shows on the page as a toast that goes away by itself, and only the API's
    body carries the quota's hours to wait (`data.num`). Reading the replies catches the refusal
    even when the toast is already gone, with those hours. Only requests whose body has fully
    arrived ("requestfinished") are read, and only JSON ones: reading never waits on a stream.
    """

    def __init__(self, page: Any):
        self._page = page
        self._unread: list[Any] = []
        self._failure: EngineError | None = None
        self._refused: list[EngineError] = []  # refusals that took nothing, not yet answered by a click
        page.on("requestfinished", self._keep)

    def _keep(self, request: Any) -> None:
        # Runs inside Playwright's event dispatch: only note the request, read it later.
        try:
            if request.method == "POST" and "/api/" in request.url:
                self._unread.append(request)
        except Exception:
            pass  # a request of a page being closed: nothing to learn from it

    def failure(self) -> EngineError | None:
        """The hard failure (quota, bot check, logged out) a reply reported so far, or the send's
        unknown answer (engines/unknown.py), or None."""
        while self._unread and self._failure is None:
            request = self._unread.pop(0)
            try:
                response = request.response()
                if response is None or "json" not in (response.headers.get("content-type") or ""):
                    continue
                body = response.json()
            except Exception:
                continue  # no body (redirect, page gone) or not JSON: the page's signals decide
            error = classify_api_error(body)
            if isinstance(error, HardError):
                self._failure = error
            elif error is not None and error.code in TOOK_NOTHING:
                self._refused.append(error)
            elif error is not None and error.unknown is not None and _send_step(request.url):
                # The send answered with words nobody has reported: whether the site took the
                # prompt is unknown, and waiting for a chat address would not tell. Once the
                # completion was let go it is in doubt; before (the new chat refused), no send.
                error.unknown = error.unknown.at(_send_step(request.url))
                self._failure = error
        return self._failure

    def refusal(self) -> EngineError | None:
        """The site's last refusal of the send since the last call that took nothing and asks for
        a later try ("The chat is in progress", CHAT_IN_PROGRESS, ParallelLimited), or None. Each
        refusal is reported once."""
        self.failure()
        refused, self._refused = self._refused[-1:], []
        return refused[0] if refused else None

    def close(self) -> None:
        try:
            self._page.remove_listener("requestfinished", self._keep)
        except Exception:
            pass  # the page is already closed
