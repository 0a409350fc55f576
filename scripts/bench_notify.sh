#!/usr/bin/env bash
# What keyspace notifications cost a SET: one respited binary run four
# ways side by side in one run, memtier_benchmark writing fresh random
# 64-byte values (as scripts/bench_ab.sh does): notify-keyspace-events ""
# (off); "KEA" with no subscriber; "KEA" with one client subscribed to an
# unrelated channel (the writer then gathers and publishes every event, to
# nobody); "KEA" with one client on the pattern `__keyevent@0__:del`
# (every event is also matched against it). Every cell is the median of
# ROUNDS runs of SECS seconds, the servers taken in turn within a round.
# Beside each rate: CPU microseconds per command (/proc/PID/stat
# utime+stime over the commands INFO counts).
#
# Usage: scripts/bench_notify.sh MEMTIER RESPITED [KEYS] [ROUNDS] [SECS]
# Example: scripts/bench_notify.sh /usr/local/bin/memtier_benchmark target/release/respited 100000 3 10
set -euo pipefail
memtier=$1 bin=$2 keys=${3:-100000} rounds=${4:-3} secs=${5:-10}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
servers=(7651 7652 7653 7654)
flags=("" "KEA" "KEA" "KEA")
for i in 0 1 2 3; do
    printf '[redis]\nnotify-keyspace-events = "%s"\n' "${flags[$i]}" >"$dir/$i.toml"
    "$bin" --port "${servers[$i]}" --db "$dir/$i.db" --config "$dir/$i.toml" 2>"$dir/$i.log" &
done
for p in "${servers[@]}"; do wait_up "$p"; done
# The subscribers: they read what comes (nothing does) until the end.
redis-cli -p 7653 subscribe unrelated >/dev/null &
redis-cli -p 7654 psubscribe '__keyevent@0__:del' >/dev/null &
declare -A pid
for p in "${servers[@]}"; do
    pid[$p]=$(redis-cli -p "$p" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}')
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cmds() { redis-cli -p "$1" info stats | tr -d '\r' | awk -F: '/^total_commands_processed/ {print $2}'; }
mt() { "$memtier" -p "$1" --key-minimum 1 --key-maximum "$keys" --random-data -d 64 --hide-histogram "${@:2}"; }
for p in "${servers[@]}"; do
    mt "$p" -t 2 -c 10 --pipeline 64 --ratio 1:0 --key-pattern P:P -n allkeys >/dev/null 2>&1
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A rate dticks dcmds
for _ in $(seq "$rounds"); do
    for p in "${servers[@]}"; do
        t0=$(ticks "${pid[$p]}"); c0=$(cmds "$p")
        out=$(mt "$p" -t 2 -c 25 --ratio 1:0 --key-pattern R:R --distinct-client-seed --test-time "$secs" 2>/dev/null |
            awk '/^Totals/ {print $2}')
        rate[$p]+="$out "
        dticks[$p]=$(( ${dticks[$p]:-0} + $(ticks "${pid[$p]}") - t0 ))
        dcmds[$p]=$(( ${dcmds[$p]:-0} + $(cmds "$p") - c0 - 1 ))
    done
done
hz=$(getconf CLK_TCK)
off=$(median ${rate[7651]})
echo "memtier_benchmark -t 2 -c 25 SET, keys uniform over $keys, fresh random 64-byte values, median of $rounds x ${secs}s"
echo
echo "| notify-keyspace-events | subscribers | SET ops/s | vs off | µs CPU/op |"
echo "|---|---|---|---|---|"
labels=("\"\" (off)|none" "KEA|none" "KEA|one, to an unrelated channel" "KEA|one, to the pattern \`__keyevent@0__:del\`")
for i in 0 1 2 3; do
    p=${servers[$i]}
    IFS='|' read -r f s <<<"${labels[$i]}"
    r=$(median ${rate[$p]})
    cpu=$(awk -v t="${dticks[$p]}" -v c="${dcmds[$p]}" -v hz="$hz" 'BEGIN {printf "%.1f", t / hz / c * 1e6}')
    echo "| $f | $s | $r | $(awk -v x="$r" -v y="$off" 'BEGIN {printf "%.2fx", x/y}') | $cpu |"
done
echo
echo "$bin ($("$bin" --version 2>/dev/null || echo '?'))"
