#!/usr/bin/env bash
# What the journal costs heartbeats over HTTP (issue 8: at most 10 %
# slower): scripts/bench-server.sh without and with --data-dir, alternated
# ROUNDS times (default 3) in one run so the machine's noise hits both
# alike; prints every run, then the medians. DURATION defaults to 5s.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
export DURATION=${DURATION:-5s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  for j in 0 1; do
    run=$(JOURNAL=$j scripts/bench-server.sh)
    echo "$run"
    echo "$run" | awk -v j="$j" '/^Requests\/sec/ { n++; print j, n, $2 }' >>"$out"
  done
done
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    j, n, rps = line.split()
    runs.setdefault((j, n), []).append(float(rps))
names = {"1": "single heartbeats (req/s)", "2": "batches of 1,000 (req/s)"}
for n in ("1", "2"):
    off = statistics.median(runs[("0", n)])
    on = statistics.median(runs[("1", n)])
    print(f"{names[n]}: journal off {off:,.0f}, on {on:,.0f}: {on / off:.2f}x")
PY
