#!/usr/bin/env bash
# One cell of scripts/bench_cpu.sh at a time: one workload against one or
# more respited builds and the redis-server it is measured against, side by
# side, the servers taken in turn, so that each run stays short. Per server:
# ops/s and p99 (memtier_benchmark, or the queue example), CPU microseconds
# per operation of the whole process (/proc/PID/stat utime+stime over the
# commands INFO counts, or per job for the queue), context switches per
# operation (voluntary + nonvoluntary over /proc/PID/task/*/status), and for
# respite the same two figures per thread (writer, the connections'
# runtime, checkpointer, readers).
#
# Usage: scripts/bench_cpu_cell.sh MEMTIER QUEUE KEYS SECS ROUNDS WORKLOAD RESPITED...
#   WORKLOAD: set10 | set50 | set200 | p16 | mixed | get50 | getp16 | queue
#   SET, the mix and the queue are measured against redis-server with
#   `appendfsync always`; GET against redis-server without persistence.
# Example: scripts/bench_cpu_cell.sh /usr/local/bin/memtier_benchmark \
#            target/release/examples/queue 100000 6 2 set50 target/release/respited
set -euo pipefail
memtier=$1 queue=$2 keys=$3 secs=$4 rounds=$5 workload=$6
shift 6
bins=("$@")
# shellcheck source=scripts/bench_cpu_common.sh
source "$(dirname "$0")/bench_cpu_common.sh"
bench_respiteds 7741 always "${bins[@]}"
case $workload in
get*) bench_redis 7798 "redis, no persistence" --appendonly no ;;
*) bench_redis 7798 "redis AOF always" --appendonly yes --appendfsync always ;;
esac
bench_pids
# Per thread name: "name ticks voluntary nonvoluntary" lines, summed over
# the threads of that name.
threads() {
    for t in /proc/"$1"/task/*; do
        n=$(tr ' ' '_' <"$t/comm")
        c=$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null || echo 0)
        v=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null || echo 0)
        i=$(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null || echo 0)
        echo "$n $c $v $i"
    done | awk '{c[$1] += $2; v[$1] += $3; i[$1] += $4} END {for (n in c) print n, c[n], v[n], i[n]}' | sort
}
mt() { "$memtier" -p "$1" --key-minimum 1 --key-maximum "$keys" --random-data -d 64 --hide-histogram \
    --distinct-client-seed --key-pattern R:R "${@:2}"; }
if [ "$workload" != queue ]; then
    for p in "${servers[@]}"; do
        mt "$p" -t 2 -c 10 --pipeline 64 --ratio 1:0 --key-pattern P:P -n allkeys >/dev/null 2>&1
    done
fi
case $workload in
set10) args=(-t 2 -c 5 --ratio 1:0) ;;
set50) args=(-t 2 -c 25 --ratio 1:0) ;;
set200) args=(-t 2 -c 100 --ratio 1:0) ;;
p16) args=(-t 2 -c 25 --pipeline 16 --ratio 1:0) ;;
mixed) args=(-t 2 -c 25 --ratio 1:1) ;;
get50) args=(-t 2 -c 25 --ratio 0:1) ;;
getp16) args=(-t 2 -c 25 --pipeline 16 --ratio 0:1) ;;
queue) args=() ;;
*)
    echo "unknown workload $workload" >&2
    exit 2
    ;;
esac
# GETs: one untimed pass first, so respite's value cache holds the keys.
case $workload in get*)
    for p in "${servers[@]}"; do mt "$p" "${args[@]}" --test-time 3 >/dev/null 2>&1; done
    ;;
esac
echo "$workload, keys uniform over $keys, ${secs}s per run, $rounds rounds"
echo
echo "| round | server | ops/s | p99 ms | CPU µs/op | ctx switches/op |"
echo "|---|---|---:|---:|---:|---:|"
declare -A thr
for r in $(seq 1 "$rounds"); do
    for p in "${servers[@]}"; do
        t0=$(ticks "${pid[$p]}") s0=$(switches "${pid[$p]}") c0=$(cmds "$p")
        threads "${pid[$p]}" >"$dir/t0"
        if [ "$workload" = queue ]; then
            out=$("$queue" --target "x=127.0.0.1:$p" --producers 50 --consumers 50 --seconds "$secs" --rounds 1 2>/dev/null |
                awk -F'|' '/^\| x/ {print $3, $5}' | sed 's/ ms//g')
            read -r ops p99 <<<"$out"
            n=$((ops * secs))
        else
            out=$(mt "$p" "${args[@]}" --test-time "$secs" 2>/dev/null |
                awk '/^Totals/ {print $2, $(NF-2)}')
            read -r ops p99 <<<"$out"
            c1=$(cmds "$p")
            n=$((c1 - c0 - 1))
        fi
        t1=$(ticks "${pid[$p]}") s1=$(switches "${pid[$p]}")
        threads "${pid[$p]}" >"$dir/t1"
        awk -v r="$r" -v s="${name[$p]}" -v o="$ops" -v p99="$p99" -v t=$((t1 - t0)) -v hz="$hz" -v n="$n" \
            -v cs=$((s1 - s0)) \
            'BEGIN {printf "| %d | %s | %d | %s | %.1f | %.3f |\n", r, s, o, p99, t / hz / n * 1e6, cs / n}'
        if [ "$p" != 7798 ]; then
            thr[$p]+=$(join "$dir/t0" "$dir/t1" | awk -v hz="$hz" -v n="$n" \
                '{c = $5 - $2; v = $6 - $3; i = $7 - $4; if (c > 0 || v + i > 0)
                    printf "%s %.1f µs, %.3f + %.3f sw; ", $1, c / hz / n * 1e6, v / n, i / n}')
            thr[$p]+=$'\n'
        fi
    done
done
echo
echo "Per thread: CPU µs per op, voluntary + nonvoluntary context switches per op; one line per round:"
for p in "${servers[@]}"; do
    [ "$p" = 7798 ] && continue
    echo "${name[$p]}:"
    echo -n "${thr[$p]}"
done
