#!/usr/bin/env bash
# Two respited binaries side by side in one run, with redis-server
# (appendfsync always) beside them: the A/B benchmark for a change to the
# engine or to SQLite. memtier_benchmark writes a fresh random 64-byte value
# per SET (--random-data), keys uniform over KEYS (--key-pattern R:R,
# --distinct-client-seed), the keyspace filled first. Every cell is the
# median of ROUNDS runs of SECS seconds, the servers taken in turn within a
# round so a burst of noise hits every column alike. Beside each rate: CPU
# microseconds per command (/proc/PID/stat utime+stime over the commands
# INFO counts) and, for SET, bytes written to disk per SET (/proc/PID/io
# write_bytes).
#
# Usage: scripts/bench_ab.sh MEMTIER OLD_RESPITED NEW_RESPITED [KEYS] [ROUNDS] [SECS]
# Example: scripts/bench_ab.sh /usr/local/bin/memtier_benchmark /tmp/respited-old target/release/respited 100000 3 10
set -euo pipefail
memtier=$1 old=$2 new=$3 keys=${4:-100000} rounds=${5:-3} secs=${6:-10}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
"$old" --port 7601 --db "$dir/old.db" 2>"$dir/old.log" &
"$new" --port 7602 --db "$dir/new.db" 2>"$dir/new.log" &
redis-server --port 7603 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null &
servers=(7601 7602 7603)
for p in "${servers[@]}"; do wait_up "$p"; done
declare -A pid
for p in "${servers[@]}"; do
    pid[$p]=$(redis-cli -p "$p" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}')
done
wbytes() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cmds() { redis-cli -p "$1" info stats | tr -d '\r' | awk -F: '/^total_commands_processed/ {print $2}'; }
mt() { "$memtier" -p "$1" --key-minimum 1 --key-maximum "$keys" --random-data -d 64 --hide-histogram "${@:2}"; }
for p in "${servers[@]}"; do
    mt "$p" -t 2 -c 10 --pipeline 64 --ratio 1:0 --key-pattern P:P -n allkeys >/dev/null 2>&1
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A rate dbytes dticks dcmds
workloads=("SET, 50 conns|--ratio 1:0" "GET, 50 conns|--ratio 0:1" "50% SET / 50% GET, 50 conns|--ratio 1:1")
for w in "${workloads[@]}"; do
    IFS='|' read -r label args <<<"$w"
    for _ in $(seq "$rounds"); do
        for p in "${servers[@]}"; do
            k="$label,$p"
            b0=$(wbytes "${pid[$p]}"); t0=$(ticks "${pid[$p]}"); c0=$(cmds "$p")
            # shellcheck disable=SC2086
            out=$(mt "$p" -t 2 -c 25 $args --key-pattern R:R --distinct-client-seed --test-time "$secs" 2>/dev/null |
                awk '/^Totals/ {print $2}')
            rate[$k]+="$out "
            dbytes[$k]=$(( ${dbytes[$k]:-0} + $(wbytes "${pid[$p]}") - b0 ))
            dticks[$k]=$(( ${dticks[$k]:-0} + $(ticks "${pid[$p]}") - t0 ))
            dcmds[$k]=$(( ${dcmds[$k]:-0} + $(cmds "$p") - c0 - 1 ))
        done
    done
done
hz=$(getconf CLK_TCK)
echo "memtier_benchmark -t 2 -c 25, keys uniform over $keys, fresh random 64-byte values, median of $rounds x ${secs}s"
echo
echo "| workload | A ops/s | B ops/s | redis AOF always ops/s | B / A | B / redis | A µs CPU/op | B µs CPU/op | redis µs CPU/op | A B/SET | B B/SET | redis B/SET |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for w in "${workloads[@]}"; do
    IFS='|' read -r label args <<<"$w"
    a=$(median ${rate[$label,7601]}); b=$(median ${rate[$label,7602]}); r=$(median ${rate[$label,7603]})
    row="| $label | $a | $b | $r | $(awk -v x="$b" -v y="$a" 'BEGIN {printf "%.2fx", x/y}') | $(awk -v x="$b" -v y="$r" 'BEGIN {printf "%.2fx", x/y}')"
    for p in 7601 7602 7603; do
        row+=" | $(awk -v t="${dticks[$label,$p]}" -v c="${dcmds[$label,$p]}" -v hz="$hz" 'BEGIN {printf "%.1f", t / hz / c * 1e6}')"
    done
    for p in 7601 7602 7603; do
        if [ "$args" = "--ratio 1:0" ]; then
            row+=" | $(( ${dbytes[$label,$p]} / ${dcmds[$label,$p]} ))"
        else
            row+=" | -"
        fi
    done
    echo "$row |"
done
echo
echo "A: $old ($("$old" --version 2>/dev/null || echo '?')); B: $new ($("$new" --version 2>/dev/null || echo '?'))"
