#!/usr/bin/env bash
# PUBLISH throughput and latency, respited and redis-server side by side
# in one run: for each case (1, 10 and 100 subscribers to the channel;
# 100 subscribers to a matching pattern), memtier_benchmark's 50
# publishers (-t 1 -c 50) send `PUBLISH bench <64 bytes>` for SECS seconds
# to each server in turn. Subscribers are raw sockets read by `cat` into
# /dev/null (a consumer that costs next to nothing). Reported: PUBLISH/s,
# messages delivered/s (PUBLISH/s times the receivers each PUBLISH
# reports), memtier's PUBLISH round trip p50 and p99 in ms, and server CPU
# microseconds per PUBLISH (/proc/PID/stat utime+stime over the
# publishes). Each cell is the median of ROUNDS runs.
#
# Usage: scripts/bench_publish.sh MEMTIER RESPITED [SECS] [ROUNDS]
# Example: scripts/bench_publish.sh /usr/local/bin/memtier_benchmark /tmp/track-respited 10 3
set -euo pipefail
memtier=$1 bin=$2 secs=${3:-10} rounds=${4:-3}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
ours=7661 theirs=7662
"$bin" --port $ours --db "$dir/r.db" 2>"$dir/r.log" &
redis-server --port $theirs --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
wait_up $ours; wait_up $theirs
pid() { redis-cli -p "$1" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}'; }
declare -A spid=([$ours]=$(pid $ours) [$theirs]=$(pid $theirs))
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# N subscribers on server port $1 with command $2 (SUBSCRIBE bench, or
# PSUBSCRIBE bench*): each a bash /dev/tcp socket drained by cat.
subscribe() {
    local port=$1 cmd=$2 n=$3
    for _ in $(seq "$n"); do
        bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; printf '%s\r\n' '$cmd' >&3; exec cat <&3 >/dev/null" &
    done
    # Wait until the server has them all (and their subscriptions).
    until [ "$(redis-cli -p "$port" info clients | tr -d '\r' | awk -F: '/^connected_clients/ {print $2}')" -gt "$n" ]; do
        sleep 0.1
    done
    sleep 0.5
}
unsubscribe_all() {
    redis-cli -p "$1" client kill type pubsub >/dev/null
    sleep 0.3
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() { # port -> "ops p50 p99 cpu_us"
    local port=$1 t0 out
    t0=$(ticks "${spid[$port]}")
    # A command given with --command has no Hits/Misses columns: Totals,
    # Ops/sec, Avg. Latency, p50 Latency, p99 Latency, KB/sec.
    out=$("$memtier" -p "$port" -t 1 -c 50 --command "PUBLISH bench __data__" -d 64 \
        --test-time "$secs" --hide-histogram --print-percentiles 50,99 2>/dev/null |
        awk '/^Totals/ {print $2, $4, $5}')
    local dt=$(( $(ticks "${spid[$port]}") - t0 ))
    read -r ops p50 p99 <<<"$out"
    awk -v o="$ops" -v a="$p50" -v b="$p99" -v d="$dt" -v hz="$hz" -v s="$secs" \
        'BEGIN {printf "%.0f %s %s %.1f\n", o, a, b, d / hz / (o * s) * 1e6}'
}
echo "memtier_benchmark -t 1 -c 50 --command \"PUBLISH bench __data__\" -d 64, ${secs}s, median of $rounds"
echo
echo "| case | server | PUBLISH/s | messages delivered/s | p50 ms | p99 ms | µs CPU/PUBLISH |"
echo "|---|---|---|---|---|---|---|"
for case in "1 SUBSCRIBE" "10 SUBSCRIBE" "100 SUBSCRIBE" "100 PSUBSCRIBE"; do
    read -r n kind <<<"$case"
    cmd="$kind bench"; [ "$kind" = PSUBSCRIBE ] && cmd="PSUBSCRIBE bench*"
    declare -A o=() p50=() p99=() cpu=()
    for port in $theirs $ours; do subscribe "$port" "$cmd" "$n"; done
    for _ in $(seq "$rounds"); do
        for port in $theirs $ours; do
            read -r a b c d <<<"$(run "$port")"
            o[$port]+="$a "; p50[$port]+="$b "; p99[$port]+="$c "; cpu[$port]+="$d "
        done
    done
    for port in $theirs $ours; do unsubscribe_all "$port"; done
    for port in $theirs $ours; do
        name=redis-server; [ "$port" = $ours ] && name=respited
        ops=$(median ${o[$port]})
        echo "| $n × \`$cmd\` | $name | $ops | $(awk -v x="$ops" -v n="$n" 'BEGIN {printf "%.0f", x * n}') | $(median ${p50[$port]}) | $(median ${p99[$port]}) | $(median ${cpu[$port]}) |"
    done
    unset o p50 p99 cpu
done
echo
echo "$bin, redis-server $(redis-server --version | awk '{print $3}'), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
