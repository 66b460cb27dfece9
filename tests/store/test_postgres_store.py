"""What only the PostgreSQL store has to prove (the shared suite, test_store_contract.py, runs on
it too): the schema is created and migrated only on request, an unreachable server or a
connection killed mid-step is "try later" with nothing written, and a password never shows."""

from __future__ import annotations

import socket
import threading

import psycopg
import pytest

from pipeline.store.pg_schema import SCHEMA_VERSION, SchemaMismatch, migrate
from pipeline.store.postgres import PostgresStore, shown_url
from pipeline.store.protocol import Event, Intent, StoreBusy, StoreUnreachable


@pytest.fixture
def url(postgres_server):
    return postgres_server.new_database()


def test_a_database_without_the_schema_is_refused_naming_store_init(url):
    with pytest.raises(SchemaMismatch, match=r"has no qwenpipe schema .*run `qwenpipe store init`"):
        PostgresStore(url)


def test_store_init_creates_the_schema_once_and_again_is_a_no_op(url):
    with psycopg.connect(url, autocommit=True) as conn:
        assert migrate(conn, "test") == (0, SCHEMA_VERSION)
        assert migrate(conn, "test") == (SCHEMA_VERSION, SCHEMA_VERSION)
    with PostgresStore(url) as store, store.transaction() as tx:
        tx.append(Event("a", "sending", 1.0))


def test_a_newer_schema_is_refused_naming_the_upgrade(url):
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn, "test")
        conn.execute("UPDATE qwenpipe_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaMismatch, match="newer than this qwenpipe knows.*upgrade qwenpipe"):
        PostgresStore(url)


def test_batches_in_one_database_never_see_each_others_rows(url):
    with PostgresStore(url, batch="one", migrate=True) as one, PostgresStore(url, batch="two") as two:
        with one.transaction() as tx:
            tx.append(Event("a", "sending", 1.0))
            tx.record_intent("a", Intent(1, 1.0, "sha", account="main"))
        with two.transaction() as tx:  # the same (slug, turn) in another batch is another send
            tx.record_intent("a", Intent(1, 2.0, "sha", account="main"))
        assert [e.slug for e in one.events()] == ["a"] and list(two.events()) == []
        assert [s.intent_at for s in two.sends()] == [2.0]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_server_is_try_later_and_never_shows_the_password():
    url = f"postgresql://qwen:s3cret@127.0.0.1:{_closed_port()}/batch"
    with pytest.raises(StoreUnreachable) as err:
        PostgresStore(url)
    assert isinstance(err.value, StoreBusy)  # the contract's "busy": exit 3, nothing sent
    assert "s3cret" not in str(err.value) and "qwen:[REDACTED]@127.0.0.1" in str(err.value)
    assert "unreachable" in str(err.value)
    assert shown_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_a_connection_killed_mid_step_writes_nothing_and_the_next_step_reconnects(url, postgres_server):
    store = PostgresStore(url, migrate=True)
    with store.transaction() as tx:
        tx.append(Event("a", "sending", 1.0))
    with pytest.raises(StoreUnreachable), store.transaction() as tx:
        tx.append(Event("a", "sent", 2.0, fields={"chat_url": "https://chat.qwen.ai/c/x"}))
        pid = tx._conn.info.backend_pid
        with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        tx.append(Event("a", "done", 3.0))
    assert [e.event for e in store.events()] == ["sending"]  # reconnected; the cut step is gone
    assert store.summaries()["a"].last_event == "sending"
    with store.transaction() as tx:
        tx.append(Event("a", "sent", 4.0))
    assert [e.event for e in store.events()] == ["sending", "sent"]
    store.close()


def test_a_batch_held_past_the_busy_timeout_is_busy_not_a_hang(url):
    holder = PostgresStore(url, migrate=True)
    waiter = PostgresStore(url, busy_timeout=0.2)
    inside, release = threading.Event(), threading.Event()

    def hold():
        with holder.transaction():
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(30)
        with pytest.raises(StoreBusy, match="another host holds the batch"), waiter.transaction() as tx:
            tx.append(Event("b", "sending", 1.0))
    finally:
        release.set()
        thread.join()
    assert [e.slug for e in holder.events()] == []
    holder.close()
    waiter.close()


def test_doctor_checks_the_shared_store_schema_and_whose_accounts_another_host_serves(
    tmp_path, postgres_server
):
    import time

    from project_files import write_config

    from pipeline.config import load
    from pipeline.setup.doctor import Report, check_store

    url = postgres_server.new_database()
    (tmp_path / "prompts").mkdir()
    write_config(tmp_path, f'[store]\nurl = "{url}"\nhost_id = "h1"\n[accounts.a]\n')
    config = load(str(tmp_path / "config.toml"))
    report = Report("test")
    check_store(report, config, time.time())
    (check,) = report.checks
    assert check.status == "fail" and "qwenpipe store init" in check.detail + check.fix
    PostgresStore.init(url)
    with PostgresStore(url) as store, store.transaction() as tx:
        tx.serve("h2", ["a"], time.time())
    report = Report("test")
    check_store(report, config, time.time())
    (check,) = report.checks
    assert check.status == "warn" and "a (host h2)" in check.detail, check.detail
