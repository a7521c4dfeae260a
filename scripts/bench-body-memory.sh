#!/usr/bin/env bash
# What one large request body costs the server's memory: the peak resident
# set (VmHWM) of a fresh `herenow serve` before and after one POST of
#   padding:    a 4 MiB body of spaces around an empty heartbeat list
#               (the body's own reading);
#   heartbeats: 380,000 `{"id":"a"}` (4 MB) to /heartbeats, refused as a
#               batch too large (the list as read).
#
#   scripts/bench-body-memory.sh                  # target/release/herenow
#   BINS="old/herenow target/release/herenow" scripts/bench-body-memory.sh
#
# Each binary and body gets a fresh server, ROUNDS times (default 3), and
# the growth in kB is printed per round. Needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
if [ -z "${BINS:-}" ]; then
  cargo build --release -p herenow --quiet
  BINS=target/release/herenow
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
with open(d + "/padding.json", "w") as f:
    f.write('{"heartbeats":[' + " " * 4150000 + "]}")
with open(d + "/heartbeats.json", "w") as f:
    f.write('{"heartbeats":[' + ",".join(['{"id":"a"}'] * 380000) + "]}")
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
for bin in $BINS; do
  for body in padding heartbeats; do
    growth=""
    for _ in $(seq "$ROUNDS"); do
      RUST_LOG=warn "$bin" serve --listen "127.0.0.1:$port" >/dev/null 2>&1 &
      server=$!
      for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
      before=$(hwm "$server")
      code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST -H 'content-type: application/json' \
        --data-binary "@$dir/$body.json" "http://127.0.0.1:$port/v1/spaces/x/heartbeats")
      after=$(hwm "$server")
      kill "$server"; wait "$server" 2>/dev/null || true
      growth="$growth $((after - before))"
    done
    echo "$bin, $body (answer $code): peak RSS grew by$growth kB"
  done
done
