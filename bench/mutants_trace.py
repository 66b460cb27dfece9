"""A pytest plugin for bench/mutants.py: which functions of the package each test runs.

Loaded only by the mutation script's map run (`-p mutants_trace`, bench/ on PYTHONPATH), never by
the suite. For each test it records the functions under MUTANTS_TRACE_ROOT (the worker's copy of
pipeline/) that started at least once, while the test's setup, call or teardown ran, and the
test's own seconds; it writes {nodeid: {"seconds": s, "functions": ["path::Qual.name", ...]}} as
JSON to MUTANTS_TRACE_OUT at the session's end.

A profile function (sys.setprofile, and threading.setprofile for threads started later) sees every
Python call of its thread, greenlets included (the sync Playwright API runs the user's code and
its callbacks in greenlets of one thread). Python 3.11 has no sys.monitoring.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pytest

ROOT = os.environ.get("MUTANTS_TRACE_ROOT", "")
OUT = os.environ.get("MUTANTS_TRACE_OUT", "")
BASE = os.path.dirname(ROOT.rstrip(os.sep))  # the copy's folder: paths are relative to it

_current: set[str] = set()
_known: dict[object, str | None] = {}  # code object -> "path::qualname" (None: not ours)
_tests: dict[str, dict] = {}


def _name(code) -> str | None:
    found = _known.get(code, ...)
    if found is ...:
        found = None
        if code.co_filename.startswith(ROOT):
            # "Class.method.<locals>.inner" -> "Class.method.inner", as bench/mutants.py names it
            qual = code.co_qualname.replace(".<locals>", "")
            found = f"{os.path.relpath(code.co_filename, BASE)}::{qual}"
        _known[code] = found
    return found


def _profile(frame, event, _arg):
    if event == "call":
        name = _name(frame.f_code)
        if name is not None:
            _current.add(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current.clear()
    started = time.monotonic()
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        _tests[item.nodeid] = {
            "seconds": round(time.monotonic() - started, 2),
            "functions": sorted(_current),
        }


def pytest_sessionfinish(session, exitstatus):
    if OUT:
        with open(OUT, "w") as out:
            json.dump(_tests, out, indent=0, sort_keys=True)
