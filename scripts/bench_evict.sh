#!/usr/bin/env bash
# Eviction under a write load: respited with maxmemory MAXMEM and
# allkeys-lru, memtier random SETs of 100-byte values over KEYS keys (more
# than fit) at 50 connections for SECS seconds. Prints the SET rate and
# latency, the keys evicted per second, the live bytes against the limit,
# and from INFO persistence the commit latency p99/max and the longest
# eviction step.
#
#   scripts/bench_evict.sh RESPITED MAXMEM KEYS SECS
set -euo pipefail
bin=$1; maxmem=$2; keys=$3; secs=$4
port=6485
root=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$root"' EXIT
"$bin" --port $port --db "$root/respite.db" --appendfsync always 2>"$root/log" &
pid=$!
until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
redis-cli -p $port config set maxmemory "$maxmem" >/dev/null
redis-cli -p $port config set maxmemory-policy allkeys-lru >/dev/null
# Fill to the limit first, then measure the steady state.
memtier_benchmark -p $port --protocol=redis -t 2 -c 25 --ratio=1:0 --key-pattern=P:P \
    --key-minimum=1 --key-maximum="$keys" --requests=allkeys -d 100 -R --distinct-client-seed \
    --pipeline=8 --hide-histogram >/dev/null 2>&1 || true
redis-cli -p $port config resetstat >/dev/null
e0=$(redis-cli -p $port info stats | tr -d '\r' | awk -F: '$1 == "evicted_keys" {print $2}')
memtier_benchmark -p $port --protocol=redis -t 2 -c 25 --ratio=1:0 --key-pattern=R:R \
    --key-minimum=1 --key-maximum="$keys" --test-time="$secs" -d 100 -R --distinct-client-seed \
    --hide-histogram >"$root/set" 2>/dev/null
e1=$(redis-cli -p $port info stats | tr -d '\r' | awk -F: '$1 == "evicted_keys" {print $2}')
awk '/^Totals/ {printf "SET %d ops/s, latency avg %s ms, p99 %s ms, p99.9 %s ms\n", $2, $5, $7, $8}' "$root/set"
echo "evicted $((e1 - e0)) keys in $secs s: $(( (e1 - e0) / secs )) keys/s; dbsize $(redis-cli -p $port dbsize)"
redis-cli -p $port info memory | tr -d '\r' | grep -E '^(used_memory_dataset|maxmemory|maxmemory_policy):' | tr '\n' ' '; echo
redis-cli -p $port info persistence | tr -d '\r' | grep -E \
    '^(group_commit_commit_latency_(p50|p99|max)_us|evict_step_max_us|wal_pause_max_us|db_size_bytes):' | tr '\n' ' '; echo
redis-cli -p $port shutdown >/dev/null 2>&1 || true
wait $pid 2>/dev/null || true
