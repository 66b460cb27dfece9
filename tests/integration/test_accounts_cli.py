"""Several accounts end to end: real processes, real Chromium (one browser, a context per
account), the simulator with accounts a, b, c (each its own chats, chat list and quota; a chat
asked for by another account is CHAT_NOT_FOUND and counted as an affinity violation)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from sim_project import add_accounts, journal, make_project, prompt, read_article, senders
from tests_cli_helpers import qwenpipe_in_process

from pipeline.simulator import Simulator
from pipeline.wiring import open_sqlite

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def sim():
    with Simulator(
        port=0, answer_seconds=0.0, thinking_seconds=0.0, url_delay=0.1, accounts=("a", "b", "c")
    ).start() as server:
        yield server


@pytest.fixture
def fresh(sim):
    sim.set(clear_accounts=True)
    start = len(sim.ledger())
    yield sim, start


def signed_in(sim, states: dict, *names: str) -> None:
    for name in names or states:
        states[name].parent.mkdir(parents=True, exist_ok=True)
        states[name].write_text(json.dumps(sim.login_state(name)))


def cycles_until_done(project, most: int = 12) -> list[int]:
    codes = []
    for _ in range(most):
        result = qwenpipe_in_process("cycle", cwd=project)
        codes.append(result.returncode)
        assert result.returncode in (0, 3, 42), result.stderr
        if result.returncode == 0:
            break
    return codes


def test_three_accounts_one_spent_one_logged_out_every_article_by_its_sender_once(fresh, tmp_path):
    sim, start = fresh
    project = make_project(tmp_path, sim)
    # c (logged out) and b (one send left) come first: rotation must pass over them, never back
    states = add_accounts(project, ["c", "b", "a"])
    signed_in(sim, states)
    sim.set(log_out="c", account_quotas={"b": 1})
    texts = {
        f"p{i:02d}": prompt(project, f"p{i:02d}", f"Write article {i} about accounts.") for i in range(12)
    }
    codes = cycles_until_done(project)
    assert codes[-1] == 0, codes
    taken = senders(sim, start)
    assert {text: len(taken.get(text, [])) for text in texts.values()} == dict.fromkeys(texts.values(), 1)
    assert Counter(a for (a,) in taken.values()) == {"b": 1, "a": 11}
    assert sim.affinity_violations() == 0
    for slug, text in texts.items():
        meta, _ = read_article(project / "articles" / f"{slug}.md")
        assert meta["engine"] == "qwen" and meta["account"] == taken[text][0], slug
    ends = [e for e in journal(project) if e["event"] == "cycle_end"]
    assert all(e["browser_launches"] <= 1 for e in ends), [e["browser_launches"] for e in ends]
    with open_sqlite(project / "articles" / ".qwenpipe") as store:
        assert {s.slug: s.account for s in store.sends()} == {
            slug: taken[text][0] for slug, text in texts.items()
        }
        assert store.quota_block("b", 0) is not None and store.quota_block("a", 0) is None


def test_a_logged_out_account_with_chats_in_flight_makes_them_wait_then_they_finish(fresh, tmp_path):
    sim, start = fresh
    project = make_project(tmp_path, sim)
    states = add_accounts(project, ["a", "b"])
    signed_in(sim, states)
    texts = [prompt(project, f"w{i}", f"Write article {i} about waiting.") for i in range(2)]
    assert qwenpipe_in_process("cycle", cwd=project).returncode == 42  # spread: w0 to a, w1 to b
    sim.set(log_out="a")
    waiting = qwenpipe_in_process("cycle", cwd=project)
    assert waiting.returncode == 1, waiting.stderr  # failed: its chat waits for account a
    assert "qwenpipe login --account a" in waiting.stderr
    assert not (project / "articles" / "w0.md").exists()
    signed_in(sim, states, "a")
    assert cycles_until_done(project)[-1] == 0
    assert senders(sim, start) == {texts[0]: ["a"], texts[1]: ["b"]}  # a's chat never moved to b
    assert sim.affinity_violations() == 0
    for i, name in enumerate("ab"):
        meta, _ = read_article(project / "articles" / f"w{i}.md")
        assert meta["engine"] == "qwen" and meta["account"] == name


def test_generate_account_pins_the_first_send_and_an_unknown_name_is_exit_2(fresh, tmp_path):
    sim, start = fresh
    project = make_project(tmp_path, sim)
    states = add_accounts(project, ["a", "b", "c"])
    signed_in(sim, states)
    text = prompt(project, "tea", "Write about pinned tea.")
    unknown = qwenpipe_in_process("generate", "tea", "--account", "zz", cwd=project)
    assert unknown.returncode == 2 and "a, b, c" in unknown.stderr
    assert not (project / "articles" / "tea.md.sending").exists() and senders(sim, start) == {}
    assert qwenpipe_in_process("generate", "tea", "--account", "c", cwd=project).returncode == 42
    assert qwenpipe_in_process("generate", "tea", "--account", "c", "--wait", cwd=project).returncode == 0
    assert senders(sim, start) == {text: ["c"]} and sim.affinity_violations() == 0
    meta, _ = read_article(project / "articles" / "tea.md")
    assert meta["account"] == "c"


def test_an_old_intent_marker_without_an_account_resumes_as_default(fresh, tmp_path):
    sim, start = fresh
    # no [accounts.*]: [browser]'s login is `default`, the saved login its own browser loads
    project = make_project(tmp_path, sim, own_browser=True)
    (project / "state.json").write_text(json.dumps(sim.login_state("a")))
    text = prompt(project, "old", "Write about an old marker.")
    assert qwenpipe_in_process("generate", "old", cwd=project).returncode == 42
    article = project / "articles"
    (article / "old.md.url").unlink()  # as the version before accounts left a crash after the click:
    marker = {"time": 0.0, "pid": 1, "prompt_sha256": __import__("hashlib").sha256(text.encode()).hexdigest()}
    (article / "old.md.sending").write_text(json.dumps(marker) + "\n")  # a marker without account,
    with open_sqlite(article / ".qwenpipe") as store, store.transaction() as tx:
        tx.forget_sends("old")  # and no sends in the store
    resumed = qwenpipe_in_process("generate", "old", "--wait", cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    assert senders(sim, start) == {text: ["a"]}  # found in the chat list, not sent again
    meta, _ = read_article(article / "old.md")
    assert meta["account"] == "default" and meta["engine"] == "qwen"
