#!/usr/bin/env bash
# What one durable write costs: respite (one or two builds) beside
# redis-server with `appendfsync always`, side by side in one run. For each
# workload and server: ops/s and p99 from memtier_benchmark (fresh random
# 64-byte values, keys uniform over KEYS, the keyspace filled first), CPU
# microseconds per command (/proc/PID/stat utime+stime over the commands INFO
# counts), context switches per command (voluntary + nonvoluntary, summed
# over /proc/PID/task/*/status), and for SET the bytes written to storage
# per SET (/proc/PID/io write_bytes). Then the job queue
# (loadgen/examples/queue.rs, 50 producers LPUSH, 50 consumers BRPOP)
# against each server, with its CPU per job.
#
# Usage: scripts/bench_cpu.sh MEMTIER QUEUE KEYS SECS RESPITED [RESPITED_B]
#   QUEUE: the built queue example (target/release/examples/queue)
# Example: scripts/bench_cpu.sh /usr/local/bin/memtier_benchmark \
#            target/release/examples/queue 100000 8 target/release/respited
set -euo pipefail
memtier=$1 queue=$2 keys=$3 secs=$4
shift 4
bins=("$@")
# shellcheck source=scripts/bench_cpu_common.sh
source "$(dirname "$0")/bench_cpu_common.sh"
bench_respiteds 7701 if-several "${bins[@]}"
bench_redis 7799 "redis AOF always" --appendonly yes --appendfsync always
bench_pids
wbytes() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
mt() { "$memtier" -p "$1" --key-minimum 1 --key-maximum "$keys" --random-data -d 64 --hide-histogram "${@:2}"; }
# The job queue against each server, with the CPU and switches per job.
queue_run() {
    echo
    echo "| queue, 50 producers LPUSH / 50 consumers BRPOP, $1 | jobs/s | p50 ms | p99 ms | CPU µs/job | ctx switches/job |"
    echo "|---|---|---|---|---|---|"
    for p in "${servers[@]}"; do
        t0=$(ticks "${pid[$p]}"); s0=$(switches "${pid[$p]}")
        out=$("$queue" --target "x=127.0.0.1:$p" --producers 50 --consumers 50 --seconds "$secs" --rounds 1 2>/dev/null |
            awk -F'|' '/^\| x/ {print $3, $4, $5}')
        t1=$(ticks "${pid[$p]}"); s1=$(switches "${pid[$p]}")
        read -r jobs p50 p99 <<<"$(echo "$out" | sed 's/ ms//g')"
        awk -v s="${name[$p]}" -v j="$jobs" -v a="$p50" -v b="$p99" -v t=$((t1 - t0)) -v hz="$hz" -v secs="$secs" \
            -v cs=$((s1 - s0)) \
            'BEGIN {n = j * secs; printf "| %s | %d | %s | %s | %.1f | %.2f |\n", s, j, a, b, t / hz / n * 1e6, cs / n}'
    done
}
queue_run "on fresh servers"
for p in "${servers[@]}"; do
    mt "$p" -t 2 -c 10 --pipeline 64 --ratio 1:0 --key-pattern P:P -n allkeys >/dev/null 2>&1
done
echo
echo "memtier_benchmark, keys uniform over $keys, fresh random 64-byte values, ${secs}s per cell"
echo
echo "| workload | server | ops/s | p99 ms | CPU µs/op | ctx switches/op | bytes/SET |"
echo "|---|---|---|---|---|---|---|"
workloads=("SET, 10 conns|-t 2 -c 5 --ratio 1:0"
    "SET, 50 conns|-t 2 -c 25 --ratio 1:0"
    "SET, 200 conns|-t 2 -c 100 --ratio 1:0"
    "SET, 50 conns, --pipeline 16|-t 2 -c 25 --pipeline 16 --ratio 1:0"
    "50% SET / 50% GET, 50 conns|-t 2 -c 25 --ratio 1:1")
for w in "${workloads[@]}"; do
    IFS='|' read -r label args <<<"$w"
    for p in "${servers[@]}"; do
        b0=$(wbytes "${pid[$p]}"); t0=$(ticks "${pid[$p]}"); c0=$(cmds "$p"); s0=$(switches "${pid[$p]}")
        # shellcheck disable=SC2086
        out=$(mt "$p" $args --key-pattern R:R --distinct-client-seed --test-time "$secs" 2>/dev/null |
            awk '/^Totals/ {print $2, $(NF-2)}')
        b1=$(wbytes "${pid[$p]}"); t1=$(ticks "${pid[$p]}"); c1=$(cmds "$p"); s1=$(switches "${pid[$p]}")
        n=$((c1 - c0 - 1))
        bytes=-
        case $args in *"1:0"*) bytes=$(((b1 - b0) / n)) ;; esac
        read -r rate p99 <<<"$out"
        awk -v l="$label" -v s="${name[$p]}" -v r="$rate" -v q="$p99" -v t=$((t1 - t0)) -v hz="$hz" \
            -v n="$n" -v cs=$((s1 - s0)) -v b="$bytes" \
            'BEGIN {printf "| %s | %s | %d | %s | %.1f | %.2f | %s |\n", l, s, r, q, t / hz / n * 1e6, cs / n, b}'
    done
done
queue_run "after the SET runs above"
echo
for b in "${bins[@]}"; do echo "respite: $b ($("$b" --version 2>/dev/null || echo '?'))"; done
echo "redis: $(redis-server --version | head -1)"
