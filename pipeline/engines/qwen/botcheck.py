"""A bot check, whatever its form (docs/qwen-site.md, "Bot checks"): known by the page leaving
the chat for a verification address, or by a send answered with something that is neither the
site's stream nor its JSON, never by one widget alone.

The site has shown its check as a JSON refusal with a slider laid over the page, as a
"Verification" page, as an HTTP 200 HTML page whose script sends the page to
`/_____tmd_____/punish?...&action=captchaconnect` (a "connect them in order" puzzle, no slider
handle), as a QR code deny page, and a driver that knew only the slider's handle read each new
form as "sent, no chat address yet". What all of them share is that the page is no longer the
chat: that is what is watched here.

Whether the site took the prompt is a separate question (design: "Sent or not"). A send answered
with a verification page, or redirected to one, is the site's answer to that very request: it
took nothing. A page that merely went to a verification address may have gone after the prompt
was taken: that send stays in doubt.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from ..base import Code, EngineError, HardError, TransientError
from ..unknown import Where, unknown
from .api import BOT_MARKERS
from .selectors import FAILURE_TEXTS
from .stream import COMPLETIONS_PATH, PageTraffic
from .watcher import PageWatcher

# Any address with one of these is the site's verification, not its chat (Alibaba's punish
# pages live under /_____tmd_____/; "captcha" names the older and the newer puzzles alike).
VERIFICATION_PARTS = ("_____tmd_____", "/punish", "captcha")
SIGN_IN_PATH = "/auth"  # the sign-in page; an address *under* it is something else
BOT_CHECK_HINT = "try later, headed, or attached to your own Chrome (browser.cdp_url)"


def is_sign_in(url: str) -> bool:
    """Whether `url` is the site's sign-in page (`/auth`, whatever its query)."""
    return urlsplit(url).path.rstrip("/") == SIGN_IN_PATH


def is_verification(url: str) -> bool:
    """Whether `url` is a verification address: a punish or captcha page, or a page under
    `/auth/` that is not the sign-in page itself (an unknown step of the site's checks)."""
    parts = urlsplit(url or "")
    where = (parts.path + "?" + parts.query).lower()
    if any(part in where for part in VERIFICATION_PARTS):
        return True
    return parts.path.startswith(SIGN_IN_PATH + "/") and not is_sign_in(url)


def bot_check(detail: str) -> HardError:
    return HardError(
        f"the site asks for a human verification (bot check: {detail}); {BOT_CHECK_HINT}", code=Code.BOT_CHECK
    )


def foreign_reply(
    kind: str, body: str, location: str = "", went: str = "", status: int | None = None
) -> EngineError:
    """What a completion answered with neither the stream nor JSON means: the firewall's page
    (transient, as anywhere), else a bot check. `went`: the verification address the page went
    to since (named in the message: `qwenpipe login` shows that page to solve it). A reply that
    names no verification is also an unknown answer (engines/unknown.py): journalled as seen."""
    if FAILURE_TEXTS.waf_marker in body:
        return TransientError("the site answered the send with its firewall (WAF) page", code=Code.WAF)
    what = f"redirected to {location}" if location else f"answered with {kind or 'no content type'}"
    then = f"; the page went to {address(went)}" if went else ""
    error = bot_check(f"the send was {what}, not the site's stream or JSON{then}")
    if names_verification(body, location) or went:
        return error
    return unknown(error, Where.COMPLETION, status=status, content_type=kind, body=body, url=location or None)


def gateway_error(page: Any) -> bool:
    """Whether the page is a gateway's error page where the app should be (a 5xx or a 429 for
    the document, or such a page the app drew in its own place): no waiting makes it the app."""
    try:
        title, seen = page.title(), page.evaluate(_PAGE_SEEN_JS)
    except Exception:  # navigating, or gone: the next look tells
        return False
    status = seen.get("status") if isinstance(seen, dict) else None
    titled = HTTP_ERROR_TITLE.match(title or "")
    failing = int(titled.group(1)) if titled else status if isinstance(status, int) else 0
    return (failing >= 500 or failing == 429) and bool(APP_PATH.match(urlsplit(page.url).path))


def unknown_page(page: Any, why: str) -> EngineError:
    """What a page that is not the chat, and none of the pages the site is known to show instead
    (the sign-in page, a verification, the firewall, a banner), means where the chat should be.

    A widget nobody has seen at the chat's own address, or a redirect to an unknown address: the
    page has left the chat, as a bot check's does (the design: "whatever the widget"), so it is
    one: the account is held (a hold that learns, contract/quota.py), never tried page after
    page. The chat's own address answered with an HTTP error page (a gateway's 5xx) is the
    site failing, not leaving: transient. Both are unknown answers, journalled as seen."""
    try:
        url, title = page.url, page.title()
        seen = page.evaluate(_PAGE_SEEN_JS)
    except Exception:  # a page gone or hung: the hold stands on what is known
        url, title, seen = getattr(page, "url", ""), "", {}
    seen = seen if isinstance(seen, dict) else {}
    text, status = str(seen.get("text") or ""), seen.get("status")
    where = address(url) or "?"
    status = status if isinstance(status, int) and status > 0 else None
    # A gateway's error page the app drew in its own place (a read answered with it) says its
    # status in its title ("504 Gateway Timeout"), whatever the document's own was.
    titled = HTTP_ERROR_TITLE.match(title or "")
    failing = int(titled.group(1)) if titled else status if status and status >= 400 else None
    if failing is not None and APP_PATH.match(urlsplit(url).path):
        status = failing
        error: EngineError = TransientError(
            f"the chat site answered {where} with HTTP {status} ({title or why})", code=Code.NETWORK
        )
    else:
        error = HardError(
            f"an unknown page where the chat should be ({where}: {why}): the account is held as "
            "for a bot check; if the site changed its page, run `qwenpipe doctor` and set "
            f"[qwen.selectors], else {BOT_CHECK_HINT}",
            code=Code.BOT_CHECK,
        )
    return unknown(error, status=status, url=where, body=f"title {title!r}: {text}")


# The app's own addresses: the new chat's page and a chat's (a page elsewhere has left the app).
APP_PATH = re.compile(r"^/(c/[^/]+)?/?$")
HTTP_ERROR_TITLE = re.compile(r"^\s*([45]\d\d)\b")  # "502 Bad Gateway", as gateways title them
# What a page shows of itself: its text, and its document's HTTP status (Navigation Timing).
_PAGE_SEEN_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return {text: (document.body && document.body.innerText) || '', status: nav ? nav.responseStatus : 0};
}"""


def address(url: str) -> str:
    """`url` without its scheme and host (the site's own addresses are relative in messages)."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def names_verification(body: str, location: str = "") -> bool:
    """Whether a foreign reply is the check's own answer to the send by what it says: a redirect
    to a verification address, or a page that names one (the punish page's form, the check's
    codes). The firewall's page is not the bot check, and proves nothing either way."""
    if FAILURE_TEXTS.waf_marker in body:
        return False
    return is_verification(location) or any(m in body for m in (*BOT_MARKERS, *VERIFICATION_PARTS))


def reply_refusal(page: Any) -> EngineError | None:
    """The bot check a completion of `page` was answered with, when that reply is provably the
    check's answer to the send (the site refusing that very request in words: it took nothing):
    it names the verification (names_verification), or the page went to a verification address
    right after it. A page that leaves the chat takes such a reply's body along before it can be
    read (docs/qwen-site.md), so where the page went is the reply's word. Else None."""
    checks, bodies = BotChecks.of(page), "\n".join(PageTraffic.of(page).plain_texts())
    for reply in checks.replies:
        went = next((visit.url for visit in checks.visited if visit.order > reply.order), "")
        if FAILURE_TEXTS.waf_marker not in bodies and (went or names_verification(bodies, reply.location)):
            return foreign_reply(reply.kind, bodies, reply.location, went, reply.status)
    return None


def left_chat(page: Any) -> EngineError | None:
    """The failure when `page` is no longer the chat: a completion answered with neither the
    stream nor JSON, a frame gone to a verification address (the slider's iframe, the punish
    page, an unknown page under /auth/). In doubt: the page may have left after the prompt was
    taken (reply_refusal says when it provably was not)."""
    checks = BotChecks.of(page)
    went = checks.visited[0].url if checks.visited else ""
    if checks.replies:
        first = checks.replies[0]
        bodies = "\n".join(PageTraffic.of(page).plain_texts())
        return foreign_reply(first.kind, bodies, first.location, went, first.status)
    if went:
        return bot_check(f"the page went to {address(went)}")
    return None


class Reply(NamedTuple):
    """A completion answered with neither the stream nor JSON: its content type, where it was
    redirected ("" when it was not), and when (the order of what the page met)."""

    kind: str
    location: str
    order: int
    status: int | None = None


class Visit(NamedTuple):
    """A frame of the page gone to a verification address, and when."""

    url: str
    order: int


class BotChecks(PageWatcher):
    """What one page of ours met that only a bot check does: a frame that went to a verification
    address, a completion answered with something other than the stream or the site's JSON.

    Playwright's events are only noted here (they run inside its event dispatch); the bodies of
    such replies are the ones PageTraffic keeps as they arrive (`PageTraffic.plain_texts`)."""

    def __init__(self, page: Any):
        super().__init__(page)
        self.visited: list[Visit] = []
        self.replies: list[Reply] = []
        self._order = itertools.count()
        page.on("framenavigated", self._navigated)
        page.on("response", self._response)

    def _navigated(self, frame: Any) -> None:
        try:
            url, inner = frame.url, frame.parent_frame is not None
        except Exception:
            return  # a frame of a page being closed
        # An inner frame counts only as the check's own overlay (its punish page): a page may
        # embed other frames whose addresses merely mention a captcha script.
        if is_verification(url) and (not inner or any(p in url for p in VERIFICATION_PARTS[:2])):
            self.visited.append(Visit(url, next(self._order)))

    def _response(self, response: Any) -> None:
        try:
            request = response.request
            if request.method != "POST" or COMPLETIONS_PATH not in request.url:
                return
            kind = (response.headers.get("content-type") or "").lower()
            if 300 <= response.status < 400:
                location = response.headers.get("location") or "?"
                self.replies.append(Reply(kind, location, next(self._order), response.status))
            elif "event-stream" not in kind and "json" not in kind:
                self.replies.append(Reply(kind, "", next(self._order), response.status))
        except Exception:
            pass  # a response of a page being closed: nothing to learn from it

    def close(self) -> None:
        for event, handler in (("framenavigated", self._navigated), ("response", self._response)):
            try:
                self._page.remove_listener(event, handler)
            except Exception:
                pass  # the page is already closed
