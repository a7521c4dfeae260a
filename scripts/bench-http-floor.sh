#!/usr/bin/env bash
# The floor under a single heartbeat over a socket (issue 10: "find where
# our µs per request go"): `herenow serve` (memory store) against
# `bare_server` (crates/herenow-server/examples/bare_server.rs: the same
# runtime, allocator and axum::serve, one route that answers without
# looking at the body), each pinned to the same cores, wrk on the others,
# the single-heartbeat load of scripts/loads/single.lua. ROUNDS rounds
# (default 5) of DURATION (default 5s), the two servers in turns, a fresh
# server per run. Prints every run, then medians: requests/s and the
# server's CPU per request (utime + stime from /proc over wrk's count).
#
#   scripts/bench-http-floor.sh                        # server on core 0, wrk on core 1
#   SERVER_CORES=0-3 LOAD_CORES=4-7 scripts/bench-http-floor.sh
#   AGAINST=/tmp/herenow-base scripts/bench-http-floor.sh  # another herenow binary
#                                                    # (a base build) instead of bare_server
#   FLOOR=hyper scripts/bench-http-floor.sh          # bare_server on hyper alone, no axum
#
# Needs wrk (apt-get install -y wrk); or KIT=<folder made by
# scripts/device-kit.sh> on a machine without cargo or wrk. The servers'
# tokio workers are set to their core count (TOKIO_WORKER_THREADS).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
SERVER_CORES=${SERVER_CORES:-0}
LOAD_CORES=${LOAD_CORES:-1}
CONNECTIONS=${CONNECTIONS:-64}
AGAINST=${AGAINST:-}
FLOOR=${FLOOR:-axum}
case $FLOOR in axum) floor_arg=() ;; hyper) floor_arg=(hyper) ;; *) echo "FLOOR is axum or hyper" >&2; exit 1 ;; esac
other=bare
[ -n "$AGAINST" ] && other=against

KIT=${KIT:-}
if [ -n "$KIT" ]; then
  herenow=$KIT/bin/herenow
  bare=$KIT/bin/bare_server
  wrk=(env LD_LIBRARY_PATH="$KIT/lib" "$KIT/bin/wrk")
else
  cargo build --release -p herenow --quiet
  cargo build --release -p herenow-server --example bare_server --quiet
  herenow=target/release/herenow
  bare=target/release/examples/bare_server
  wrk=(wrk)
fi
export TOKIO_WORKER_THREADS
TOKIO_WORKER_THREADS=$(taskset -c "$SERVER_CORES" nproc)
# Whether a port answers (bash alone: no curl needed).
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
dir=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$dir"' EXIT
cp scripts/loads/single.lua "$dir/single.lua"
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
threads=$(( $(taskset -c "$LOAD_CORES" nproc) ))
[ "$threads" -gt 8 ] && threads=8
hz=$(getconf CLK_TCK)

run() { # which -> "rate cpu_us_per_request"
  local port
  port=$(free_port)
  if [ "$1" = herenow ] || [ "$1" = against ]; then
    local binary=$herenow
    [ "$1" = against ] && binary=$AGAINST
    RUST_LOG=warn taskset -c "$SERVER_CORES" "$binary" serve --listen "127.0.0.1:$port" \
      >"$dir/server.log" 2>&1 &
  else
    taskset -c "$SERVER_CORES" "$bare" "127.0.0.1:$port" "${floor_arg[@]}" >"$dir/server.log" 2>&1 &
  fi
  server=$!
  for _ in $(seq 100); do listening "$port" && break; sleep 0.1; done
  taskset -c "$LOAD_CORES" "${wrk[@]}" -t"$threads" -c"$CONNECTIONS" -d1s -s "$dir/single.lua" "http://127.0.0.1:$port" >/dev/null
  local before after out rate
  before=$(awk '{print $14 + $15}' "/proc/$server/stat")
  out=$(taskset -c "$LOAD_CORES" "${wrk[@]}" -t"$threads" -c"$CONNECTIONS" -d"$DURATION" -s "$dir/single.lua" "http://127.0.0.1:$port")
  after=$(awk '{print $14 + $15}' "/proc/$server/stat")
  kill "$server"; wait "$server" 2>/dev/null || true
  server=""
  if echo "$out" | grep -q 'Non-2xx'; then echo "$out" >&2; exit 1; fi
  rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  echo "$rate $(python3 -c "print(round(($after - $before) / $hz / ($rate * ${DURATION%s}) * 1e6, 2))")"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
# Which cores share a physical core (hyperthreads) and which share a
# cache: "8 cores" are 8 physical cores or 4 pairs, and the rows read
# differently.
echo "core siblings: $(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list 2>/dev/null | sort -un | tr '\n' ' ')(L3 shared by: $(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list 2>/dev/null || echo unknown))"
echo "server on cores $SERVER_CORES, wrk -t$threads -c$CONNECTIONS on $LOAD_CORES, $DURATION per run; floor: bare_server on $FLOOR"
out="$dir/runs"
for r in $(seq "$ROUNDS"); do
  order="herenow $other"
  [ $((r % 2)) = 0 ] && order="$other herenow"
  for which in $order; do
    read -r rate cpu < <(run "$which")
    echo "round $r $which: $rate req/s, server CPU $cpu us per request"
    echo "$r $which $rate $cpu" >>"$out"
  done
done
python3 - "$out" "$other" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
other = sys.argv[2]
for which in ("herenow", other):
    rates = [float(r[2]) for r in rows if r[1] == which]
    cpus = [float(r[3]) for r in rows if r[1] == which]
    print(f"{which:8} median {statistics.median(rates):,.0f} req/s, {statistics.median(cpus):.1f} us of server CPU per request")
h = {r[0]: float(r[2]) for r in rows if r[1] == "herenow"}
o = {r[0]: float(r[2]) for r in rows if r[1] == other}
print(f"herenow / {other}: median of per-round ratios {statistics.median(h[k] / o[k] for k in h):.2f}x")
hc = {r[0]: float(r[3]) for r in rows if r[1] == "herenow"}
oc = {r[0]: float(r[3]) for r in rows if r[1] == other}
print(f"server CPU per request, herenow / {other}: median of per-round ratios {statistics.median(hc[k] / oc[k] for k in hc):.2f}x")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
