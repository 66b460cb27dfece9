"""The fuzz runner's invariants (tests/chaos/fuzz.py) on findings made up here: each check breaks
on what it must catch and keeps quiet about what the rules allow. No browser, no simulator."""

from __future__ import annotations

import fuzz
import pytest

from pipeline.store.protocol import Event

PROMPT = "Write a short piece on tide pools (fuzz trial 0-00000000, prompt 0)."


class Site:
    """What the checks ask of the simulator: whether it has accounts."""

    def __init__(self, accounts: tuple[str, ...] = ()):
        self.accounts = accounts


def trial() -> fuzz.Trial:
    made = fuzz.Trial(index=3, seed=5, fuzz_seed=99)
    made.slugs = {"f3-p0": PROMPT}
    return made


def sent(at: float, *, accepted: bool = True, account: str = "") -> dict:
    return {"prompt": PROMPT, "accepted": accepted, "account": account, "time": at, "scenario": "ok"}


def event(name: str, at: float = 0.0, account: str = "", **fields) -> Event:
    return Event(slug="f3-p0", event=name, ts=at, account=account, fields=fields)


def test_a_prompt_taken_twice_breaks_unless_its_send_was_given_up_as_lost():
    twice = [sent(1.0), sent(40.0)]
    found = trial()
    fuzz.check_duplicates(found, [event("sending"), event("sent")], twice)
    assert list(found.broken) == ["duplicate_send"] and not found.ok
    allowed = trial()
    fuzz.check_duplicates(allowed, [event("sent"), event(fuzz.ALLOWED_RESEND), event("sent")], twice)
    assert allowed.broken == {} and allowed.ok
    once = trial()
    fuzz.check_duplicates(once, [], [sent(1.0)])
    assert once.broken == {}


@pytest.mark.parametrize("accounts", [(), ("acct1",)])
def test_a_send_reaching_the_site_after_its_account_was_held_is_a_second_strike(accounts):
    name = accounts[0] if accounts else ""
    hold = event("hold", at=10.0, account=name or "default", code="bot_check")
    before = trial()
    fuzz.check_holds(before, [hold], [sent(9.0, accepted=False, account=name)], Site(accounts))
    assert before.broken == {}
    after = trial()
    fuzz.check_holds(
        after, [hold], [sent(9.0, account=name), sent(12.0, accepted=False, account=name)], Site(accounts)
    )
    assert list(after.broken) == ["struck_while_held"]
    twice = trial()
    fuzz.check_holds(twice, [hold, event("hold", at=20.0, account=name or "default")], [], Site(accounts))
    assert list(twice.broken) == ["struck_while_held"]


def test_unknown_answers_not_journalled_are_reported_and_break_only_when_strict(monkeypatch):
    found = trial()
    found.faults = [{"step": "chat_json", "kind": "html_5xx"}, {"step": "chat_list", "kind": "slow"}]
    fuzz.check_unknown_journalled(found, [event("sent")])
    assert list(found.broken) == ["unknown_unjournalled"]
    assert found.ok  # reported only, until branch `unknown` journals them
    monkeypatch.setattr(fuzz, "STRICT_UNKNOWN", True)
    assert not found.ok
    journalled = trial()
    journalled.faults = found.faults
    fuzz.check_unknown_journalled(
        journalled, [event("unknown_answer", where="chat_json", seen="502 Bad Gateway")]
    )
    assert journalled.broken == {} and journalled.unknown_events == 1
    quiet = trial()
    quiet.faults = [{"step": "chat_list", "kind": "slow"}, {"step": "chat_json", "kind": "unknown_field"}]
    fuzz.check_unknown_journalled(quiet, [])
    assert quiet.broken == {}


def test_an_unknown_answer_that_keeps_a_token_breaks():
    found = trial()
    found.faults = [{"step": "chat_json", "kind": "html_5xx"}]
    fuzz.check_unknown_journalled(
        found, [event("unknown_answer", where="chat_json", seen="token=eyJhbGciOi.x.y")]
    )
    assert list(found.broken) == ["unknown_unjournalled"]


def test_the_problem_lines_say_how_to_rerun_the_trial():
    found = trial()
    found.faults = [{"step": "completion", "kind": "html_5xx_taken"}]
    found.breaks("duplicate_send", "f3-p0: the site took it 2 times")
    summary = fuzz.Summary(trials=[found])
    line = summary.problems()
    assert (
        "duplicate_send: trial 3 (--seed 5 --only 3; fuzz seed 99; faults: completion:html_5xx_taken)" in line
    )
    assert summary.failed == [found]
    assert "trials breaking duplicate_send" in summary.table()


def test_a_traceback_is_named_by_its_exception_line():
    output = (
        "qwenpipe: working\nTraceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'id'\n"
    )
    assert fuzz.traceback_line(output) == "KeyError: 'id'"
