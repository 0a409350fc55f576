#!/usr/bin/env bash
# Scripts and functions, respite against redis-server side by side in one
# run, memtier_benchmark with random keys:
#   - EVALSHA of a read-modify-write script of three calls on one key
#     (GET, INCR, EXPIRE), and FCALL of the same as a function: respite
#     (appendfsync always, its default) against redis-server with
#     appendonly yes and appendfsync always;
#   - EVALSHA_RO of a read-only script of three GETs: respite against
#     redis-server without persistence.
# Every cell is the median of ROUNDS runs of SECS seconds, the servers
# taken in turn within a round. Beside each rate: the server's CPU
# microseconds per call (/proc/PID/stat utime+stime over the calls made).
#
# Usage: scripts/bench_scripts.sh MEMTIER RESPITED [KEYS] [ROUNDS] [SECS] [CLIENTS]
# Example: scripts/bench_scripts.sh /usr/local/bin/memtier_benchmark /tmp/lua-respited 100000 3 10 50
set -euo pipefail
memtier=$1 bin=$2 keys=${3:-100000} rounds=${4:-3} secs=${5:-10} clients=${6:-50}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
respite=7661 redis_always=7662 redis_none=7663
"$bin" --port $respite --db "$dir/r.db" 2>"$dir/r.log" &
mkdir -p "$dir/a" "$dir/n"
redis-server --port $redis_always --dir "$dir/a" --save "" --appendonly yes --appendfsync always >/dev/null &
redis-server --port $redis_none --dir "$dir/n" --save "" --appendonly no >/dev/null &
for p in $respite $redis_always $redis_none; do wait_up $p; done
rmw="redis.call('get', KEYS[1]); local n = redis.call('incr', KEYS[1]); redis.call('expire', KEYS[1], 3600); return n"
ro="return {redis.call('get', KEYS[1]), redis.call('get', KEYS[1] .. ':a'), redis.call('get', KEYS[1] .. ':b')}"
lib="#!lua name=bench
redis.register_function('rmw', function(keys) redis.call('get', keys[1]); local n = redis.call('incr', keys[1]); redis.call('expire', keys[1], 3600); return n end)"
declare -A sha_rmw sha_ro pid
for p in $respite $redis_always $redis_none; do
    sha_rmw[$p]=$(redis-cli -p $p script load "$rmw")
    sha_ro[$p]=$(redis-cli -p $p script load "$ro")
    redis-cli -p $p function load replace "$lib" >/dev/null
    pid[$p]=$(redis-cli -p $p info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}')
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# One run: prints ops/s and CPU ticks used.
run() {
    local p=$1 cmd=$2 t0 out
    t0=$(ticks "${pid[$p]}")
    out=$("$memtier" -p "$p" -t 2 -c $((clients / 2)) --hide-histogram --test-time "$secs" \
        --distinct-client-seed --key-minimum 1 --key-maximum "$keys" \
        --command "$cmd" --command-key-pattern R 2>/dev/null | awk '/^Totals/ {print $2}')
    echo "$out $(( $(ticks "${pid[$p]}") - t0 ))"
}
# Preload the keys the read-only script reads.
for p in $respite $redis_none; do
    "$memtier" -p "$p" -t 1 -c 10 --hide-histogram -n allkeys --key-minimum 1 --key-maximum "$keys" \
        --command "SET __key__ 12345" --command-key-pattern P >/dev/null 2>&1
done
hz=$(getconf CLK_TCK)
declare -A rate cpu
cases=(
    "rmw-respite|$respite|EVALSHA ${sha_rmw[$respite]} 1 __key__"
    "rmw-redis|$redis_always|EVALSHA ${sha_rmw[$redis_always]} 1 __key__"
    "fcall-respite|$respite|FCALL rmw 1 __key__"
    "fcall-redis|$redis_always|FCALL rmw 1 __key__"
    "ro-respite|$respite|EVALSHA_RO ${sha_ro[$respite]} 1 __key__"
    "ro-redis|$redis_none|EVALSHA_RO ${sha_ro[$redis_none]} 1 __key__"
)
for _ in $(seq "$rounds"); do
    for c in "${cases[@]}"; do
        IFS='|' read -r name p cmd <<<"$c"
        read -r ops t < <(run "$p" "$cmd")
        rate[$name]+="$ops "
        calls=$(awk -v o="$ops" -v s="$secs" 'BEGIN {print o * s}')
        cpu[$name]+="$(awk -v t="$t" -v c="$calls" -v hz="$hz" 'BEGIN {printf "%.1f", t / hz / c * 1e6}') "
    done
done
echo "memtier_benchmark -t 2 -c $((clients / 2)) ($clients connections), keys uniform over $keys, median of $rounds x ${secs}s"
echo
echo "| call | respite ops/s | µs CPU/call | redis-server ops/s | µs CPU/call | respite/redis |"
echo "|---|---|---|---|---|---|"
row() {
    local label=$1 a=$2 b=$3 ra rb
    ra=$(median ${rate[$a]}); rb=$(median ${rate[$b]})
    echo "| $label | $ra | $(median ${cpu[$a]}) | $rb | $(median ${cpu[$b]}) | $(awk -v x="$ra" -v y="$rb" 'BEGIN {printf "%.2fx", x/y}') |"
}
row "EVALSHA GET+INCR+EXPIRE (redis: appendfsync always)" rmw-respite rmw-redis
row "FCALL GET+INCR+EXPIRE (redis: appendfsync always)" fcall-respite fcall-redis
row "EVALSHA_RO 3 GETs (redis: no persistence)" ro-respite ro-redis
echo
echo "$bin ($("$bin" --version 2>/dev/null || echo '?')), $(redis-server --version | awk '{print $3}')"
