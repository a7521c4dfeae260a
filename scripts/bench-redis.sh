#!/usr/bin/env bash
# Redis baselines for BENCHMARKS.md, measured on this machine in the same
# run as herenow's: a sorted set of 1M members (11-byte ids, seed 001/004's
# layout), and the commands the seeds use for each herenow operation.
#
# Starts its own redis-server on a free port and stops it at the end; never
# touches a Redis already running here. Needs redis-server, redis-cli and
# redis-benchmark (Debian: apt-get install -y redis-server redis-tools).
set -euo pipefail

N=${N:-1000000}
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --logfile "$dir/redis.log" --daemonize yes --pidfile "$dir/redis.pid"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null || true; rm -rf "$dir"' EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 50); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done

now=$(( $(date +%s) * 1000 ))
before=$(cli info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
# 1M members, ids "u:000000001" (11 bytes), last seen over the past 10 min.
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
after=$(cli info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
echo "redis: $(cli info server | awk -F: '/^redis_version:/ {print $2}' | tr -d '\r'), $N members loaded"
awk -v a="$after" -v b="$before" -v n="$N" 'BEGIN { printf "memory: %.1f bytes/member (used_memory delta)\n", (a-b)/n }'

# 500 friends, spread over the set.
python3 - "$N" <<'PY' | cli --pipe >/dev/null
import sys
n = int(sys.argv[1])
ids = ["u:%09d" % i for i in range(0, n, n // 500)][:500]
args = ["SADD", "friends:bench"] + ids
sys.stdout.write("*%d\r\n" % len(args))
for a in args:
    sys.stdout.write("$%d\r\n%s\r\n" % (len(a.encode()), a))
PY

server_usec() { # command name -> usec_per_call from INFO commandstats
  cli info commandstats | tr -d '\r' | awk -F'[:=,]' -v c="cmdstat_$1" '$1 == c { print $7 }'
}
bench() { # label, redis-benchmark args...
  local label=$1; shift
  cli config resetstat >/dev/null
  local rps
  rps=$(redis-benchmark -p "$port" -q "$@" | tr '\r' '\n' | awk '/requests per second/ {print $(NF-5)}' | tail -1)
  printf '%-44s %12s req/s' "$label" "$rps"
}

cutoff=$((now - 600000))
bench "ZADD one at a time (-c 1)" -n 100000 -c 1 -r "$N" ZADD presence:bench "$now" "u:__rand_int__"; echo "   server $(server_usec zadd) us/call"
bench "ZADD pipelined (-c 1 -P 64)" -n 1000000 -c 1 -P 64 -r "$N" ZADD presence:bench "$now" "u:__rand_int__"; echo "   server $(server_usec zadd) us/call"
bench "ZADD 50 clients (-c 50)" -n 300000 -c 50 -r "$N" ZADD presence:bench "$now" "u:__rand_int__"; echo "   server $(server_usec zadd) us/call"
bench "top 100: ZRANGE BYSCORE REV LIMIT 0 100" -n 20000 -c 1 ZRANGE presence:bench +inf "$cutoff" BYSCORE REV LIMIT 0 100; echo "   server $(server_usec zrange) us/call"
bench "count: ZCOUNT (10 min window)" -n 100000 -c 1 ZCOUNT presence:bench "$cutoff" +inf; echo "   server $(server_usec zcount) us/call"
bench "online friends: ZINTERSTORE (500 friends)" -n 5000 -c 1 ZINTERSTORE online:bench 2 presence:bench friends:bench; echo "   server $(server_usec zinterstore) us/call"
bench "last seen x1000: ZMSCORE 1000 ids" -n 2000 -c 1 ZMSCORE presence:bench $(seq -f 'u:%09g' 0 1000 999999 | head -1000); echo "   server $(server_usec zmscore) us/call"

# Expiry: trimming 100k members at once blocks the server for this long.
cli config resetstat >/dev/null
cli zremrangebyscore presence:bench -inf "$((now - 600000 + 60000))" >/dev/null
echo "expiry: ZREMRANGEBYSCORE of 100k members blocks for $(server_usec zremrangebyscore) us"
