#!/usr/bin/env bash
# Set everything up, start the loopback simulator, and run the example prompts through the real
# pipeline (real Chromium, the real cycle) until every article is on disk in .demo/articles/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
root=$(pwd)
demo="$root/.demo"
mkdir -p "$demo"
.venv/bin/qwenpipe simulate --port 0 --answer-seconds 4 --ledger "$demo/ledger.json" >"$demo/sim.url" 2>"$demo/sim.log" &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$demo/sim.url" ] && break; sleep 0.2; done
base=$(head -n1 "$demo/sim.url")
cat >"$demo/config.toml" <<TOML
# The demo: the example prompts against the simulator on $base (never the real site).
[paths]
prompts = "$root/prompts"
articles = "articles"
[qwen]
base_url = "$base"
poll_interval = 2
[browser]
profile_dir = "profile"
storage_state = "state.json"
[router]
base_url = "$base/v1"
model = "test/model"
TOML
echo "demo: simulator on $base; config $demo/config.toml" >&2
for round in $(seq 30); do
  code=0
  .venv/bin/qwenpipe --config "$demo/config.toml" cycle || code=$?
  case $code in
    0) break ;;
    42|3) sleep 3 ;;
    *) echo "demo: cycle exited $code" >&2; exit "$code" ;;
  esac
done
.venv/bin/qwenpipe --config "$demo/config.toml" status || true
echo >&2
for f in "$demo"/articles/*.md; do echo "== $f"; head -n 24 "$f"; echo "..."; done
echo "demo: prompts received by the simulator: $(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$demo/ledger.json")" >&2
