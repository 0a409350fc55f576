#!/usr/bin/env bash
# Data growth: load N keys of 100-byte values with memtier_benchmark
# (--pipeline 32, 2 threads x 10 connections, keys 1..N in order), then
# random SET and random GET over them at 50 connections, for each server
# given, one after the other, each on a fresh data directory.
#
#   scripts/bench_growth.sh N SECS NAME=CMD [NAME=CMD ...]
#
# CMD is a respited binary (started with --appendfsync always and the
# default settings) or `redis` (redis-server, appendfsync always). Prints
# one Markdown row per server: load rate and time, bytes written per write
# and CPU microseconds per write during the load (/proc/PID/io write_bytes,
# /proc/PID/stat utime+stime), the WAL's peak size (sampled every 100 ms),
# the database's size after a clean stop (with any WAL the stop left; for
# redis the AOF directory), the random SET rate with its p99 and bytes
# written per SET, and the random GET rate with its p99. The random SETs
# use --distinct-client-seed: each connection writes its own random value,
# so a SET changes the value it overwrites (memtier's random value is fixed
# per seed, and SQLite writes nothing for a row overwritten with itself).
# For respited, INFO's commit latency (p99, max) and WAL figures over the
# whole run follow its row. LOAD_TIMEOUT (seconds, default 240) stops a
# load that takes longer. `just growth N SECS` is the long run (10 minutes
# of random SETs, then of GETs, by default).
set -euo pipefail
n=$1; secs=$2; shift 2
port=6479
tick=$(getconf CLK_TCK)
root=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$root"' EXIT

io() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# totals FILE: memtier's Totals line: ops/sec and p99 (ms).
totals() { awk '/^Totals/ {printf "%d %s\n", $2, $7}' "$1"; }

echo "| server | keys | load ops/s | load s | bytes/write | CPU µs/write | WAL peak MB | db MB | SET/s (p99 ms) | bytes/SET | GET/s (p99 ms) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for spec in "$@"; do
    name=${spec%%=*}; cmd=${spec#*=}
    dir="$root/$name"; mkdir -p "$dir"
    if [ "$cmd" = redis ]; then
        redis-server --port $port --dir "$dir" --appendonly yes --appendfsync always \
            --save '' --logfile "$dir/log" &
        db="$dir/appendonlydir"; wal=/nonexistent
    else
        "$cmd" --port $port --db "$dir/respite.db" --appendfsync always 2>"$dir/log" &
        db="$dir/respite.db"; wal="$dir/respite.db-wal"
    fi
    pid=$!
    until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
    ( peak=0; while kill -0 $pid 2>/dev/null; do
        s=$(stat -c %s "$wal" 2>/dev/null || echo 0)
        [ "$s" -gt "$peak" ] && peak=$s && echo $peak >"$dir/walpeak"
        sleep 0.1; done ) &
    w0=$(io $pid); c0=$(cpu $pid); t0=$(date +%s.%N)
    timeout "${LOAD_TIMEOUT:-240}" memtier_benchmark -p $port --protocol=redis -t 2 -c 10 \
        --pipeline=32 --ratio=1:0 --key-pattern=P:P --key-minimum=1 --key-maximum="$n" \
        --requests=allkeys -d 100 -R --hide-histogram >"$dir/load" 2>/dev/null || true
    t1=$(date +%s.%N); w1=$(io $pid); c1=$(cpu $pid)
    keys=$(redis-cli -p $port dbsize)
    w2=$(io $pid)
    memtier_benchmark -p $port --protocol=redis -t 2 -c 25 --ratio=1:0 --key-pattern=R:R \
        --key-minimum=1 --key-maximum="$n" --test-time="$secs" -d 100 -R --distinct-client-seed \
        --hide-histogram >"$dir/set" 2>/dev/null
    w3=$(io $pid)
    memtier_benchmark -p $port --protocol=redis -t 2 -c 25 --ratio=0:1 --key-pattern=R:R \
        --key-minimum=1 --key-maximum="$n" --test-time="$secs" \
        --hide-histogram >"$dir/get" 2>/dev/null
    if [ "$cmd" != redis ]; then
        redis-cli -p $port info persistence | tr -d '\r' | grep -E \
            '^(group_commit_commit_latency_(p99|max)_us|wal_pause_max_us|wal_size_peak_bytes):' \
            | tr '\n' ' ' | sed 's/^/    info: /' >"$dir/info" || true
    fi
    redis-cli -p $port shutdown >/dev/null 2>&1 || true
    wait $pid 2>/dev/null || true
    # After the stop: the database and whatever WAL the stop left.
    size=$(du -scb "$db" "$db-wal" 2>/dev/null | tail -1 | cut -f1 || true)
    read -r sr sp < <(totals "$dir/set"); read -r gr gp < <(totals "$dir/get")
    awk -v name="$name" -v keys="$keys" -v t="$(echo "$t1 - $t0" | bc)" -v w=$((w1 - w0)) \
        -v c=$((c1 - c0)) -v tick="$tick" -v walpeak="$(cat "$dir/walpeak" 2>/dev/null || echo 0)" \
        -v size="$size" -v sr="$sr" -v sp="$sp" -v gr="$gr" -v gp="$gp" -v ws=$((w3 - w2)) -v secs="$secs" 'BEGIN {
        printf "| %s | %d | %d | %.1f | %d | %.1f | %.1f | %.0f | %d (%s) | %d | %d (%s) |\n",
            name, keys, keys / t, t, w / keys, c * 1e6 / tick / keys, walpeak / 1e6,
            size / 1e6, sr, sp, ws / (sr * secs), gr, gp }'
    [ -s "$dir/info" ] && { cat "$dir/info"; echo; }
    grep -E "recover|stopped cleanly|emptied" "$dir/log" | sed 's/^/    log: /' | cut -c1-160 || true
done
