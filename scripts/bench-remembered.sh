#!/usr/bin/env bash
# Memory per remembered user (issue 8: at most 32 bytes in the embedded
# store): the remembered_memory example with N users (default 10M, 12-byte
# ids), then the same ids and times in one Redis sorted set (ZADD through
# redis-cli --pipe into a redis-server started here on a free port, stopped
# by pid), measured with MEMORY USAGE.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
cargo run --release --quiet -p herenow-memory --example remembered_memory "$N"

dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --save "" --appendonly no >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
python3 - "$N" <<'PY' | redis-cli -p "$port" --pipe >/dev/null
import sys
n, t0, out = int(sys.argv[1]), 1_700_000_000_000, sys.stdout
for start in range(0, n, 1000):
    end = min(start + 1000, n)
    parts = [f"*{2 + 2 * (end - start)}\r\n$4\r\nZADD\r\n$10\r\nremembered\r\n"]
    for i in range(start, end):
        score, member = str(t0 + i), f"user:{i:07d}"
        parts.append(f"${len(score)}\r\n{score}\r\n${len(member)}\r\n{member}\r\n")
    out.write("".join(parts))
PY
bytes=$(redis-cli -p "$port" memory usage remembered)
python3 -c "print(f'Redis sorted set of the same $N ids (MEMORY USAGE): {$bytes / $N:.1f} bytes per user')"
