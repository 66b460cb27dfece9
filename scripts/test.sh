#!/usr/bin/env bash
# Set everything up, lint, and run the whole test suite (unit, simulator, real Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest -q "$@"
