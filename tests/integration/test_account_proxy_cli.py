"""A proxy per account ([browser] proxy, [accounts.NAME] proxy): that account's browser goes out
through it, others do not, and its password is shown nowhere. A real forward proxy on loopback
(tests/proxy_server.py) counts what reaches the simulator through it."""

from __future__ import annotations

import json

import pytest
from proxy_server import ForwardProxy
from sim_project import add_accounts, make_project, prompt, read_article
from tests_cli_helpers import qwenpipe_in_process

from pipeline.simulator import Simulator

# Its projects launch their own browser (tests/sim_project.py):
# a proxy is a launch option (attached, the user's Chrome has its own).
OWN_BROWSER = True

pytestmark = pytest.mark.browser

PASSWORD = "s3cret-Proxy-Pass"


@pytest.fixture(scope="module")
def sim():
    with Simulator(
        port=0, answer_seconds=0.0, thinking_seconds=0.0, url_delay=0.1, accounts=("p", "d")
    ).start() as server:
        yield server


@pytest.fixture
def proxy():
    with ForwardProxy("alice", PASSWORD) as server:
        yield server


def site(sim) -> str:
    return sim.base_url.split("://", 1)[1].rstrip("/")


def leaks(*results) -> list[str]:
    return [r.args[-1] for r in results if PASSWORD in r.stdout + r.stderr]


def test_the_account_with_a_proxy_goes_through_it_and_the_other_does_not(sim, proxy, tmp_path):
    project = make_project(tmp_path, sim)
    states = add_accounts(project, ["d"])
    states |= add_accounts(project, ["p"], proxy=proxy.url("alice", PASSWORD))
    for name, state in states.items():
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps(sim.login_state(name)))
    direct = prompt(project, "direct", "Write an article about tea, sent directly.")
    proxied = prompt(project, "proxied", "Write an article about tea, sent through the proxy.")

    first = qwenpipe_in_process("generate", "direct", "--account", "d", "--wait", cwd=project)
    assert first.returncode == 0, first.stderr
    assert proxy.relayed(site(sim)) == 0 and proxy.refused == 0, "the account without a proxy used it"

    second = qwenpipe_in_process("generate", "proxied", "--account", "p", "--wait", cwd=project)
    assert second.returncode == 0, second.stderr
    assert proxy.relayed(site(sim)) >= 3, proxy.counts  # the page, its scripts, its API calls
    assert proxy.refused >= 1  # it asked for the login, and the browser gave it
    assert read_article(project / "articles" / "proxied.md")[0]["account"] == "p"
    sent = {e["prompt"]: e.get("account") for e in sim.ledger()}
    assert sent[proxied] == "p" and sent[direct] == "d"

    status = qwenpipe_in_process("status", "--json", cwd=project)
    accounts = qwenpipe_in_process("accounts", cwd=project)
    assert not leaks(first, second, status, accounts)


def test_the_one_account_of_browser_proxy_goes_through_it(sim, proxy, tmp_path):
    project = make_project(tmp_path, sim)
    config = project / "config.toml"
    config.write_text(
        config.read_text().replace("[browser]\n", f'[browser]\nproxy = "{proxy.url("alice", PASSWORD)}"\n')
    )
    (project / "state.json").write_text(json.dumps(sim.login_state("p")))
    prompt(project, "tea", "Write an article about tea through the default account's proxy.")
    result = qwenpipe_in_process("generate", "tea", "--wait", cwd=project)
    assert result.returncode == 0, result.stderr
    assert proxy.relayed(site(sim)) >= 3, proxy.counts
    assert not leaks(result)


def test_a_proxy_that_refuses_the_login_is_a_failure_that_never_shows_the_password(sim, tmp_path):
    with ForwardProxy("alice", "another-password") as proxy:
        project = make_project(tmp_path, sim, router=False)
        config = project / "config.toml"
        config.write_text(
            config.read_text().replace(
                "[browser]\n", f'[browser]\nproxy = "{proxy.url("alice", PASSWORD)}"\n'
            )
        )
        prompt(project, "tea", "Write an article about tea through a proxy that refuses us.")
        result = qwenpipe_in_process("generate", "tea", cwd=project)
        assert result.returncode in (1, 3), result.stderr
        assert proxy.relayed(site(sim)) == 0 and proxy.refused >= 1
        assert not leaks(result)


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_doctor_checks_each_accounts_proxy_and_never_shows_a_password(sim, proxy, tmp_path):
    project = make_project(tmp_path, sim)
    states = add_accounts(project, ["p"], proxy=proxy.url("alice", PASSWORD))
    add_accounts(project, ["q"], proxy=proxy.url("alice", "wrong-" + PASSWORD), enabled=False)
    add_accounts(project, ["r"], proxy=f"http://bob:{PASSWORD}@127.0.0.1:{_closed_port()}", enabled=False)
    add_accounts(project, ["d"], enabled=False)
    states["p"].parent.mkdir(parents=True, exist_ok=True)
    states["p"].write_text(json.dumps(sim.login_state("p")))
    doctor = qwenpipe_in_process("doctor", "--json", cwd=project)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["proxy (p)"]["status"] == "ok", checks["proxy (p)"]
    assert "(user alice)" in checks["proxy (p)"]["detail"]
    assert checks["proxy (q)"]["status"] == "fail" and "refuses the login" in checks["proxy (q)"]["detail"]
    assert checks["proxy (r)"]["status"] == "fail" and "cannot connect" in checks["proxy (r)"]["detail"]
    assert "proxy (d)" not in checks
    assert checks["login (p)"]["status"] == "ok", checks["login (p)"]
    assert proxy.tunnels[site(sim)] == 1  # doctor's own look through p's proxy (q's was refused)
    assert proxy.relayed(site(sim)) > 1  # and p's chat page opened through it
    text = qwenpipe_in_process("doctor", cwd=project)
    assert "proxy (q)" in text.stdout
    assert not leaks(doctor, text)


def test_a_cycle_sends_and_polls_through_the_accounts_proxy(sim, proxy, tmp_path):
    project = make_project(tmp_path, sim)
    states = add_accounts(project, ["p"], proxy=proxy.url("alice", PASSWORD))
    add_accounts(project, ["d"], enabled=False)
    states["p"].parent.mkdir(parents=True, exist_ok=True)
    states["p"].write_text(json.dumps(sim.login_state("p")))
    for number in range(3):
        prompt(project, f"c{number}", f"Write article {number} about tea through a cycle and a proxy.")
    results = []
    for _ in range(8):
        results.append(qwenpipe_in_process("cycle", cwd=project))
        assert results[-1].returncode in (0, 3, 42), results[-1].stderr
        if results[-1].returncode == 0:
            break
    assert results[-1].returncode == 0, [r.returncode for r in results]
    assert all(read_article(project / "articles" / f"c{n}.md")[0]["account"] == "p" for n in range(3))
    assert proxy.relayed(site(sim)) >= 3 and proxy.tunnels[site(sim)] == 0
    results.append(qwenpipe_in_process("status", cwd=project))
    results.append(qwenpipe_in_process("log", cwd=project))
    assert not leaks(*results)
    written = b"".join(p.read_bytes() for p in (project / "articles").rglob("*") if p.is_file())
    assert PASSWORD.encode() not in written
