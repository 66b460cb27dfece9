"""Hostile files under articles/ and prompts/, through the real `qwenpipe` command line.

A symlink where qwenpipe keeps a file of its own is refused and its target left as it was; a
FIFO never hangs a run (each call has a subprocess timeout far below qwen.run_timeout); one bad
article is that article's problem and the rest of the batch goes on. No browser is needed: the
router engine (of the simulator) writes articles, and while the chat's quota is spent a cycle
sends through the router too.
"""

from __future__ import annotations

import json
import os
import stat
import time

import pytest
from sim_project import make_project, prompt
from tests_cli_helpers import qwenpipe, qwenpipe_in_process

QUICK = 30  # seconds: a FIFO that blocked a read would hang until qwen.run_timeout (30 min)


SIMULATOR = {"answer_seconds": 1.0, "thinking_seconds": 0.1, "url_delay": 0.1}  # conftest.py `sim`


@pytest.fixture
def project(sim, tmp_path):
    folder = make_project(tmp_path / "p", sim, extra="")
    (folder / "articles" / ".qwenpipe").mkdir()
    return folder


def state_dir(project):
    return project / "articles" / ".qwenpipe"


def spend_chat_quota(project):
    # While the chat's quota is spent, articles go to the router: a cycle without any browser.
    until = time.time() + 86400
    (state_dir(project) / "quota.json").write_text(json.dumps({"blocked_until": until, "reason": "test"}))


def run(*args, project):
    return qwenpipe_in_process(*args, cwd=project, timeout=QUICK)


def one_line(result) -> str:
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    return result.stderr


# -- 2. symlinks: refused, their targets untouched ---------------------------------------------


def test_a_symlinked_article_lock_is_refused_and_its_target_not_truncated(project, outside):
    prompt(project, "tea", "Write about tea.")
    lock = state_dir(project) / "locks" / "tea.lock"
    lock.parent.mkdir()
    lock.symlink_to(outside)
    result = run("generate", "tea", "--engine", "router", project=project)
    assert result.returncode == 1, result.stderr
    assert f"{lock} is a symlink" in one_line(result)
    assert outside.read_text() == "the user's own file\n"
    assert not (project / "articles" / "tea.md").exists()


def test_a_symlinked_cycle_lock_is_refused_and_its_target_not_truncated(project, outside):
    prompt(project, "tea", "Write about tea.")
    (state_dir(project) / "cycle.lock").symlink_to(outside)
    result = run("cycle", project=project)
    assert result.returncode == 1, result.stderr
    assert "cycle.lock is a symlink" in one_line(result)
    assert outside.read_text() == "the user's own file\n"


@pytest.mark.parametrize(
    ("name", "command", "said"),
    [
        ("locks/tea.lock", ("generate", "tea", "--engine", "router"), "tea.lock is a hard link"),
        ("cycle.lock", ("cycle",), "cycle.lock is a hard link"),
        ("qwenpipe.db-shm", ("cycle",), "qwenpipe.db-shm: a hard link"),
        ("qwenpipe.db", ("generate", "tea", "--engine", "router"), "qwenpipe.db: a hard link"),
    ],
)
def test_a_hard_linked_file_of_ours_is_refused_and_the_other_names_file_untouched(
    project, outside, name, command, said
):
    prompt(project, "tea", "Write about tea.")
    linked = state_dir(project) / name
    linked.parent.mkdir(exist_ok=True)
    os.link(outside, linked)
    outside.chmod(0o644)
    result = run(*command, project=project)
    assert result.returncode == 1, result.stderr
    assert said in one_line(result) and "2 names" in result.stderr
    assert outside.read_text() == "the user's own file\n" and stat.S_IMODE(outside.stat().st_mode) == 0o644
    assert not (project / "articles" / "tea.md").exists()


def test_a_symlinked_journal_gets_no_line_appended(project, outside, sim):
    prompt(project, "tea", "Write about tea (journal link).")
    (state_dir(project) / "journal.jsonl").symlink_to(outside)
    before = len(sim.router.ledger())
    for args in (("generate", "tea", "--engine", "router"), ("cycle",), ("status",)):
        result = run(*args, project=project)
        assert result.returncode == 1, (args, result.stderr)
        assert "journal.jsonl is a symlink" in one_line(result)
    assert outside.read_text() == "the user's own file\n"
    assert len(sim.router.ledger()) == before, "nothing was asked of the router"


@pytest.mark.parametrize("folder", [".qwenpipe", ".qwenpipe/state", ".qwenpipe/locks"])
def test_a_symlinked_state_folder_is_refused_and_nothing_lands_in_its_target(project, tmp_path, folder):
    prompt(project, "tea", "Write about tea.")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = project / "articles" / folder
    if folder == ".qwenpipe":
        link.rmdir()
    link.symlink_to(elsewhere, target_is_directory=True)
    commands = [("generate", "tea", "--engine", "router"), ("cycle",)]
    if folder != ".qwenpipe/locks":  # status reads nothing from locks/
        commands.append(("status",))
    for args in commands:
        result = run(*args, project=project)
        assert result.returncode == 1, (args, result.stderr)
        assert f"{link} is a symlink, not a folder" in one_line(result)
    assert list(elsewhere.iterdir()) == []


def test_a_symlinked_quota_record_is_refused_and_its_target_untouched(project, outside):
    prompt(project, "tea", "Write about tea.")
    (state_dir(project) / "quota.json").symlink_to(outside)
    for args in (("status",), ("cycle",)):
        result = run(*args, project=project)
        assert result.returncode == 1, result.stderr
        assert "quota.json is a symlink" in one_line(result)
    assert outside.read_text() == "the user's own file\n"


# -- 3. FIFOs never hang a run ----------------------------------------------------------------


def test_a_fifo_journal_is_refused_by_status_and_generate_without_hanging(project):
    prompt(project, "tea", "Write about tea.")
    fifo = state_dir(project) / "journal.jsonl"
    os.mkfifo(fifo)
    for args in (("status",), ("generate", "tea", "--engine", "router"), ("show", "tea")):
        result = run(*args, project=project)  # a hang raises TimeoutExpired
        assert result.returncode == 1, (args, result.stderr)
        assert f"{fifo} is a FIFO (named pipe), not a regular file" in one_line(result)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "left as it was"


def test_a_fifo_chat_url_makes_that_article_invalid_and_never_hangs(project):
    prompt(project, "tea", "Write about tea.")
    prompt(project, "coffee", "Write about coffee.")
    fifo = project / "articles" / "tea.md.url"
    os.mkfifo(fifo)
    generate = run("generate", "tea", project=project)
    assert generate.returncode == 1 and f"{fifo} is a FIFO" in one_line(generate)
    status = run("status", "--json", project=project)
    assert status.returncode == 0, status.stderr
    rows = {row["slug"]: row for row in json.loads(status.stdout)["articles"]}
    assert rows["tea"]["state"] == "invalid" and "tea.md.url is a FIFO" in rows["tea"]["last_error"]
    assert rows["coffee"]["state"] == "pending"


def test_a_fifo_prompt_file_is_a_bad_prompt_exit_2_without_hanging(project):
    os.mkfifo(project / "prompts" / "tea.md")
    result = run("generate", "tea", project=project)
    assert result.returncode == 2, result.stderr
    assert "tea.md is a FIFO (named pipe), not a prompt file" in one_line(result)


def test_a_fifo_config_file_is_a_bad_config_exit_2_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "config.toml")
    for args in (("status",), ("generate", "tea")):
        result = qwenpipe_in_process(*args, cwd=tmp_path, timeout=QUICK)
        assert result.returncode == 2, (args, result.stderr)
        assert "config.toml is a FIFO (named pipe), not a config file" in one_line(result)


def test_a_fifo_state_file_is_that_articles_problem_in_status_and_cycle(project):
    prompt(project, "tea", "Write about tea.")
    prompt(project, "coffee", "Write about coffee, the cycle goes on.")
    (state_dir(project) / "state").mkdir()
    fifo = state_dir(project) / "state" / "tea.json"
    os.mkfifo(fifo)
    spend_chat_quota(project)
    status = run("status", "--json", project=project)
    assert status.returncode == 0, status.stderr
    rows = {row["slug"]: row for row in json.loads(status.stdout)["articles"]}
    assert rows["tea"]["state"] == "invalid" and "tea.json is a FIFO" in rows["tea"]["last_error"]
    cycle = run("cycle", project=project)
    assert cycle.returncode == 1, cycle.stderr
    assert f"tea: skipped: {fifo} is a FIFO" in one_line(cycle)
    assert (project / "articles" / "coffee.md").is_file(), "the rest of the batch goes on"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# -- 11. one bad article is that article's problem -----------------------------------------


def test_a_dangling_article_symlink_is_reported_and_the_batch_goes_on(project, tmp_path):
    prompt(project, "tea", "Write about tea.")
    prompt(project, "coffee", "Write about coffee while tea is broken.")
    link = project / "articles" / "tea.md"
    link.symlink_to(tmp_path / "nowhere.md")
    spend_chat_quota(project)
    status = run("status", "--json", project=project)
    assert status.returncode == 0, status.stderr
    rows = {row["slug"]: row for row in json.loads(status.stdout)["articles"]}
    assert rows["tea"]["state"] == "invalid" and f"{link} is a symlink" in rows["tea"]["last_error"]
    assert rows["coffee"]["state"] == "quota"
    show = run("show", "tea", project=project)
    assert show.returncode == 0 and "invalid" in show.stdout, one_line(show)
    cycle = run("cycle", project=project)
    assert cycle.returncode == 1, cycle.stderr
    assert f"tea: skipped: {link} is a symlink" in one_line(cycle)
    assert (project / "articles" / "coffee.md").is_file()
    assert link.is_symlink() and not (tmp_path / "nowhere.md").exists(), "nothing written through it"


# -- 10. temporaries are ours alone ---------------------------------------------------------


def test_a_cycle_keeps_the_users_tmp_files_and_is_not_stopped_by_a_tmp_folder(project):
    articles = project / "articles"
    notes = articles / ".tmp-my-notes.txt"
    notes.write_text("mine")
    (articles / ".tmp-dir").mkdir()
    (articles / ".qwenpipe-tmp-x.md.abcd1234").mkdir()  # our shape, but a folder: not ours
    for path in (notes, articles / ".tmp-dir", articles / ".qwenpipe-tmp-x.md.abcd1234"):
        os.utime(path, (1_000_000, 1_000_000))
    result = run("cycle", project=project)
    assert result.returncode == 0, result.stderr
    assert notes.read_text() == "mine"
    assert (articles / ".tmp-dir").is_dir() and (articles / ".qwenpipe-tmp-x.md.abcd1234").is_dir()


# -- 14. setup problems are exit 1 with the fix, not internal errors -------------------------


def test_a_state_file_that_is_a_folder_is_a_setup_problem_exit_1(project):
    prompt(project, "tea", "Write about tea.")
    folder = state_dir(project) / "state" / "tea.json"
    folder.mkdir(parents=True)
    result = run("generate", "tea", "--engine", "router", project=project)
    assert result.returncode == 1, result.stderr
    assert f"{folder} is a folder, not a regular file" in one_line(result)
    assert "move it away or delete it" in result.stderr


def test_a_state_folder_that_is_a_file_is_a_setup_problem_exit_1(project):
    prompt(project, "tea", "Write about tea.")
    (state_dir(project) / "state").write_text("not a folder")
    result = run("generate", "tea", "--engine", "router", project=project)
    assert result.returncode == 1, result.stderr
    assert f"{state_dir(project) / 'state'} is a regular file, not a folder" in one_line(result)


# -- 4. private files are private --------------------------------------------------------------


def test_records_are_0600_in_a_0700_folder_and_the_article_follows_the_umask(project, sim):
    prompt(project, "tea", "Write about tea, privately.")
    old = os.umask(0o027)
    try:  # a process: the umask is read once, when qwenpipe starts (pipeline/files.py)
        result = qwenpipe("generate", "tea", "--engine", "router", cwd=project, timeout=QUICK)
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr

    def mode(path):
        return stat.S_IMODE(os.lstat(path).st_mode)

    state = state_dir(project)
    assert mode(project / "articles" / "tea.md") == 0o640, "the article follows the umask"
    for folder in (state, state / "locks"):
        assert mode(folder) == 0o700, folder
    private = [state / "qwenpipe.db", state / "locks" / "tea.lock"]
    assert all(mode(path) == 0o600 for path in private), {str(p): oct(mode(p)) for p in private}


def test_a_cycle_tightens_what_an_older_version_left_readable(project):
    prompt(project, "tea", "Write about tea.")
    state = state_dir(project)
    (state / "state").mkdir()
    made = {
        state / "journal.jsonl": "",
        state / "state" / "tea.json": "{}",
        project / "articles" / "tea.md.url": f"{project}/c/0123456789abcdef0123456789\n",
        project / "articles" / "tea.md.failed": 'reason = "x"\n',
    }
    for path, text in made.items():
        path.write_text(text)
        path.chmod(0o644)
    state.chmod(0o755)
    (state / "state").chmod(0o755)
    run("cycle", project=project)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "state").stat().st_mode) == 0o700
    assert {str(p): stat.S_IMODE(p.stat().st_mode) for p in made} == {str(p): 0o600 for p in made}


@pytest.mark.browser
def test_a_real_send_leaves_its_marker_and_chat_url_private(project, sim):
    text = prompt(project, "tea", "Write about tea, sent by the browser, kept private.")
    result = qwenpipe_in_process("generate", "tea", cwd=project, timeout=120)
    assert result.returncode == 42, result.stderr
    url = project / "articles" / "tea.md.url"
    assert stat.S_IMODE(url.stat().st_mode) == 0o600, "the chat URL is not for everyone"
    assert stat.S_IMODE(state_dir(project).stat().st_mode) == 0o700
    assert stat.S_IMODE((state_dir(project) / "locks" / "tea.lock").stat().st_mode) == 0o600
    assert [e["prompt"] for e in sim.sends()].count(text) == 1


@pytest.mark.browser
def test_a_symlinked_send_marker_stops_the_send_before_the_browser(project, sim, outside):
    text = prompt(project, "tea", "Write about tea, never sent through a link.")
    (project / "articles" / "tea.md.sending").symlink_to(outside)
    result = qwenpipe_in_process("generate", "tea", cwd=project, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "tea.md.sending is a symlink" in one_line(result)
    assert outside.read_text() == "the user's own file\n"
    assert text not in [e["prompt"] for e in sim.sends()]


@pytest.mark.browser
def test_a_symlinked_journal_stops_a_chat_send_before_its_marker(project, sim, outside):
    text = prompt(project, "tea", "Write about tea, with a journal that is a link.")
    (state_dir(project) / "journal.jsonl").symlink_to(outside)
    result = qwenpipe_in_process("generate", "tea", cwd=project, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "journal.jsonl is a symlink" in one_line(result)
    assert not (project / "articles" / "tea.md.sending").exists(), "no marker a later run must explain"
    assert text not in [e["prompt"] for e in sim.sends()]
    assert outside.read_text() == "the user's own file\n"


def test_a_fifo_saved_login_does_not_hang_status(project):
    prompt(project, "tea", "Write about tea.")
    os.mkfifo(project / "state.json")  # browser.storage_state in make_project's config
    result = run("status", project=project)
    assert result.returncode == 2, one_line(result)  # the path guard at load (config.check_paths)
    assert "browser.storage_state" in result.stderr and "a FIFO" in result.stderr
