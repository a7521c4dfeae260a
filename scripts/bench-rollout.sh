#!/usr/bin/env bash
# Rollout and crash benchmark for BENCHMARKS.md ("A server going away"):
# two `herenow serve --store redis://` (release build) on one redis-server
# this script starts on a free port, MEMBERS pusher-js members and MEMBERS
# members of herenow's browser client (/v1/ws) on server A through a TCP
# proxy, observers of both protocols on B (crates/herenow/tests/pusher/
# rollout.js, the script the rollout tests run):
#
#   1. term: the proxy sends new connections to B and A gets SIGTERM:
#      members seen leaving by the observers, time until every member is
#      subscribed again on B; and the same with `--grace 0`, as herenow
#      was before the grace and as Pusher's own servers and its
#      self-hosted peers (Soketi, Sockudo, Reverb) remove a member;
#   2. kill: the same with SIGKILL, a fifth of the members not coming back:
#      time until they are gone for the observers (the ghosts), the others
#      seen leaving;
#   3. what the grace costs on Redis: the commands per connection opened
#      and ended (INFO commandstats around a run, divided by the
#      connections), and the bytes each connection keeps in its server's
#      set of connections (MEMORY USAGE of a live server's set).
#
# Each mode runs RUNS times (default 3): every run and the median. MEMBERS
# (default 500 per protocol, 1,000 in all) tunes it; CASES (default `term
# kill term-0`) picks the runs. Needs redis-server,
# redis-cli and Node.js with npm (apt-get install -y redis-server nodejs
# npm); the npm packages are those of crates/herenow/tests/pusher.
set -euo pipefail
cd "$(dirname "$0")/.."

MEMBERS=${MEMBERS:-500}
RUNS=${RUNS:-3}
APP=4242:herenow-key:herenow-secret-123
SECRET=bench-rollout-token-secret-bench-rollout

# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

cargo build --release -p herenow --quiet
bin=$PWD/target/release/herenow
(cd crates/herenow/tests/pusher && { [ -d node_modules/pusher-js ] || npm ci --no-audit --no-fund --loglevel=error; })
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
echo "machine: $(nproc) cores (shared), $(uname -m); redis $(cli info server | awk -F: '/^redis_version:/ {print $2}' | tr -d '\r'); node $(node --version); $MEMBERS + $MEMBERS members, $RUNS runs, medians"

# serve NAME [GRACE]: starts a server, sets $url_NAME and $pid_NAME.
serve() {
  "$bin" serve --listen 127.0.0.1:0 --store "redis://127.0.0.1:$rport" --pusher-app "$APP" \
    --token-secret "$SECRET" --grace "${2:-5s}" >"$dir/$1.out" 2>"$dir/$1.err" &
  local pid=$!
  pids+=("$pid")
  local url=
  for _ in $(seq 100); do
    url=$(sed -n 's|.*listening on \(http://[^ /]*\).*|\1|p' "$dir/$1.out" | head -n1)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "herenow did not start: $(cat "$dir/$1.err")" >&2; exit 1; }
  printf -v "url_$1" '%s' "$url"
  printf -v "pid_$1" '%s' "$pid"
}

# run MODE [GRACE_MS]: one run on a fresh pair of servers; prints
# rollout.js's lines.
run() {
  local grace_ms=${2:-5000}
  cli flushall >/dev/null
  serve a "${grace_ms}ms"
  serve b "${grace_ms}ms"
  (cd crates/herenow/tests/pusher && A_URL=$url_a B_URL=$url_b A_PID=$pid_a PUSHER_APP=$APP \
    MODE=$1 MEMBERS=$MEMBERS GRACE_MS=$grace_ms node --experimental-websocket rollout.js) >"$dir/run.out" 2>"$dir/run.err" \
    || { cat "$dir/run.out" "$dir/run.err" >&2; exit 1; }
  wait "$pid_a" 2>/dev/null || true
  kill "$pid_b" 2>/dev/null || true
  wait "$pid_b" 2>/dev/null || true
  pids=()
  cat "$dir/run.out"
}

for case in ${CASES:-term kill term-0}; do
  mode=${case%-0}
  grace_ms=5000
  [ "$case" = term-0 ] && grace_ms=0
  echo "== $mode, grace $grace_ms ms"
  : >"$dir/$case.back"
  : >"$dir/$case.left"
  : >"$dir/$case.gone"
  for i in $(seq "$RUNS"); do
    out=$(run "$mode" "$grace_ms")
    echo "$out" | sed "s/^/  run $i: /" | grep 'measured:' || true
    echo "$out" | sed -n 's/.*reconnected to B \([0-9]*\) ms.*/\1/p' >>"$dir/$case.back"
    echo "$out" | sed -n 's/.*members seen leaving by the observers: \([0-9]*\).*/\1/p' | head -n1 >>"$dir/$case.left"
    echo "$out" | sed -n 's/.*were gone for the observers \([0-9]*\) ms.*/\1/p' >>"$dir/$case.gone"
  done
  echo "median: every member back on B after $(median <"$dir/$case.back") ms; members seen leaving: $(median <"$dir/$case.left")"
  if [ -s "$dir/$case.gone" ]; then
    echo "median: the members that did not come back gone for the observers $(median <"$dir/$case.gone") ms after SIGKILL"
  fi
done

# What the grace costs on Redis: of the commands of one term run, those
# that keep servers' sets of connections (SADD, SREM, SPOP); and the bytes
# one connection keeps in its server's set, from a set of MEMBERS entries
# shaped as herenow writes them (space, member, connection id).
echo "== cost"
cli flushall >/dev/null
cli config resetstat >/dev/null
serve a
serve b
(cd crates/herenow/tests/pusher && A_URL=$url_a B_URL=$url_b A_PID=$pid_a PUSHER_APP=$APP \
  MODE=term MEMBERS=$MEMBERS GRACE_MS=5000 node --experimental-websocket rollout.js) >"$dir/run.out" 2>&1 || { cat "$dir/run.out" >&2; exit 1; }
stat() { cli info commandstats | tr -d '\r' | awk -F'[=,:]' -v c="cmdstat_$1" '$1 == c {n = $3} END {print n + 0}'; }
total=$(cli info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_/ {n += $3} END {print n}')
own=$(( $(stat sadd) + $(stat srem) + $(stat spop) ))
echo "redis commands in one term run: $total, of which the servers' sets of connections: $own ($(awk -v a="$own" -v b="$total" 'BEGIN {printf "%.1f", 100 * a / b}') %)"
for i in $(seq "$MEMBERS"); do printf 'SADD herenow:{instances}:conns:bench "presence-rollout\\nu:member-%d\\np1234567.%d"\n' "$i" "$i"; done | cli >/dev/null
bytes=$(cli memory usage 'herenow:{instances}:conns:bench' samples 0)
echo "a server's set of $MEMBERS connections: $bytes bytes ($((bytes / MEMBERS)) bytes per connection)"
