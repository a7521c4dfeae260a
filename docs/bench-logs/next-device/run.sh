#!/usr/bin/env bash
# Prepared 2026-11-26 (session 30, no device lent) for the next session
# that has a `device` machine: issue 10's last criterion, the Redis store
# at 8 server cores not below 4. One call of about 7 minutes:
#
#   scripts/device-kit.sh                      # here, first (-> .device-kit)
#   run: bash docs/bench-logs/next-device/run.sh   carry [".device-kit"], timeout_s 600
#
# What each part tells (BENCHMARKS.md, "Redis store, 8 cores against 4:
# what the next sitting runs"):
# 1. batches and singles at 4 and 8 cores, small rounds one at a time
#    (the default) and two at a time: Redis' cores busy, heartbeats per
#    call and Redis' µs per call say whether Redis' core, the coalescing or
#    the round trip holds each row back; if two small rounds lift the
#    8-core singles above the 4-core ones, the round trip was the limit.
#    Since 2026-11-27 each Redis row also says how long herenow waited
#    per heartbeat call (its own /metrics): if that wait grows from 4 to 8
#    cores while Redis' µs per call does not, the time is lost between
#    Redis' answer and the caller (herenow's wake-ups), not in Redis.
# 2. 8 cores with 4 workers: herenow's threads against its cores.
# 3. Redis behind a 100 µs proxy (a round trip of 200 µs, as to another
#    host): small rounds one or two at a time where the round trip is
#    certainly the limit.
set -u
K=.device-kit
out=${OUT:-/tmp/out}
mkdir -p "$out"
{
  echo "== 1: CORES=\"4 8\", small rounds 1 and 2"
  KIT=$K DURATION=4s ROUNDS=3 WARMUP=8s CORES="4 8" REDIS=1 \
    STORES="redis redis:HERENOW_REDIS_SMALL_ROUNDS=2" LOADS="batch1 single1" \
    scripts/bench-scale.sh
  echo "== 2: 8 cores, 4 workers"
  KIT=$K DURATION=4s ROUNDS=2 WARMUP=8s CORES=8 WORKERS=4 REDIS=1 STORES=redis \
    LOADS="single1" scripts/bench-scale.sh
  echo "== 3: Redis 100 us away each way, 8 cores"
  KIT=$K REDIS_DELAY_US=100 DURATION=4s ROUNDS=2 WARMUP=8s CORES=8 REDIS=1 \
    STORES="redis redis:HERENOW_REDIS_SMALL_ROUNDS=2" LOADS="single1" \
    scripts/bench-scale.sh
} >"$out/redis.txt" 2>&1
tail -40 "$out/redis.txt"
