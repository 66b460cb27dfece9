"""Sending: the click on send and its proof. Sending is the only action that costs anything, so
every error of a send says whether it provably sent nothing (`nothing_sent`: before the click,
or a refusal of the site's that took nothing), and the proof the site took the message is the
chat's address (a new chat) or the completion's stream, else its JSON (a later turn). The
site's refusals and what each means: docs/qwen-site.md ("Refusals of a send that take nothing",
the bot check, the day's limit)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..base import ACCOUNT_REFUSALS, Code, EngineError, HardError, TransientError
from .api import ChatShapeError, chat_id_from_url, classify_api_error, parse_chat
from .botcheck import left_chat, reply_refusal, unknown_page
from .context import POLL_SECONDS, EngineContext
from .hold import CompletionHold
from .page import ApiUnusable, SendReplies, detect_ui, fetch_api, screen_failure
from .refusals import after_refusal
from .selectors import Selectors
from .stream import PageTraffic

REPLY_GRACE_SECONDS = 2  # a quota toast seen: how long its API reply (with the hours) may lag

Resend = Callable[[EngineError | None], None]


class Submit:
    """Marks the engine errors of one send that came before the send button was clicked: those
    provably sent nothing (`nothing_sent`). A click that fails may still have reached the site."""

    def __init__(self) -> None:
        self.clicked = False

    def click(self, button: Any) -> None:
        self.clicked = True
        button.click()

    def __enter__(self) -> Submit:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, _tb: object) -> None:
        if isinstance(error, EngineError) and not self.clicked:
            error.nothing_sent = True


@contextmanager
def replies_to_send(page: Any) -> Iterator[SendReplies]:
    """The site's replies to what the page sends, watched while the block runs."""
    replies = SendReplies(page)
    try:
        yield replies
    finally:
        replies.close()


def clicker(page: Any, selectors: Selectors, submit: Submit, *, later_turn: bool = False) -> Resend:
    """Clicks send now, and again each time it is called with the site's refusal that took
    nothing (refusals.py says which refusal means what): BUSY_CLICKS clicks in all."""
    clicks = 0

    def click(refusal: EngineError | None = None) -> None:
        nonlocal clicks
        if refusal is not None:
            pause = after_refusal(refusal, clicks, later_turn=later_turn)
            page.wait_for_timeout(pause * 1000)
        clicks += 1
        submit.click(page.locator(selectors.send_button).first)

    click()
    return click


def sent_failure(ctx: EngineContext, page: Any, replies: SendReplies) -> EngineError | None:
    """Why the site refused what was just sent: its API reply first (it carries the quota's
    hours and outlives the toast), else the page's failure screen."""
    refused = replies.failure() or plain_refusal(page) or reply_refusal(page)
    # A bot check is the page leaving the chat, whatever it draws (botcheck.py).
    failure = refused or screen_failure(page, ctx.selector_sets) or left_chat(page)
    if failure is not None and failure.code in ACCOUNT_REFUSALS:
        # The site answers the send itself with the bot check (FAIL_SYS_USER_VALIDATE), "not
        # logged in" or the day's limit (RateLimited) and takes nothing: no send, and none the
        # site counts against the day. Only that reply proves it; a slider, a login form or a
        # toast seen on the page without it may have come after the prompt was taken. The
        # page can draw the toast before Playwright reports the reply: give it a moment.
        until = ctx.deadline(REPLY_GRACE_SECONDS)
        while refused is None and ctx.now() < until:
            page.wait_for_timeout(POLL_SECONDS * 1000)
            refused = replies.failure() or plain_refusal(page) or reply_refusal(page)
        if refused is not None and refused.code in ACCOUNT_REFUSALS:
            refused.nothing_sent = True
            return refused
    return failure


def check_sent(ctx: EngineContext, page: Any, replies: SendReplies, resend: Resend, deadline: float) -> float:
    """After a click, while waiting for its proof: raise why the site refused what was sent;
    after a refusal that took nothing ("in progress", ParallelLimited: refusals.py) click again
    and give the wait a fresh deadline. Returns the deadline to wait by."""
    failure = sent_failure(ctx, page, replies)
    if failure is not None:
        raise failure
    refusal = replies.refusal()
    if refusal is not None:
        resend(refusal)
        return ctx.deadline(ctx.page_timeout)
    return deadline


def wait_for_chat_id(
    ctx: EngineContext, page: Any, replies: SendReplies, resend: Resend, hold: CompletionHold
) -> str:
    """The new chat's id, once the page's address shows it (the proof a first message was
    taken); raises the site's refusal, or a timeout saying the chat list is searched first."""
    deadline = ctx.deadline(ctx.page_timeout)
    while ctx.now() < deadline:
        hold.check()
        chat_id = chat_id_from_url(page.url)
        if chat_id:
            return chat_id
        try:
            deadline = check_sent(ctx, page, replies, resend, deadline)
        except EngineError:
            # A completion held back while the check waited: the page's error is its
            # reaction to our abort, and why we aborted (nothing sent) is what counts.
            hold.check()
            raise
        page.wait_for_timeout(POLL_SECONDS * 1000)
    if detect_ui(page, ctx.selector_sets) is None:  # the page is no longer the app: what is it?
        raise unknown_page(
            page, f"the page left the app after the click, no chat address in {ctx.page_timeout:g} s"
        )
    raise TransientError(
        f"the prompt was sent but no chat address appeared within {ctx.page_timeout:g} s "
        "(the chat list is searched before any resend)",
        code=Code.NO_CHAT_URL,
    )


def wait_for_user_turn(
    ctx: EngineContext,
    page: Any,
    chat_id: str,
    number: int,
    text: str,
    replies: SendReplies,
    resend: Resend,
) -> None:
    """Wait for the proof that the site took `text` as user turn `number`: the completion's
    stream opening on the page (what the page itself receives), or, where the site answered
    without a stream, its JSON showing `text` as the chat's last user message."""
    deadline = ctx.deadline(ctx.page_timeout)
    traffic = PageTraffic.of(page)
    while True:
        deadline = check_sent(ctx, page, replies, resend, deadline)
        if traffic.stream_began():
            return
        if not traffic.answered_without_stream():
            view = None  # no word from the site yet: the stream, or its refusal, is coming
        else:
            try:
                view = parse_chat(
                    fetch_api(page, f"/api/v2/chats/{chat_id}", timeout=ctx.page_timeout), chat_id
                )
            except (ApiUnusable, ChatShapeError):
                view = None  # look again: the page or the API may be between two states
        if view is not None and len(view.turns) == number and same_text(view.turns[-1].user_text, text):
            return
        if ctx.now() >= deadline:
            raise TransientError(
                f"turn {number} was sent but the chat did not show it within {ctx.page_timeout:g} s "
                "(the next run reads the chat before sending anything)",
                code=Code.NO_TURN,
            )
        page.wait_for_timeout(POLL_SECONDS * 1000)


def same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def plain_refusal(page: Any) -> EngineError | None:
    """The hard refusal in a completion the site answered without a stream, as the page received
    it (kept over DevTools: a page that went on to a verification page no longer has its body)."""
    for body in PageTraffic.of(page).plain_replies():
        error = classify_api_error(body)
        if isinstance(error, HardError):
            return error
    return None
