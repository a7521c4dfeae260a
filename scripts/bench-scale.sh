#!/usr/bin/env bash
# Scaling with cores (issue 10), for BENCHMARKS.md: a release `herenow serve`
# pinned with taskset to 1, 2, 4, 8... cores, driven by wrk pinned to the
# other cores, under four loads: batches of 1,000 heartbeats into one space
# and into 64 spaces, single heartbeats into one space and into 64 spaces.
# The memory store always; with REDIS=1 also --store redis:// against a
# redis-server this script starts on a free port. Prints one table.
#
#   scripts/bench-scale.sh                   # cores 1 2 4 8 ... up to half the machine
#   CORES="1 2 4 8" scripts/bench-scale.sh   # the server's core counts
#   REDIS=1 scripts/bench-scale.sh           # the Redis store's rows too
#   STORES="redis" REDIS=1 scripts/bench-scale.sh   # only the rows named
#   STORES="memory memory:HERENOW_SPACE_STRIPES=4" scripts/bench-scale.sh
#                                            # a row per configuration: the store,
#                                            # then the server's environment after ':'
#
# The server gets the first n CPUs of the CPU order (0, 1, 2... where
# there are no hyperthreads; else each physical core's hyperthreads
# together, so for an even n the server and wrk share no physical core; CPU_ORDER
# overrides) and the load tool the CPUs after them (wrk
# -t = as many as it gets, at most 8). When the machine has no core left for
# the load (a 2-core machine serving on 2 cores), wrk shares the server's
# cores and the table says so: such a row measures the pair, not the server.
# Redis, when measured, gets the last core to itself where the machine has
# one to spare, else it shares too.
#
# The loads are those of scripts/bench-server.sh: batch bodies are ten
# bodies of 1,000 ids each (user-0 ... user-9999), rotated; single
# heartbeats draw ids from 100k users. With 64 spaces each space has a
# body of 1,000 ids of its own (64,000 members), and a single heartbeat
# goes to space load-(id % 64), so in every load a member stays in one
# space and, after the warm-up, heartbeats are mostly of members already
# present (a body rotated over spaces would make most of its heartbeats
# joins, and measure those instead). Each run starts with a warm-up of WARMUP (default 1s);
# Redis' single loads need about 8s of it before their 100k members are
# all present (REDIS=1 WARMUP=8s). REDIS_DELAY_US=N puts Redis "on another
# machine": the server reaches it through a proxy that holds every byte N
# microseconds each way (crates/herenow-testkit/examples/delay_proxy.rs, on
# the core before Redis' where one is spare, else on Redis'), as a network
# between two hosts would. Connections: 8 for batches, 64 for singles
# (BATCH_CONNECTIONS, SINGLE_CONNECTIONS). Each cell is the median of ROUNDS
# (default 3) runs of DURATION (default 8s), each on a fresh server, the
# rows' runs taking turns; the server's CPU (utime + stime over the run,
# from /proc, median) is given as cores busy; Redis rows add Redis' cores
# busy, the heartbeats each script call carried and Redis' microseconds
# per script call (INFO commandstats over the run), which say whether
# Redis' one core is the limit and why, and how long herenow waited for
# each heartbeat script call (its /metrics, herenow_redis_command_duration_seconds
# over the run): a wait much longer than Redis' time is the round trip and
# herenow's own scheduling. Needs wrk (apt-get install -y wrk) and, for REDIS=1, redis-server.
# BIN=path measures that herenow binary instead of building one.
#
# On a machine without cargo, wrk or Redis (a carried `device` machine),
# KIT=<folder made by scripts/device-kit.sh> takes all of them from there.
# The server's tokio workers are set to its core count as well
# (TOKIO_WORKER_THREADS; WORKERS=n sets them apart from the cores, to see
# how a store copes with more threads than cores), and the script says
# whether taskset's pinning is honoured there (some sandboxes accept it
# and pin nothing).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-1s}
ROUNDS=${ROUNDS:-3}
REDIS=${REDIS:-0}
REDIS_DELAY_US=${REDIS_DELAY_US:-0}
BATCH_CONNECTIONS=${BATCH_CONNECTIONS:-8}
SINGLE_CONNECTIONS=${SINGLE_CONNECTIONS:-64}
LOADS=${LOADS:-"batch1 batch64 single1 single64"}
total=$(nproc)
if [ -z "${CORES:-}" ]; then
  CORES=1
  n=2
  while [ $((n * 2)) -le "$total" ] || { [ "$total" -le 2 ] && [ "$n" -le "$total" ]; }; do
    CORES="$CORES $n"
    n=$((n * 2))
  done
fi

# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Redis' side of a run, read before and after it: its CPU ticks, and the
# calls and microseconds of every script command (INFO commandstats:
# EVALSHA and EVAL, read-only forms too), so a row can say whether Redis'
# core was full and how many heartbeats each script call carried.
redis_stats() {
  local calls
  calls=$("${redis_cli[@]}" -p "$rport" info commandstats | tr -d '\r' |
    awk -F'[:,=]' '$1 ~ /^cmdstat_eval/ {c += $3; u += $5} END {print c + 0, u + 0}')
  echo "$(cpu_ticks "$(cat "$dir/redis.pid")") $calls"
}
# herenow's side of a Redis run, read before and after it from the
# server's /metrics: the seconds and the count of its heartbeat script
# calls (herenow_redis_command_duration_seconds{op="heartbeat"}), so a row
# can say how long each call took as herenow waited for it, next to what
# Redis spent on it. HTTP/1.0 keeps the body unchunked; bash alone, no curl.
herenow_calls() {
  local out
  out=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" &&
    printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 &&
    tr -d '\r' <&3) 2>/dev/null || true)
  echo "$out" | awk '/^herenow_redis_command_duration_seconds_(sum|count)\{/ && /op="heartbeat"/ {
      if ($1 ~ /_sum/) s += $NF; else c += $NF } END {printf "%.6f %d\n", s, c}'
}

KIT=${KIT:-}
if [ -n "$KIT" ]; then
  herenow=$KIT/bin/herenow
  delay_proxy=$KIT/bin/delay_proxy
  wrk=(env LD_LIBRARY_PATH="$KIT/lib" "$KIT/bin/wrk")
  redis_server=(env LD_LIBRARY_PATH="$KIT/lib" "$KIT/bin/redis-server")
  redis_cli=(env LD_LIBRARY_PATH="$KIT/lib" "$KIT/bin/redis-cli")
else
  [ -z "${BIN:-}" ] && cargo build --release -p herenow --quiet
  herenow=${BIN:-target/release/herenow}
  if [ "$REDIS_DELAY_US" != 0 ]; then
    cargo build --release -p herenow-testkit --example delay_proxy --quiet
  fi
  delay_proxy=target/release/examples/delay_proxy
  wrk=(wrk)
  redis_server=(redis-server)
  redis_cli=(redis-cli)
fi
# Whether a port answers (bash alone: no curl needed).
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pinning="honoured"
[ "$(taskset -c 0 nproc 2>/dev/null)" = 1 ] || pinning="NOT honoured (taskset -c 0 nproc says $(taskset -c 0 nproc 2>&1)): the server's workers are still its core count, but nothing keeps wrk off its cores"
dir=$(mktemp -d)
cleanup() {
  if [ -f "$dir/server.pid" ]; then kill "$(cat "$dir/server.pid")" 2>/dev/null || true; fi
  if [ -f "$dir/redis.pid" ]; then kill "$(cat "$dir/redis.pid")" 2>/dev/null || true; fi
  if [ -f "$dir/proxy.pid" ]; then kill "$(cat "$dir/proxy.pid")" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

# ---------------------------------------------------------------- the loads
python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
def body(first):
    items = ",".join('{"id":"user-%d"}' % (first + i) for i in range(1000))
    return '{"heartbeats":[%s]}' % items
# One space: ten bodies of 1,000 ids, rotated (10,000 members). 64 spaces:
# a body of 1,000 ids of its own per space, always sent there (64,000
# members), so that after the warm-up both loads write members already
# present, as the single loads do; a body rotated over spaces would make
# most of its heartbeats joins.
for spaces, count in ((1, 10), (64, 64)):
    with open("%s/batch%d.lua" % (d, spaces), "w") as f:
        f.write("local bodies = {\n")
        for b in range(count):
            f.write("  [==[%s]==],\n" % body(b * 1000))
        f.write("}\nlocal n = 0\n")
        f.write("request = function()\n  n = n + 1\n  local b = n %% %d\n" % count)
        if spaces == 1:
            f.write('  local path = "/v1/spaces/load/heartbeats"\n')
        else:
            f.write('  local path = "/v1/spaces/load-" .. b .. "/heartbeats"\n')
        f.write('  return wrk.format("POST", path, {["Content-Type"] = "application/json"}, bodies[b + 1])\nend\n')
    # Ids from 100k users; with 64 spaces each user always goes to the
    # same space (id % 64), so both loads hold 100k members.
    with open("%s/single%d.lua" % (d, spaces), "w") as f:
        f.write("local counter = 0\nrequest = function()\n  counter = counter + 1\n")
        f.write("  local id = (counter * 7919) % 100000\n")
        if spaces == 1:
            f.write('  local path = "/v1/spaces/load/heartbeat"\n')
        else:
            f.write('  local path = "/v1/spaces/load-" .. (id %% %d) .. "/heartbeat"\n' % spaces)
        f.write('  return wrk.format("POST", path, {["Content-Type"] = "application/json"}, \'{"id":"user-\' .. id .. \'"}\')\nend\n')
PY

# ---------------------------------------------------------------- one run
# run STORE_ARGS CORELIST LOADCORES LOAD -> prints "rate cores_busy"
run() {
  local store_args=$1 servercores=$2 loadcores=$3 load=$4 envs=$5
  local port threads conns workers
  workers=${WORKERS:-$(echo "$servercores" | tr ',' '\n' | wc -l)}
  port=$(free_port)
  # shellcheck disable=SC2086
  env RUST_LOG=warn $envs TOKIO_WORKER_THREADS="$workers" taskset -c "$servercores" "$herenow" serve \
    --listen "127.0.0.1:$port" $store_args >"$dir/server.log" 2>&1 &
  server=$!
  echo "$server" >"$dir/server.pid"
  for _ in $(seq 100); do listening "$port" && break; sleep 0.1; done
  threads=$(( $(echo "$loadcores" | tr ',' '\n' | wc -l) ))
  [ "$threads" -gt 8 ] && threads=8
  case $load in batch*) conns=$BATCH_CONNECTIONS ;; *) conns=$SINGLE_CONNECTIONS ;; esac
  [ "$conns" -lt "$threads" ] && threads=$conns
  # Warm the spaces up (their members exist, as in a live site), briefly.
  taskset -c "$loadcores" "${wrk[@]}" -t"$threads" -c"$conns" -d"$WARMUP" -s "$dir/$load.lua" "http://127.0.0.1:$port" >/dev/null
  local before after hz out rate rbefore=() rafter=() hbefore=() hafter=()
  hz=$(getconf CLK_TCK)
  [ -n "$store_args" ] && read -ra rbefore < <(redis_stats) && read -ra hbefore < <(herenow_calls "$port")
  before=$(cpu_ticks "$server")
  out=$(taskset -c "$loadcores" "${wrk[@]}" -t"$threads" -c"$conns" -d"$DURATION" -s "$dir/$load.lua" "http://127.0.0.1:$port")
  after=$(cpu_ticks "$server")
  [ -n "$store_args" ] && read -ra rafter < <(redis_stats) && read -ra hafter < <(herenow_calls "$port")
  if echo "$out" | grep -q 'Non-2xx'; then
    echo "$out" >&2
    echo "error answers in $load" >&2
    exit 1
  fi
  rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  case $load in batch*) rate=$(awk -v r="$rate" 'BEGIN {printf "%.0f", r * 1000}') ;; esac
  kill "$server"; wait "$server" 2>/dev/null || true
  rm -f "$dir/server.pid"
  local secs=${DURATION%s} redis="- - - -"
  # Redis rows: Redis' cores busy, heartbeats per script call, Redis'
  # microseconds per script call, microseconds per heartbeat call as
  # herenow waited for it.
  if [ -n "$store_args" ]; then
    redis=$(awk -v t=$((rafter[0] - rbefore[0])) -v c=$((rafter[1] - rbefore[1])) \
      -v u=$((rafter[2] - rbefore[2])) -v hz="$hz" -v s="$secs" -v r="$rate" \
      -v hs="${hafter[0]:-0}" -v hs0="${hbefore[0]:-0}" -v hc=$((${hafter[1]:-0} - ${hbefore[1]:-0})) \
      'BEGIN {if (c == 0) c = 1; w = "-"; if (hc > 0) w = sprintf("%.1f", (hs - hs0) * 1e6 / hc);
        printf "%.2f %.1f %.1f %s", t / hz / s, r * s / c, u / c, w}')
  fi
  echo "$rate $(awk -v t=$((after - before)) -v hz="$hz" -v s="$secs" 'BEGIN {printf "%.2f", t / hz / s}') $redis"
}

# The CPUs in the order they are handed out: this process's CPUs, each
# physical core's hyperthreads next to each other, so that the server's
# first n CPUs are whole physical cores (where n is even) and never share
# one with wrk's or Redis'. Without hyperthreads: 0, 1, 2... CPU_ORDER="0
# 8 1 9 ..." sets it by hand.
if [ -n "${CPU_ORDER:-}" ]; then
  read -ra order <<<"$CPU_ORDER"
else
  mapfile -t order < <(python3 - <<'PY'
import os
allowed = sorted(os.sched_getaffinity(0))
def siblings(c):
    try:
        with open("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % c) as f:
            text = f.read().strip()
    except OSError:
        return [c]
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out
seen, order = set(), []
for c in allowed:
    for s in [c] + siblings(c):
        if s in allowed and s not in seen:
            seen.add(s)
            order.append(s)
print("\n".join(map(str, order)))
PY
)
fi
# pick A B: the CPUs at places A..B of that order, comma-separated.
pick() {
  local IFS=,
  echo "${order[*]:$1:$(($2 - $1 + 1))}"
}

redis_core=""
store_rows=("memory")
[ "$REDIS" = 1 ] && store_rows+=("redis")
# STORES="redis memory:HERENOW_SPACE_STRIPES=4 ..." keeps only the rows named.
[ -n "${STORES:-}" ] && read -ra store_rows <<<"$STORES"
if [ "$REDIS" = 1 ]; then
  rport=$(free_port)
  maxcores=$(echo "$CORES" | tr ' ' '\n' | sort -n | tail -1)
  if [ "$total" -gt $((maxcores + 1)) ]; then redis_core=${order[$((total - 1))]}; fi
  redis_pin=${redis_core:-$(pick 0 $((total - 1)))}
  # The delaying proxy gets a core of its own next to Redis' where there
  # is one to spare, else shares Redis'.
  proxy_pin=$redis_pin
  redis_cores=1
  if [ "$REDIS_DELAY_US" != 0 ] && [ "$total" -gt $((maxcores + 2)) ]; then
    proxy_pin=${order[$((total - 2))]}
    redis_cores=2
  fi
  taskset -c "$redis_pin" "${redis_server[@]}" --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" --daemonize yes --pidfile "$dir/redis.pid"
  for _ in $(seq 50); do "${redis_cli[@]}" -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
  # The port the server is given: Redis', or the delaying proxy's.
  sport=$rport
  if [ "$REDIS_DELAY_US" != 0 ]; then
    sport=$(free_port)
    taskset -c "$proxy_pin" "$delay_proxy" "$sport" "$rport" "$REDIS_DELAY_US" 2>"$dir/proxy.log" &
    echo $! >"$dir/proxy.pid"
    for _ in $(seq 50); do listening "$sport" && break; sleep 0.1; done
  fi
fi

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# Which cores share a physical core (hyperthreads) and which share a
# cache: "8 cores" are 8 physical cores or 4 pairs, and the rows read
# differently.
echo "core siblings: $(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list 2>/dev/null | sort -un | tr '\n' ' ')(L3 shared by: $(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list 2>/dev/null || echo unknown))"
echo "wrk: $BATCH_CONNECTIONS connections for batches, $SINGLE_CONNECTIONS for singles; $DURATION per run, median of $ROUNDS runs; fresh server per run"
echo "server cores: $CORES (tokio workers ${WORKERS:-the same}); stores: ${store_rows[*]}; pinning $pinning"
echo "CPU order (server from the front, Redis at the end): ${order[*]}"
[ -n "$redis_core" ] && echo "redis-server pinned to core $redis_core"
[ "$REDIS_DELAY_US" != 0 ] && echo "Redis reached through a proxy holding each byte ${REDIS_DELAY_US} us each way, pinned to core(s) $proxy_pin"
# Rounds go over every store row in turn, so the machine's noise falls on
# all of them alike.
declare -A rates cpus rcpus percall usecs waits
for n in $CORES; do
  servercores=$(pick 0 $((n - 1)))
  for load in $LOADS; do
    for round in $(seq "$ROUNDS"); do
      for store in "${store_rows[@]}"; do
        store_args=""
        # A row "memory:A=1,B=2" is the memory store with those variables
        # in the server's environment (a configuration to compare).
        envs=""
        kind=${store%%:*}
        [ "$kind" != "$store" ] && envs=${store#*:} && envs=${envs//,/ }
        [ "$kind" = redis ] && store_args="--store redis://127.0.0.1:$sport"
        last_load=$((total - 1))
        [ -n "$redis_core" ] && [ "$kind" = redis ] && last_load=$((total - 1 - redis_cores))
        if [ "$n" -le "$last_load" ]; then loadcores=$(pick "$n" "$last_load"); else loadcores=$servercores; fi
        [ "$kind" = redis ] && "${redis_cli[@]}" -p "$rport" flushall >/dev/null
        read -r rate cpu rcpu per usec waited < <(run "$store_args" "$servercores" "$loadcores" "$load" "$envs") || true
        if [ -z "${cpu:-}" ]; then echo "the $load run failed" >&2; exit 1; fi
        said=""
        [ "$rcpu" != - ] && said="; Redis CPU $rcpu cores, $per heartbeats and $usec us of Redis per script call, $waited us per heartbeat call as herenow waited"
        echo "  round $round: $store, $n cores, $load: $rate (server CPU $cpu cores$said)" >&2
        rates[$store|$n|$load]="${rates[$store|$n|$load]:-} $rate"
        cpus[$store|$n|$load]="${cpus[$store|$n|$load]:-} $cpu"
        rcpus[$store|$n|$load]="${rcpus[$store|$n|$load]:-} $rcpu"
        percall[$store|$n|$load]="${percall[$store|$n|$load]:-} $per"
        usecs[$store|$n|$load]="${usecs[$store|$n|$load]:-} $usec"
        waits[$store|$n|$load]="${waits[$store|$n|$load]:-} $waited"
        unset rate cpu rcpu per usec waited
      done
    done
  done
done
results=()
for store in "${store_rows[@]}"; do
  for n in $CORES; do
    last_load=$((total - 1))
    [ -n "$redis_core" ] && [ "${store%%:*}" = redis ] && last_load=$((total - 1 - redis_cores))
    note=""
    [ "$n" -gt "$last_load" ] && note=" (wrk on the same cores)"
    row="| $store | $n$note |"
    for load in $LOADS; do
      # shellcheck disable=SC2086
      r=$(printf '%s\n' ${rates[$store|$n|$load]} | median)
      # shellcheck disable=SC2086
      c=$(printf '%s\n' ${cpus[$store|$n|$load]} | median)
      case $load in
        batch*) cell=$(awk -v r="$r" 'BEGIN {printf "%.2fM members/s", r / 1e6}') ;;
        *) cell=$(awk -v r="$r" 'BEGIN {printf "%.1fk req/s", r / 1e3}') ;;
      esac
      extra=""
      if [ "${store%%:*}" = redis ]; then
        # shellcheck disable=SC2086
        extra="; Redis $(printf '%s\n' ${rcpus[$store|$n|$load]} | median), $(printf '%s\n' ${percall[$store|$n|$load]} | median)/call, $(printf '%s\n' ${usecs[$store|$n|$load]} | median) us/call"
        # shellcheck disable=SC2086
        w=$(printf '%s\n' ${waits[$store|$n|$load]} | grep -v '^-$' || true)
        [ -n "$w" ] && extra="$extra, herenow waits $(echo "$w" | median) us/call"
      fi
      row="$row $cell (CPU $c$extra) |"
    done
    results+=("$row")
  done
done
echo
header="| store | server cores |"
sep="| --- | --- |"
for load in $LOADS; do
  case $load in
    batch1) header="$header batches of 1,000, one space |" ;;
    batch64) header="$header batches of 1,000, 64 spaces |" ;;
    single1) header="$header single heartbeats, one space |" ;;
    single64) header="$header single heartbeats, 64 spaces |" ;;
  esac
  sep="$sep --- |"
done
echo "$header"
echo "$sep"
printf '%s\n' "${results[@]}"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
