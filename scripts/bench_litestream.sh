#!/usr/bin/env bash
# SET throughput and commit latency with and without Litestream attached,
# one after the other, each on a fresh data directory (docs/benchmarks.md,
# "Litestream attached").
#
#   flock -o /tmp/respite-heavy.lock scripts/bench_litestream.sh RESPITED SECS
#
# RESPITED is a respited binary (a release build). First respite alone
# (checkpoint auto), then respite with checkpoint external and `litestream
# replicate` beside it, copying to a file replica with the settings of
# configs/litestream.yml (min-checkpoint-page-count 8192, truncate-page-n
# 131072, busy-timeout 5s, sync-interval 1s). Both run appendfsync always;
# memtier_benchmark sends random SETs of 100-byte values over 1M keys from
# 2 threads x 25 connections for SECS seconds. Prints memtier's SET line,
# then INFO persistence's commit latency, WAL peak, write-lock waits and
# checkpoint figures, and the replica's size.
set -euo pipefail
bin=${1:?respited binary}
secs=${2:-60}
for mode in alone litestream; do
    d=$(mktemp -d)
    port=$((20000 + RANDOM % 20000))
    ck=auto
    [ "$mode" = litestream ] && ck=external
    "$bin" --port "$port" --db "$d/respite.db" --checkpoint "$ck" \
        --unixsocket "$d/respite.sock" >"$d/respited.log" 2>&1 &
    rpid=$!
    for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
    lpid=
    if [ "$mode" = litestream ]; then
        mkdir -p "$d/replica"
        printf 'dbs:\n  - path: %s\n    min-checkpoint-page-count: 8192\n    truncate-page-n: 131072\n    busy-timeout: 5s\n    replica:\n      type: file\n      path: %s\n      sync-interval: 1s\n' \
            "$d/respite.db" "$d/replica" >"$d/litestream.yml"
        litestream replicate -config "$d/litestream.yml" >"$d/litestream.log" 2>&1 &
        lpid=$!
        sleep 2
    fi
    echo "== $mode (checkpoint $ck)"
    memtier_benchmark -s 127.0.0.1 -p "$port" --protocol=redis -t 2 -c 25 --ratio=1:0 \
        --key-maximum=1000000 --key-pattern=R:R -d 100 --test-time="$secs" \
        --hide-histogram 2>/dev/null | grep -E '^Sets' || true
    redis-cli -p "$port" INFO persistence | tr -d '\r' |
        grep -E 'commit_latency|wal_size_peak|write_lock|checkpoint_mode|wal_checkpoints:|checkpoint_last_seen'
    [ -n "$lpid" ] && echo "replica_bytes:$(du -sb "$d/replica" | cut -f1)"
    kill -TERM "$rpid"; wait "$rpid" || true
    if [ -n "$lpid" ]; then kill -TERM "$lpid"; wait "$lpid" || true; fi
    rm -rf "$d"
done
