#!/usr/bin/env bash
# Schema-driven fuzzing of the HTTP API with schemathesis: every phase
# (examples, coverage, fuzzing, stateful) and every check, against a
# herenow server this script starts, from the server's own /openapi.json.
# Any failure (a 5xx, an answer or event off its schema, valid data refused,
# invalid data accepted) exits non-zero.
#
#   scripts/fuzz-api.sh                          # long run: memory store, 300 s
#   scripts/fuzz-api.sh --max-time 1800          # longer
#   scripts/fuzz-api.sh --store redis://127.0.0.1:6379/15
#   scripts/fuzz-api.sh --redis                  # over a redis-server it starts
#   HERENOW_REDIS_SHARDS=4 scripts/fuzz-api.sh --redis-cluster   # 3 masters it starts
#   scripts/fuzz-api.sh --max-examples 10 --max-time 60   # what fuzz-api-short.sh runs
#   scripts/fuzz-api.sh --seed 42                # reproduce a run
#   scripts/fuzz-api.sh --open                   # a server without keys
#
# Options: --open (a server without API keys, fuzzed without one: the
# document then says a key is optional, and every request must be served
# as such; by default the server has a write key and every request sends
# it), --store URL (herenow's --store; default memory), --redis /
# --redis-cluster (a redis-server, or a cluster of three, started here on
# free ports and stopped by pid at the end), --max-time
# SECONDS (budget of the whole run; fuzzing and stateful repeat until it is
# spent; default 300), --max-examples N (per operation; default 200),
# --seed N, --workers N (default 1), and after `--` any schemathesis option.
#
# Uses $HERENOW_BIN when set, else builds target/debug/herenow. Installs
# schemathesis (pinned) into .venv-fuzz (git-ignored) when missing.
#
# JSON Schema cannot state a few of the server's rules (clock, stored state,
# two fields at once, UTF-8 byte lengths); scripts/fuzz-api-hooks.py accepts
# their `400`s and nothing else (see there, and
# crates/herenow-server/src/openapi/rules.rs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

SCHEMATHESIS_VERSION=4.32.5
store=memory
max_time=300
max_examples=200
workers=1
open=0
seed=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --store) store="$2"; shift 2 ;;
    --redis) store=spawn-redis; shift ;;
    --redis-cluster) store=spawn-cluster; shift ;;
    --max-time) max_time="$2"; shift 2 ;;
    --max-examples) max_examples="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --seed) seed=(--seed "$2"); shift 2 ;;
    --) shift; extra=("$@"); break ;;
    --open) open=1; shift ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "fuzz-api.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "${HERENOW_BIN:-}" ]; then
  cargo build -q -p herenow
  HERENOW_BIN="$root/target/debug/herenow"
fi
if [ ! -x "$HERENOW_BIN" ]; then
  echo "fuzz-api.sh: no herenow binary at $HERENOW_BIN (build it, or set HERENOW_BIN)" >&2
  exit 1
fi

venv="$root/.venv-fuzz"
if [ "$("$venv/bin/schemathesis" --version 2>/dev/null)" != "schemathesis, version $SCHEMATHESIS_VERSION" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

work="$(mktemp -d)"
pid=""
redis_pids=()
cleanup() {
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  for p in "${redis_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
# start_redis PORT [ARGS…]: a redis-server of our own, no persistence.
start_redis() {
  local port=$1
  shift
  mkdir -p "$work/redis-$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$work/redis-$port" "$@" >"$work/redis-$port/log" 2>&1 &
  redis_pids+=($!)
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "fuzz-api.sh: redis-server on $port did not start" >&2
  exit 1
}
case "$store" in
  spawn-redis)
    port=$(free_port)
    start_redis "$port"
    store="redis://127.0.0.1:$port/0"
    ;;
  spawn-cluster)
    nodes=()
    for _ in 1 2 3; do
      port=$(free_port)
      start_redis "$port" --cluster-enabled yes --cluster-config-file "$work/redis-$port/nodes.conf"
      nodes+=("127.0.0.1:$port")
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-yes >"$work/cluster.log" 2>&1 \
      || { cat "$work/cluster.log" >&2; exit 1; }
    for _ in $(seq 100); do
      redis-cli -p "${nodes[0]#*:}" cluster info | grep -q 'cluster_state:ok' && break
      sleep 0.1
    done
    store="redis+cluster://$(IFS=,; echo "${nodes[*]}")"
    ;;
esac
echo "fuzz-api.sh: store $store" >&2
key="fuzz-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
keys=(--api-key "$key:write")
auth=(--header "Authorization: Bearer $key")
if [ "$open" = 1 ]; then
  keys=()
  auth=()
fi
# A --webhook-secret: a space's webhook endpoint given without a secret of
# its own is then valid, as the schema says.
: >"$work/server.log"
RUST_LOG=warn "$HERENOW_BIN" serve --listen 127.0.0.1:0 --store "$store" "${keys[@]}" \
  --webhook-secret "whsec_$(head -c 32 /dev/urandom | base64 | tr -d '\n')" \
  >"$work/server.log" 2>&1 &
pid=$!
base=""
for _ in $(seq 100); do
  base="$(grep -o 'listening on http://[0-9.:]*' "$work/server.log" | head -n1 | cut -d' ' -f3 || true)"
  [ -n "$base" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$base" ] || { echo "fuzz-api.sh: the server did not start" >&2; cat "$work/server.log" >&2; exit 1; }

# An event stream never ends: schemathesis reads it for --request-timeout
# seconds (or 20 events), then checks every event it read.
status=0
SCHEMATHESIS_HOOKS="$root/scripts/fuzz-api-hooks.py" "$venv/bin/schemathesis" run "$base/openapi.json" \
  "${auth[@]}" \
  --phases examples,coverage,fuzzing,stateful \
  --checks all --exclude-checks positive_data_acceptance \
  --max-examples "$max_examples" --max-time "$max_time" --workers "$workers" \
  --request-timeout 2 --suppress-health-check all --no-color \
  "${seed[@]}" "${extra[@]}" || status=$?
if grep -q 'panicked' "$work/server.log"; then
  echo "fuzz-api.sh: the server panicked:" >&2
  grep -A5 'panicked' "$work/server.log" >&2
  status=1
fi
exit "$status"
