"""Observing one answer: looking at a chat until its answer is complete, or saying why not yet.
Looking never types. An answer is complete only when the page says so (no stop button, the copy
button on the turn, no thinking) AND the site's JSON says the turn finished AND the answer's
markdown stays unchanged over `stable_reads` reads a second apart; the page's text is never the
article (docs/qwen-site.md, "Reading an answer"). The page a send left open is read from its
completion's stream instead, the moment it ends finished."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base import Answer, Code, EmptyAnswer, EngineError, Generating, ProgressCallback, TransientError
from ..unknown import Where, unknown
from .api import ChatShapeError, classify_api_error, parse_chat
from .context import POLL_SECONDS, EngineContext
from .history import History, whole
from .page import ApiUnusable, DomState, fetch_api, read_dom_state, screen_failure
from .pages import Live
from .selectors import Selectors
from .sending import same_text
from .steady import API_STABLE_SECONDS, Steadiness, finished_long_ago, site_time
from .stream import PageTraffic, StreamRead

PAGE_SETTLE_SECONDS = 3  # a fresh page may show "busy" this long before drawing a done answer
WAIT_PAGE_SECONDS = 0.1  # a settled, steady answer: how often to look whether the page agrees yet
PAGE_LOAD_SECONDS = 5  # how long a look waits for a chat's page to load the chat's JSON itself
PAGE_RELOAD_SECONDS = 0.5  # ... and, at a later look, for the page's next load of its own
STREAM_LOOK_SECONDS = 0.1  # how often a wait on the sending page looks whether its stream ended


@dataclass
class Observation:
    """One look at the chat: a candidate answer, or why there is none yet."""

    progress: str
    markdown: str | None = None
    title: str | None = None
    model: str | None = None
    extra: dict = field(default_factory=dict)
    catching_up: bool = False  # the site has (more of) the answer than the page shows yet
    unsure: bool = False  # no API to ask: the page may still be drawing a finished answer
    stalled: bool = False  # the page looks done but the API says the turn did not finish
    # The answer, when the site's stored status says it finished (whatever the page shows yet):
    # such reads count toward the stability reads, and may come API_STABLE_SECONDS apart.
    settled: str | None = None
    dom_text: str | None = None  # the page's answer text while it says busy
    vouched: bool = False  # complete by the page's own load and drawing: no stability reads needed


class Observer:
    """Looks at one-turn chats for one engine; remembers, per chat it sent, how many assistant
    turns the page showed before (`turns_before`): the answer is the next one."""

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx
        self.turns_before: dict[str, int] = {}

    def watch(
        self,
        page: Any,
        selectors: Selectors,
        chat_id: str,
        *,
        deadline: float,
        on_progress: ProgressCallback | None = None,
        patient: bool = False,
    ) -> Answer | Generating:
        """Read the chat once a second until the answer is complete and stable.

        Impatient (check): a plain "still generating" read returns Generating at once; only the
        stability reads, a page still drawing an answer the site has finished, or a suspected
        stall keep it looking (bounded by `deadline`). Patient (wait): looks until `deadline`.
        """
        ctx = self.ctx
        turns_before = self.turns_before.get(chat_id, 0)
        settle_until = ctx.now() + PAGE_SETTLE_SECONDS
        reads, said, said_at, seen = Steadiness(ctx.stable_reads), None, float("-inf"), None
        behind_since = None  # since when the page has not drawn what the site has
        while True:
            before = seen.dom_text if seen is not None else None
            seen = self.observe(page, selectors, chat_id, turns_before, patient=patient, dom_before=before)
            behind_since = (behind_since or ctx.now()) if seen.catching_up else None
            if behind_since is not None and ctx.now() - behind_since > ctx.page_timeout:
                # A page the site replaced (an error page, a widget nobody has seen) never
                # catches up: a wait on it would never end. Looked at again with a fresh page;
                # an unknown answer, so a sent chat's is never handed to the router for it.
                changed = TransientError(
                    f"the page has not drawn the answer the site has for {ctx.page_timeout:g} s "
                    f"(qwen.page_timeout): {seen.progress}",
                    code=Code.PAGE_CHANGED,
                )
                raise unknown(changed, Where.CHAT_JSON, what=f"a page that never drew the answer: {page.url}")
            if seen.markdown is not None:
                if seen.vouched or reads.steady(seen.markdown):
                    return Answer(
                        seen.markdown, ctx.name, title=seen.title, model=seen.model, extra=seen.extra
                    )
            elif seen.settled is not None:
                reads.steady(seen.settled)  # stored as finished; complete once the page agrees
            else:
                reads.unfinished(stalled=seen.stalled)
                settling = seen.unsure and ctx.now() < settle_until
                if not (patient or seen.catching_up or seen.stalled or settling):
                    return Generating(seen.progress)
            if on_progress and seen.progress != said and ctx.now() - said_at >= ctx.read_interval:
                on_progress(seen.progress)  # a line a second at most, however often the page is read
                said, said_at = seen.progress, ctx.now()
            if ctx.now() >= deadline:
                return Generating(seen.progress)
            page.wait_for_timeout(pause(seen, reads, ctx.read_interval) * 1000)

    def observe(
        self,
        page: Any,
        selectors: Selectors,
        chat_id: str,
        turns_before: int,
        *,
        patient: bool,
        dom_before: str | None = None,
    ) -> Observation:
        """One look: the page, then (unless a patient watch sees the page busy with an answer
        still growing) the site's JSON. `dom_before` is the page's answer text at the last look."""
        ctx = self.ctx
        failure = screen_failure(page, ctx.selector_sets)
        if failure is not None:
            raise failure
        dom = read_dom_state(page, selectors)
        busy = dom.busy_reason(selectors, turns_before)
        paused = bool(dom.answer_text) and dom.answer_text == dom_before  # the page stopped growing
        streaming = dom.stop_visible or not selectors.stop_button  # a page that can tell says so
        if busy is not None and patient and not paused and streaming:
            # The API read waits until the page says it is done, or its answer stopped growing.
            return Observation(busy, dom_text=dom.answer_text)
        try:
            read = read_chat_json(ctx, page, chat_id)
            view, loaded_by_page = parse_chat(read.body, chat_id), read.by_page
            ctx.noticed.notice(Where.CHAT_JSON, view.unknown)
        except (ApiUnusable, ChatShapeError) as err:
            field = err.field or "?" if isinstance(err, ChatShapeError) else ""
            return observe_dom_only(dom, selectors, busy, str(err), field)
        turn = view.turns[turns_before] if len(view.turns) > turns_before else None
        if turn is not None and turn.error:
            raise TransientError(
                f"the site reports an error in the answer: {turn.error}", code=Code.ANSWER_ERROR
            )
        stored = view.stored[turns_before] if len(view.stored) > turns_before else None
        settled = turn.answer if turn is not None and stored is True and turn.answer.strip() else None
        # Stored as finished with no text: what an account past its real limit gets
        # (docs/qwen-site.md). Never an article; once the page stops streaming, a failure.
        empty = turn is not None and stored is True and not turn.answer.strip()
        if empty and not dom.stop_visible:
            raise EmptyAnswer()
        if busy is not None:
            # A freshly opened page draws a finished answer a moment late: worth waiting for.
            site_has_more = bool(turn and turn.answer) and (
                turn.finished or dom.assistant_turns <= turns_before
            )
            return Observation(
                busy, catching_up=site_has_more or empty, settled=settled, dom_text=dom.answer_text
            )
        if turn is None or not turn.finished or not turn.answer.strip():
            # Only a UI that positively shows completion (a copy button) can contradict the API;
            # the older UI shows nothing, so there this is plain "still generating".
            return Observation(dom.progress(), stalled=bool(selectors.copy_button))
        extra = {"source": "api", "chat_id": chat_id, "ui": selectors.name}
        if loaded_by_page:
            extra["read"] = "page"
        return Observation(
            "finishing",
            turn.answer,
            title=view.real_title,
            model=view.model,
            extra=extra,
            settled=settled,
            # The page loaded this JSON itself, the site stored the answer as finished long before
            # (by its clock: the flag may come ahead of the last words), and the page drew that
            # turn complete: nothing more to read.
            vouched=loaded_by_page
            and settled is not None
            and finished_long_ago(view, site_time(read.date), stable_reads=ctx.stable_reads),
        )

    def wait_for_stream(
        self, page: Any, live: Live, deadline: float, on_progress: ProgressCallback | None
    ) -> Answer | None:
        """The answer as the page that sent it receives it: the completion's stream, taken the
        moment it ends with `finished` in the answer phase. None when the stream cannot tell (it
        broke, ended unfinished or empty, or the browser kept no body): the chat's own page,
        read as any later run reads it, decides then. Progress comes from the page's drawing."""
        ctx = self.ctx
        said, said_at = None, float("-inf")
        while ctx.now() < deadline:
            failure = screen_failure(page, ctx.selector_sets)
            if failure is not None:
                raise failure
            read = live.traffic.stream()
            if isinstance(read, StreamRead):
                if read.error:
                    raise TransientError(
                        f"the site reports an error in the answer: {read.error}", code=Code.ANSWER_ERROR
                    )
                if not read.finished:
                    cut = TransientError(
                        "the answer stopped before the site marked it finished (cut short)",
                        code=Code.CUT_SHORT,
                    )
                    # A stream that said something nobody has reported before it broke off.
                    raise unknown(cut, Where.STREAM, what=read.unknown) if read.unknown else cut
                ctx.noticed.notice(Where.STREAM, read.unknown)
                if not read.answer.strip():
                    return None  # an empty answer: the chat's page says what it means
                if read.model is None:
                    return None  # which model answered is for the chat's JSON to say
                if not stored_as_streamed(page, live.chat_id, read.answer, ctx.page_timeout):
                    return None  # the chat's own page decides, from what the site stores
                extra = {"source": "stream", "chat_id": live.chat_id, "ui": live.selectors.name}
                return Answer(read.answer, ctx.name, model=read.model, extra=extra)
            if read is not None:  # Unreadable
                return None
            dom = read_dom_state(page, live.selectors)
            if not (dom.composer or dom.assistant_turns):
                return None  # the page is no longer the app (replaced): the chat's own page decides
            progress = dom.progress()
            if on_progress and progress != said and ctx.now() - said_at >= ctx.read_interval:
                on_progress(progress)
                said, said_at = progress, ctx.now()
            page.wait_for_timeout(STREAM_LOOK_SECONDS * 1000)
        return None


def stored_as_streamed(page: Any, chat_id: str, streamed: str, timeout: float) -> bool:
    """Whether the chat's JSON stores, as finished, the answer its stream gave (word for word,
    spaces aside). The stream is what the page draws as it comes, frame by frame: a frame sent
    twice or out of order writes its words twice or elsewhere, and nothing in the frames tells
    (fuzz seed 1300 trial 112: a duplicated frame's words in the article). The site's stored
    answer is what every later look reads; when it does not agree yet, the chat's own page
    decides with the stability reads. One read of ours, the page's headers."""
    try:
        turns = parse_chat(fetch_api(page, f"/api/v2/chats/{chat_id}", timeout=timeout), chat_id).turns
    except (ApiUnusable, ChatShapeError, EngineError):  # the chat's page meets it again, and says
        return False
    return bool(turns) and turns[-1].finished and same_text(turns[-1].answer, streamed)


def pause(seen: Observation, reads: Steadiness, read_interval: float) -> float:
    """Seconds to the next read. The stability rule (stable_reads reads a second apart) is
    for an answer nothing vouches for: a page that looks done, a JSON that says nothing of
    its completion. Once the site's stored status says finished, the reads only have to show
    that no chunk still lands, and API_STABLE_SECONDS apart does (see collect.py): three
    reads span half a second. So a waited-for answer is taken within about a second of its
    end where the site and the page agree, and after the full stability reads where not."""
    if seen.settled is not None and reads.same >= reads.needed:
        return WAIT_PAGE_SECONDS  # steady already: only the page's agreement is missing
    if seen.settled is not None or seen.dom_text is not None:
        return API_STABLE_SECONDS  # a settled answer, or a busy page read (local, no request)
    return read_interval


def observe_dom_only(
    dom: DomState, selectors: Selectors, busy: str | None, why: str, field: str = ""
) -> Observation:
    """The site's JSON is unusable. The page's text is never the article (it is rendered and
    virtualised: docs/qwen-site.md, "Reading an answer"), so a page that shows a finished
    answer makes this a transient failure: a later look, or the router after
    qwen.max_attempts, writes the article."""
    if busy is not None:
        return Observation(busy, unsure=True)
    if not dom.answer_text.strip():
        return Observation(dom.progress(), stalled=bool(selectors.copy_button))
    error = TransientError(
        f"the page shows a finished answer but the site's JSON for it cannot be read ({why}); "
        "the page's text is never taken as the article",
        code=Code.API_ERROR,
    )
    # A JSON without a field it needs (`field`) is an answer nobody has reported.
    raise unknown(error, Where.CHAT_JSON, field=field) if field else error


def read_chat_json(ctx: EngineContext, page: Any, chat_id: str) -> History:
    """The chat's JSON, whole, and whether the page loaded it itself: the newest load of the
    page's own since the last look, else a read of ours with the page's headers. A load the
    site answered with a failure is raised as that failure (stale headers: our read
    instead). A load that holds only the history's last page is completed (history.py)."""
    traffic = PageTraffic.of(page)
    # A chat's page loads its JSON as it opens; a page that loads again on its own (while it
    # draws an answer) is given a moment for its next load before we read for ourselves.
    first = not traffic.has_loaded(chat_id)
    until = ctx.deadline(min(ctx.page_timeout, PAGE_LOAD_SECONDS if first else PAGE_RELOAD_SECONDS))
    while not traffic.has_fresh_load(chat_id) and ctx.now() < until:
        page.wait_for_timeout(POLL_SECONDS * 200)
    loaded = traffic.chat_load(chat_id)
    if loaded is not None:
        error = classify_api_error(loaded)
        if error is None:
            date = traffic.load_date(chat_id)
            return whole(page, chat_id, loaded, True, timeout=ctx.page_timeout)._replace(date=date)
        if error.code != Code.STALE_HEADERS:
            raise error
    elif all_finished(traffic.latest_load(chat_id), traffic.load_date(chat_id), ctx.stable_reads, chat_id):
        # No new load, but the last one already holds every answer as finished long before
        # it was answered: a finished answer does not change, and it is what the page draws.
        # (A stored "finished" alone may come ahead of the last words: read again, ourselves.)
        date = traffic.load_date(chat_id)
        latest = traffic.latest_load(chat_id)
        return whole(page, chat_id, latest, True, timeout=ctx.page_timeout)._replace(date=date)
    body = fetch_api(page, f"/api/v2/chats/{chat_id}", timeout=ctx.page_timeout)
    return whole(page, chat_id, body, False, timeout=ctx.page_timeout, drawn=traffic.latest_load(chat_id))


def all_finished(body: dict | None, date: str | None, stable_reads: int, chat_id: str | None = None) -> bool:
    """A successful chat JSON whose every answer the site stored as finished, long before its
    clock (`date`, the load's Date header) answered it (steady.finished_long_ago); of `chat_id`
    when given. A page's load that names another chat is never taken again in place of a read
    of ours: each look would meet it again, and a patient wait never end (fuzz seed 2800 trial
    140: `chat_json:other_chat`, then the page replaced, "waiting for the answer to start" for
    two minutes without a request)."""
    if body is None or classify_api_error(body) is not None:
        return False
    try:
        view = parse_chat(body, chat_id)
    except ChatShapeError:
        return False
    finished = bool(view.stored) and all(done is True for done in view.stored)
    return finished and finished_long_ago(view, site_time(date), stable_reads=stable_reads)
