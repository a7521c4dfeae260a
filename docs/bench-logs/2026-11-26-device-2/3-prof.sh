#!/usr/bin/env bash
# One profile of the server under the one-space batch load: $1 cores, $2 extra env.
P=.device-prof; B=$P/bin; n=$1; tag=$2; shift 2
export LD_LIBRARY_PATH=$PWD/$P/lib
env "$@" RUST_LOG=warn TOKIO_WORKER_THREADS=$n taskset -c 0-$((n-1)) $B/herenow serve --listen 127.0.0.1:8111 >/dev/null 2>&1 & S=$!
sleep 1
taskset -c ${LOADCORES:-8-15} $B/wrk -t8 -c8 -d10s -s $P/batch1.lua http://127.0.0.1:8111 > $OUT/wrk-$tag.txt &
W=$!
sleep 2
$B/perf stat -e task-clock,context-switches,cpu-migrations -p $S -- sleep 2 2> $OUT/stat-$tag.txt
$B/perf record -F 1999 -p $S -o $OUT/p-$tag.data -- sleep 4 2> $OUT/rec-$tag.err
wait $W; kill $S; wait $S 2>/dev/null
$B/perf report -i $OUT/p-$tag.data --stdio --no-children --sort comm --percent-limit 1 2>/dev/null | grep -v '^#' | grep -v '^$' > $OUT/rep-$tag.txt
$B/perf report -i $OUT/p-$tag.data --stdio --no-children --sort comm,sym --percent-limit 0.4 2>/dev/null | grep -v '^#' | grep -v '^$' | head -90 >> $OUT/rep-$tag.txt
rm -f $OUT/p-$tag.data
grep Requests/sec $OUT/wrk-$tag.txt; head -12 $OUT/rep-$tag.txt
