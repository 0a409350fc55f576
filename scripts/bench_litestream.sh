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
# 131072, busy-timeout 5s, sync-interval 1s), and a read replica following
# it (`litestream restore -f` and a respited --replica-of-file). Both run
# appendfsync always; memtier_benchmark sends random SETs of 100-byte
# values over 1M keys from 2 threads x 25 connections for SECS seconds.
# Prints memtier's SET line, respited's CPU microseconds per SET and bytes
# written per SET (/proc), INFO persistence's commit latency, WAL peak and
# write-lock waits; with Litestream also the replica's size and bytes per
# SET, the read replica's lag (a probe key set on the primary once a
# second, timed until the replica shows it), and the seconds a
# `litestream restore` of the final state takes, per 100 MB of database.
#
# Environment (for tuning runs): MODES (default "alone litestream"; also
# "litestream-only": Litestream without the read replica following it),
# LS_MIN_PAGES (min-checkpoint-page-count, default 8192), LS_TRUNCATE_PAGES
# (truncate-page-n, default 131072), LS_CHECKPOINT_INTERVAL (default 1m,
# Litestream's own), LS_MONITOR_INTERVAL (monitor-interval, how often it
# reads the WAL and considers a checkpoint; default 1s, its own).
set -euo pipefail
bin=${1:?respited binary}
secs=${2:-60}
modes=${MODES:-alone litestream}
min_pages=${LS_MIN_PAGES:-8192}
truncate_pages=${LS_TRUNCATE_PAGES:-131072}
interval=${LS_CHECKPOINT_INTERVAL:-1m}
monitor=${LS_MONITOR_INTERVAL:-1s}
clk=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
write_bytes() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
for mode in $modes; do
    d=$(mktemp -d /var/tmp/bench-litestream.XXXXXX)
    port=$((20000 + RANDOM % 20000))
    ck=auto
    [ "$mode" != alone ] && ck=external
    "$bin" --port "$port" --db "$d/respite.db" --checkpoint "$ck" \
        --unixsocket "$d/respite.sock" >"$d/respited.log" 2>&1 &
    rpid=$!
    wait_port "$port"
    lpid= fpid= rrpid= probe=
    if [ "$mode" != alone ]; then
        mkdir -p "$d/replica" "$d/follower"
        printf 'dbs:\n  - path: %s\n    min-checkpoint-page-count: %s\n    truncate-page-n: %s\n    checkpoint-interval: %s\n    monitor-interval: %s\n    busy-timeout: 5s\n    replica:\n      type: file\n      path: %s\n      sync-interval: 1s\n' \
            "$d/respite.db" "$min_pages" "$truncate_pages" "$interval" "$monitor" "$d/replica" >"$d/litestream.yml"
        echo "litestream: min-checkpoint-page-count $min_pages, truncate-page-n $truncate_pages, checkpoint-interval $interval, monitor-interval $monitor"
        litestream replicate -config "$d/litestream.yml" >"$d/litestream.log" 2>&1 &
        lpid=$!
        redis-cli -p "$port" SET probe 0 >/dev/null
        for _ in $(seq 300); do [ -n "$(ls -A "$d/replica" 2>/dev/null)" ] && break; sleep 0.1; done
        sleep 2
    fi
    if [ "$mode" = litestream ]; then
        litestream restore -f -o "$d/follower/respite.db" "file://$d/replica" >"$d/follower.log" 2>&1 &
        fpid=$!
        for _ in $(seq 300); do [ -e "$d/follower/respite.db-txid" ] && break; sleep 0.1; done
        rport=$((port + 1))
        "$bin" --port "$rport" --replica-of-file "$d/follower/respite.db" >"$d/replica-respited.log" 2>&1 &
        rrpid=$!
        wait_port "$rport"
        # The lag probe: once a second, a fresh value on the primary, timed
        # until the read replica answers it.
        (
            while :; do
                v=$(date +%s%N)
                redis-cli -p "$port" SET probe "$v" >/dev/null 2>&1 || exit 0
                until [ "$(redis-cli -p "$rport" GET probe 2>/dev/null)" = "$v" ]; do
                    sleep 0.01
                    [ $(( $(date +%s%N) - v )) -gt 30000000000 ] && break
                done
                echo $(( ($(date +%s%N) - v) / 1000000 ))
                sleep 1
            done
        ) >"$d/lag.txt" &
        probe=$!
    fi
    echo "== $mode (checkpoint $ck)"
    c0=$(cpu_ticks "$rpid") w0=$(write_bytes "$rpid")
    out=$(memtier_benchmark -s 127.0.0.1 -p "$port" --protocol=redis -t 2 -c 25 --ratio=1:0 \
        --key-maximum=1000000 --key-pattern=R:R -d 100 --random-data --distinct-client-seed \
        --test-time="$secs" --hide-histogram 2>/dev/null)
    c1=$(cpu_ticks "$rpid") w1=$(write_bytes "$rpid")
    echo "$out" | grep -E '^Sets'
    ops=$(echo "$out" | awk '/^Sets/ {printf "%d", $2 * '"$secs"'}')
    echo "cpu_us_per_set: $(( (c1 - c0) * 1000000 / clk / (ops > 0 ? ops : 1) ))"
    echo "bytes_written_per_set: $(( (w1 - w0) / (ops > 0 ? ops : 1) ))"
    redis-cli -p "$port" INFO persistence | tr -d '\r' |
        grep -E 'commit_latency|wal_size_peak|write_lock|checkpoint_mode|wal_checkpoints:|checkpoint_last_seen'
    if [ -n "$probe" ]; then
        kill "$probe" 2>/dev/null || true
        wait "$probe" 2>/dev/null || true
        sort -n "$d/lag.txt" | awk '{a[NR]=$1} END {if (NR) {p = int(NR*0.9); if (p < 1) p = 1; printf "replica_lag_ms: n=%d median=%d p90=%d max=%d\n", NR, a[int((NR+1)/2)], a[p], a[NR]}}'
        echo "replica_bytes: $(du -sb "$d/replica" | cut -f1) ($(( $(du -sb "$d/replica" | cut -f1) / (ops > 0 ? ops : 1) )) per SET)"
    fi
    kill -TERM "$rpid"; wait "$rpid" || true
    [ -n "$rrpid" ] && { kill -TERM "$rrpid"; wait "$rrpid" || true; }
    [ -n "$fpid" ] && { kill -TERM "$fpid"; wait "$fpid" || true; }
    if [ -n "$lpid" ]; then
        kill -TERM "$lpid"; wait "$lpid" || true
        echo "waits over 100 ms logged by respited: $(grep -c 'waited for the write lock' "$d/respited.log" || true)"
        size=$(stat -c %s "$d/respite.db")
        t0=$(date +%s%N)
        litestream restore -o "$d/restored.db" "file://$d/replica" >/dev/null 2>&1
        t1=$(date +%s%N)
        echo "restore: $(( (t1 - t0) / 1000000 )) ms for a $(( size / 1048576 )) MiB database ($(( (t1 - t0) / 10000 / (size / 1048576 > 0 ? size / 1048576 : 1) )) ms per 100 MiB)"
    fi
    rm -rf "$d"
done
