#!/usr/bin/env bash
# Packs what scripts/bench-scale.sh and scripts/bench-http-floor.sh need
# into one folder that can travel to a machine with more cores and no
# network or build tools (the library's `device` machines: carry the
# folder, run the script there with KIT=<folder>). Issue 10's 8-core
# figures are taken that way.
#
#   scripts/device-kit.sh            # -> .device-kit/ (git-ignored)
#   scripts/device-kit.sh DIR
#
# The folder holds bin/ (herenow, bare_server, space_handoff, delay_proxy and
# fanout_floor built here in release and stripped, and peerload where it is built
# as scripts/bench-peerload.sh says; wrk, redis-server, redis-cli and redis-benchmark copied from
# this machine) and
# lib/ (the shared libraries those tools load, found with ldd, but for the
# C and C++ runtimes). About 35 MB; the binaries need GLIBC 2.34 or newer. Needs wrk and redis-server here
# (apt-get install -y wrk redis-server).
#
# Then, there:
#   KIT=.device-kit CORES="1 2 4 8" DURATION=5s ROUNDS=1 REDIS=1 scripts/bench-scale.sh
#   KIT=.device-kit SERVER_CORES=0 LOAD_CORES=8-15 scripts/bench-http-floor.sh
#   taskset -c 0-7 env THREADS="2 4 8" STRIPES="2 4" .device-kit/bin/space_handoff
#   HERENOW_BIN=.device-kit/bin/herenow FLOOR_BIN=.device-kit/bin/fanout_floor \
#     PEERLOAD=.device-kit/bin/peerload SERVER_CPUS=0-7 LOAD_CPUS=8-15 \
#     PROTO=pusher N=9900 HOLD=15 scripts/bench-peerload.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/kit.sh
. scripts/lib/kit.sh
out=${1:-.device-kit}

for tool in wrk redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "device-kit: $tool is missing here" >&2; exit 1; }
done
cargo build --release -p herenow --quiet
cargo build --release -p herenow-server --example bare_server --quiet
cargo build --release -p herenow-memory --example space_handoff --quiet
cargo build --release -p herenow-testkit --example delay_proxy --quiet
cargo build --release -p herenow-server --example fanout_floor --quiet

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp target/release/herenow target/release/examples/{bare_server,space_handoff,delay_proxy,fanout_floor} "$out/bin/"
peerload=${PEERLOAD:-/tmp/peerload-target/release/peerload}
[ -x "$peerload" ] && cp "$peerload" "$out/bin/"
strip "$out"/bin/*
for tool in wrk redis-server redis-cli redis-benchmark; do
  cp -L "$(command -v "$tool")" "$out/bin/$tool"
done
kit_libs "$out/lib" "$out"/bin/*
{
  echo "built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD) on $(uname -m)"
  echo "needs GLIBC $(objdump -T "$out"/bin/* "$out"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1) or newer"
} >"$out/KIT"
cat "$out/KIT"
du -sh "$out"
