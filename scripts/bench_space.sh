#!/usr/bin/env bash
# Space per key: N keys (memtier_benchmark, keys memtier-1..memtier-N in
# order, --pipeline 32) of each value size into a fresh respited with each
# page size, stopped cleanly; prints the database file's bytes per key and
# their ratio to the key and value bytes.
#
#   scripts/bench_space.sh RESPITED N "PAGE_SIZES" "VALUE_SIZES"
set -euo pipefail
bin=$1; n=$2; pages=$3; values=$4
port=6481
root=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$root"' EXIT
# Mean key length of memtier-1..memtier-N.
keylen=$(awk -v n="$n" 'BEGIN { s = 0; for (i = 1; i <= n; i++) s += 8 + length(i ""); print s / n }')
echo "| page size | value bytes | keys | db bytes | bytes/key | / (key + value) | load ops/s |"
echo "|---|---|---|---|---|---|---|"
for page in $pages; do
    for v in $values; do
        dir="$root/$page-$v"; mkdir -p "$dir"
        "$bin" --port $port --db "$dir/respite.db" --page-size "$page" 2>"$dir/log" &
        pid=$!
        until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
        t0=$(date +%s.%N)
        memtier_benchmark -p $port --protocol=redis -t 2 -c 10 --pipeline=32 --ratio=1:0 \
            --key-pattern=P:P --key-minimum=1 --key-maximum="$n" --requests=allkeys \
            -d "$v" -R --hide-histogram >/dev/null 2>&1
        t1=$(date +%s.%N)
        keys=$(redis-cli -p $port dbsize)
        redis-cli -p $port shutdown >/dev/null 2>&1 || true
        wait $pid 2>/dev/null || true
        size=$(du -scb "$dir/respite.db" "$dir/respite.db-wal" 2>/dev/null | tail -1 | cut -f1 || true)
        awk -v p="$page" -v v="$v" -v k="$keys" -v s="$size" -v kl="$keylen" \
            -v t="$(echo "$t1 - $t0" | bc)" 'BEGIN {
            printf "| %d | %d | %d | %d | %.0f | %.2f | %d |\n", p, v, k, s, s / k, s / k / (kl + v), k / t }'
    done
done
