#!/usr/bin/env bash
# Contact-list benchmark for BENCHMARKS.md, "Watching contact lists": a release `herenow serve` on loopback and the watch_load example
# (crates/herenow-server/examples) in a second process: USERS sockets
# (default 10,000; users u0..), each watching CONTACTS users (default 200)
# drawn from them (seeded: SEED), anywhere; then FLIPS watched users
# (default 100) go online, one every FLIP_MS ms, then offline the same way.
#
#   scripts/bench-watch.sh                 # the memory store
#   STORE=redis scripts/bench-watch.sh     # a redis-server this script starts
#   RUNS=3 USERS=5000 scripts/bench-watch.sh
#
# Each run starts a fresh server (and Redis). Prints per run, then the
# medians over RUNS (default 1): the server's RSS before the sockets, with
# them open, and with them watching (per socket and per watching socket);
# its CPU while holding HOLD seconds (default 20; pings only, at the
# welcome's ping_ms), as percent of one core, and the client's; status
# latency p50/p99/max over every (flip, watcher) pair, and of each flip's
# first status (the head of its fan-out). The raw JSON of each
# run is printed too. A store that cannot watch (answers `unsupported`)
# is reported as such and the script exits 2.
#
# The client and the server share this machine's cores; both processes get
# the hard open-file limit (ulimit -n), which must exceed USERS + FLIPS.
set -euo pipefail
cd "$(dirname "$0")/.."

USERS=${USERS:-10000}
CONTACTS=${CONTACTS:-200}
FLIPS=${FLIPS:-100}
FLIP_MS=${FLIP_MS:-50}
HOLD=${HOLD:-20}
SEED=${SEED:-9}
RUNS=${RUNS:-1}
STORE=${STORE:-memory}
case "$STORE" in memory | redis) ;; *) echo "STORE must be memory or redis" >&2; exit 64 ;; esac

cargo build --release -p herenow --quiet
cargo build --release -p herenow-server --example watch_load --quiet
dir=$(mktemp -d)
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  rm -rf "$dir"
}
trap cleanup EXIT

ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -le $((USERS + FLIPS + 100)) ]; then
  echo "open-file limit $(ulimit -n) is too low for $USERS sockets per process" >&2
  exit 1
fi
secret=$(head -c 24 /dev/urandom | base64)
hz=$(getconf CLK_TCK)
echo "store: $STORE   users: $USERS   contacts: $CONTACTS   flips: $FLIPS x 2, one per $FLIP_MS ms   hold: $HOLD s"
echo "machine: $(nproc) cores (shared with the client and other work), $(uname -m), open files $(ulimit -n)"

# run_once R: a fresh server (and Redis), one watch_load run; its JSON goes
# to $dir/run.R.json. Returns watch_load's status (2: watch refused).
run_once() {
  local r=$1 store_flag=() port spid rc=0
  if [ "$STORE" = redis ]; then
    local rport
    rport=$(free_port)
    redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$dir" --logfile "$dir/redis.$r.log" &
    pids+=($!)
    for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
    store_flag=(--store "redis://127.0.0.1:$rport")
  fi
  port=$(free_port)
  RUST_LOG=warn target/release/herenow serve --listen "127.0.0.1:$port" "${store_flag[@]}" \
    --token-secret "$secret" --ws-max-connections $((USERS + FLIPS + 1000)) \
    --max-connections $((USERS + FLIPS + 2000)) >"$dir/server.$r.log" 2>&1 &
  spid=$!
  pids+=($spid)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
  echo "== run $r: load average $(cut -d' ' -f1-3 /proc/loadavg)"
  target/release/examples/watch_load --url "ws://127.0.0.1:$port/v1/ws" --secret "$secret" \
    --users "$USERS" --contacts "$CONTACTS" --flips "$FLIPS" --flip-ms "$FLIP_MS" \
    --hold-secs "$HOLD" --seed "$SEED" --server-pid "$spid" --clk-tck "$hz" \
    >"$dir/run.$r.json" || rc=$?
  echo "   load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  if grep -qi 'error\|panic' "$dir/server.$r.log"; then
    echo "   server log:"; sed 's/^/     /' "$dir/server.$r.log" | tail -5
  fi
  stop_all
  return "$rc"
}

for r in $(seq "$RUNS"); do
  rc=0
  run_once "$r" || rc=$?
  if [ "$rc" -eq 2 ]; then
    echo "watch refused by the $STORE store: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["watch_refused"])' "$dir/run.$r.json")"
    cat "$dir/run.$r.json"
    exit 2
  elif [ "$rc" -ne 0 ]; then
    echo "watch_load failed ($rc)" >&2
    exit "$rc"
  fi
done

python3 - "$dir" "$RUNS" <<'PY'
import json, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
rs = [json.load(open(f"{d}/run.{r}.json")) for r in range(1, runs + 1)]

def row(r):
    kib = r["server_rss_kib"]
    lat = r["status_latency_us"]
    return {
        "connected": r["connected"], "failed": r["failed"], "open s": r["open_secs"],
        "watching": r["watching"], "watch s": r["watch_secs"],
        "server CPU s to watch": r["watch_cpu"]["server_cpu_s"],
        "RSS before MiB": kib["before"] / 1024, "RSS open MiB": kib["open"] / 1024,
        "RSS watching MiB": kib["watching"] / 1024,
        "KB/socket open": r["bytes_per_socket_open"] / 1000,
        "KB/watching socket": r["bytes_per_watching_socket"] / 1000,
        "KB/socket overall": r["bytes_per_socket_overall"] / 1000,
        "server CPU hold %": r["hold_cpu"]["server_pct"],
        "client CPU hold %": r["hold_cpu"]["client_pct"],
        "pings/s hold": r["pings_while_holding"] / r["hold_cpu"]["secs"],
        "server CPU flips %": r["flip_cpu"]["server_pct"],
        "client CPU flips %": r["flip_cpu"]["client_pct"],
        "samples": r["latency_samples"], "expected": r["latency_expected"],
        "unexplained": r["unexplained_statuses"],
        "p50 ms": lat["p50"] / 1000, "p99 ms": lat["p99"] / 1000, "max ms": lat["max"] / 1000,
        "first p50 ms": r["first_status_latency_us"]["p50"] / 1000,
        "first p99 ms": r["first_status_latency_us"]["p99"] / 1000,
    }

rows = [row(r) for r in rs]
for i, (r, raw) in enumerate(zip(rows, rs), 1):
    print(f"-- run {i}")
    print("   " + "  ".join(f"{k}: {v:.2f}" if isinstance(v, float) else f"{k}: {v}" for k, v in r.items()))
    print("   " + json.dumps(raw))
print(f"== medians over {runs} run(s)")
for k in rows[0]:
    m = statistics.median(r[k] for r in rows)
    print(f"   {k}: {m:.2f}" if isinstance(m, float) else f"   {k}: {m}")
PY
