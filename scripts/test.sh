#!/usr/bin/env bash
# Set everything up, lint, and run the whole test suite (unit, simulator, real Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Five workers on two cores. The suite is CPU-bound (a `generate` that sends costs ~6.5 s of
# CPU: Chromium and its children ~3.5, Playwright's node driver ~1, Python ~1.3); four and five
# workers took the same wall time.
# Bytecode caches on even where the environment turns them off (PYTHONDONTWRITEBYTECODE=1):
# without them every worker rewrites the asserts of all ~100 test modules again at each run
# (collecting cost 10.9 CPU-s per worker, 3.5 s with the cache), and every `python -m pipeline`
# the tests start compiles the package from source.
#
# `--quick` (the edit-run loop): lint, then the tests that start no browser and no qwenpipe
# process of their own (unit tests with fake engines, the simulator over HTTP, the engines'
# rules, the model and fuzz tests, the stores). CI runs the whole command, without it.
if [ "${1:-}" = "--quick" ]; then
  shift
  exec env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m pytest -q -n 3 -m "not browser and not chaos" \
    tests/unit tests/engines tests/simulator tests/model tests/store "$@"
fi
# Work stealing: a worker with nothing left takes tests queued on a busy one. With xdist's
# default (`load`) a clean clone's workers were busy only 59 % of the 645 s: the last few percent,
# long browser tests queued behind each other on one or two workers, ran while the others idled.
env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m pytest -q -n 5 --dist worksteal --durations=25 "$@"
