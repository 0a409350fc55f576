#!/bin/bash
# A/B: cached GET throughput (redis-benchmark -P 16 and -P 1, 10,000 keys
# read from the value cache), two respited builds in interleaved rounds.
# usage: ab_get.sh BASE_RESPITED NEW_RESPITED [ROUNDS]. Used for
# docs/benchmarks.md, "What access tracking costs a cached GET".
BASE=${1:?usage: ab_get.sh BASE_RESPITED NEW_RESPITED [ROUNDS]}
NEW=${2:?}
ROUNDS=${3:-3}
for r in $(seq 1 $ROUNDS); do
  for v in base new; do
    bin=$BASE; [ $v = new ] && bin=$NEW
    d=$(mktemp -d); port=7950
    $bin --port $port --db $d/db >/dev/null 2>&1 &
    pid=$!
    for i in $(seq 1 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-benchmark -p $port -t set -n 100000 -r 10000 -d 64 -P 16 -q >/dev/null 2>&1
    # warm the cache
    redis-benchmark -p $port -t get -n 200000 -r 10000 -P 16 -q >/dev/null 2>&1
    p16=$(redis-benchmark -p $port -t get -n 2000000 -r 10000 -P 16 -c 50 -q 2>/dev/null | grep -o '[0-9.]* requests per second' | awk '{print $1}')
    p1=$(redis-benchmark -p $port -t get -n 300000 -r 10000 -P 1 -c 50 -q 2>/dev/null | grep -o '[0-9.]* requests per second' | awk '{print $1}')
    echo "round $r $v GET-P16 $p16 GET-P1 $p1"
    kill $pid; wait $pid 2>/dev/null; rm -rf $d
  done
done
