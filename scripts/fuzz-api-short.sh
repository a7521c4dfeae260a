#!/usr/bin/env bash
# The short schemathesis run for scripts/test.sh: every phase and every
# check, a few examples per operation, about a minute on 2 cores. Builds
# nothing: uses $HERENOW_BIN, else target/debug/herenow. Exits non-zero on
# any failure. The long run is scripts/fuzz-api.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export HERENOW_BIN="${HERENOW_BIN:-$root/target/debug/herenow}"
exec "$root/scripts/fuzz-api.sh" --max-examples 8 --max-time 75 "$@"
