"""Several hosts over one PostgreSQL batch (issue 18), for the three-host test and the multi-host
chaos runner: each host is a project folder of its own (the same prompts, its own `articles/`,
its own account and `host_id`) whose `[store] url` names one shared database, and each of its
commands runs in a process group of its own (chaos.start), as cron on a separate machine would.

What is checked comes from outside qwenpipe: the simulator's ledger (what the site took, from
which account), its affinity counter, the database's rows, each host's files after `sync`, and
`status --json`. `findings` says in words every promise broken.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
if str(HERE / "chaos") not in sys.path:  # the process pieces (own session, reaping) are chaos.py's
    sys.path.insert(0, str(HERE / "chaos"))

import tomli_w  # noqa: E402
from chaos import article_problem, finish, last_line, qwenpipe_env, reap_group, start  # noqa: E402
from chaos_common import vanished_sends  # noqa: E402
from sim_project import add_accounts, make_project  # noqa: E402
from sockets import port_of, tcp_sockets  # noqa: E402
from tests_cli_helpers import qwenpipe  # noqa: E402

ACCOUNTS = ("a", "b", "c")  # one simulator account per host
STORE_UNREACHABLE = "store unreachable"  # what a command says (stderr) when the database is down
OK_CODES = (0, 3, 42)  # a cycle's codes when nothing broke (done, working, queued)


@dataclass(frozen=True)
class Host:
    host_id: str
    account: str
    project: Path

    @property
    def articles(self) -> Path:
        return self.project / "articles"


def make_hosts(
    root: Path,
    sim,
    url: str,
    prompts: dict[str, str],
    *,
    accounts=ACCOUNTS,
    lease_seconds: float = 30,
    orphan_hours: float = 6,
    qwen: str = "",
    own_browser: bool | None = None,
    headless_shell: bool = False,
) -> list[Host]:
    """One project per account under `root` (h1, h2, ...), each with every prompt, its account
    signed in (the simulator's login state where `[accounts.NAME]` keeps it) and `[store]`
    naming the shared database; `qwen`: more `[qwen]` lines; `own_browser` and `headless_shell`:
    see make_project."""
    hosts = []
    for number, account in enumerate(accounts, 1):
        host = Host(f"h{number}", account, root / f"h{number}")
        make_project(host.project, sim, extra=qwen, own_browser=own_browser, headless_shell=headless_shell)
        store = {
            "store": {
                "url": url,
                "host_id": host.host_id,
                "lease_seconds": lease_seconds,
                "orphan_hours": orphan_hours,
            },
            "article": {"min_words": 0},  # the router simulator's answers are short
        }
        with (host.project / "config.toml").open("a", encoding="utf-8") as config:
            config.write("\n" + tomli_w.dumps(store))
        state = add_accounts(host.project, [account])[account]
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps(sim.login_state(account)), encoding="utf-8")
        for slug, text in prompts.items():
            (host.project / "prompts" / f"{slug}.md").write_text(text, encoding="utf-8")
        hosts.append(host)
    return hosts


def run(host: Host, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """One command on a host, to its end (store init, sync, status)."""
    return qwenpipe(*args, cwd=host.project, env=qwenpipe_env(), timeout=timeout)


@dataclass
class Outcome:
    host: Host
    code: int
    stderr: str
    killed: bool = False  # by the runner (a deadline or a planned kill), not by a crash point
    orphans: int = 0  # processes of its group still alive after it died (reaped)


def start_cycles(hosts: list[Host], crash_at: dict[str, str] | None = None) -> dict[str, subprocess.Popen]:
    """`qwenpipe cycle` on every host at once, each in its own session (process group);
    `crash_at`: host_id -> the crash point armed in that host's cycle."""
    crash_at = crash_at or {}
    return {host.host_id: start(["cycle"], host.project, crash_at.get(host.host_id, "")) for host in hosts}


def finish_cycles(hosts: list[Host], running: dict[str, subprocess.Popen]) -> list[Outcome]:
    """Wait for every cycle started by start_cycles (chaos.finish's deadline: killed after it);
    what a dead command left in its group is reaped."""
    outcomes = []
    for host in hosts:
        process = running[host.host_id]
        code, err, killed = finish(process)
        orphans = reap_group(process) if code < 0 else 0
        outcomes.append(Outcome(host, code, err, killed, orphans))
    return outcomes


def cycle_round(hosts: list[Host], crash_at: dict[str, str] | None = None) -> list[Outcome]:
    """One cron tick on every host: their cycles overlap."""
    return finish_cycles(hosts, start_cycles(hosts, crash_at))


def stop_group(process: subprocess.Popen) -> None:
    """SIGSTOP a command's whole group (its browser too): a frozen VM."""
    os.killpg(process.pid, signal.SIGSTOP)


def continue_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def status(host: Host) -> dict:
    """`qwenpipe status --json` on a host (the whole batch, from the database); {} when it fails."""
    result = run(host, "status", "--json")
    if result.returncode != 0:
        return {"error": f"status --json exit {result.returncode}: {last_line(result.stderr)}"}
    return json.loads(result.stdout)


def done_count(document: dict) -> int:
    return int(document.get("totals", {}).get("done", 0))


# -- the database ---------------------------------------------------------------------------


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def db_rows(url: str) -> tuple[list[tuple], Counter]:
    """(every send row as (slug, turn, account, chat_url), `done` steps per slug) read straight
    from the database: what qwenpipe recorded, whatever its own reads say."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        sends = conn.execute("SELECT slug, turn, account, chat_url FROM sends ORDER BY slug, turn").fetchall()
        done = conn.execute("SELECT slug, count(*) FROM events WHERE event = 'done' GROUP BY slug").fetchall()
    return [tuple(row) for row in sends], Counter(dict(done))


def group_sockets(pgid: int) -> set[str]:
    """The socket inodes open in a process group (its connections to the database among them)."""
    inodes = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[2]) != pgid:
                continue
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except (OSError, ValueError, IndexError):
            continue
    return inodes


def local_ports(inodes: set[str]) -> set[int]:
    """The local TCP ports of these socket inodes (/proc/net/tcp, tcp6)."""
    return {port_of(columns[1]) for columns in tcp_sockets() if len(columns) > 9 and columns[9] in inodes}


def host_backends(server, url: str, process: subprocess.Popen, busy: bool = False) -> list[int]:
    """The server pids of the database connections that this host's command holds (`busy`:
    only those inside a statement or a transaction: mid-step)."""
    ports = local_ports(group_sockets(process.pid))
    return [
        pid
        for pid, port, state in server.backends(database_name(url))
        if port in ports and (not busy or state != "idle")
    ]


# -- the checks -----------------------------------------------------------------------------


@dataclass
class Findings:
    """What the ledger, the database and the hosts' files say; `problems` in words."""

    duplicates: list[str] = field(default_factory=list)  # slugs the site took more than once
    lost: list[str] = field(default_factory=list)  # slugs with no article on some host
    wrong: list[str] = field(default_factory=list)  # an article that is not what the ledger says
    done_twice: list[str] = field(default_factory=list)  # more than one `done` step in the database
    affinity_violations: int = 0
    problems: list[str] = field(default_factory=list)


def senders(sim, texts, since: int = 0, others: frozenset[str] = frozenset()) -> dict[str, list[dict]]:
    """Prompt text -> the ledger's accepted sends of it (from entry `since` on), but those into
    the chats `others` (another workspace's sends)."""
    wanted = set(texts)
    taken: dict[str, list[dict]] = {text: [] for text in wanted}
    for entry in sim.ledger()[since:]:
        if entry["accepted"] and entry["prompt"] in wanted and entry["chat_id"] not in others:
            taken[entry["prompt"]].append(entry)
    return taken


def check_hosts(
    hosts: list[Host],
    sim,
    url: str,
    prompts: dict[str, str],
    *,
    router_slugs=frozenset(),
    since: int = 0,
    affinity: bool = True,
    others: frozenset[str] = frozenset(),
    hidden: frozenset[str] = frozenset(),
    lost: Counter | None = None,
) -> Findings:
    """Every guarantee of issue 18 after the batch is finished and every host has synced:
    each prompt taken by the site at most once (exactly once unless the router wrote it), the
    database's send row names the ledger's account and chat, each article done once, present
    and the same on every host, its front matter account the ledger's sender; `status --json`
    shows every article done with its account and the host that holds that account; no chat
    read by an account that did not make it (`affinity`: the simulator's counter is for this
    run alone).

    `others`: chat ids another workspace outside the batch sent (left out); `hidden`: chats the
    site never shows, and `lost` (slug -> recorded recovery_lost steps): a prompt whose send
    vanished may have been sent again after a recorded loss, or its article be the router's."""
    found = Findings()
    taken = senders(sim, prompts.values(), since, others)
    host_of = {host.account: host.host_id for host in hosts}
    try:
        sends, done_steps = db_rows(url)
    except Exception as error:
        found.problems.append(f"the database cannot be read: {type(error).__name__}: {error}")
        sends, done_steps = [], Counter()
    rows, shown = {}, {}
    for slug, turn, account, chat_url in sends:
        rows.setdefault(slug, []).append((turn, account, chat_url))
    for slug, text in sorted(prompts.items()):
        vanished, given_back = vanished_sends(taken[text], hidden, (lost or Counter())[slug])
        if len(taken[text]) - len(given_back) > 1:
            found.duplicates.append(slug)
            accounts = [entry["account"] for entry in taken[text]]
            found.problems.append(
                f"{slug}: the site took the prompt {len(taken[text])} times (from {accounts}; "
                f"{len(vanished)} into chats it never showed, {len(given_back)} sent again after a "
                "recorded loss)"
            )
        elif not taken[text] and slug not in router_slugs:
            found.problems.append(f"{slug}: the site never took the prompt")
        accepted = [entry for entry in taken[text] if entry not in vanished]  # the sends it shows
        shown[text] = accepted
        routed = router_slugs | ({slug} if vanished else set())
        sender = accepted[0] if accepted else None
        recorded = rows.get(slug, [])
        if sender and [(r[0], r[1]) for r in recorded] != [(1, sender["account"])]:
            found.problems.append(
                f"{slug}: the database's sends {recorded}, the ledger's sender {sender['account']}"
            )
        elif sender and not recorded[0][2].rstrip("/").endswith("/c/" + sender["chat_id"]):
            found.problems.append(
                f"{slug}: the database's chat URL {recorded[0][2]!r}, the site's chat {sender['chat_id']}"
            )
        if done_steps[slug] > 1:
            found.done_twice.append(slug)
            found.problems.append(f"{slug}: {done_steps[slug]} `done` steps in the database")
        check_copies(found, hosts, sim, slug, text, accepted, sender, routed)
    check_status(found, hosts, prompts, shown, host_of)
    if affinity:
        found.affinity_violations = sim.affinity_violations()
        if found.affinity_violations:
            found.problems.append(
                f"{found.affinity_violations} chat request(s) by an account that did not make the chat"
            )
    return found


def check_copies(found: Findings, hosts, sim, slug, text, accepted, sender, router_slugs) -> None:
    """The article on every host: there, right (chaos.article_problem), and the same bytes."""
    copies = {}
    for host in hosts:
        article = host.articles / f"{slug}.md"
        if not article.exists():
            if slug not in found.lost:
                found.lost.append(slug)
            found.problems.append(f"{slug}: no article on {host.host_id} after sync")
            continue
        copies[host.host_id] = article.read_bytes()
        account = sender["account"] if sender else None
        problem = article_problem(article, slug, text, sim, len(accepted), slug in router_slugs, account)
        if problem:
            if slug not in found.wrong:
                found.wrong.append(slug)
            found.problems.append(f"{slug} on {host.host_id}: {problem}")
        sidecar = host.articles / f"{slug}.md.url"
        if sender and not sidecar.exists():
            found.problems.append(f"{slug} on {host.host_id}: no .md.url (sync writes every sent chat's)")
        elif sender and not sidecar.read_text().strip().rstrip("/").endswith("/c/" + sender["chat_id"]):
            found.problems.append(
                f"{slug} on {host.host_id}: its .md.url does not name the chat {sender['chat_id']}"
            )
    if len(set(copies.values())) > 1:
        if slug not in found.wrong:
            found.wrong.append(slug)
        found.problems.append(f"{slug}: the hosts' copies differ: {difference(copies)}")


def difference(copies: dict[str, bytes]) -> str:
    """Which front matter keys (or the body) differ between the hosts' copies of one article."""
    parsed = {}
    for host_id, raw in copies.items():
        try:
            head, body = raw.decode()[4:].split("\n+++\n", 1)
            parsed[host_id] = {**tomllib.loads(head), "(body)": body.strip()}
        except (ValueError, tomllib.TOMLDecodeError):
            parsed[host_id] = {"(front matter)": "unreadable"}
    keys = sorted({key for meta in parsed.values() for key in meta})
    differing = [k for k in keys if len({repr(meta.get(k)) for meta in parsed.values()}) > 1]
    return "; ".join(
        f"{k}: " + ", ".join(f"{h}={m.get(k)!r}"[:80] for h, m in sorted(parsed.items())) for k in differing
    )


def check_status(found: Findings, hosts, prompts, taken, host_of) -> None:
    """`status --json` on each host: the whole batch done, each article's account the sender's
    and its host the one holding that account."""
    for host in hosts:
        document = status(host)
        if "error" in document:
            found.problems.append(f"{host.host_id}: {document['error']}")
            continue
        total = document.get("totals", {}).get("total")
        if total != len(prompts) or done_count(document) != len(prompts):
            found.problems.append(f"{host.host_id}: status --json totals {document.get('totals')}")
        for article in document.get("articles", []):
            slug = article.get("slug")
            if slug not in prompts:
                found.problems.append(f"{host.host_id}: status --json lists {slug!r}, not a prompt")
                continue
            accepted = taken[prompts[slug]]
            if not accepted:
                continue
            account = accepted[0]["account"]
            shown = (article.get("account"), article.get("host"))
            if shown != (account, host_of[account]):
                found.problems.append(
                    f"{host.host_id}: status --json shows {slug} with (account, host) {shown}, "
                    f"the ledger's sender {account} on {host_of[account]}"
                )
