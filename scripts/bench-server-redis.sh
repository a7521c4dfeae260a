#!/usr/bin/env bash
# Redis-store benchmark for BENCHMARKS.md ("Redis store"): everything in one
# run against one redis-server this script starts itself on a free port
# (never a Redis already running here), on the same machine as the load.
#
#   1. redis-benchmark ZADD -P 64: the floor herenow's batches must reach;
#   2. herenow serve --store redis:// (release build), driven by wrk with
#      the loads of scripts/bench-server.sh: single heartbeats (one member
#      per request, ids over 100k users) and batches (1,000 members per
#      request);
#   3. the seeds' baseline: a Python HTTP server (http.server's
#      ThreadingHTTPServer) doing one redis-py ZADD per request, as seeds
#      000/001 do, under the same single-heartbeat wrk load;
#   4. Redis memory for 1M members (11-byte ids): a plain sorted set (seeds
#      001/004) vs herenow's default layout written through its batch API,
#      as used_memory deltas.
#
# Each wrk load runs RUNS times (default 3); the script prints every run and
# the median. Needs wrk, redis-server, redis-cli, redis-benchmark and
# python3 with venv (Debian: apt-get install -y wrk redis-server
# python3-venv); redis-py is installed with pip into a venv in the temporary
# directory. DURATION (default 10s), THREADS (default 1), CONNECTIONS
# (default 64) and N (default 1000000) tune it.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
THREADS=${THREADS:-1}
CONNECTIONS=${CONNECTIONS:-64}
RUNS=${RUNS:-3}
N=${N:-1000000}

# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
wait_http() {
  for _ in $(seq 200); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done
  echo "no answer from $1" >&2
  return 1
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

cargo build --release -p herenow --quiet
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ -f "$dir/redis.pid" ] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" --daemonize yes --pidfile "$dir/redis.pid"
cli() { redis-cli -p "$rport" "$@"; }
for _ in $(seq 50); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
used_memory() { cli info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }

echo "machine: $(nproc) cores (shared), $(uname -m); redis $(cli info server | awk -F: '/^redis_version:/ {print $2}' | tr -d '\r'); wrk -t$THREADS, $DURATION per run, $RUNS runs, medians"

# ---------------------------------------------------------------- the loads
cp scripts/loads/single.lua "$dir/single.lua"
python3 - "$dir/batch.lua" <<'PY'
import sys
bodies = []
for b in range(10):
    items = ",".join('{"id":"user-%d"}' % (b * 1000 + i) for i in range(1000))
    bodies.append('{"heartbeats":[%s]}' % items)
with open(sys.argv[1], "w") as f:
    f.write("local bodies = {\n")
    for body in bodies:
        f.write("  [==[%s]==],\n" % body)
    f.write("}\nlocal n = 0\n")
    f.write("request = function()\n  n = n %% %d + 1\n" % len(bodies))
    f.write('  return wrk.format("POST", "/v1/spaces/load/heartbeats", {["Content-Type"] = "application/json"}, bodies[n])\nend\n')
PY

# wrk_runs NAME URL SCRIPT CONNECTIONS: RUNS runs, each printed; the median
# requests/s goes to $dir/NAME.median.
wrk_runs() {
  local name=$1 url=$2 script=$3 conns=$4
  : >"$dir/$name.rps"
  for r in $(seq "$RUNS"); do
    wrk -t"$THREADS" -c"$conns" -d"$DURATION" --latency -s "$script" "$url" >"$dir/$name.$r.out"
    local rps p50 p99 errs
    rps=$(awk '/Requests\/sec/ {print $2}' "$dir/$name.$r.out")
    p50=$(awk '$1=="50%" {print $2}' "$dir/$name.$r.out")
    p99=$(awk '$1=="99%" {print $2}' "$dir/$name.$r.out")
    errs=$(grep -E 'Non-2xx|Socket errors' "$dir/$name.$r.out" | tr -s ' ' | tr '\n' ' ' || true)
    echo "  run $r: $rps req/s, p50 $p50, p99 $p99 $errs"
    echo "$rps" >>"$dir/$name.rps"
  done
  median <"$dir/$name.rps" >"$dir/$name.median"
  echo "  median: $(cat "$dir/$name.median") req/s"
}

# ------------------------------------------------- 1. redis-benchmark floor
echo "== redis-benchmark -P 64 ZADD (random members of 100k, 2M commands), $RUNS runs"
: >"$dir/zadd.rps"
for r in $(seq "$RUNS"); do
  rps=$(redis-benchmark -p "$rport" -n 2000000 -r 100000 -P 64 -q \
          ZADD bench:zadd __rand_int__ member:__rand_int__ \
        | tr '\r' '\n' | awk '/requests per second/ {for (i=1;i<=NF;i++) if ($i ~ /^[0-9.]+$/ && $(i+1)=="requests") print $i}' | tail -1)
  echo "  run $r: $rps ZADD/s"
  echo "$rps" >>"$dir/zadd.rps"
done
zadd=$(median <"$dir/zadd.rps")
echo "  median: $zadd ZADD/s"
cli del bench:zadd >/dev/null

# ------------------------------------------------------ 2. herenow on Redis
hport=$(free_port)
RUST_LOG=warn target/release/herenow serve --listen "127.0.0.1:$hport" \
  --store "redis://127.0.0.1:$rport" >"$dir/herenow.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$hport/readyz"
echo "== herenow --store redis://, single heartbeats: wrk -c$CONNECTIONS"
wrk_runs herenow_single "http://127.0.0.1:$hport" "$dir/single.lua" "$CONNECTIONS"
echo "== herenow --store redis://, batch heartbeats (1,000 members per request): wrk -c8"
wrk_runs herenow_batch "http://127.0.0.1:$hport" "$dir/batch.lua" 8
echo "  = $(awk -v r="$(cat "$dir/herenow_batch.median")" 'BEGIN {printf "%.0f", r * 1000}') members/s"
echo "  members stored: $(curl -sf "http://127.0.0.1:$hport/v1/spaces/load/count?window=1m")"

# ------------------------------------------ 3. the seeds' Python baseline
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check redis
cat >"$dir/seed_app.py" <<'PY'
"""Seeds 000/001 as a web app: one redis-py ZADD per heartbeat request."""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import redis

r = redis.Redis(host="127.0.0.1", port=int(sys.argv[2]), max_connections=256)

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like herenow under wrk
    # Headers and body are two writes: without this, Nagle's algorithm and
    # delayed ACKs stall every keep-alive response by ~40 ms, which would
    # measure TCP, not the seed.
    disable_nagle_algorithm = True

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        member = json.loads(body)["id"]
        r.zadd("whos_online:users", {member: int(time.time())})
        out = b'{"accepted":1}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass

ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 1024  # wrk opens all connections at once
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
pport=$(free_port)
"$dir/venv/bin/python" "$dir/seed_app.py" "$pport" "$rport" >"$dir/seed.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$pport/"
echo "== seed baseline (Python ThreadingHTTPServer + redis-py ZADD per request), single heartbeats: wrk -c$CONNECTIONS"
wrk_runs seed_single "http://127.0.0.1:$pport" "$dir/single.lua" "$CONNECTIONS"
echo "  members in whos_online:users: $(cli zcard whos_online:users)"

# ------------------------------------------------------------- 4. memory
echo "== Redis memory for $N members (11-byte ids), used_memory delta"
cli flushall >/dev/null
before=$(used_memory)
now=$(( $(date +%s) * 1000 ))
python3 - "$N" "$now" <<'PY' | cli --pipe >/dev/null
import sys
n, now = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout
for start in range(0, n, 1000):
    args = ["ZADD", "presence:bench"]
    for i in range(start, min(n, start + 1000)):
        args += [str(now - 600000 + i * 600000 // n), "u:%09d" % i]
    out.write("*%d\r\n" % len(args))
    for a in args:
        out.write("$%d\r\n%s\r\n" % (len(a.encode()), a))
PY
after=$(used_memory)
plain=$(awk -v a="$after" -v b="$before" -v n="$N" 'BEGIN { printf "%.1f", (a-b)/n }')
echo "  plain sorted set (seeds 001/004): $plain bytes/member (MEMORY USAGE of the set: $(cli memory usage presence:bench samples 0) bytes)"
cli flushall >/dev/null
before=$(used_memory)
python3 - "$N" "$dir/mem" <<'PY'
import os, sys
n, d = int(sys.argv[1]), sys.argv[2]
os.makedirs(d, exist_ok=True)
for b in range(0, n, 1000):
    items = ",".join('{"id":"u:%09d"}' % i for i in range(b, min(n, b + 1000)))
    with open("%s/%d.json" % (d, b // 1000), "w") as f:
        f.write('{"heartbeats":[%s]}' % items)
PY
ls "$dir/mem" | xargs -P 4 -I{} curl -sf -o /dev/null -H 'content-type: application/json' \
  --data-binary @"$dir/mem/{}" "http://127.0.0.1:$hport/v1/spaces/mem/heartbeats"
for _ in $(seq 100); do
  total=$(curl -sf "http://127.0.0.1:$hport/v1/spaces/mem/count?window=10m" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
  [ "$total" -ge "$N" ] && break
  sleep 0.2
done
after=$(used_memory)
layout=$(awk -v a="$after" -v b="$before" -v n="$N" 'BEGIN { printf "%.1f", (a-b)/n }')
echo "  herenow default layout ($total members through the batch API): $layout bytes/member"
echo "  keys: $(cli --scan --pattern 'herenow:{mem}*' | sort | tr '\n' ' ')"
for k in $(cli --scan --pattern 'herenow:{mem}*' | sort); do
  echo "    $k: $(cli type "$k") $(cli memory usage "$k" samples 0) bytes"
done

# ------------------------------------------------------------- summary
echo "== summary (medians)"
awk -v z="$zadd" -v b="$(cat "$dir/herenow_batch.median")" -v s="$(cat "$dir/herenow_single.median")" \
    -v p="$(cat "$dir/seed_single.median")" -v pl="$plain" -v l="$layout" 'BEGIN {
  printf "  batch heartbeats into Redis: %.0f members/s vs ZADD -P 64 %.0f/s: %.2fx (target >= 1x)\n", b*1000, z, b*1000/z
  printf "  single-heartbeat HTTP: %.0f req/s vs seed baseline %.0f req/s: %.2fx (target >= 3x)\n", s, p, s/p
  printf "  memory: %.1f vs plain sorted set %.1f bytes/member: %.2fx (target <= 1x)\n", l, pl, l/pl
}'
