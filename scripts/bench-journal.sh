#!/usr/bin/env bash
# What the journal costs heartbeats over HTTP (the target: at most 15 %
# slower). Starts two release servers side by side, one without and one
# with --data-dir (every heartbeat journaled), and drives them with wrk in
# turns: ROUNDS rounds (default 10) of DURATION (default 3s) per load and
# server, the order of the two servers swapped every round, so the
# machine's noise hits both alike. Loads as in scripts/bench-server.sh:
# single heartbeats (64 connections, ids over 100k users) and batches of
# 1,000 (8 connections). Prints every run, then the medians and the median
# of the per-round ratios. Needs wrk (Debian: apt-get install -y wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-3s}
THREADS=${THREADS:-1}

cargo build --release -p herenow --quiet
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
declare -A port
for j in 0 1; do
  port[$j]=$(free_port)
  args=(serve --listen "127.0.0.1:${port[$j]}")
  if [ "$j" = 1 ]; then args+=(--data-dir "$dir/data"); fi
  RUST_LOG=warn target/release/herenow "${args[@]}" >"$dir/server-$j.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:${port[$j]}/healthz" >/dev/null && break; sleep 0.1; done
done

cp scripts/loads/single.lua "$dir/single.lua"
python3 - "$dir/batch.lua" <<'PY'
import sys
# Ten different bodies of 1,000 members each, rotated (as in
# scripts/bench-server.sh).
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

ticks() { # server -> its CPU time so far (user + system), in clock ticks
  awk '{ print $14 + $15 }' "/proc/${pids[$1]}/stat"
}
hz=$(getconf CLK_TCK)
busy() { # the whole machine's busy CPU time so far, in clock ticks
  awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}

run() { # load server -> requests/s
  local conns=64
  if [ "$1" = batch ]; then conns=8; fi
  wrk -t"$THREADS" -c"$conns" -d"$DURATION" -s "$dir/$1.lua" "http://127.0.0.1:${port[$2]}" |
    awk '/^Requests\/sec/ { print $2 } /Non-2xx/ { print "non-2xx answers: " $0 > "/dev/stderr"; exit 1 }'
}

# Warm both: every user present in both stores, the journal's file and
# buffers grown.
for j in 0 1; do run batch "$j" >/dev/null; done
echo "== $ROUNDS rounds of wrk -t$THREADS -d$DURATION per load and server, alternated"
out="$dir/runs"
for r in $(seq "$ROUNDS"); do
  order="0 1"
  if [ $((r % 2)) = 0 ]; then order="1 0"; fi
  for load in single batch; do
    for j in $order; do
      before=$(ticks "$j") all_before=$(busy)
      rps=$(run "$load" "$j")
      after=$(ticks "$j") all_after=$(busy)
      # The server's CPU per request (wrk's rate times the run's length),
      # in microseconds: less bent than the rate by what else shares the
      # cores.
      # The machine's too: wrk, and the kernel's writeback of the journal.
      cpu=$(python3 -c "print(round(($after - $before) / $hz / ($rps * ${DURATION%s}) * 1e6, 2))")
      all=$(python3 -c "print(round(($all_after - $all_before) / $hz / ($rps * ${DURATION%s}) * 1e6, 2))")
      echo "round $r $load journal=$j $rps req/s, CPU per request: server $cpu us, machine $all us"
      echo "$r $load $j $rps $cpu $all" >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import statistics, sys
runs, cpus, alls = {}, {}, {}
for line in open(sys.argv[1]):
    r, load, j, rps, cpu, machine = line.split()
    runs.setdefault((load, j), {})[r] = float(rps)
    cpus.setdefault((load, j), {})[r] = float(cpu)
    alls.setdefault((load, j), {})[r] = float(machine)
names = {"single": "single heartbeats (req/s)", "batch": "batches of 1,000 (req/s)"}
for load in ("single", "batch"):
    off, on = runs[(load, "0")], runs[(load, "1")]
    m_off, m_on = statistics.median(off.values()), statistics.median(on.values())
    paired = statistics.median(on[r] / off[r] for r in off)
    print(f"{names[load]}: journal off {m_off:,.0f}, on {m_on:,.0f}: {m_on / m_off:.2f}x "
          f"(median of per-round ratios {paired:.2f}x)")
    for what, table in (("server", cpus), ("machine", alls)):
        c_off, c_on = table[(load, "0")], table[(load, "1")]
        c_paired = statistics.median(c_on[r] / c_off[r] for r in c_off)
        print(f"  {what} CPU per request: journal off {statistics.median(c_off.values()):.1f} us, "
              f"on {statistics.median(c_on.values()):.1f} us (median of per-round ratios {c_paired:.2f}x)")
PY
echo "== journal: $(du -sh "$dir/data" | cut -f1) in $dir/data"
