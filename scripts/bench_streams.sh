#!/usr/bin/env bash
# Streams under load: respite (appendfsync always) beside redis-server 7.0
# with appendfsync always, each cell run on the two in turn.
#   XADD        `XADD xs MAXLEN ~ 1000 * f <64 bytes>` to one stream,
#               memtier_benchmark, 50 connections (-t 2 -c 25), REQUESTS each;
#               then, for reference, a SET of 64 bytes to a new key each
#               (the write path alone), the same way
#   XREADGROUP  50 consumers of one group sharing one stream of 200,000
#               entries, each looping XREADGROUP COUNT n + XACK of what it
#               got (loadgen/examples/stream_group.rs), COUNT 1 and 10
# Beside each rate: p99 latency, the server's CPU microseconds per
# operation (/proc/PID/stat utime+stime over the run) and the bytes it
# wrote per operation (/proc/PID/io write_bytes, a second after the run).
# With LOCK set, each cell takes that lock on its own (flock -o), so a long
# run never holds it.
#
# Usage: scripts/bench_streams.sh RESPITED STREAM_GROUP [REQUESTS] [MEMTIER] [ROUNDS]
# STREAM_GROUP: the built example (target/release/examples/stream_group).
# With BEFORE=OTHER_RESPITED, a third server (that build, same settings)
# runs each cell too, as "respite before" (an A/B of two builds in one
# run). ONLY=xadd or ONLY=group runs only those cells; COUNTS="1 10" the
# COUNTs of the consumer cells.
set -euo pipefail
bin=$1 sg=$2 n=${3:-4000} memtier=${4:-memtier_benchmark} rounds=${5:-2}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
locked() { if [ -n "${LOCK:-}" ]; then flock -o "$LOCK" "$@"; else "$@"; fi; }
"$bin" --port 7671 --db "$dir/r.db" --appendfsync always 2>"$dir/r.log" &
redis-server --port 7672 --dir "$dir" --save "" --appendonly yes --appendfsync always \
    --appendfilename a.aof >/dev/null &
ports=(7671 7672)
declare -A pid name
name[7671]=respite name[7672]="redis always"
if [ -n "${BEFORE:-}" ]; then
    "$BEFORE" --port 7673 --db "$dir/b.db" --appendfsync always 2>"$dir/b.log" &
    ports=(7671 7673 7672)
    name[7673]="respite before"
fi
for p in "${ports[@]}"; do wait_up "$p"; done
for p in "${ports[@]}"; do
    pid[$p]=$(redis-cli -p "$p" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}')
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
written() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
hz=$(getconf CLK_TCK)
xadd() {
    local p=$1 t0 t1 out
    redis-cli -p "$p" del xs >/dev/null
    t0=$(ticks "${pid[$p]}")
    w0=$(written "${pid[$p]}")
    out=$("$memtier" -p "$p" -t 2 -c 25 -n "$n" --hide-histogram -d 64 \
        --command="XADD xs MAXLEN ~ 1000 * f __data__" 2>/dev/null | grep -E '^(Xadds|Totals)' | head -1)
    t1=$(ticks "${pid[$p]}")
    # Let the fsyncs and a checkpoint the run set off finish first.
    sleep 1
    w1=$(written "${pid[$p]}")
    # memtier's columns in --command mode: Ops/sec, Avg, p50, p99, p99.9, KB/sec
    echo "$out" | awk -v cpu=$((t1 - t0)) -v w=$((w1 - w0)) -v hz="$hz" -v ops=$((50 * n)) -v who="${name[$p]}" -v len="$(redis-cli -p "$p" xlen xs)" \
        '{printf "| XADD MAXLEN ~ 1000 | %s | %.0f | %s | %.1f | %.0f | %s |\n", who, $2, $5, cpu / hz / ops * 1e6, w / ops, len}'
}
# The write path's own floor under the same load: a plain SET of 64 bytes,
# same connections and count.
setref() {
    local p=$1 t0 t1 out
    t0=$(ticks "${pid[$p]}")
    w0=$(written "${pid[$p]}")
    # Each SET a new key (each client its own range, a fresh prefix per
    # run): memtier's data is the same bytes every time, and SQLite does
    # not rewrite a row whose bytes are unchanged, so an overwrite would
    # write nothing.
    # (memtier takes --command-key-pattern after the --command.)
    out=$("$memtier" -p "$p" -t 2 -c 25 -n "$n" --hide-histogram -d 64 --key-prefix "set$(date +%s%N):" \
        --key-minimum=1 --key-maximum=$((50 * n)) \
        --command="SET __key__ __data__" --command-key-pattern=P 2>/dev/null | grep -E '^(Sets|Totals)' | head -1)
    t1=$(ticks "${pid[$p]}")
    sleep 1
    w1=$(written "${pid[$p]}")
    echo "$out" | awk -v cpu=$((t1 - t0)) -v w=$((w1 - w0)) -v hz="$hz" -v ops=$((50 * n)) -v who="${name[$p]}" \
        '{printf "| SET (the write path alone) | %s | %.0f | %s | %.1f | %.0f | |\n", who, $2, $5, cpu / hz / ops * 1e6, w / ops}'
}
echo "| test | server | ops/s | p99 ms | server CPU µs/op | bytes written/op | XLEN after |"
echo "|---|---|---:|---:|---:|---:|---:|"
if [ "${ONLY:-xadd}" = xadd ]; then
    for r in $(seq "$rounds"); do
        for p in "${ports[@]}"; do
            locked bash -c "$(declare -f xadd setref ticks written); $(declare -p pid name); memtier=$memtier n=$n hz=$hz; xadd $p; setref $p"
        done
    done
    echo
fi
targets=()
for p in "${ports[@]}"; do
    targets+=(--target "${name[$p]}=127.0.0.1:$p" --pid "${name[$p]}=${pid[$p]}")
done
if [ "${ONLY:-group}" = group ]; then
    for c in ${COUNTS:-1 10}; do
        for r in $(seq "$rounds"); do
            locked "$sg" "${targets[@]}" \
                --consumers 50 --count "$c" --entries 200000 --seconds 10 --rounds 1 | sed "s/^| 1 |/| COUNT $c |/"
        done
    done
fi
echo
echo "$bin ($("$bin" --version 2>/dev/null || echo '?'))${BEFORE:+, before: $BEFORE}, $(redis-server --version | awk '{print $3}')"
