#!/usr/bin/env bash
# Set up everything qwenpipe needs on Debian/Ubuntu: Chromium, Xvfb, Hugo (the publishing tests
# build a site with it), PostgreSQL (the several-hosts store's tests), a venv, the package with its test extra.
set -euo pipefail
cd "$(dirname "$0")/.."

# Xvfb: the virtual screen of headed runs on a server (browser.display), and of its tests.
# Hugo: the real reader of published articles in the tests.
# PostgreSQL: the several-hosts store; the tests start throwaway servers of their own (no service).
if ! command -v Xvfb >/dev/null 2>&1 || ! command -v hugo >/dev/null 2>&1 \
   || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { ! command -v chromium >/dev/null 2>&1 \
   && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; }; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium xvfb hugo postgresql >/dev/null
fi
# The same Chromium's headless shell: the browser most tests attach to (tests/shared_browser.py),
# a sixth of the CPU per page. Optional: without it the tests use the full chromium, slower.
if ! command -v chromium-headless-shell >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq chromium-headless-shell >/dev/null; } \
    || echo "setup: no chromium-headless-shell package: the tests use chromium (slower)" >&2
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
log=$(mktemp)
# --no-compile: Python compiles (and caches) what is imported when it is first imported; compiling
# every installed package up front took a third of a clean clone's install.
if ! .venv/bin/pip install -q --no-compile -e '.[test]' >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
rm -f "$log"
echo "setup: ok ($(.venv/bin/qwenpipe --version), browser: $(command -v chromium || command -v google-chrome))" >&2
