#!/usr/bin/env bash
# Set everything up, lint, and run the whole test suite (unit, simulator, real Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Five workers on two cores: most of the time is spent waiting on Chromium and the simulator
# (four left 40% of the CPU idle: 16 min wall for 20 min of CPU).
.venv/bin/python -m pytest -q -n 5 "$@"
