#!/usr/bin/env bash
# Shrinking the file after deletes: load N keys of 100-byte values
# (memtier_benchmark --pipeline 32, keys memtier-1..N), stop cleanly and
# note the file's size; start again, delete keys memtier-1..N/2 (redis-cli
# --pipe) while memtier writes random SETs at 50 connections over the other
# half, wait for the incremental vacuum to finish ("free pages given back"
# in the log, at most WAIT seconds), then stop cleanly and note the size
# again. Prints the sizes, the pages the vacuum freed, its longest step,
# and the commit latency p99/max and SET rate during the deletes.
#
#   scripts/bench_vacuum.sh RESPITED N [WAIT]
set -euo pipefail
bin=$1; n=$2; wait_secs=${3:-120}
port=6483
root=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$root"' EXIT
start() {
    "$bin" --port $port --db "$root/respite.db" 2>>"$root/log" &
    pid=$!
    until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
}
stop() { redis-cli -p $port shutdown >/dev/null 2>&1 || true; wait $pid 2>/dev/null || true; }
field() { redis-cli -p $port info persistence | tr -d '\r' | awk -F: -v f="$1" '$1 == f {print $2}'; }
start
memtier_benchmark -p $port --protocol=redis -t 2 -c 10 --pipeline=32 --ratio=1:0 \
    --key-pattern=P:P --key-minimum=1 --key-maximum="$n" --requests=allkeys -d 100 -R \
    --hide-histogram >/dev/null 2>&1
stop
before=$(stat -c %s "$root/respite.db")
start
half=$((n / 2))
memtier_benchmark -p $port --protocol=redis -t 2 -c 25 --ratio=1:0 --key-pattern=R:R \
    --key-minimum=$((half + 1)) --key-maximum="$n" --test-time=3600 -d 100 -R \
    --distinct-client-seed --hide-histogram >"$root/set" 2>/dev/null &
writer=$!
sleep 2
redis-cli -p $port config resetstat >/dev/null
t0=$(date +%s.%N)
awk -v h="$half" 'BEGIN { for (i = 1; i <= h; i++) printf "*2\r\n$3\r\nDEL\r\n$%d\r\nmemtier-%d\r\n", length("memtier-" i), i }' \
    | redis-cli -p $port --pipe >/dev/null
t1=$(date +%s.%N)
for _ in $(seq "$wait_secs"); do
    grep -q "free pages given back" "$root/log" && break
    sleep 1
done
t2=$(date +%s.%N)
during=$(redis-cli -p $port info persistence | tr -d '\r' | grep -E \
    '^(group_commit_commit_latency_(p99|max)_us|wal_pause_max_us|vacuum_freed_pages|vacuum_step_max_us|disk_free_pages_bytes|page_size):' | tr '\n' ' ')
running=$(stat -c %s "$root/respite.db")
ops=$(redis-cli -p $port info stats | tr -d '\r' | awk -F: '$1 == "total_commands_processed" {print $2}')
kill $writer 2>/dev/null || true; wait $writer 2>/dev/null || true
stop
after=$(stat -c %s "$root/respite.db")
echo "keys $n, deleted $half in $(echo "$t1 - $t0" | bc) s, vacuum done $(echo "$t2 - $t0" | bc) s after the first DEL"
echo "file before $before, while running after the vacuum $running, after a clean stop $after bytes"
echo "commands since the deletes began $ops; $during"
grep -E "giving free pages|free pages given|vacuum step failed" "$root/log" | cut -c1-200
