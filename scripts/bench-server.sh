#!/usr/bin/env bash
# Server load benchmark for BENCHMARKS.md: herenow (release build, memory
# store) on loopback, driven by wrk on the same machine, keep-alive.
#
#   single: POST /v1/spaces/load/heartbeat, one member per request, ids drawn
#           from 100k users;
#   batch:  POST /v1/spaces/load/heartbeats, 1,000 members per request.
#
# Needs wrk (Debian: apt-get install -y wrk). Starts its own server on a free
# port and stops it at the end. DURATION (default 10s), THREADS (default 1)
# and CONNECTIONS (default 64) tune the load. JOURNAL=1 serves with
# --data-dir (a scratch directory): every heartbeat is journaled.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
THREADS=${THREADS:-1}
CONNECTIONS=${CONNECTIONS:-64}
JOURNAL=${JOURNAL:-0}

cargo build --release -p herenow --quiet
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
store_args=()
if [ "$JOURNAL" = 1 ]; then store_args=(--data-dir "$dir/data"); fi
echo "== herenow serve ${store_args[*]:-(no data dir)}"
RUST_LOG=warn target/release/herenow serve --listen "127.0.0.1:$port" "${store_args[@]}" >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

cp scripts/loads/single.lua "$dir/single.lua"

python3 - "$dir/batch.lua" <<'PY'
import sys
# Ten different bodies of 1,000 members each, rotated.
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

echo "== single heartbeats: wrk -t$THREADS -c$CONNECTIONS -d$DURATION"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$dir/single.lua" "http://127.0.0.1:$port" \
  | grep -E 'Requests/sec|50%|99%|Non-2xx|Socket errors'
echo "== batch heartbeats (1,000 members per request): wrk -t$THREADS -c8 -d$DURATION"
wrk -t"$THREADS" -c8 -d"$DURATION" --latency -s "$dir/batch.lua" "http://127.0.0.1:$port" \
  | grep -E 'Requests/sec|50%|99%|Non-2xx|Socket errors'
echo "(members/s for batches = Requests/sec x 1000)"
echo "== members stored: $(curl -sf "http://127.0.0.1:$port/v1/spaces/load/count?window=1m")"
