"""A batch shared by two hosts through a real PostgreSQL server (issue 18): real processes, real
Chromium, one simulator with accounts a and b; each host its own folder, host_id and account.
(The three-host run and the chaos over hosts are tests/integration/test_hosts.py and
tests/chaos; these are the contract's own rules, each once.)"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from sim_project import add_accounts, make_project, prompt, read_article, senders
from tests_cli_helpers import qwenpipe_in_process

from pipeline.exitcodes import ExitCode
from pipeline.store.postgres import PostgresStore
from pipeline.store.protocol import Intent

# Its projects launch their own browser (tests/sim_project.py), the headless shell: each host
# signs its account in through a saved login (the full chromium's launch: tests/setup).
OWN_BROWSER = True

pytestmark = pytest.mark.browser

SIMULATOR = {"answer_seconds": 0.3, "thinking_seconds": 0.1, "url_delay": 0.1, "accounts": ("a", "b")}


def host(tmp_path, sim, url: str, name: str, account: str, *, router: bool = True, extra: str = ""):
    project = make_project(tmp_path / name, sim, router=router, headless_shell=True)
    states = add_accounts(project, [account])
    states[account].parent.mkdir(parents=True, exist_ok=True)
    states[account].write_text(json.dumps(sim.login_state(account)))
    with open(project / "config.toml", "a", encoding="utf-8") as config:
        config.write(f'\n[store]\nurl = "{url}"\nhost_id = "{name}"\nlease_seconds = 30\n{extra}')
    return project


@pytest.fixture
def batch(sim, postgres_server, tmp_path):
    sim.set(clear_accounts=True)
    url = postgres_server.new_database()
    first = host(tmp_path, sim, url, "h1", "a")
    second = host(tmp_path, sim, url, "h2", "b")
    init = qwenpipe_in_process("store", "init", cwd=first)
    assert init.returncode == ExitCode.DONE, init.stderr
    return sim, url, first, second, len(sim.ledger())


def same_prompts(projects, count: int) -> dict[str, str]:
    texts = {}
    for i in range(count):
        for project in projects:
            texts[f"p{i}"] = prompt(project, f"p{i}", f"Write article {i} about shared batches.")
    return texts


def test_two_hosts_send_each_prompt_once_and_every_host_gets_every_article(batch):
    sim, url, first, second, start = batch
    texts = same_prompts([first, second], 4)
    # h1 sends two (its cycle limit), h2 the other two; then each collects its own chats only
    for project in (first, second):
        text = (project / "config.toml").read_text()
        (project / "config.toml").write_text(text.replace("[qwen]\n", "[qwen]\nmax_sends_per_cycle = 2\n", 1))
    codes = {}
    for _ in range(6):
        for project in (first, second):
            result = qwenpipe_in_process("cycle", cwd=project)
            assert result.returncode in (0, 3, 42), result.stderr
            codes[project.name] = result.returncode
        if set(codes.values()) == {0}:
            break
    assert set(codes.values()) == {0}, codes
    taken = senders(sim, start)
    assert {text: len(taken.get(text, [])) for text in texts.values()} == dict.fromkeys(texts.values(), 1)
    assert Counter(a for (a,) in taken.values()) == {"a": 2, "b": 2}
    assert sim.affinity_violations() == 0
    for project in (first, second):
        assert qwenpipe_in_process("sync", cwd=project).returncode == ExitCode.DONE
        for slug, text in texts.items():
            meta, _ = read_article(project / "articles" / f"{slug}.md")
            assert meta["account"] == taken[text][0], (project.name, slug)
    documents = {(first / "articles" / f"{s}.md").read_text() for s in texts}
    assert documents == {(second / "articles" / f"{s}.md").read_text() for s in texts}
    status = json.loads(qwenpipe_in_process("status", "--json", cwd=second).stdout)
    hosts = {row["slug"]: (row["host"], row["account"]) for row in status["articles"]}
    assert sorted(hosts.values()) == [("h1", "a"), ("h1", "a"), ("h2", "b"), ("h2", "b")]


def test_a_host_never_looks_at_another_hosts_chat_nor_sends_its_prompt(batch):
    sim, url, first, second, start = batch
    same_prompts([first, second], 1)
    sim.set(answer_seconds=600)  # h1's chat stays generating
    assert qwenpipe_in_process("generate", "p0", cwd=first).returncode == ExitCode.QUEUED
    result = qwenpipe_in_process("generate", "p0", cwd=second)
    assert result.returncode == ExitCode.WORKING, result.stderr
    assert "account a, which host h1 serves" in result.stderr
    assert (second / "articles" / "p0.md.url").exists()  # h2's face shows the batch's send
    cycle = qwenpipe_in_process("cycle", cwd=second)
    assert cycle.returncode == ExitCode.WORKING and "1 in progress elsewhere" in cycle.stderr, cycle.stderr
    assert len(senders(sim, start)) == 1 and sim.affinity_violations() == 0


def test_an_article_leased_by_another_host_is_left_alone(batch):
    sim, url, first, second, start = batch
    same_prompts([first], 1)
    with PostgresStore(url) as store:
        assert store.claim_lease("p0", "h2:999:abcd", 300, time.time())
    result = qwenpipe_in_process("generate", "p0", cwd=first)
    assert result.returncode == ExitCode.WORKING and "in progress on h2" in result.stderr, result.stderr
    assert senders(sim, start) == {}


def test_an_unreachable_store_sends_nothing_and_says_so(batch, tmp_path):
    sim, url, first, second, start = batch
    same_prompts([first], 1)
    config = first / "config.toml"
    config.write_text(config.read_text().replace(url.rsplit("/", 1)[0], "postgresql://postgres@127.0.0.1:9"))
    result = qwenpipe_in_process("cycle", cwd=first)
    assert result.returncode == ExitCode.WORKING, result.stderr
    assert "store unreachable" in result.stderr and "Traceback" not in result.stderr
    assert senders(sim, start) == {} and not (first / "articles" / "p0.md.url").exists()


def test_an_orphaned_chat_goes_to_the_router_and_status_says_why_first(batch):
    sim, url, first, second, start = batch
    same_prompts([first], 1)
    long_ago = time.time() - 7 * 3600
    with PostgresStore(url) as store, store.transaction() as tx:  # sent by account z of host h9, gone
        tx.record_intent("p0", Intent(1, long_ago, "x" * 64, "z", 1, "h9:1:abcd"))
        tx.record_sent("p0", 1, f"{sim.base_url}/c/0b5e1c3a-0000-4000-8000-00000000dead", long_ago)
        tx.serve("h9", ["z"], long_ago)
    status = json.loads(qwenpipe_in_process("status", "--json", cwd=first).stdout)
    (row,) = status["articles"]
    assert (row["host"], row["account"]) == ("h9", "z")
    assert "not been served for store.orphan_hours = 6 h" in row["last_error"]
    result = qwenpipe_in_process("generate", "p0", cwd=first)
    assert result.returncode == ExitCode.DONE, result.stderr
    meta, _ = read_article(first / "articles" / "p0.md")
    assert meta["engine"] == "router"
    assert senders(sim, start) == {} and sim.affinity_violations() == 0


def test_a_host_that_joins_with_a_chat_in_flight_gives_the_batch_its_send(batch):
    sim, url, first, second, start = batch
    same_prompts([first, second], 1)
    config = first / "config.toml"
    shared = config.read_text()
    config.write_text(shared.split("\n[store]")[0])  # h1 on its own first (its SQLite store)
    sim.set(answer_seconds=600)
    assert qwenpipe_in_process("generate", "p0", cwd=first).returncode == ExitCode.QUEUED
    config.write_text(shared)
    joined = qwenpipe_in_process("sync", cwd=first)
    assert joined.returncode == ExitCode.DONE and "gave it 1 of this host's" in joined.stderr, joined.stderr
    result = qwenpipe_in_process("generate", "p0", cwd=second)
    assert result.returncode == ExitCode.WORKING and "account a, which" in result.stderr, result.stderr
    assert len(senders(sim, start)) == 1 and sim.affinity_violations() == 0


def test_a_cycle_plans_around_articles_another_host_holds(batch):
    sim, url, first, second, start = batch
    texts = same_prompts([first], 3)
    config = first / "config.toml"
    config.write_text(config.read_text().replace("[qwen]\n", "[qwen]\nmax_sends_per_cycle = 1\n", 1))
    sim.set(answer_seconds=600)
    with PostgresStore(url) as store:  # h2 is on p0 (the oldest): h1's one send is the next one
        assert store.claim_lease("p0", "h2:999:abcd", 300, time.time())
    result = qwenpipe_in_process("cycle", cwd=first)
    assert result.returncode == ExitCode.QUEUED, result.stderr
    assert "1 sent" in result.stderr and "in progress elsewhere" in result.stderr, result.stderr
    assert list(senders(sim, start)) == [texts["p1"]]
