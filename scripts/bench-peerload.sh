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
# The Pusher protocol (issue 38): N members in one presence channel over
# herenow's /app/{key}, or over Sockudo (`cargo install sockudo --locked`)
# with its member cap raised, the same tool and options:
#
#   PROTO=pusher N=5000 scripts/bench-peerload.sh
#   PROTO=pusher SERVER=sockudo SOCKUDO=~/.cargo/bin/sockudo scripts/bench-peerload.sh
#
# With PROTO=pusher on herenow, the fan-out floor runs after it, the same
# N and PROBES (crates/herenow-server/examples/fanout_floor.rs: the probes'
# frames written to as many sockets by a bare tokio program): the
# member_added frames alone, then with each probe's roster too (every byte
# the server writes during the probes), three times each; the median's
# server CPU per recipient is printed, with herenow's ratio to it.
#
# OBSERVERS (50), PROBES (100) and MAX_SETTLE (peerload's, seconds) too;
# HERENOW_BIN=path runs that herenow build instead of building this tree
# (to alternate two builds). On a machine with cores to spare,
# SERVER_CPUS=0-7 LOAD_CPUS=8-15 pins the server and the floor's writer to
# the first list, peerload to the second (taskset); with the binaries
# carried from scripts/device-kit.sh's folder there (HERENOW_BIN, FLOOR_BIN,
# PEERLOAD under .device-kit/bin).
#
# Needs peerload built:
#   (cd ../shared/tools/peerload && CARGO_TARGET_DIR=/tmp/peerload-target cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000}
STORE=${STORE:-memory}
PROTO=${PROTO:-herenow}
SERVER=${SERVER:-herenow}
OBSERVERS=${OBSERVERS:-50}
PROBES=${PROBES:-100}
MAX_SETTLE=${MAX_SETTLE:-300}
KEY=bench-key
APP=bench
HOLD=${HOLD:-30}
PEERLOAD=${PEERLOAD:-/tmp/peerload-target/release/peerload}
SECRET=bench-peerload-secret-0123456789abcdef

# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
# Until the port takes connections (no curl on the device machines).
wait_port() {
  for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "nothing listens on port $1" >&2
  return 1
}
server_pin=() load_pin=()
[ -n "${SERVER_CPUS:-}" ] && server_pin=(taskset -c "$SERVER_CPUS")
[ -n "${LOAD_CPUS:-}" ] && load_pin=(taskset -c "$LOAD_CPUS")

[ -x "$PEERLOAD" ] || { echo "build peerload first (see the header)" >&2; exit 1; }
HERENOW_BIN=${HERENOW_BIN:-}
if [ "$SERVER" != sockudo ] && [ -z "$HERENOW_BIN" ]; then
  cargo build --release -q -p herenow
  HERENOW_BIN=target/release/herenow
fi
if [ "$PROTO" = pusher ] && [ "$SERVER" != sockudo ] && [ -z "${FLOOR_BIN:-}" ]; then
  cargo build --release -q -p herenow-server --example fanout_floor
fi
FLOOR_BIN=${FLOOR_BIN:-target/release/examples/fanout_floor}
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
if [ "$SERVER" = sockudo ]; then
  cat >"$dir/config.json" <<JSON
{"host": "127.0.0.1", "port": $port, "max_connections": 60000, "metrics": {"enabled": false},
 "rate_limiter": {"enabled": false}, "presence": {"max_members_per_channel": 20000},
 "app_manager": {"driver": "memory", "array": {"apps": [{"id": "$APP", "key": "$KEY",
  "secret": "$SECRET", "enabled": true, "max_connections": 60000,
  "max_presence_members_per_channel": 20000}]}}}
JSON
  (cd "$dir" && RUST_LOG=warn exec "${SOCKUDO:-sockudo}" --config "$dir/config.json") >"$dir/server.log" 2>&1 &
  server=$!
  pids+=("$server")
  wait_port "$port"
else
  RUST_LOG=warn "${server_pin[@]}" "$HERENOW_BIN" serve --listen "127.0.0.1:$port" \
    --token-secret "$SECRET" --pusher-app "$APP:$KEY:$SECRET" \
    --ws-max-connections 50000 --max-connections 60000 \
    "${store_args[@]}" >"$dir/server.log" 2>&1 &
  server=$!
  pids+=("$server")
  wait_port "$port"
fi
echo "== $SERVER ($PROTO protocol, $STORE store), $N users, $OBSERVERS observers, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"${load_pin[@]}" "$PEERLOAD" --proto "$PROTO" --url "ws://127.0.0.1:$port" --key "$KEY" --secret "$SECRET" --pid "$server" \
  --n "$N" --observers "$OBSERVERS" --probes "$PROBES" --hold-secs "$HOLD" --ping-min 10 --ping-max 20 \
  --max-settle-secs "$MAX_SETTLE" --label "$SERVER-$PROTO-$STORE" --out "$dir/out.json" >/dev/null
python3 - "$dir/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e, p, c = r["errors"], r["probe"], r["connect"]
print(f"connected {c['ok']}/{r['n']} in {c['connect_s']} s, settled at {c['settled_s']} s")
print(f"observers {r['observers']}: closed {e['closed_after_ready']}, lagged notices {e['lagged']}, close kinds {e['kinds']}")
print(f"probe joins seen {p['pairs_seen']}/{p['pairs_expected']}: p50 {p['p50_ms']} ms, p99 {p['p99_ms']} ms, max {p['max_ms']} ms")
print(f"hold: server CPU {r['hold']['server_cpu_pct']} %, RSS per connection {r['bytes_per_conn']['end_hold']} B, load {r['hold']['loadavg']}")
PY
if [ "$PROTO" = pusher ] && [ "$SERVER" != sockudo ]; then
  # The floor swings from run to run (where its reader's threads run):
  # the median of three.
  for i in 1 2 3; do
    "${server_pin[@]}" "$FLOOR_BIN" "$N" "$PROBES" >"$dir/floor-$i.json"
    "${server_pin[@]}" "$FLOOR_BIN" "$N" "$PROBES" rosters >"$dir/floor-rosters-$i.json"
  done
  python3 - "$dir" "$N" "$PROBES" <<'PY'
import json, sys
d, n, probes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = json.load(open(f"{d}/out.json"))
def median(kind):
    runs = [json.load(open(f"{d}/{kind}-{i}.json")) for i in (1, 2, 3)]
    return sorted(runs, key=lambda f: f["us_per_delivery"])[1]
f, fr = median("floor"), median("floor-rosters")
# Each probe's member_added goes to every member in the channel then.
deliveries = sum(n + i for i in range(probes))
herenow = r["probe"]["server_cpu_s"] / deliveries * 1e6
print(f"fan-out: herenow {herenow:.2f} µs of server CPU per recipient ({r['probe']['server_cpu_s']} s for {deliveries} deliveries); "
      f"floor {f['us_per_delivery']:.2f} µs ({f['server_cpu_s']} s), ratio {herenow / f['us_per_delivery']:.2f}; "
      f"floor with the probes' rosters {fr['us_per_delivery']:.2f} µs ({fr['server_cpu_s']} s), ratio {herenow / fr['us_per_delivery']:.2f}")
PY
fi
cp "$dir/out.json" "${OUT:-/tmp/bench-peerload-$SERVER-$PROTO-$N.json}"
