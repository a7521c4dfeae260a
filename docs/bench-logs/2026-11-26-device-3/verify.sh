#!/usr/bin/env bash
# Call 3 of the third 16-core sitting: the code as committed (spaces
# striped by default from 8 workers, no owners on stripes) against whole
# spaces as before (HERENOW_SPACE_STRIPES=1: the previous default, one
# owner at 8 cores), at 4 and 8 server cores.
set -u
o=${OUT:-/tmp/device-3}
mkdir -p "$o"
{ cat .device-kit/KIT; uptime; } >"$o/7-topology.txt"
KIT=.device-kit DURATION=4s ROUNDS=2 CORES="4 8" LOADS="batch1 batch64 single1" \
  STORES="memory memory:HERENOW_SPACE_STRIPES=1" scripts/bench-scale.sh >"$o/7-default.log" 2>&1
tail -n 12 "$o/7-default.log"
