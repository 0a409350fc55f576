#!/usr/bin/env bash
# SET/GET 1:1 on random keys over 100,000 with fresh random values of
# several sizes: two respited builds (say, before and after a change) and
# redis-server with appendfsync always, side by side, ROUNDS rounds.
# usage: value_sizes.sh OLD_RESPITED NEW_RESPITED MEMTIER [ROUNDS] [SECS]
# Used for docs/benchmarks.md, "Long string values out of their key rows".
set -euo pipefail
old=$1; new=$2; mt=$3; rounds=${4:-2}; secs=${5:-6}
for size in ${SIZES:-64 300 2000 20000}; do
  for round in $(seq 1 "$rounds"); do
    dir=$(mktemp -d)
    "$old" --port 7311 --db "$dir/old.db" >/dev/null 2>&1 &
    "$new" --port 7312 --db "$dir/new.db" >/dev/null 2>&1 &
    redis-server --port 7313 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null &
    for p in 7311 7312 7313; do until redis-cli -p $p ping >/dev/null 2>&1; do sleep 0.1; done; done
    line="size $size round $round"
    for p in 7311 7312 7313; do
      "$mt" -p $p --key-minimum 1 --key-maximum 100000 --random-data -d "$size" -t 2 -c 10 \
        --pipeline 32 --ratio 1:0 --key-pattern P:P -n allkeys --hide-histogram >/dev/null 2>&1
      ops=$("$mt" -p $p --key-minimum 1 --key-maximum 100000 --random-data -d "$size" -t 2 -c 25 \
        --ratio 1:1 --key-pattern R:R --test-time "$secs" --hide-histogram 2>/dev/null | awk '/^Totals/ {print $2}')
      line="$line $p=$ops"
    done
    echo "$line"
    for p in 7311 7312 7313; do redis-cli -p $p shutdown nosave >/dev/null 2>&1 || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
  done
done
