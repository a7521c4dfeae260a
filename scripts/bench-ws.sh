#!/usr/bin/env bash
# WebSocket load benchmark for BENCHMARKS.md: a release `herenow serve` on
# loopback, and the ws_load example (crates/herenow-server/examples) holding
# CONNECTIONS sockets (default 10,000), each joined to space `load` and
# pinging every 10 s, SUBSCRIBERS of them (default 100) subscribed to it.
#
#   scripts/bench-ws.sh            # the memory store
#   STORE=redis scripts/bench-ws.sh   # a redis-server this script starts
#
# Prints: the server's resident memory before and after the connections
# (and the difference per connection), the server's CPU while holding them
# (percent of one core, from /proc/PID/stat), and ws_load's JSON line with
# join→event latency over every (probe, subscriber) pair.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS=${CONNECTIONS:-10000}
SUBSCRIBERS=${SUBSCRIBERS:-100}
HOLD=${HOLD:-30}
PROBES=${PROBES:-100}
STORE=${STORE:-memory}

cargo build --release -p herenow --quiet
cargo build --release -p herenow-server --example ws_load --quiet
dir=$(mktemp -d)
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
port=$(free_port)
secret=$(head -c 24 /dev/urandom | base64)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

store_flag=()
if [ "$STORE" = redis ]; then
  rport=$(free_port)
  redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --logfile "$dir/redis.log" &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
  store_flag=(--store "redis://127.0.0.1:$rport")
fi

ulimit -n "$(ulimit -Hn)"
RUST_LOG=warn target/release/herenow serve --listen "127.0.0.1:$port" "${store_flag[@]}" \
  --token-secret "$secret" --ws-max-connections $((CONNECTIONS + 1000)) \
  --max-connections $((CONNECTIONS + 2000)) >"$dir/server.log" 2>&1 &
spid=$!
pids+=($spid)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

before=$(rss_kib "$spid")
mkfifo "$dir/out"
target/release/examples/ws_load --url "ws://127.0.0.1:$port/v1/ws" --secret "$secret" \
  --connections "$CONNECTIONS" --subscribers "$SUBSCRIBERS" --hold-secs "$HOLD" \
  --probes "$PROBES" >"$dir/out" &
lpid=$!
pids+=($lpid)
exec 3<"$dir/out"
read -r line <&3 # ready
after=$(rss_kib "$spid")
t0=$(cpu_ticks "$spid"); w0=$(date +%s.%N)
read -r line <&3 # steady
t1=$(cpu_ticks "$spid"); w1=$(date +%s.%N)
read -r result <&3
wait "$lpid"

echo "store: $STORE   connections: $CONNECTIONS   subscribers: $SUBSCRIBERS   machine: $(nproc) cores"
echo "server RSS before: $((before / 1024)) MiB, with connections: $((after / 1024)) MiB"
python3 - "$before" "$after" "$CONNECTIONS" "$t0" "$t1" "$w0" "$w1" "$hz" "$result" <<'PY'
import json, sys
before, after, n, t0, t1, w0, w1, hz = (float(x) for x in sys.argv[1:9])
r = json.loads(sys.argv[9])
print(f"memory per connection: {(after - before) * 1024 / n:.0f} bytes")
print(f"server CPU while holding ({w1 - w0:.0f} s, pings only): {100 * (t1 - t0) / hz / (w1 - w0):.1f}% of one core")
print(f"join->event latency over {r['latency_samples']}/{r['latency_expected']} samples: "
      f"p50 {r['join_to_event_us']['p50'] / 1000:.2f} ms, p99 {r['join_to_event_us']['p99'] / 1000:.2f} ms, "
      f"max {r['join_to_event_us']['max'] / 1000:.2f} ms")
print(json.dumps(r))
PY
