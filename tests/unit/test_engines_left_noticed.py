"""What a chat engine met that no call of it took (its pages' answers read as it closes them) is
journalled as the run's own, whichever way the run's engines close: fuzz seed 2700 trial 40, a
chat list the send's page loaded once the answer was drawn, answered with a redirect nobody has
reported, reached no journal (fakes; the fuzz trial is the real run)."""

from __future__ import annotations

import threading

import pytest
from cycle_project import cycle_project
from fakes import FakeChat, FakeRouter, answer

from pipeline.batch.cycle import run_cycle
from pipeline.contract.journal import NO_ARTICLE
from pipeline.contract.workspace import Engines
from pipeline.engines.unknown import UnknownAnswer
from pipeline.wiring import _journalled

LEFT = UnknownAnswer("chat_list", "HTTP 302 to /fuzz/ad66fa10/moved")


class ClosedRouter(FakeRouter):
    closed = False

    def close(self) -> None:
        self.closed = True


class PagesLeftOpen(FakeChat):
    """A chat engine whose pages met `left` after the last call: read as it closes them."""

    def __init__(self, left: list[UnknownAnswer], fails: bool = False):
        super().__init__()
        self.left, self.fails = left, fails

    def close(self) -> None:
        self.noticed_unknown.extend(self.left)  # what close_page reads off the pages it closes
        super().close()
        if self.fails:
            raise RuntimeError("the browser went away while closing")


def unknown_events(ws) -> list[dict]:
    return [e for e in ws.journal.read() if e["event"] == "unknown_answer"]


@pytest.mark.parametrize("close_fails", [False, True], ids=["closed", "close-raised"])
def test_every_accounts_engine_hands_what_it_met_after_its_calls_as_it_closes(close_fails):
    chats = {
        "acct1": PagesLeftOpen([LEFT], fails=close_fails),
        "acct2": PagesLeftOpen([UnknownAnswer("stream", "phase 'fuzz'"), LEFT]),
        "acct3": PagesLeftOpen([]),
    }
    router = ClosedRouter()
    handed: list[tuple[str, UnknownAnswer]] = []
    engines = Engines(
        None,  # the factories below never read it
        chat_factory=lambda config: chats[config],
        router_factory=lambda _config: router,
        on_noticed=lambda account, found: handed.append((account, found)),
    )
    engines._chats.update(chats)  # as `chat(name)` leaves them, without accounts' configs
    engines.router()
    if close_fails:
        with pytest.raises(RuntimeError):
            engines.close()
    else:
        engines.close()
    # Whether or not acct1's close raised, every account is closed and its leftovers handed,
    # the router closed, and only then the error raised.
    assert handed == [
        ("acct1", LEFT),
        ("acct2", UnknownAnswer("stream", "phase 'fuzz'")),
        ("acct2", LEFT),
    ]
    assert all(chat.closed for chat in chats.values()) and router.closed


def test_the_runs_journal_holds_them_as_its_own_with_where_and_account(workspace):
    record = _journalled(workspace)
    record("acct2", LEFT)
    [event] = unknown_events(workspace)
    assert event["slug"] == NO_ARTICLE and event["where"] == "chat_list" and event["account"] == "acct2"
    assert "302" in event["seen"]


def test_a_cycles_poll_threads_hand_theirs_to_the_runs_engines(project):
    # The poll threads' engines (each attached to the shared session) close in their threads:
    # what their pages met after the last poll goes where the run's engines send theirs.
    chat, router = FakeChat(), FakeRouter()
    slugs = [f"article-{n}" for n in range(4)]
    ws, engines = cycle_project(project, chat, router, slugs, "concurrency = 2", sent=True)
    handed: list[tuple[str, UnknownAnswer]] = []
    closed = threading.Lock()

    original = type(chat)._attach

    def attach(self):
        attached = original(self)
        close, own = attached.close, []  # an attached engine notices on its own pages

        def close_with_leftovers():
            with closed:
                own.append(LEFT)
            close()

        def noticed():
            found, own[:] = list(own), []
            return found

        attached.close, attached.noticed = close_with_leftovers, noticed
        return attached

    chat._attach = attach.__get__(chat)
    run = engines()
    run.on_noticed = lambda account, found: handed.append((account, found))
    chat.enqueue_check(*(answer() for _ in slugs))
    report = run_cycle(ws, run)
    run.close()
    assert report.counts["finished"] == len(slugs), report.summary()
    assert len(chat.attached) == 2
    assert handed.count(("default", LEFT)) == 2, handed  # one per poll thread's engine
