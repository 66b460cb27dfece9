"""Crash injection: SIGKILL `generate` and `cycle` at every step boundary and at random moments.

    .venv/bin/python tests/chaos/chaos.py --trials 500 [--seed 7] [--jobs 1] [--accounts 3]

Each trial makes a fresh project against ONE long-lived simulator (real subprocesses, real
Chromium), kills one or more commands, either at a named crash point (QWENPIPE_CRASH_AT) or
after a random delay, then re-runs `cycle` / `generate` without crashes until every prompt is
done, and checks what the contract promises:

- the simulator accepted each prompt at most once (its ledger), and a prompt the chat took is
  never also paid for through the router;
- each article is complete: the chat's exact answer (sim.expected_answer), or a router article
  (engine = "router") for the prompts whose send the chat refused (`[sim:slider]`,
  `[sim:punish_page]`, `[sim:quota]`);
- no article is missing and none is dead-lettered;
- the store's count of the day's sends (what `qwen.max_sends_per_day` limits) is the number of
  sends the simulator accepted, per account with `--accounts`;
- no `.qwenpipe-tmp-*` file is left: a killed writer's leftover may stay until a cycle cleans files
  older than 300 s, so the check ages the leftovers (os.utime, as if 400 s had passed), runs
  one more cycle and requires them gone; before that it checks a leftover is never read as an
  article by the batch scan;
- every complete journal line parses, except torn lines from mid_journal kills (at most one
  per such kill), and `status --json` still reads it all.

A share of the trials (chaos_common.site_fault) also has the site slow to show a new chat (a
read-after-write lag of 1-5 s: the chat reads as not found and is not listed): a recovery or a
poll in that window proves nothing and must not send again nor hand the article to the router.

A share of the trials has chats that vanish while the commands are killed (never shown, though
the site took their prompts): such a prompt may reach the site again only after a recorded
`recovery_lost` (counted once, as the rules say), or its article may be the router's; nothing
else. And a share is twinned: a second workspace on the same login (its profile and saved
login) sends the first prompt's text while the first workspace's send is interrupted; neither
may adopt the other's chat, and each article must be its own chat's answer.

With `--accounts N` the simulator has N accounts and each trial's config.toml N
`[accounts.NAME]` tables, each signed in with `qwenpipe login --account NAME --import` of the
simulator's login_state; the last account may send only SMALL_QUOTA prompts a day. Then also:
each chat article names in its front matter the account the ledger says sent it, and no chat is
ever read, sent into or stopped by another account (the simulator's affinity violations, 0).

The quick CI version is tests/chaos/test_chaos_quick.py; docs/reliability.md quotes long runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
if str(TESTS) not in sys.path:  # run as a script: make tests/ importable (sim_project)
    sys.path.insert(0, str(TESTS))

import chaos_common  # noqa: E402
import tests_cli_helpers  # noqa: E402
from sim_project import add_accounts, make_project  # noqa: E402

NAMED = ("before_send", "after_naming", "after_send", "mid_article", "mid_journal", "after_router")
KINDS = (*NAMED, "random")
# The chat refuses the send: the router writes it. The bot check is the slider of the site since
# autumn 2026 (the page stays; its reply proves nothing was taken), or the page that answers the
# send and leaves the chat for the puzzle at once (the reply that moved it proves the same). The
# older verification page navigates away with its JSON reply, and qwenpipe then counts the send
# as possibly taken.
ROUTER_TOKENS = ("[sim:slider]", "[sim:quota]", "[sim:punish_page]")
TOPICS = ("green tea", "sourdough", "tide pools", "bicycle gears", "paper maps", "night trains")
COMMAND_TIMEOUT = 120
CLEAN_DEADLINE = 150  # seconds of crash-free re-runs before an article counts as lost
TEMP_PREFIX = ".qwenpipe-tmp-"  # files.TMP_PREFIX
STALE_AGE = 400  # older than files.clean_stale_temporaries' 300 s
# The router simulator's answers are short; the word minimum is not what these trials test.
ARTICLE_SECTION = "\n[article]\nmin_words = 0\n"
SMALL_QUOTA = 2  # sends a day of the last account with --accounts: it runs out in the first trials
TWIN_SHARE = 0.15  # of the trials without router prompts: a second workspace sends the same text
TWIN_SLUG = "twin"
TWIN_DEADLINE = 60  # seconds of crash-free cycles for the twin's one article


@dataclass
class Trial:
    """One trial's plan and findings. `problems` lists every broken promise in words."""

    index: int
    kind: str
    slugs: dict[str, str] = field(default_factory=dict)  # slug -> prompt text
    router_slugs: set[str] = field(default_factory=set)
    quota: bool = (
        False  # a `[sim:quota]` or `[sim:slider]` prompt: the account stops, the router may write all
    )
    kills: Counter = field(default_factory=Counter)  # crash point (or "random") -> SIGKILLs
    runs: int = 0
    duplicates: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    temp_left: list[str] = field(default_factory=list)  # leftovers after the final runs
    temp_from_kills: int = 0  # leftovers seen before ageing (allowed, cleaned by the cycle)
    torn_lines: int = 0
    unreadable_lines: int = 0  # complete lines that do not parse beyond the torn allowance
    recovered: int = 0
    router_articles: int = 0
    orphans: int = 0  # processes of a killed command still alive after it died
    count_mismatches: list[str] = field(default_factory=list)  # the day's sends unlike the site's
    site_fault: dict = field(default_factory=dict)  # the simulator's fault (read_lag, vanish_chats)
    twin: Path | None = None  # the second workspace on the same login (sends the first text)
    vanished: int = 0  # sends the site took into chats it never shows
    resent: int = 0  # sends again after a recorded recovery_lost of a vanished chat
    started_at: float = 0.0  # wall clock: the day whose sends are counted
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def qwenpipe_env(crash_at: str = "") -> dict[str, str | None]:
    """What a chaos run's command is started with over the test's environment: no config of the
    caller's, and this crash point or none."""
    return {"QWENPIPE_CONFIG": None, "QWENPIPE_CRASH_AT": crash_at or None}


def start(args: list[str], project: Path, crash_at: str = "") -> subprocess.Popen:
    # Own session: what a killed command leaves behind (its browser) can be found by group id.
    return tests_cli_helpers.spawn(
        *args,
        cwd=project,
        env=qwenpipe_env(crash_at),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(process: subprocess.Popen, *, kill_after: float | None = None) -> tuple[int, str, bool]:
    """(exit code, stderr, killed by us). Kills the process after `kill_after` s if still running."""
    killed = False
    if kill_after is not None:
        try:
            process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            killed = True
    try:
        _out, err = process.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        _out, err = process.communicate()
        # The problem line shows the last line only: say there what the command was doing.
        err = f"{err or ''}\n(chaos: killed after the command timeout; it last said: {last_line(err)})"
    return process.returncode, err or "", killed


def reap_group(process: subprocess.Popen) -> int:
    """SIGKILL whatever is left of a killed command's process group (its browser, its driver):
    only processes this runner started. Returns how many were still there."""
    pgid = process.pid
    alive = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive += 1
        except (OSError, ValueError, IndexError):
            continue
    if alive:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return alive


def qwenpipe(args: list[str], project: Path, *, crash_at: str = "", kill_after: float | None = None):
    process = start(args, project, crash_at)
    code, err, killed = finish(process, kill_after=kill_after)
    orphans = reap_group(process) if code == -signal.SIGKILL else 0
    return code, err, killed, orphans


def articles_dir(project: Path) -> Path:
    return project / "articles"


def done(project: Path, slugs) -> bool:
    return all((articles_dir(project) / f"{slug}.md").exists() for slug in slugs)


def pick_command(rng: random.Random, trial: Trial, project: Path) -> list[str]:
    pending = [s for s in sorted(trial.slugs) if not (articles_dir(project) / f"{s}.md").exists()]
    if trial.kind == "after_router" and trial.router_slugs and rng.random() < 0.5:
        pending = sorted(trial.router_slugs) or pending
    roll = rng.random()
    if roll < 0.45 or not pending:
        return ["cycle"]
    slug = rng.choice(pending)
    return ["generate", slug, "--wait"] if roll < 0.65 else ["generate", slug]


def plan_trial(index: int, rng: random.Random, kind: str | None = None, max_prompts: int = 3) -> Trial:
    kind = kind or rng.choice(KINDS)
    trial = Trial(index=index, kind=kind)
    nonce = f"{index}-{rng.getrandbits(32):08x}"  # the chat list must never match an older trial
    count = rng.randint(1, max_prompts)
    with_router = kind == "after_router" or rng.random() < 0.15
    for number in range(count):
        topic = rng.choice(TOPICS)
        text = f"Write a short piece on {topic} (chaos trial {nonce}, prompt {number})."
        slug = f"t{index}-p{number}"
        if with_router and number == 0:
            token = rng.choice(ROUTER_TOKENS)
            text = f"{text} {token}"
            trial.router_slugs.add(slug)
            # A spent quota stops every chat send; so does a bot check, which holds the account
            # for qwen.bot_check_pause hours (the router writes what comes after it).
            trial.quota = True
        trial.slugs[slug] = text
    if not with_router and rng.random() < TWIN_SHARE:
        trial.twin = Path(f"t{index:04d}-twin")  # made under the run's root by run_trial
    return trial


def run_trial(
    sim,
    root: Path,
    index: int,
    rng: random.Random,
    kind: str | None = None,
    max_prompts: int = 3,
    site_faults: bool = True,
) -> Trial:
    """Plan, break, heal and check one trial in `root/tNNNN`."""
    started = time.monotonic()
    trial = plan_trial(index, rng, kind, max_prompts)
    trial.started_at = time.time()
    # killed: its own browser
    project = make_project(
        root / f"t{index:04d}", sim, extra=chaos_common.LOST_CHAT_AFTER, own_browser=True, headless_shell=True
    )
    with open(project / "config.toml", "a", encoding="utf-8") as config:
        config.write(ARTICLE_SECTION)
    for slug, text in trial.slugs.items():
        (project / "prompts" / f"{slug}.md").write_text(text, encoding="utf-8")
    sim.set(url_delay=round(rng.uniform(0.05, 1.5), 2))
    trial.site_fault = chaos_common.site_fault(rng)
    if not site_faults:  # the quick CI runs: kills alone (chaos_common.quick_run)
        trial.site_fault, trial.twin = {}, None
    if trial.twin:
        first = trial.slugs[min(trial.slugs)]
        if sim.accounts:  # the first account's login, as `qwenpipe login --account` keeps it
            login = project / ".qwenpipe" / "accounts" / sim.accounts[0]
            login = {"profile": login / "profile", "state": login / "state.json", "account": sim.accounts[0]}
        else:
            login = {"profile": project / "profile", "state": project / "state.json"}
        trial.twin = make_twin(root / trial.twin, sim, first, **login)
    try:
        sign_in_accounts(trial, project, sim)
        # The fault through the kills (and the crash-free runs, but a vanishing); alone on the site.
        with chaos_common.SITE_FAULTS.held(sim, trial.site_fault):
            break_it(trial, project, rng)
            sim.set(**chaos_common.while_healing(trial.site_fault))
            if trial.twin:
                heal_twin(trial)
            heal(trial, project, rng)
        check(trial, project, sim)
    except Exception as error:  # a broken runner must show up as a problem, not a silent pass
        trial.problems.append(f"runner error: {type(error).__name__}: {error}")
    trial.seconds = time.monotonic() - started
    return trial


def make_twin(folder: Path, sim, text: str, *, profile: Path, state: Path, account: str = "") -> Path:
    """A second workspace on another's login (its `profile` and saved login `state`, as two
    workspaces of one person on one machine share them; `account`: under [accounts.NAME], else
    [browser]), with `text` as its one prompt (TWIN_SLUG)."""
    twin = make_project(
        folder, sim, extra=chaos_common.LOST_CHAT_AFTER, own_browser=True, headless_shell=True
    )
    config = twin / "config.toml"
    settings = config.read_text(encoding="utf-8") + ARTICLE_SECTION
    if not account:
        settings = settings.replace('profile_dir = "profile"', f'profile_dir = "{profile}"')
        settings = settings.replace('storage_state = "state.json"', f'storage_state = "{state}"')
    config.write_text(settings, encoding="utf-8")
    if account:
        add_accounts(twin, [account], profile_dir=str(profile), storage_state=str(state))
    (twin / "prompts" / f"{TWIN_SLUG}.md").write_text(text, encoding="utf-8")
    return twin


def heal_twin(trial: Trial) -> None:
    """The twin's crash-free cycles, between the first workspace's kills and its own healing:
    its send comes while the first's may be interrupted (a marker with no chat named)."""
    deadline = time.monotonic() + TWIN_DEADLINE
    while time.monotonic() < deadline:
        code, err, _killed, _orphans = qwenpipe(["cycle"], trial.twin)
        trial.runs += 1
        if code not in (0, 3, 42) or "Traceback" in err:
            trial.problems.append(f"twin: cycle exit {code}: {last_line(err)}")
            return
        if code == 0 and (articles_dir(trial.twin) / f"{TWIN_SLUG}.md").exists():
            return
        time.sleep(0.2)
    trial.problems.append(f"twin: no article after {TWIN_DEADLINE} s of cycles")


def sign_in_accounts(trial: Trial, project: Path, sim) -> None:
    """With simulator accounts: a table for each in config.toml, each signed in the way a user
    does on a server (`qwenpipe login --account NAME --import FILE`)."""
    if not sim.accounts:
        return
    add_accounts(project, sim.accounts)
    for name in sim.accounts:
        login = project / f"login-{name}.json"
        login.write_text(json.dumps(sim.login_state(name)), encoding="utf-8")
        code, err, _killed, _orphans = qwenpipe(["login", "--account", name, "--import", login.name], project)
        if code != 0:
            trial.problems.append(f"login --account {name} --import exit {code}: {last_line(err)}")


def break_it(trial: Trial, project: Path, rng: random.Random) -> None:
    """Run commands with the crash armed until one was killed (sometimes two): at most 5 runs, or
    up to 10 while none was (a kill at a random moment may come after a short command ended)."""
    wanted_kills = 2 if rng.random() < 0.25 else 1
    kills = 0
    for run in range(10):
        if done(project, trial.slugs) or (run >= 5 and kills):
            break
        command = pick_command(rng, trial, project)
        if trial.kind == "random":
            code, err, killed, orphans = qwenpipe(command, project, kill_after=rng.uniform(0.2, 4.5))
        else:
            code, err, killed, orphans = qwenpipe(command, project, crash_at=trial.kind)
            killed = code == -signal.SIGKILL
        trial.runs += 1
        trial.orphans += orphans
        if killed:
            trial.kills[trial.kind] += 1
            kills += 1
            if kills >= wanted_kills:
                break
        elif code not in (0, 3, 42):
            trial.problems.append(f"{' '.join(command)} (crash armed) exit {code}: {last_line(err)}")
        if "Traceback" in err:
            trial.problems.append(f"{' '.join(command)}: traceback: {last_line(err)}")
        time.sleep(rng.uniform(0, 0.8))  # let answers grow, so mid_article has a finished one


def heal(trial: Trial, project: Path, rng: random.Random) -> None:
    """Crash-free `cycle` (and now and then `generate`) until every prompt is done."""
    deadline = time.monotonic() + CLEAN_DEADLINE
    while time.monotonic() < deadline:
        command = ["cycle"] if rng.random() < 0.7 else pick_command(rng, trial, project)
        code, err, _killed, _orphans = qwenpipe(command, project)
        trial.runs += 1
        if code not in (0, 3, 42) or "Traceback" in err:
            trial.problems.append(f"{' '.join(command)} exit {code}: {last_line(err)}")
            if code in (1, 2) or "Traceback" in err:
                return
        if "not sending again" in err:
            trial.recovered += 1
        if done(project, trial.slugs) and command == ["cycle"] and code == 0:
            return
        time.sleep(0.2)


def check(trial: Trial, project: Path, sim) -> None:
    out = articles_dir(project)
    hidden = chaos_common.hidden_chats(sim)
    twin_chat = twin_chat_id(trial, sim)
    # The twin's send is its own (checked by check_twin): the first workspace's are the rest.
    sends = [entry for entry in sim.sends() if entry["chat_id"] != twin_chat]
    senders = {entry["prompt"]: entry["account"] for entry in sends}
    lost = recovery_lost(project)
    given_back: list[dict] = []  # vanished sends the store gave back before sending again
    for slug, text in sorted(trial.slugs.items()):
        mine = [entry for entry in sends if entry["prompt"] == text]
        vanished, back = chaos_common.vanished_sends(mine, hidden, lost[slug])
        trial.vanished += len(vanished)
        trial.resent += len(back)
        given_back += back
        if len(mine) - len(back) > 1:
            trial.duplicates.append(slug)
            trial.problems.append(
                f"{slug}: the chat took the prompt {len(mine)} times "
                f"({len(vanished)} into chats it never showed, {lost[slug]} recorded as lost)"
            )
        article = out / f"{slug}.md"
        if (out / f"{slug}.md.failed").exists():
            trial.problems.append(f"{slug}: dead-lettered: {(out / f'{slug}.md.failed').read_text()!r}")
        if not article.exists():
            trial.lost.append(slug)
            trial.problems.append(f"{slug}: no article after the crash-free runs")
            continue
        for leftover in (f"{slug}.md.sending",):
            if (out / leftover).exists():
                trial.problems.append(f"{slug}: {leftover} left beside the finished article")
        # A spent quota or a bot check stops the chat; a chat never shown is the router's.
        router_ok = slug in trial.router_slugs or trial.quota or bool(vanished)
        shown = len(mine) - len(vanished)
        problem = article_problem(article, slug, text, sim, shown, router_ok, senders.get(text))
        if problem:
            trial.wrong.append(slug)
            trial.problems.append(f"{slug}: {problem}")
        elif slug in trial.router_slugs:
            trial.router_articles += 1
    counted = [entry for entry in sends if entry not in given_back]
    check_send_counts(trial, project, sim, counted)
    check_twin(trial, [out], sim, twin_chat)
    check_journal(trial, project)
    check_temporaries(trial, project)


def recovery_lost(project: Path) -> Counter:
    from pipeline.wiring import open_sqlite

    with open_sqlite(articles_dir(project) / ".qwenpipe") as store:
        return chaos_common.recovery_lost(store)


def twin_chat_id(trial: Trial, sim) -> str | None:
    """The chat the twin's article names (its one send), or None without a twin or article."""
    if not trial.twin:
        return None
    from pipeline.engines.qwen.api import chat_id_from_url

    url = articles_dir(trial.twin) / f"{TWIN_SLUG}.md.url"
    try:
        return chat_id_from_url(url.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def check_twin(trial: Trial, folders: list[Path], sim, twin_chat: str | None) -> None:
    """The twin's article is its own chat's answer, sent once and counted once, and the other
    workspaces (their articles `folders`) never adopted it (no `.md.url` names the twin's chat)."""
    if not trial.twin:
        return
    first_slug = min(trial.slugs)
    text = trial.slugs[first_slug]
    if twin_chat is None:
        trial.problems.append("twin: no chat named in twin.md.url")
        return
    theirs = [e for e in sim.sends() if e["chat_id"] == twin_chat]
    article = articles_dir(trial.twin) / f"{TWIN_SLUG}.md"
    problem = article_problem(article, TWIN_SLUG, text, sim, len(theirs), False, theirs[0]["account"])
    if problem:
        trial.wrong.append(TWIN_SLUG)
        trial.problems.append(f"twin: {problem}")
    for folder in folders:
        ours = folder / f"{first_slug}.md.url"
        if ours.exists() and twin_chat in ours.read_text(encoding="utf-8"):
            trial.problems.append(f"{first_slug} in {folder}: adopted the twin workspace's chat {twin_chat}")
    from pipeline.wiring import open_sqlite

    with open_sqlite(articles_dir(trial.twin) / ".qwenpipe") as store:
        problem = chaos_common.send_count_problem(
            store, trial.started_at, theirs, per_account=bool(sim.accounts)
        )
    if problem:
        trial.count_mismatches.append(f"twin: {problem}")
        trial.problems.append(f"twin: {problem}")


def check_send_counts(trial: Trial, project: Path, sim, sends: list[dict]) -> None:
    from pipeline.wiring import open_sqlite

    texts = set(trial.slugs.values())
    accepted = [entry for entry in sends if entry["prompt"] in texts]
    with open_sqlite(articles_dir(project) / ".qwenpipe") as store:
        problem = chaos_common.send_count_problem(
            store, trial.started_at, accepted, per_account=bool(sim.accounts)
        )
    if problem:
        trial.count_mismatches.append(problem)
        trial.problems.append(problem)


def article_problem(
    article: Path, slug: str, text: str, sim, accepted: int, router_ok: bool, sender: str | None = None
) -> str:
    """What is wrong with the article ("" when nothing); `sender`: the account the ledger says
    took the prompt (with simulator accounts the chat article must name it)."""
    raw = article.read_text(encoding="utf-8")
    if not raw.startswith("+++\n") or "\n+++\n" not in raw[4:]:
        return "the article has no front matter"
    head, body = raw[4:].split("\n+++\n", 1)
    try:
        meta = tomllib.loads(head)
    except tomllib.TOMLDecodeError as err:
        return f"the front matter is not TOML: {err}"
    if meta.get("slug") != slug:
        return f"front matter slug {meta.get('slug')!r}"
    if meta.get("engine") == "qwen":
        if body.strip() != sim.expected_answer(text).strip():
            return "the body is not the chat's answer (incomplete or swapped)"
        if accepted != 1:
            return f"a chat article, but the chat took the prompt {accepted} times"
        if sim.accounts and meta.get("account") != sender:
            return f"front matter account {meta.get('account')!r}, but the ledger's sender is {sender!r}"
        return ""
    if meta.get("engine") == "router":
        if not router_ok:
            return "written by the router although the chat could serve it"
        if accepted:
            return "paid twice: the chat took the prompt and the router wrote it"
        if not body.strip():
            return "the router article is empty"
        return ""
    return f"unknown engine {meta.get('engine')!r}"


def check_journal(trial: Trial, project: Path) -> None:
    from pipeline.wiring import open_sqlite

    # The journal is in the store: a kill inside a step (mid_journal) leaves nothing of it, so
    # there is no torn line to allow for; every event must read back.
    trial.torn_lines = trial.unreadable_lines = 0
    with open_sqlite(articles_dir(project) / ".qwenpipe") as store:
        events = [e.event for e in store.events()]
    if "cycle_end" not in events:
        trial.problems.append("journal: no cycle_end from the final cycle")
    status = tests_cli_helpers.qwenpipe("status", "--json", cwd=project, env=qwenpipe_env(), timeout=60)
    if status.returncode != 0:
        trial.problems.append(f"status --json exit {status.returncode}: {last_line(status.stderr)}")
    else:
        totals = json.loads(status.stdout).get("totals", {})
        if totals.get("total") != len(trial.slugs):
            trial.problems.append(f"status --json counts {totals.get('total')} articles: {totals}")


def temporaries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob(f"{TEMP_PREFIX}*") if p.is_file())


def check_temporaries(trial: Trial, project: Path) -> None:
    out = articles_dir(project)
    leftovers = temporaries(out)
    trial.temp_from_kills = len(leftovers)
    if leftovers and not sum(trial.kills.values()):
        trial.problems.append(f"temporary files without any kill: {[p.name for p in leftovers]}")
    from pipeline.batch.scan import scan

    known = {view.slug for view in scan(project / "prompts", out)}
    if known != set(trial.slugs):
        trial.problems.append(f"the batch scan sees {sorted(known)}: a leftover read as an article?")
    # As if 400 s had passed: the next cycle must remove what the killed writers left.
    aged = time.time() - STALE_AGE
    for path in leftovers:
        os.utime(path, (aged, aged))
    code, err, _killed, _orphans = qwenpipe(["cycle"], project)
    if code != 0:
        trial.problems.append(f"final cycle exit {code}: {last_line(err)}")
    trial.temp_left = [str(p.relative_to(out)) for p in temporaries(out)]
    if trial.temp_left:
        trial.problems.append(f"temporary files left after a cycle: {trial.temp_left}")


def last_line(text: str) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


@dataclass
class Summary:
    trials: list[Trial] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False  # Ctrl-C: the table covers the trials that completed
    accounts: int = 0
    # Requests for a chat made by another account, over the whole run (the simulator counts
    # them; with trials side by side they cannot be told apart by trial).
    affinity_violations: int = 0

    def add(self, trial: Trial) -> None:
        self.trials.append(trial)

    @property
    def kills(self) -> Counter:
        total = Counter()
        for trial in self.trials:
            total.update(trial.kills)
        return total

    def total(self, name: str) -> int:
        return sum(len(v) if isinstance(v := getattr(t, name), list) else v for t in self.trials)

    @property
    def failed(self) -> list[Trial]:
        return [t for t in self.trials if not t.ok]

    @property
    def broken(self) -> bool:
        """A promise broken anywhere: in a trial, or the affinity of a chat to its account."""
        return bool(self.failed or self.affinity_violations)

    def account_rows(self) -> list[tuple[str, int]]:
        return [("accounts", self.accounts), ("affinity violations", self.affinity_violations)]

    def site_fault_rows(self) -> list[tuple[str, int]]:
        """The rows of the site's faults (both runners' tables)."""
        return [
            (
                "trials with the site slow to show new chats",
                sum(bool(t.site_fault.get("read_lag")) for t in self.trials),
            ),
            (
                "trials with chats that vanish",
                sum(bool(t.site_fault.get("vanish_chats")) for t in self.trials),
            ),
            ("sends into chats never shown", self.total("vanished")),
            ("of those sent again after a recorded recovery_lost", self.total("resent")),
            ("trials with a second workspace on the same login", sum(bool(t.twin) for t in self.trials)),
            (
                "trials with the bot check as a page",
                sum(any("punish_page" in x for x in t.slugs.values()) for t in self.trials),
            ),
        ]

    def table(self) -> str:
        kills = self.kills
        rows = [
            ("trials", len(self.trials)),
            ("prompts", sum(len(t.slugs) for t in self.trials)),
            *((f"kills at {name}", kills[name]) for name in NAMED),
            ("kills at a random moment", kills["random"]),
            ("kills in all", sum(kills.values())),
            *self.site_fault_rows(),
            ("commands run", self.total("runs")),
            ("recoveries from the chat list", self.total("recovered")),
            ("router articles", self.total("router_articles")),
            ("duplicate sends found", self.total("duplicates")),
            ("articles lost", self.total("lost")),
            ("trials whose day's send count is not the site's", self.total("count_mismatches")),
            *(self.account_rows() if self.accounts else ()),
            ("articles wrong or incomplete", self.total("wrong")),
            ("temp files left by kills (aged, then cleaned)", self.total("temp_from_kills")),
            ("temp files left after the final cycle", self.total("temp_left")),
            ("torn journal lines (mid_journal kills)", self.total("torn_lines")),
            ("journal lines unreadable otherwise", self.total("unreadable_lines")),
            ("browser processes outliving a killed command", self.total("orphans")),
            *chaos_common.closing_rows(self),
        ]
        return chaos_common.table(rows)

    def problems(self) -> str:
        return "\n".join(f"trial {t.index} ({t.kind}): {p}" for t in self.failed for p in t.problems)


def run(
    trials: int,
    *,
    seed: int = 0,
    root: Path,
    jobs: int = 1,
    answer_seconds: float = 0.8,
    max_prompts: int = 3,
    progress=None,
    site_faults: bool = True,
    accounts: int = 0,
) -> Summary:
    """Run `trials` trials against one simulator; kinds cycle through every crash point first.
    `accounts`: that many chat accounts (0: the one account of a setup without tables)."""
    names = tuple(f"acct{n}" for n in range(1, accounts + 1))

    def set_up(sim) -> None:
        if len(names) > 1:
            sim.set(account_quotas={names[-1]: SMALL_QUOTA})

    def trial_of(sim, index: int, rng: random.Random) -> Trial:
        kind = KINDS[index % len(KINDS)] if index < 2 * len(KINDS) else None
        return run_trial(sim, root, index, rng, kind, max_prompts, site_faults=site_faults)

    return chaos_common.run_trials(
        Summary(accounts=accounts),
        trials,
        seed=seed,
        jobs=jobs,
        answer_seconds=answer_seconds,
        accounts=names,
        trial_of=trial_of,
        progress=progress,
        set_up=set_up,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    chaos_common.add_run_arguments(
        parser, jobs_help="trials at once (one simulator for all)", answer_seconds=0.8, max_prompts=3
    )
    chaos_common.add_keep_argument(parser)
    parser.add_argument("--accounts", type=int, default=0, help="chat accounts (0: no [accounts.*] tables)")
    args = parser.parse_args(argv)

    def kills(trial: Trial) -> str:
        return ",".join(f"{k}x{v}" for k, v in trial.kills.items()) or "no kill"

    return chaos_common.run_and_report(
        args, run, name="chaos", kind_width=12, details=kills, accounts=args.accounts
    )


if __name__ == "__main__":
    sys.exit(main())
