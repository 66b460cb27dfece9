#!/usr/bin/env bash
# Set up what qwenpipe needs on Debian/Ubuntu, for one purpose:
#   setup.sh demo   Chromium (apt, with sudo when not root), a venv, qwenpipe in it
#   setup.sh test   the same, plus what the tests start for real: Xvfb (headed runs), Hugo (the
#                   published site's real reader), PostgreSQL (throwaway servers of the several-
#                   hosts store's tests; no service is started), Chromium's headless shell
#                   (optional: most tests' browser, a sixth of the CPU per page), the test extra
# Each apt package is installed only when missing; nothing is installed that the purpose does
# not use.
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-test}"
case "$purpose" in
  demo|test) ;;
  *) echo "usage: setup.sh demo|test" >&2; exit 2 ;;
esac

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
apt_install() {
  [ "$#" -eq 0 ] && return 0
  echo "setup: apt-get install $*${sudo:+ (with sudo)}" >&2
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

missing=()
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
   && ! command -v google-chrome >/dev/null 2>&1; then
  missing+=(chromium)
fi
if [ "$purpose" = test ]; then
  command -v Xvfb >/dev/null 2>&1 || missing+=(xvfb)
  command -v hugo >/dev/null 2>&1 || missing+=(hugo)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
fi
apt_install "${missing[@]}"
if [ "$purpose" = test ] && ! command -v chromium-headless-shell >/dev/null 2>&1; then
  apt_install chromium-headless-shell \
    || echo "setup: no chromium-headless-shell package: the tests use chromium (slower)" >&2
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
extra=""
[ "$purpose" = test ] && extra="[test]"
log=$(mktemp)
# --no-compile: Python compiles (and caches) what is imported when it is first imported; compiling
# every installed package up front took a third of a clean clone's install.
if ! .venv/bin/pip install -q --no-compile -e ".$extra" >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
rm -f "$log"
echo "setup: ok for the $purpose ($(.venv/bin/qwenpipe --version), browser: $(command -v chromium || command -v chromium-browser || command -v google-chrome))" >&2
