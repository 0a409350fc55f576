#!/usr/bin/env bash
# GET with CLIENT TRACKING on (default mode) against GET without it, on a
# respited and a redis-server side by side: memtier_benchmark's 50
# connections (-t 2 -c 25) GET random keys among KEYS preloaded ones for
# SECS seconds, once plain and once with each connection sending
# `CLIENT TRACKING on` first (memtier's arbitrary commands run in sequence
# with their ratios: one TRACKING, then a million GETs). RESP2 and no
# writes, so no invalidation is ever sent: what is measured is what
# tracking adds to a read, remembering its key. Each cell is the median
# of ROUNDS runs, the four cases taken in turn.
#
# Usage: scripts/bench_tracking_get.sh MEMTIER RESPITED [SECS] [ROUNDS] [KEYS] [PIPELINE]
set -euo pipefail
memtier=$1 bin=$2 secs=${3:-5} rounds=${4:-3} keys=${5:-10000} pipeline=${6:-1}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
ours=7671 theirs=7672
"$bin" --port $ours --db "$dir/r.db" 2>"$dir/r.log" &
redis-server --port $theirs --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
wait_up $ours; wait_up $theirs
for port in $ours $theirs; do
    "$memtier" -p "$port" -t 1 -c 10 --command "SET __key__ __data__" --command-key-pattern P \
        --key-maximum "$keys" -n $((keys / 10 + 1)) -d 64 --hide-histogram >/dev/null 2>&1
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() { # port tracking(0|1) -> "ops p50 p99"
    local port=$1 tracking=$2 cmds
    cmds=(--command "GET __key__" --command-key-pattern R)
    if [ "$tracking" = 1 ]; then
        cmds=(--command "CLIENT TRACKING on" --command-ratio 1 "${cmds[@]}" --command-ratio 1000000)
    fi
    "$memtier" -p "$port" -t 2 -c 25 --pipeline "$pipeline" "${cmds[@]}" --key-maximum "$keys" \
        --test-time "$secs" --hide-histogram --print-percentiles 50,99 2>/dev/null |
        awk '/^Totals/ {print $2, $4, $5}'
}
echo "memtier_benchmark -t 2 -c 25 --pipeline $pipeline GET over $keys keys, ${secs}s, median of $rounds"
echo
echo "| server | tracking | GET/s | p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
declare -A o=() p50=() p99=()
for _ in $(seq "$rounds"); do
    for port in $theirs $ours; do
        for t in 0 1; do
            read -r a b c <<<"$(run "$port" "$t")"
            o[$port$t]+="$a "; p50[$port$t]+="$b "; p99[$port$t]+="$c "
        done
    done
done
for port in $theirs $ours; do
    name=redis-server; [ "$port" = $ours ] && name=respited
    for t in 0 1; do
        on=off; [ "$t" = 1 ] && on=on
        echo "| $name | $on | $(median ${o[$port$t]}) | $(median ${p50[$port$t]}) | $(median ${p99[$port$t]}) |"
    done
done
