#!/usr/bin/env bash
# Issue 15's join storm, measured with the independent load tool
# ../shared/tools/peerload (its README): N distinct users (default 10,000)
# join one room over /v1/ws while 50 observers, spread over the connection
# order, subscribe to it (most while it is still filling); after the hold,
# 100 probes join one by one and every observer times each probe's join.
# Reports how many observers were cut (4009) and the probes' join→event
# latency, on a release `herenow serve` over the memory store, or with
# STORE=redis over a redis-server this script starts on a free port.
#
#   scripts/bench-peerload.sh            # memory store
#   STORE=redis scripts/bench-peerload.sh
#
# Needs peerload built:
#   (cd ../shared/tools/peerload && CARGO_TARGET_DIR=/tmp/peerload-target cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000}
STORE=${STORE:-memory}
HOLD=${HOLD:-30}
PEERLOAD=${PEERLOAD:-/tmp/peerload-target/release/peerload}
SECRET=bench-peerload-secret-0123456789abcdef

# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
wait_http() {
  for _ in $(seq 200); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done
  echo "no answer from $1" >&2
  return 1
}

[ -x "$PEERLOAD" ] || { echo "build peerload first (see the header)" >&2; exit 1; }
cargo build --release -q -p herenow
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

store_args=()
if [ "$STORE" = redis ]; then
  rport=$(free_port)
  redis-server --port "$rport" --save '' --appendonly no --daemonize no >"$dir/redis.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
  store_args=(--store "redis://127.0.0.1:$rport")
fi
port=$(free_port)
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
RUST_LOG=warn target/release/herenow serve --listen "127.0.0.1:$port" \
  --token-secret "$SECRET" --ws-max-connections 50000 --max-connections 60000 \
  "${store_args[@]}" >"$dir/server.log" 2>&1 &
server=$!
pids+=("$server")
wait_http "http://127.0.0.1:$port/healthz"
echo "== herenow ($STORE store), $N users, 50 observers, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$PEERLOAD" --proto herenow --url "ws://127.0.0.1:$port" --secret "$SECRET" --pid "$server" \
  --n "$N" --observers 50 --probes 100 --hold-secs "$HOLD" --ping-min 10 --ping-max 20 \
  --label "herenow-$STORE" --out "$dir/out.json" >/dev/null
python3 - "$dir/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e, p, c = r["errors"], r["probe"], r["connect"]
print(f"connected {c['ok']}/{r['n']} in {c['connect_s']} s, settled at {c['settled_s']} s")
print(f"observers {r['observers']}: closed {e['closed_after_ready']}, lagged notices {e['lagged']}, close kinds {e['kinds']}")
print(f"probe joins seen {p['pairs_seen']}/{p['pairs_expected']}: p50 {p['p50_ms']} ms, p99 {p['p99_ms']} ms, max {p['max_ms']} ms")
print(f"hold: server CPU {r['hold']['server_cpu_pct']} %, RSS per connection {r['bytes_per_conn']['end_hold']} B, load {r['hold']['loadavg']}")
PY
