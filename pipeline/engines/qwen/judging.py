"""Judging a whole chat as turns (multi-turn prompts): every turn of a chat, the last one judged
by the same rule as one answer (observing.py). Answers are paired with their own user message
through the JSON's parent links, and the page's signals count only when they belong to the
assistant turn after the last user message, so the answer to turn N is never taken from turn
N-1 (docs/qwen-site.md, "Reading an answer")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base import ChatTurns, Code, TransientError, TurnState
from ..unknown import Where
from .api import ChatShapeError, ChatView, parse_chat
from .context import POLL_SECONDS, EngineContext
from .observing import read_chat_json
from .page import ApiUnusable, DomState, read_dom_state, screen_failure
from .selectors import Selectors
from .steady import Steadiness

CONFIRMED_SECONDS = 60  # how long an answer seen complete and stable counts as such


@dataclass
class TurnsSeen:
    """One look at a whole chat (multi-turn): its turns, and whether the last may be complete."""

    turns: list[TurnState]  # the last one with complete=False: the caller decides that
    progress: str
    title: str | None = None
    model: str | None = None
    candidate: str | None = None  # the last answer, when every signal says it is complete
    catching_up: bool = False  # the site finished the last answer; the page has not drawn it yet
    stalled: bool = False  # the page looks done but the API says the last turn did not finish

    def result(self, *, complete: bool) -> ChatTurns:
        turns = list(self.turns)
        if complete and turns:
            turns[-1] = TurnState(turns[-1].user, self.candidate or turns[-1].answer, complete=True)
        progress = "complete" if complete else self.progress
        return ChatTurns(turns, title=self.title, model=self.model, progress=progress)


class TurnsReader:
    """Reads whole chats for one engine; remembers, per chat, the last answer seen complete and
    stable (`confirmed`: turns, answer, when), so that a send_turn right after a read_turns of
    the same run needs one more complete read, not the stability reads again."""

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx
        self.confirmed: dict[str, tuple[int, str, float]] = {}

    def read(self, page: Any, selectors: Selectors, chat_id: str) -> ChatTurns:
        """Look at the whole chat like a check looks at one answer (impatient): a last turn that
        is plainly still generating is reported at once; one that looks complete is re-read until
        it stayed unchanged `stable_reads` times (bounded by page_timeout)."""
        ctx = self.ctx
        deadline = ctx.deadline(ctx.page_timeout)
        reads = Steadiness(ctx.stable_reads)
        while True:
            seen = self.observe(page, selectors, chat_id)
            if seen.candidate is not None:
                if reads.steady(seen.candidate) or self.seen_stable(chat_id, seen):
                    self.confirmed[chat_id] = (len(seen.turns), seen.candidate, ctx.now())
                    return seen.result(complete=True)
            else:
                reads.unfinished(stalled=seen.stalled)
                if not (seen.catching_up or seen.stalled):
                    return seen.result(complete=False)
            if ctx.now() >= deadline:
                return seen.result(complete=False)
            # A page catching up with a finished answer is looked at often; the stability and
            # stall reads keep their second apart.
            pause = POLL_SECONDS if seen.catching_up else ctx.read_interval
            page.wait_for_timeout(pause * 1000)

    def seen_stable(self, chat_id: str, seen: TurnsSeen) -> bool:
        """This very answer already passed the stability reads a moment ago (read_turns, then
        send_turn in the same run): one more complete read is enough."""
        count, answer, when = self.confirmed.get(chat_id, (0, "", 0.0))
        fresh = self.ctx.now() - when < CONFIRMED_SECONDS
        return fresh and count == len(seen.turns) and answer == seen.candidate

    def observe(self, page: Any, selectors: Selectors, chat_id: str) -> TurnsSeen:
        """One look at the whole chat: the page's signals and the site's JSON, judged."""
        ctx = self.ctx
        failure = screen_failure(page, ctx.selector_sets)
        if failure is not None:
            raise failure
        dom = read_dom_state(page, selectors)
        try:
            read = read_chat_json(ctx, page, chat_id)
            view = parse_chat(read.body, chat_id)
            ctx.noticed.notice(Where.CHAT_JSON, view.unknown)
        except (ApiUnusable, ChatShapeError) as err:
            # The page alone cannot pair answers with their messages safely: no guessing.
            raise TransientError(
                f"cannot read the chat's turns from the site's API: {err}", code=Code.API_ERROR
            ) from None
        return judge_turns(dom, view, selectors, hidden=(read.hidden, read.hidden_users))


def judge_turns(
    dom: DomState, view: ChatView, selectors: Selectors, *, hidden: tuple[int, int] = (0, 0)
) -> TurnsSeen:
    """One read of a chat (the page's signals and the site's whole JSON) as turns.

    Earlier turns are complete when the JSON says they finished. The last one is a candidate
    only when the JSON says it finished without error AND the page shows exactly that many
    turns AND the page's last assistant turn (the one after the last user message) is idle:
    a copy button or an idle composer left over from the turn before never counts. A page that
    loaded only the history's last page draws `hidden` (answers, user messages) fewer (history.py).
    """
    turns = [
        TurnState(
            t.user_text,
            t.answer,
            complete=t.finished and not t.error and bool(t.answer.strip()),
            error=t.error,
        )
        for t in view.turns
    ]
    common = {"title": view.real_title, "model": view.model}
    if not turns:
        return TurnsSeen([], "waiting for the chat to show the message", **common)
    last = view.turns[-1]
    if last.error:
        raise TransientError(f"the site reports an error in the answer: {last.error}", code=Code.ANSWER_ERROR)
    turns[-1] = TurnState(last.user_text, last.answer, complete=False)
    answers, users = len(turns) - hidden[0], len(turns) - hidden[1]  # what the page draws
    busy = last_turn_busy(dom, selectors, answers, users)
    site_done = last.finished and bool(last.answer.strip())
    if busy is None and site_done:
        return TurnsSeen(turns, "finishing", candidate=last.answer, **common)
    if site_done:
        return TurnsSeen(turns, "finishing", catching_up=True, **common)
    if last.answer:
        progress = f"writing: {len(last.answer):,} chars"
    elif busy == "thinking" or (busy is not None and dom.assistant_turns == answers and dom.thinking_visible):
        progress = "thinking"
    else:
        progress = busy if busy is not None else "waiting for the answer to start"
    # Only a UI that positively shows completion (a copy button) can contradict the API.
    return TurnsSeen(turns, progress, stalled=busy is None and bool(selectors.copy_button), **common)


def last_turn_busy(dom: DomState, selectors: Selectors, count: int, users: int) -> str | None:
    """Why the page, drawing `count` answers and `users` user messages, does not (yet) show the
    last answer as complete, or None."""
    if dom.assistant_turns < count:
        return "waiting for the answer to start"  # what the page shows is an earlier turn's
    if dom.assistant_turns > count or (selectors.user_turn and dom.user_turns != users):
        return "the page and the site disagree on the turns"
    return dom.busy_reason(selectors, count - 1)
