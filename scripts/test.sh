#!/usr/bin/env bash
# Set everything up, lint, and run the whole test suite (unit, simulator, real Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Five workers on two cores. The suite is CPU-bound (a `generate` that sends costs ~4 s of
# Chromium and Python CPU); four and five workers took the same wall time.
.venv/bin/python -m pytest -q -n 5 "$@"
