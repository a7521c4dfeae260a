#!/usr/bin/env bash
# The short schemathesis run for scripts/test.sh: every phase and every
# check, a few examples per operation, against a server with a write key
# (sent with every request) and then against one without keys, about a
# minute and a half on 2 cores. Builds nothing: uses $HERENOW_BIN, else
# target/debug/herenow. Exits non-zero on any failure. The long run is
# scripts/fuzz-api.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export HERENOW_BIN="${HERENOW_BIN:-$root/target/debug/herenow}"
# A fixed seed: the test command gives the same verdict on the same code;
# exploring new inputs is the long run's job (random seed each time).
short=(--max-examples 8 --seed "${HERENOW_FUZZ_SEED:-1}")
"$root/scripts/fuzz-api.sh" "${short[@]}" --max-time 60 "$@"
exec "$root/scripts/fuzz-api.sh" "${short[@]}" --open --max-time 30 "$@"
