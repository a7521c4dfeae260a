#!/usr/bin/env bash
# The one device call of session 29 (2026-11-26 evening): striped spaces at
# 4 and 8 server cores, with the kit scripts/device-kit.sh built (carried
# as .device-kit). Each part writes its own log under $OUT as it goes.
set -u
o=${OUT:-/tmp/device-3}
mkdir -p "$o"
S=HERENOW_SPACE_STRIPES
{ cat .device-kit/KIT; nproc; uptime; lscpu | sed -n 1,25p
  for c in /sys/devices/system/cpu/cpu[0-9]*; do echo "$c $(cat $c/topology/thread_siblings_list)"; done
} >"$o/0-topology.txt" 2>&1
# 1: the engine through a MemoryStore, one space, n writer threads
taskset -c 0-7 env THREADS="1 2 4 8" STRIPES="2 4 8" ROUNDS=4000 \
  .device-kit/bin/space_handoff >"$o/1-handoff.log" 2>&1
# 2: the server, one space, batches of 1,000 from 8 connections
KIT=.device-kit DURATION=4s ROUNDS=2 CORES="4 8" LOADS=batch1 \
  STORES="memory memory:$S=2 memory:$S=4 memory:$S=8 memory:$S=4,HERENOW_SPACE_OWNERS=0 memory:$S=4,HERENOW_SPACE_OWNERS=4" \
  scripts/bench-scale.sh >"$o/2-batch1.log" 2>&1
# 3: the same from 32 connections at 8 cores (the worst row)
KIT=.device-kit DURATION=4s ROUNDS=2 CORES=8 LOADS=batch1 BATCH_CONNECTIONS=32 \
  STORES="memory memory:$S=4" scripts/bench-scale.sh >"$o/3-batch1-32.log" 2>&1
# 4: where the split is pure cost (64 spaces) and single heartbeats
KIT=.device-kit DURATION=4s ROUNDS=2 CORES="4 8" LOADS="batch64 single1" \
  STORES="memory memory:$S=4" scripts/bench-scale.sh >"$o/4-other.log" 2>&1
uptime >>"$o/0-topology.txt"
tail -n 12 "$o"/*.log
