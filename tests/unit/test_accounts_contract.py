"""Several accounts with fake chat engines: rotation chooses the sender, affinity keeps it."""

from __future__ import annotations

import json
import time
import tomllib

import pytest
from fakes import FakeChat, FakeRouter, answer, took_nothing
from project_files import add_prompt, write_config

from pipeline.accounts import config_account
from pipeline.batch.cycle import run_cycle
from pipeline.config import ConfigError, load
from pipeline.contract.step import Status, generate
from pipeline.contract.workspace import Engines
from pipeline.engines.base import ACCOUNT_REFUSALS, Generating, HardError, QuotaSpent, TransientError
from pipeline.wiring import workspace as open_workspace

BASE = "[qwen]\npoll_interval = 0\nmax_attempts = 3\n[article]\nmin_words = 0\n"


def refused_before_typing(code: str) -> HardError:
    return took_nothing(HardError(f"account refused ({code})", code=code))


class Accounts:
    """A project with accounts a, b, c (each a FakeChat), their saved logins in place."""

    def __init__(self, project, tables: str = "", names=("a", "b", "c")):
        self.project = project
        tables = tables or "".join(f"[accounts.{n}]\n" for n in names)
        write_config(project, BASE + tables)
        self.ws = open_workspace(load(project / "config.toml"))
        for name in names:
            state = project / ".qwenpipe" / "accounts" / name / "state.json"
            state.parent.mkdir(parents=True, exist_ok=True)
            state.write_text("{}")
        self.chats = {name: FakeChat(base_url="https://chat.qwen.ai") for name in names}
        for i, chat in enumerate(self.chats.values()):
            chat.sends = 1000 * i  # each account's chat ids of its own
        self.router = FakeRouter()

    def engines(self) -> Engines:
        return Engines(
            self.ws.config,
            chat_factory=lambda config: self.chats[config_account(config)],
            router_factory=lambda _c: self.router,
        )

    def calls(self, name: str) -> list[str]:
        return [h[0] for h in self.chats[name].history]

    def sent(self, name: str) -> int:
        return self.calls(name).count("send")

    def sends(self, slug: str):
        return [(s.turn, s.account, s.chat_url) for s in self.ws.store.sends(slug)]

    def reload(self, tables: str) -> None:
        write_config(self.project, BASE + tables)
        self.ws = open_workspace(load(self.project / "config.toml"))


def test_a_new_send_goes_to_the_account_with_most_sends_left_ties_in_config_order(project):
    fill = '[accounts]\nrotation = "fill"\n'
    acc = Accounts(
        project, fill + "[accounts.a]\nmax_sends_per_day = 2\n[accounts.b]\nmax_sends_per_day = 3\n"
    )
    del acc.chats["c"]
    for slug in ("one", "two", "three"):
        add_prompt(project, slug, f"Write about {slug}.")
    engines = acc.engines()
    senders = [generate(acc.ws, slug, engines).account for slug in ("one", "two", "three")]
    # b has 3 left (a 2): b; then 2 each, a tie: a comes first in config.toml; then b (2 > 1)
    assert senders == ["b", "a", "b"]
    assert acc.sent("a") == 1 and acc.sent("b") == 2


def test_the_sender_is_recorded_in_the_store_and_the_marker_before_the_click(project):
    acc = Accounts(project)
    add_prompt(project, "tea")
    seen = {}

    def send(text, choice=None, *, on_chat_id=None):
        seen["marker"] = json.loads((project / "articles" / "tea.md.sending").read_text())
        seen["store"] = acc.sends("tea")
        return FakeChat.send(acc.chats["a"], text, choice, on_chat_id=on_chat_id)

    acc.chats["a"].send = send
    outcome = generate(acc.ws, "tea", acc.engines())
    assert outcome.status is Status.QUEUED and outcome.account == "a"
    assert seen["marker"]["account"] == "a" and seen["store"] == [(1, "a", "")]
    assert acc.sends("tea") == [(1, "a", outcome.chat_url)]
    sending = [e for e in acc.ws.store.events("tea") if e.event == "sending"]
    assert [e.account for e in sending] == ["a"]


def test_polls_of_a_chat_go_to_its_sender_only_and_the_article_names_it(project):
    fill = '[accounts]\nrotation = "fill"\n'
    acc = Accounts(project, fill + "[accounts.a]\nmax_sends_per_day = 1\n[accounts.b]\n[accounts.c]\n")
    add_prompt(project, "tea")
    engines = acc.engines()
    assert generate(acc.ws, "tea", engines).account == "b"
    acc.chats["b"].enqueue_check(Generating("thinking"))
    assert generate(acc.ws, "tea", engines).status is Status.WORKING
    acc.chats["b"].enqueue_check(answer())
    assert generate(acc.ws, "tea", engines).status is Status.DONE
    assert acc.calls("b") == ["send", "check", "check"]
    assert acc.calls("a") == [] and acc.calls("c") == []
    meta = tomllib.loads((project / "articles" / "tea.md").read_text().split("+++")[1])
    assert meta["account"] == "b" and meta["engine"] == "qwen"


@pytest.mark.parametrize(("rotation", "shares"), [("spread", {"a": 5, "b": 5}), ("fill", {"a": 10, "b": 0})])
def test_two_accounts_without_limits_share_a_cycles_sends_as_rotation_says(project, rotation, shares):
    acc = Accounts(
        project, f'[accounts]\nrotation = "{rotation}"\n[accounts.a]\n[accounts.b]\n', names=("a", "b")
    )
    for number in range(10):
        add_prompt(project, f"topic-{number}", f"Write about topic {number}.")
    report = run_cycle(acc.ws, acc.engines(), say=lambda _line: None)
    assert len(report.sent) == 10
    assert {name: acc.sent(name) for name in ("a", "b")} == shares
    from pipeline.batch.status import collect

    shown = {a["name"]: a["share_today"] for a in collect(acc.ws).to_json()["accounts"]}
    assert shown == {name: n / 10 for name, n in shares.items()}  # each account's part of today's


def test_a_rotation_that_is_neither_spread_nor_fill_is_refused_naming_both(project):
    write_config(project, BASE + '[accounts]\nrotation = "random"\n[accounts.a]\n')
    with pytest.raises(ConfigError, match=r"accounts.rotation = 'random'.*spread.*fill"):
        load(project / "config.toml")


def test_a_router_written_article_names_no_account(project):
    acc = Accounts(project)
    add_prompt(project, "tea")
    assert generate(acc.ws, "tea", acc.engines(), engine="router").status is Status.DONE
    meta = tomllib.loads((project / "articles" / "tea.md").read_text().split("+++")[1])
    assert meta["engine"] == "router" and "account" not in meta


@pytest.mark.parametrize("code", ["logged_out", "bot_check"])
def test_an_account_refusing_before_typing_is_skipped_and_the_next_one_sends(project, code):
    acc = Accounts(project)
    acc.chats["a"].send_error = refused_before_typing(code)
    add_prompt(project, "tea")
    add_prompt(project, "milk", "Write about milk.")
    engines = acc.engines()
    outcome = generate(acc.ws, "tea", engines)
    assert outcome.status is Status.QUEUED and outcome.account == "b"
    assert acc.sends("tea") == [(1, "b", outcome.chat_url)]
    assert generate(acc.ws, "milk", engines).account == "c"  # a is skipped for the rest of the run
    assert acc.calls("a") == ["send"] and acc.sent("b") == 1 and acc.sent("c") == 1
    assert not acc.router.history


def test_a_quota_answer_with_no_chat_blocks_that_account_only_and_the_next_one_sends(project):
    acc = Accounts(project)
    acc.chats["a"].send_error = QuotaSpent("daily limit reached", retry_after=5 * 3600)
    add_prompt(project, "tea")
    outcome = generate(acc.ws, "tea", acc.engines())
    assert outcome.status is Status.QUEUED and outcome.account == "b"
    import time

    now = time.time()
    assert acc.ws.store.quota_block("a", now) is not None
    assert acc.ws.store.quota_block("b", now) is None and acc.ws.store.quota_block("default", now) is None
    assert not (project / "articles" / "tea.md.sending").exists()
    assert [e.event for e in acc.ws.store.events("tea")][:2] == ["sending", "unsent"]


def test_every_account_spent_falls_back_to_the_router_as_one_account_did(project):
    acc = Accounts(project)
    for chat in acc.chats.values():
        chat.send_error = QuotaSpent("daily limit reached", retry_after=3600)
    add_prompt(project, "tea")
    outcome = generate(acc.ws, "tea", acc.engines())
    assert outcome.status is Status.DONE and outcome.engine == "router"
    assert [acc.calls(n) for n in "abc"] == [["send"], ["send"], ["send"]]


def test_a_failure_after_the_click_is_never_offered_to_another_account(project):
    acc = Accounts(project)
    error = TransientError("no chat address appeared", code="no_chat_url")
    acc.chats["a"].send_error_after_naming = error  # the prompt left the browser, the URL never came
    add_prompt(project, "tea")
    engines = acc.engines()
    assert generate(acc.ws, "tea", engines).status is Status.WORKING
    marker = json.loads((project / "articles" / "tea.md.sending").read_text())
    assert marker["account"] == "a"
    acc.chats["a"].send_error_after_naming = None
    with acc.ws.store.transaction() as tx:  # its backoff passed
        record = tx.article("tea")
        record.next_try = 0.0
        tx.put_article(record)
    outcome = generate(acc.ws, "tea", engines)  # recovery looks in a's chat list only
    assert outcome.account == "a"
    assert acc.calls("a") == ["send", "user_messages", "send"]  # its named chat holds nothing
    assert acc.calls("b") == [] and acc.calls("c") == []


def test_a_lost_send_is_sent_again_from_the_same_account_even_when_it_refuses(project):
    acc = Accounts(project)
    add_prompt(project, "tea")
    (project / "articles" / "tea.md.sending").write_text(
        json.dumps({"time": 1.0, "prompt_sha256": "x", "account": "b"}) + "\n"
    )
    acc.chats["b"].send_error = refused_before_typing("logged_out")
    now = [1_800_000_000.0]
    assert generate(acc.ws, "tea", acc.engines(), clock=lambda: now[0]).status is Status.WORKING
    now[0] += acc.ws.config.qwen.lost_chat_after  # in doubt that long: lost, sent again
    outcome = generate(acc.ws, "tea", acc.engines(), clock=lambda: now[0])
    assert acc.calls("b") == ["find_chats", "find_chats", "send"]
    assert acc.calls("a") == [] and acc.calls("c") == []  # never another account
    assert outcome.engine == "router"  # the usual hard failure: the router writes it


def test_a_disabled_sender_makes_its_article_wait_and_no_account_looks(project):
    acc = Accounts(project)
    add_prompt(project, "tea")
    assert generate(acc.ws, "tea", acc.engines()).account == "a"
    acc.reload("[accounts.a]\nenabled = false\n[accounts.b]\n[accounts.c]\n")
    outcome = generate(acc.ws, "tea", acc.engines())
    assert outcome.status is Status.WORKING and outcome.reason == "account"
    assert "account a" in outcome.message and "enabled = true" in outcome.message
    assert acc.calls("a") == ["send"] and acc.calls("b") == [] and not acc.router.history


def test_a_logged_out_sender_with_a_chat_in_flight_waits_for_it_not_the_router(project):
    acc = Accounts(project)
    add_prompt(project, "tea")
    engines = acc.engines()
    assert generate(acc.ws, "tea", engines).account == "a"
    acc.chats["a"].enqueue_check(HardError("not logged in", code="logged_out"))
    outcome = generate(acc.ws, "tea", engines)
    assert outcome.status is Status.FAILED and "qwenpipe login --account a" in outcome.message
    assert not acc.router.history and acc.calls("b") == []
    acc.chats["a"].enqueue_check(answer())  # logged in again
    assert generate(acc.ws, "tea", acc.engines()).status is Status.DONE
    assert acc.sent("a") == 1 and acc.calls("b") == [] and acc.calls("c") == []


def test_generate_account_pins_a_first_send_and_names_the_accounts_when_unknown(project):
    acc = Accounts(project)
    add_prompt(project, "tea")
    add_prompt(project, "milk", "Write about milk.")
    assert generate(acc.ws, "tea", acc.engines(), account="c").account == "c"
    with pytest.raises(ConfigError, match="no account 'zz' .*a, b, c"):
        generate(acc.ws, "milk", acc.engines(), account="zz")
    acc.chats["b"].send_error = refused_before_typing("logged_out")
    outcome = generate(acc.ws, "milk", acc.engines(), account="b")
    assert acc.calls("a") == [] and acc.sent("c") == 1  # no other account took it
    assert outcome.engine == "router"


def test_a_pinned_account_with_its_quota_blocked_waits_for_it(project):
    acc = Accounts(project)
    write_config(
        project, BASE.replace("[qwen]", "[router]\nenabled = false\n[qwen]") + "[accounts.a]\n[accounts.b]\n"
    )
    acc.ws = open_workspace(load(project / "config.toml"))
    import time

    acc.ws.chat_quota.block(time.time(), 3600, "spent", account="b")
    add_prompt(project, "tea")
    outcome = generate(acc.ws, "tea", acc.engines(), account="b")
    assert outcome.status is Status.WORKING and outcome.reason == "quota"
    assert acc.calls("a") == [] and acc.calls("b") == []


def test_an_account_without_a_saved_login_is_skipped_without_a_browser(project):
    acc = Accounts(project)
    (project / ".qwenpipe" / "accounts" / "a" / "state.json").unlink()
    add_prompt(project, "tea")
    assert generate(acc.ws, "tea", acc.engines()).account == "b"
    assert acc.calls("a") == []


def test_an_old_marker_without_an_account_resumes_as_default(project, workspace, engines, chat):
    add_prompt(project, "tea")
    url = chat.send("Write about tea.")
    chat.history.clear()
    marker = {
        "time": 0.0,
        "pid": 1,
        "prompt_sha256": __import__("hashlib").sha256(b"Write about tea.").hexdigest(),
    }
    (project / "articles" / "tea.md.sending").write_text(json.dumps(marker) + "\n")
    outcome = generate(workspace, "tea", engines)
    assert outcome.account == "default" and outcome.chat_url == url and chat.sends == 1
    assert [(s.turn, s.account, s.chat_url) for s in workspace.store.sends("tea")] == [(1, "default", url)]


def test_a_cycle_groups_nothing_across_accounts_each_article_stays_with_its_sender(project):
    acc = Accounts(project, "[accounts.a]\nmax_sends_per_day = 2\n[accounts.b]\nmax_sends_per_day = 2\n")
    del acc.chats["c"]
    slugs = [f"p{i}" for i in range(4)]
    for slug in slugs:
        add_prompt(project, slug, f"Write about {slug}.")
    first = run_cycle(acc.ws, acc.engines())
    assert sorted(first.sent) == slugs and acc.sent("a") == 2 and acc.sent("b") == 2
    add_prompt(project, "p4", "Write about p4.")
    for chat in acc.chats.values():
        chat.enqueue_check(answer(), answer())
    second = run_cycle(acc.ws, acc.engines())
    assert sorted(second.finished) == slugs
    assert second.counts["throttled"] == 1  # p4: every account reached its own limit
    for slug in slugs:
        (first_send,) = acc.ws.store.sends(slug)
        checked_by = [n for n, c in acc.chats.items() if ("check", first_send.chat_url) in c.history]
        assert checked_by == [first_send.account]


def test_a_cycle_polls_each_accounts_chats_side_by_side_with_that_accounts_engines(project):
    acc = Accounts(project, names=("a", "b"))
    write_config(project, BASE.replace("[qwen]", "[qwen]\nconcurrency = 2") + "[accounts.a]\n[accounts.b]\n")
    acc.ws = open_workspace(load(project / "config.toml"))
    for slug in ("p0", "p1", "p2", "p3"):
        add_prompt(project, slug, f"Write about {slug}.")
    for i, slug in enumerate(("p0", "p1", "p2", "p3")):
        generate(acc.ws, slug, acc.engines(), account="ab"[i % 2])
    said = []
    report = run_cycle(acc.ws, acc.engines(), say=said.append)
    assert report.counts["generating"] == 4, said
    assert not [line for line in said if "one at a time" in line], said
    for name in ("a", "b"):
        chat = acc.chats[name]
        assert len(chat.attached) == 2  # two poll threads of its own
        checked = {url for call, url in chat.history if call == "check"}
        assert checked == {
            s.chat_url
            for slug in ("p0", "p1", "p2", "p3")
            for s in acc.ws.store.sends(slug)
            if s.account == name
        }


def test_status_shows_each_articles_account_and_a_line_per_account(project):
    from pipeline.batch.dashboard import plain_status, plain_story
    from pipeline.batch.status import collect, collect_story

    acc = Accounts(
        project, "[accounts.a]\n[accounts.b]\nmax_sends_per_day = 4\n[accounts.c]\nenabled = false\n"
    )
    add_prompt(project, "tea")
    add_prompt(project, "milk", "Write about milk.")
    generate(acc.ws, "tea", acc.engines(), account="b")
    document = collect(acc.ws).to_json()
    rows = {row["slug"]: row for row in document["articles"]}
    assert rows["tea"]["account"] == "b" and rows["milk"]["account"] is None
    by_name = {a["name"]: a for a in document["accounts"]}
    assert list(by_name) == ["a", "b", "c"]
    assert (by_name["b"]["sends_today"], by_name["b"]["limit"], by_name["c"]["enabled"]) == (1, 4, False)
    text = plain_status(collect(acc.ws))
    assert "ACCOUNT" in text.splitlines()[0]
    assert "account b: 1 sent today of 4 (100% of today's)" in text
    assert "account c: 0 sent today (0% of today's), disabled" in text
    assert "account: b" in plain_story(collect_story(acc.ws, "tea"), "tea")


def test_accounts_command_lists_login_sends_quota_and_enabled(project, capsys):
    import time

    from pipeline.cli.app import run

    acc = Accounts(
        project, "[accounts.a]\nmax_sends_per_day = 2\n[accounts.b]\nenabled = false\n", names=("a", "b")
    )
    add_prompt(project, "tea")
    generate(acc.ws, "tea", acc.engines())
    acc.ws.chat_quota.block(time.time(), 3600, "the site said so", account="a")
    assert run(["accounts", "--json", "--config", str(project / "config.toml")]) == 0
    accounts = json.loads(capsys.readouterr().out)["accounts"]
    a, b = accounts
    assert (a["name"], a["sends_today"], a["limit"], a["quota"]["blocked"]) == ("a", 1, 2, True)
    assert a["login"]["state_file"].endswith("accounts/a/state.json") and a["enabled"] is True
    assert (b["name"], b["enabled"], b["quota"]["blocked"]) == ("b", False, False)
    assert run(["accounts", "--config", str(project / "config.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["ACCOUNT", "ENABLED"]
    assert lines[1].split()[:2] == ["a", "yes"] and "1 of 2" in lines[1] and "spent until" in lines[1]
    assert lines[2].split()[:2] == ["b", "no"]


def account_trouble(code: str) -> HardError:
    return (
        QuotaSpent("daily limit reached", retry_after=3600) if code == "quota" else HardError(code, code=code)
    )


@pytest.mark.parametrize("code", sorted(ACCOUNT_REFUSALS))
def test_an_accounts_trouble_never_counts_against_a_sent_article_nor_dead_letters_it(project, code):
    """The finding of issue 36: a logged-out account burned the attempts of the articles it had
    sent, and dead-lettered them within max_attempts cycles. Every kind of account trouble."""
    acc = Accounts(project, "[router]\nenabled = false\n[accounts.a]\n[accounts.b]\n", ("a", "b"))
    add_prompt(project, "tea")
    engines = acc.engines()
    assert generate(acc.ws, "tea", engines).account == "a"
    for _ in range(acc.ws.config.qwen.max_attempts + 2):
        acc.chats["a"].enqueue_check(account_trouble(code))
        _clear_block(acc, "a")  # a hold or block ends: the next run looks again
        outcome = generate(acc.ws, "tea", acc.engines())
        assert outcome.status is Status.FAILED and "its chat waits for account a" in outcome.message
    assert not (project / "articles" / "tea.md.failed").exists()
    record = acc.ws.store.article("tea")
    assert (
        record.hard_failures == 0 and "its chat waits for account a" in record.last_error
    )  # status shows it
    assert acc.calls("b") == [] and not acc.router.history  # the chat stays with its account
    acc.chats["a"].enqueue_check(answer())
    assert generate(acc.ws, "tea", acc.engines()).status is Status.DONE


@pytest.mark.parametrize("code", sorted(ACCOUNT_REFUSALS))
def test_an_accounts_trouble_at_a_send_is_not_counted_against_the_article(project, code):
    acc = Accounts(project, "[router]\nenabled = false\n[accounts.a]\n", ("a",))
    add_prompt(project, "tea")
    for _ in range(acc.ws.config.qwen.max_attempts + 2):
        acc.chats["a"].send_error = account_trouble(code)
        # Met before anything was typed: a send the site may have taken is in doubt instead,
        # looked at again, not sent (tests/unit/test_in_doubt.py).
        acc.chats["a"].send_error.nothing_sent = True
        _clear_block(acc, "a")
        outcome = generate(acc.ws, "tea", acc.engines())
        assert outcome.status is Status.FAILED, outcome.message
    assert not (project / "articles" / "tea.md.failed").exists()
    assert acc.ws.store.article("tea").hard_failures == 0


def _clear_block(acc: Accounts, name: str) -> None:
    """Whatever block or hold the last run left on `name` ends now (as if its time passed)."""
    from pipeline.store.protocol import QuotaBlock

    with acc.ws.store.transaction() as tx:
        tx.block_quota(QuotaBlock(name, until=time.time() - 1, reason="over", since=time.time() - 2))
