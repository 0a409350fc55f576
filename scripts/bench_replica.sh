#!/usr/bin/env bash
# respited as a replica of redis-server 7.0 under an open-loop write load:
# whether the replica keeps up, and its lag over time.
#
# A redis-server master (no persistence, disk-based sync, 256 MB backlog)
# gets 200,000 SETs; a release respited (default configuration) is started
# with --replicaof it and synchronizes in full (the load's time is
# printed); then respite-loadgen sends RATE writes per second for SECS
# seconds to the master (20 connections, open loop; 4 SET : 2 HSET : 1
# LPUSH : 1 INCR over 200,000 keys, 64-byte values). Once a second the
# master's master_repl_offset and respite's slave_repl_offset are read
# (master first: a small negative lag is the time between the two reads),
# with the master's instantaneous ops/s and respite's CPU share (ps, the
# average since start). At the end both key counts are printed.
#
# Usage: scripts/bench_replica.sh RESPITED LOADGEN RATE SECS
# Example: scripts/bench_replica.sh /tmp/replica-respited-rel /tmp/replica-loadgen-rel 25000 30
set -euo pipefail
bin=$1 loadgen=$2 rate=$3 secs=$4
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
master=7411 replica=7412
field() { redis-cli -p "$1" INFO "$2" | grep "^$3:" | cut -d: -f2 | tr -d '\r'; }
redis-server --port $master --save "" --appendonly no --repl-backlog-size 256mb \
  --repl-diskless-sync no --dir "$dir" >"$dir/master.log" 2>&1 &
until redis-cli -p $master ping >/dev/null 2>&1; do sleep 0.1; done
"$loadgen" -p $master -c 20 -P 16 --command 'SET __key__ __data__' --key-pattern P:P \
  --keyspace 200000 -n 200000 >/dev/null 2>&1
"$bin" --port $replica --db "$dir/respite.db" --replicaof "127.0.0.1 $master" >"$dir/replica.log" 2>&1 &
rpid=$!
until [ "$(field $replica replication master_link_status 2>/dev/null)" = up ]; do sleep 0.1; done
echo "full synchronization: $(grep -o 'loaded the master.s RDB.*' "$dir/replica.log")"
"$loadgen" -p $master -c 20 --rate "$rate" --duration "${secs}s" --keyspace 200000 \
  --command '4:SET __key__ __data__' --command '2:HSET h:__key__ f __data__' \
  --command '1:LPUSH l:__key__ __data__' --command '1:INCR n:__key__' >"$dir/load.txt" 2>&1 &
lpid=$!
echo "s master_repl_offset slave_repl_offset lag_bytes master_ops/s respited_cpu%"
for t in $(seq 1 $((secs + 5))); do
  sleep 1
  m=$(field $master replication master_repl_offset)
  r=$(field $replica replication slave_repl_offset)
  ops=$(field $master stats instantaneous_ops_per_sec)
  echo "$t $m $r $((m - r)) $ops $(ps -o %cpu= -p $rpid | tr -d ' ')"
done
wait $lpid
cat "$dir/load.txt"
echo "keys: master $(redis-cli -p $master DBSIZE), replica $(redis-cli -p $replica DBSIZE)"
