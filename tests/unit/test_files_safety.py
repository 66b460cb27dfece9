"""files.py's care with what it finds on disk: no symlink followed, no FIFO blocked on, private
modes, temporaries of our own shape only, and setup errors named with their fix."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time

import pytest

from pipeline import files
from pipeline.cli import app as cli
from pipeline.contract.journal import Journal
from pipeline.errors import SetupProblem
from pipeline.files import FileLock, UnsafeFile
from pipeline.wiring import open_sqlite


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def finishes_quickly(call, seconds: float = 10.0):
    """Run `call` in a thread: a FIFO opened for reading blocks forever, and that must not happen."""
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            outcome["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{call} blocked"
    return outcome


def test_reading_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "journal.jsonl"
    os.mkfifo(fifo)
    outcome = finishes_quickly(lambda: files.read_bytes(fifo))
    assert isinstance(outcome.get("error"), UnsafeFile)
    assert str(outcome["error"]).startswith(f"{fifo} is a FIFO (named pipe), not a regular file")


def test_reading_through_a_symlink_is_refused_unless_asked(tmp_path, outside):
    link = tmp_path / "link"
    link.symlink_to(outside)
    with pytest.raises(UnsafeFile, match="is a symlink"):
        files.read_bytes(link)
    assert files.read_bytes(link, follow=True) == b"the user's own file\n"  # the user's own inputs (prompts)


def test_atomic_write_replaces_no_symlink_and_leaves_no_temporary(tmp_path, outside):
    link = tmp_path / "tea.md.url"
    link.symlink_to(outside)
    with pytest.raises(UnsafeFile, match="tea.md.url is a symlink"):
        files.atomic_write(link, "https://chat.qwen.ai/c/x\n")
    assert link.is_symlink() and outside.read_text() == "the user's own file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.txt", "tea.md.url"]


def test_a_lock_through_a_symlink_is_refused_and_does_not_truncate_the_target(tmp_path, outside):
    lock = tmp_path / "tea.lock"
    lock.symlink_to(outside)
    with pytest.raises(UnsafeFile, match="tea.lock is a symlink"):
        FileLock(lock, purpose="test").acquire()
    assert outside.read_text() == "the user's own file\n"


def test_journal_lines_never_go_through_a_symlink(tmp_path, outside):
    path = tmp_path / ".qwenpipe" / "journal.jsonl"
    path.parent.mkdir()
    path.symlink_to(outside)
    with pytest.raises(UnsafeFile):  # the store's first open reads the old journal: refused
        Journal(open_sqlite(path.parent)).append("tea", "sending")
    assert outside.read_text() == "the user's own file\n"


def test_remove_deletes_no_symlink(tmp_path, outside):
    link = tmp_path / "tea.md.sending"
    link.symlink_to(outside)
    with pytest.raises(UnsafeFile):
        files.remove(link)
    assert link.is_symlink()


def test_private_folders_are_0700_and_an_older_0755_is_tightened(tmp_path):
    old = tmp_path / "articles" / ".qwenpipe"
    old.mkdir(parents=True)
    old.chmod(0o755)
    (tmp_path / "articles").chmod(0o755)
    files.ensure_folder(old / "state")
    assert mode(old) == 0o700 and mode(old / "state") == 0o700
    assert mode(tmp_path / "articles") == 0o755, "the user's own folder is left as it is"


def test_the_store_that_holds_the_journal_is_0600(tmp_path):
    path = tmp_path / ".qwenpipe" / "journal.jsonl"
    path.parent.mkdir()
    with open_sqlite(path.parent) as store:
        Journal(store).append("tea", "sending")
    assert mode(path.parent / "qwenpipe.db") == 0o600


def test_atomic_write_is_private_unless_shared(tmp_path):
    files.atomic_write(tmp_path / "record.json", "{}")
    files.atomic_write(tmp_path / "tea.md", "+++\n+++\n", mode=files.SHARED)
    assert mode(tmp_path / "record.json") == 0o600
    assert mode(tmp_path / "tea.md") == 0o666 & ~files.UMASK


@pytest.mark.parametrize("write", ["atomic_write", "create_new"])
def test_both_writers_give_a_private_file_0600_exactly_whatever_the_umask(tmp_path, write):
    old = os.umask(0o277)  # a umask that would take the owner's write bit
    try:
        getattr(files, write)(tmp_path / "record.json", "{}", mode=files.PRIVATE)
    finally:
        os.umask(old)
    assert mode(tmp_path / "record.json") == 0o600
    assert not list(tmp_path.glob(f"{files.TMP_PREFIX}*"))


def test_stale_temporaries_of_our_shape_go_and_nothing_else(tmp_path):
    ours = tmp_path / f"{files.TMP_PREFIX}tea.md.ab12cd34"
    mine = [tmp_path / ".tmp-my-notes.txt", tmp_path / f"{files.TMP_PREFIX}notes"]  # not our shape
    folder = tmp_path / f"{files.TMP_PREFIX}dir.ab12cd34"
    link = tmp_path / f"{files.TMP_PREFIX}link.ab12cd34"
    for path in (ours, *mine):
        path.write_text("x")
    folder.mkdir()
    link.symlink_to(mine[0])
    for path in (ours, *mine, folder):
        os.utime(path, (1_000_000, 1_000_000))
    assert files.clean_stale_temporaries(tmp_path) == [ours]
    assert all(p.exists() for p in mine) and folder.is_dir() and link.is_symlink()


def test_the_temporary_name_atomic_write_uses_is_the_shape_the_sweep_removes(tmp_path, monkeypatch):
    seen = []
    real = files.os.replace

    def spy(source, target):
        seen.append(os.path.basename(source))
        real(source, target)

    monkeypatch.setattr(files.os, "replace", spy)
    files.atomic_write(tmp_path / "tea.md", "text")
    assert len(seen) == 1 and files.TMP_RE.fullmatch(seen[0]), seen


def test_a_folder_we_may_not_write_is_a_setup_problem_with_the_fix(project, monkeypatch, capsys):
    real_open = os.open

    def refuse(path, *args, **kwargs):
        if os.path.basename(path).startswith(files.TMP_PREFIX):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(files.os, "open", refuse)  # root ignores chmod: refuse like EACCES
    code = cli.run(["cycle"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "cannot write" in err and "Permission denied" in err
    assert "give this user read and write access" in err
    assert "internal error" not in err


def test_setup_problems_are_exit_1_not_internal_errors(project, capsys):
    (project / "articles" / ".qwenpipe").write_text("a file where the state folder belongs")
    code = cli.run(["status"])
    err = capsys.readouterr().err
    assert code == 1 and "is a regular file, not a folder" in err and "internal error" not in err
    assert issubclass(UnsafeFile, SetupProblem)


def test_lock_owner_of_a_fifo_is_read_without_blocking(tmp_path):
    fifo = tmp_path / "tea.lock"
    os.mkfifo(fifo)
    started = time.monotonic()
    outcome = finishes_quickly(lambda: files.read_lock_owner(fifo))
    assert outcome["value"] == "another process" and time.monotonic() - started < 10


def test_create_new_never_replaces_what_is_there_and_leaves_no_temporary(tmp_path):
    from pipeline.files import create_new

    target = tmp_path / "prompts" / "tea.md"
    assert create_new(target, "first") and target.read_text() == "first"
    assert not create_new(target, "second") and target.read_text() == "first"
    link = tmp_path / "prompts" / "link.md"
    link.symlink_to(tmp_path / "nowhere.md")  # a dangling link is something there too
    assert not create_new(link, "x") and not (tmp_path / "nowhere.md").exists()
    assert create_new(tmp_path / "prompts" / "bulk.md", "y", sync=False)
    assert sorted(p.name for p in (tmp_path / "prompts").iterdir()) == ["bulk.md", "link.md", "tea.md"]


def test_make_private_tightens_an_older_versions_files_once_then_marks_the_folder(tmp_path):
    from pipeline.contract.article import TIGHTENED, TIGHTENED_AS, make_private

    state = tmp_path / files.STATE_DIR
    (state / "locks").mkdir(parents=True)
    old = [tmp_path / "tea.md.url", tmp_path / "tea.md.failed", state / "journal.jsonl"]
    old.append(state / "locks" / "tea.lock")
    article, notes, link = tmp_path / "tea.md", tmp_path / "notes.txt", tmp_path / "coffee.md.url"
    for path in (*old, article, notes):
        path.write_text("x")
        path.chmod(0o644)
    link.symlink_to(notes)
    make_private(tmp_path)
    assert {p.name: mode(p) for p in old} == {p.name: 0o600 for p in old}
    assert mode(article) == mode(notes) == 0o644, "an article and a user's file follow the umask"
    assert (state / TIGHTENED).read_bytes() == TIGHTENED_AS and mode(state / TIGHTENED) == 0o600
    # Marked: every file this version writes is private already, so the names are not read again.
    later = tmp_path / "later.md.url"
    later.write_text("x")
    later.chmod(0o644)
    make_private(tmp_path)
    assert mode(later) == 0o644


def test_make_private_runs_again_for_a_marker_of_another_generation_or_kind(tmp_path):
    from pipeline.contract.article import TIGHTENED, TIGHTENED_AS, make_private

    state = tmp_path / files.STATE_DIR
    state.mkdir()
    sidecar = tmp_path / "tea.md.sending"
    for marker in (b"0\n", None):
        sidecar.write_text("x")
        sidecar.chmod(0o644)
        (state / TIGHTENED).unlink(missing_ok=True)
        if marker is None:  # a link at the marker: not ours to trust, nor to write through
            (state / TIGHTENED).symlink_to(tmp_path / "elsewhere")
        else:
            (state / TIGHTENED).write_bytes(marker)
        make_private(tmp_path)
        assert mode(sidecar) == 0o600, marker
    assert (state / TIGHTENED).is_symlink() and not (tmp_path / "elsewhere").exists()
    (state / TIGHTENED).unlink()
    make_private(tmp_path)
    assert (state / TIGHTENED).read_bytes() == TIGHTENED_AS


# -- hard links: a file of ours with another name elsewhere is never changed in place ----------


def hard_link(path, outside):
    path.parent.mkdir(parents=True, exist_ok=True)
    os.link(outside, path)
    outside.chmod(0o644)
    return path


def untouched(outside) -> bool:
    return outside.read_text() == "the user's own file\n" and mode(outside) == 0o644


@pytest.mark.parametrize(
    "name", ["locks/tea.lock", "cycle.lock", "publish/tea.lock", "profile/qwenpipe.lock"]
)
def test_a_hard_linked_lock_is_refused_naming_it_and_its_file_not_truncated(tmp_path, outside, name):
    lock = hard_link(tmp_path / "p" / ".qwenpipe" / name, outside)
    with pytest.raises(UnsafeFile, match=f"{lock} is a hard link .*2 names"):
        FileLock(lock, purpose="test").acquire()
    assert untouched(outside)


@pytest.mark.parametrize("flags", [os.O_WRONLY, os.O_RDWR, os.O_RDWR | os.O_CREAT, os.O_WRONLY | os.O_APPEND])
def test_no_open_for_writing_goes_through_a_hard_link(tmp_path, outside, flags):
    path = hard_link(tmp_path / ".qwenpipe" / "record.json", outside)
    with pytest.raises(UnsafeFile, match="is a hard link"):
        files.open_regular(path, flags)
    with pytest.raises(UnsafeFile, match="is a hard link"):
        files.open_regular(path, private=True)  # private: it would be chmodded
    assert files.read_bytes(path) == b"the user's own file\n"  # reading changes nothing: allowed
    assert untouched(outside)


def test_make_private_changes_no_mode_through_a_hard_link(tmp_path, outside):
    from pipeline.contract.article import make_private

    state = tmp_path / files.STATE_DIR
    linked = [
        hard_link(tmp_path / "tea.md.url", outside),
        hard_link(tmp_path / "tea.md.failed", outside),
        hard_link(state / "last_cycle.json", outside),
        hard_link(state / "quota.json", outside),
        hard_link(state / "locks" / "tea.lock", outside),
    ]
    own = tmp_path / "coffee.md.url"
    own.write_text("x")
    own.chmod(0o644)
    make_private(tmp_path)
    assert untouched(outside) and all(mode(path) == 0o644 for path in linked)
    assert mode(own) == 0o600


def test_atomic_write_over_a_hard_link_replaces_the_name_and_leaves_the_other_file(tmp_path, outside):
    path = hard_link(tmp_path / ".qwenpipe" / "last_cycle.json", outside)
    files.atomic_write(path, "{}")
    assert path.read_text() == "{}" and os.stat(path).st_nlink == 1 and mode(path) == 0o600
    assert untouched(outside)


@pytest.mark.parametrize("name", ["qwenpipe.db", "qwenpipe.db-shm", "qwenpipe.db-wal", "qwenpipe.db-journal"])
def test_a_hard_linked_database_file_is_refused_naming_it_and_left_as_it_is(tmp_path, outside, name):
    from pipeline.store import dbfile
    from pipeline.store.protocol import StoreError

    state = tmp_path / "articles" / files.STATE_DIR
    state.mkdir(parents=True, mode=0o700)
    linked = hard_link(state / name, outside)
    with pytest.raises(StoreError, match=f"{linked}: a hard link .*2 names"):
        dbfile.prepare(state)
    assert untouched(outside)
