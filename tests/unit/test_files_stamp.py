"""status_cache.files_stamp: the one stamp a kept `status --json` compares for the files its rows
read (status_document.holds): any change of any file's inode, size, mtime or ctime, or of their
order or number, is a different stamp."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from pipeline.batch.status_cache import files_stamp

FIELDS = ("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")  # what status_cache.stamp reads


def _info(n: int) -> SimpleNamespace:
    return SimpleNamespace(st_ino=2**63 + n, st_size=n, st_mtime_ns=1_800_000_000 * 10**9 + n, st_ctime_ns=-n)


def _files() -> list[SimpleNamespace]:
    return [_info(n) for n in range(1, 4)]


def test_the_same_files_give_the_same_stamp():
    assert files_stamp(_files()) == files_stamp(_files())
    assert files_stamp([]) == files_stamp([])


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("which", range(3))
def test_a_change_of_any_field_of_any_file_changes_it(field, which):
    changed = _files()
    setattr(changed[which], field, getattr(changed[which], field) + 1)
    assert files_stamp(changed) != files_stamp(_files())


def test_order_and_number_change_it():
    files = _files()
    assert files_stamp(files[::-1]) != files_stamp(files)
    assert files_stamp(files[:2]) != files_stamp(files)


def test_real_stat_results_are_stamped(tmp_path):
    path = tmp_path / "prompt.md"
    path.write_text("one")
    before = files_stamp([os.stat(path)])
    path.write_text("two!")
    assert files_stamp([os.stat(path)]) != before
