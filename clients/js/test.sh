#!/usr/bin/env bash
# Tests the TypeScript client (clients/js) against a real herenow server.
#
# Installs Node.js and npm with apt when they are missing, installs the
# package's dev dependencies (npm ci, into clients/js/node_modules), builds
# it (dist/) and runs its tests (node --test), which start their own
# `herenow serve` on a free port from $HERENOW_BIN (default: the
# repository's target/debug/herenow).
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "clients/js/test.sh: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 18 ]; then
  echo "clients/js/test.sh: Node.js 18 or later is needed, found $(node --version)" >&2
  exit 1
fi

if [ -z "${HERENOW_BIN:-}" ]; then
  root=$(git rev-parse --show-toplevel 2>/dev/null || (cd ../.. && pwd))
  HERENOW_BIN="$root/target/debug/herenow"
fi
if [ ! -x "$HERENOW_BIN" ]; then
  echo "clients/js/test.sh: no herenow binary at $HERENOW_BIN; build it (cargo build -p herenow) or set HERENOW_BIN" >&2
  exit 1
fi
export HERENOW_BIN

npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
npm test
