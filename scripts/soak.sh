#!/usr/bin/env bash
# The soak test: does churn leave memory, file descriptors and tasks where
# they started? Not part of scripts/test.sh (it takes 20 minutes a store).
#
#   scripts/soak.sh [--minutes N] [--store memory|redis|both]
#
# For each store (both by default, one after the other): a webhook receiver
# that answers a third of its requests 503 (scripts/soak/receiver.py), with
# Redis its own redis-server on a free port, `herenow serve` on a free port
# (the memory store with a --data-dir, so the journal and its snapshots
# run too) sending every event but `update` to that receiver (the load
# changes metadata at every heartbeat: hundreds of updates a second, more
# than a receiver failing a third of the time takes, so the outbox would
# fill to its cap, which is data, not a leak), and the load of
# scripts/soak/driver.py for N minutes (default 20): heartbeats, leaves,
# friend-set writes, about 60 WebSockets at a time opening, joining,
# subscribing, watching and changing their watch lists, then closing.
#
# Every 30 s it samples the server's resident memory (VmRSS), its open file
# descriptors (/proc/PID/fd) and its runtime's alive tasks
# (herenow_runtime_alive_tasks on /metrics) into target/soak/STORE.csv.
# After a 3-minute warm-up, the median of the first third of the samples
# is the baseline; the test fails if the median of the last third is more
# than 5 % above it for any of the three (or if the load saw a 5xx, a
# dropped connection, or the server died). Medians, not single samples:
# the sockets open at a sample's moment vary by a few, and the resident
# memory of a server whose sockets come and go swings by a tenth from one
# sample to the next; a leak moves the whole last third.
#
# Stops by itself. Every process it starts is started and stopped by its
# pid (also on Ctrl-C). Uses $HERENOW_BIN, else target/debug/herenow (built
# when missing); a venv .venv-soak with httpx and websockets (git-ignored).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=lib/ports.sh
source scripts/lib/ports.sh

minutes=20
stores=(memory redis)
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --store)
      case "$2" in
        memory|redis) stores=("$2") ;;
        both) stores=(memory redis) ;;
        *) echo "soak.sh: --store memory, redis or both" >&2; exit 2 ;;
      esac
      shift 2 ;;
    *) echo "usage: scripts/soak.sh [--minutes N] [--store memory|redis|both]" >&2; exit 2 ;;
  esac
done
WARMUP_S=180
SAMPLE_S=30
if ! [[ "$minutes" =~ ^[0-9]+$ ]] || [ "$minutes" -lt 6 ] || [ "$minutes" -gt 600 ]; then
  echo "soak.sh: --minutes is 6 to 600 (the warm-up alone is 3)" >&2
  exit 2
fi

venv="$root/.venv-soak"
if ! "$venv/bin/python" -c 'import httpx, websockets' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "httpx==0.28.1" "websockets==15.0.1"
fi
bin="${HERENOW_BIN:-$root/target/debug/herenow}"
if [ ! -x "$bin" ]; then
  cargo build -p herenow --locked
fi
out="$root/target/soak"
mkdir -p "$out"

pids=()
stop_all() {
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
  pids=()
}
trap stop_all EXIT
trap 'exit 130' INT TERM

wait_http() {
  local url=$1 deadline=$((SECONDS + 30))
  until curl -fsS -o /dev/null "$url" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { echo "soak.sh: $url not up in 30 s" >&2; return 1; }
    sleep 0.2
  done
}

sample() {
  local pid=$1 base=$2 t=$3 rss fds tasks
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
  fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
  tasks=$(curl -fsS "$base/metrics" | awk '/^herenow_runtime_alive_tasks[{ ]/ {print $2}')
  echo "$t,$rss,$fds,${tasks:-}"
}

soak() {
  local store=$1 csv="$out/$1.csv" log="$out/$1.log" args=() rport port base
  : >"$log"
  rport=$(free_port)
  "$venv/bin/python" scripts/soak/receiver.py "$rport" >>"$log" 2>&1 &
  pids+=($!)
  case "$store" in
    memory)
      rm -rf "$out/memory-data"
      args=(--data-dir "$out/memory-data")
      ;;
    redis)
      local redis_port
      redis_port=$(free_port)
      mkdir -p "$out/redis"
      redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$out/redis" --logfile "$out/redis/redis.log" &
      pids+=($!)
      local deadline=$((SECONDS + 10))
      until redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG; do
        [ $SECONDS -lt $deadline ] || { echo "soak.sh: redis-server did not start" >&2; return 1; }
        sleep 0.1
      done
      args=(--store "redis://127.0.0.1:$redis_port")
      ;;
  esac
  port=$(free_port)
  base="http://127.0.0.1:$port"
  "$bin" serve --listen "127.0.0.1:$port" "${args[@]}" \
    --webhook "http://127.0.0.1:$rport/hook,events=join,leave,away,back,occupied,vacated" \
    --webhook-secret "whsec_c29hay10ZXN0LXNlY3JldC1vZi0zMi1ieXRlcy0hIQ==" >>"$log" 2>&1 &
  local server=$!
  pids+=("$server")
  wait_http "$base/healthz" || return 1

  echo "soak.sh: $store: $minutes min against $base (pid $server); samples in $csv"
  "$venv/bin/python" scripts/soak/driver.py --base "$base" --seconds $((minutes * 60)) >>"$log" 2>&1 &
  local driver=$!
  pids+=("$driver")
  echo "t_s,rss_kb,fds,tasks" >"$csv"
  # Samples while the load runs in full: not once its last sockets close.
  local started=$SECONDS next=0 t total=$((minutes * 60))
  while kill -0 "$driver" 2>/dev/null; do
    t=$((SECONDS - started))
    if [ "$t" -ge "$next" ] && [ "$t" -lt "$total" ]; then
      if ! kill -0 "$server" 2>/dev/null; then
        echo "soak.sh: $store: the server died; see $log" >&2
        return 1
      fi
      sample "$server" "$base" "$t" >>"$csv"
      next=$((next + SAMPLE_S))
    fi
    sleep 1
  done
  local driven=0
  wait "$driver" || driven=$?
  kill -0 "$server" 2>/dev/null || { echo "soak.sh: $store: the server died; see $log" >&2; return 1; }
  stop_all
  grep '^driver: done' "$log" || true
  grep '^receiver:' "$log" | tail -1 || true
  if [ "$driven" -ne 0 ]; then
    echo "soak.sh: $store: the load saw errors; see $log" >&2
    return 1
  fi
  python3 - "$csv" "$store" "$WARMUP_S" <<'EOF'
import csv, statistics, sys
path, store, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [r for r in csv.DictReader(open(path)) if all(r.values())]
after = [r for r in rows if int(r["t_s"]) >= warmup]
if len(after) < 6:
    sys.exit(f"soak.sh: {store}: {len(after)} samples after the warm-up; 6 needed")
third = len(after) // 3
failed = False
for k, unit in (("rss_kb", "KiB"), ("fds", ""), ("tasks", "")):
    base = statistics.median(float(r[k]) for r in after[:third])
    end = statistics.median(float(r[k]) for r in after[-third:])
    peak = max(float(r[k]) for r in after)
    growth = (end - base) / base * 100 if base else 0.0
    ok = growth <= 5.0
    failed |= not ok
    print(f"soak.sh: {store}: {k}: {base:.0f} -> {end:.0f} {unit} ({growth:+.1f} %, peak {peak:.0f}) {'ok' if ok else 'GREW'}")
sys.exit(1 if failed else 0)
EOF
}

status=0
for store in "${stores[@]}"; do
  soak "$store" || status=1
  stop_all
done
exit "$status"
