#!/usr/bin/env bash
# Profiles `herenow serve` under the one-space batch load of
# scripts/bench-scale.sh (ten bodies of 1,000 ids, rotated, 8 connections)
# with perf: where a busy space's time goes at n cores (issue 10), and
# with VAR=V settings (HERENOW_SPACE_STRIPES=4, say) how a configuration
# changes it.
#
#   scripts/profile-batch.sh pack [DIR]        # here: DIR (default .device-prof)
#   scripts/profile-batch.sh run N TAG [VAR=V ...]   # there, or here
#
# `pack` builds a release herenow and puts it (function symbols kept, debug
# info stripped), perf, wrk and the shared libraries they load (but the C
# and C++ runtimes) and the load's Lua script into DIR: about 60 MB, for a
# machine without build tools or network (the library's `device`: carry
# DIR). Needs perf and wrk here (apt-get install -y linux-perf wrk).
#
# `run` starts the server on cores 0..N-1 with N tokio workers and the
# VAR=V settings in its environment, loads it for 10 s with wrk on
# LOAD_CORES (default 8-15), counts its context switches for 2 s and
# samples it for 4 s (perf record -F 1999), then writes to OUT (default
# ./profile-out): wrk-TAG.txt, stat-TAG.txt and rep-TAG.txt (the share of
# samples per thread name, then per thread and function). PROF=DIR names
# the packed folder (default .device-prof).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/kit.sh
. scripts/lib/kit.sh

pack() {
  local out=${1:-.device-prof}
  for tool in perf wrk; do
    command -v "$tool" >/dev/null || { echo "profile-batch: $tool is missing here" >&2; exit 1; }
  done
  cargo build --release -p herenow --quiet
  rm -rf "$out"
  mkdir -p "$out/bin" "$out/lib"
  cp target/release/herenow "$out/bin/"
  strip --strip-debug "$out/bin/herenow"
  cp -L "$(command -v perf)" "$(command -v wrk)" "$out/bin/"
  kit_libs "$out/lib" "$out/bin/perf" "$out/bin/wrk"
  python3 - "$out/batch1.lua" <<'PY'
import sys
def body(first):
    items = ",".join('{"id":"user-%d"}' % (first + i) for i in range(1000))
    return '{"heartbeats":[%s]}' % items
with open(sys.argv[1], "w") as f:
    f.write("local bodies = {\n")
    for b in range(10):
        f.write("  [==[%s]==],\n" % body(b * 1000))
    f.write("}\nlocal n = 0\nrequest = function()\n  n = n + 1\n  local b = n % 10\n")
    f.write('  return wrk.format("POST", "/v1/spaces/load/heartbeats", '
            '{["Content-Type"] = "application/json"}, bodies[b + 1])\nend\n')
PY
  echo "packed $(git rev-parse --short HEAD) into $out: $(du -sh "$out" | cut -f1)"
}

run() {
  local n=$1 tag=$2
  shift 2
  local dir=${PROF:-.device-prof} out=${OUT:-profile-out} port=8111
  local bin=$dir/bin
  mkdir -p "$out"
  export LD_LIBRARY_PATH=$PWD/$dir/lib
  env "$@" RUST_LOG=warn TOKIO_WORKER_THREADS="$n" taskset -c "0-$((n - 1))" \
    "$bin/herenow" serve --listen "127.0.0.1:$port" >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  taskset -c "${LOAD_CORES:-8-15}" "$bin/wrk" -t8 -c8 -d10s -s "$dir/batch1.lua" \
    "http://127.0.0.1:$port" >"$out/wrk-$tag.txt" &
  local load=$!
  sleep 2
  "$bin/perf" stat -e task-clock,context-switches,cpu-migrations -p "$server" -- sleep 2 \
    2>"$out/stat-$tag.txt"
  "$bin/perf" record -F 1999 -p "$server" -o "$out/p-$tag.data" -- sleep 4 2>"$out/rec-$tag.err"
  wait "$load"
  kill "$server"
  wait "$server" 2>/dev/null || true
  {
    "$bin/perf" report -i "$out/p-$tag.data" --stdio --no-children --sort comm --percent-limit 1
    "$bin/perf" report -i "$out/p-$tag.data" --stdio --no-children --sort comm,sym --percent-limit 0.4
  } 2>/dev/null | grep -v -e '^#' -e '^$' >"$out/rep-$tag.txt" || true
  rm -f "$out/p-$tag.data"
  grep 'Requests/sec' "$out/wrk-$tag.txt"
  head -12 "$out/rep-$tag.txt"
}

case ${1:-} in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,25p' "$0" >&2; exit 2 ;;
esac
