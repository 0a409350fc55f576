#!/usr/bin/env bash
# The efficiency table of docs/loadgen.md: respite-loadgen, memtier_benchmark
# and redis-benchmark side by side against one redis-server without
# persistence, SET and GET, 50 connections, pipeline 1 and 16, keys uniform
# over 100,000 (all preloaded, in each tool's own key naming, so every GET
# hits), a 64-byte value that changes on every SET. memtier needs
# --distinct-client-seed for that: without it all 50 clients draw the same
# key sequence (100,000 SETs wrote 1,978 distinct keys, not about 63,000),
# so the server works on a cache-hot sliver of the keyspace and does each
# request in about 60% of the CPU time. Each generator runs one
# thread (the server needs the other core of a 2-core machine). For every
# run: the generator's reported ops/s and its own CPU seconds (user + system,
# from /usr/bin/time) per million requests. Rounds are taken in turn across
# the tools, so noise hits all alike; the table has the median of ROUNDS.
#
# Usage: loadgen/bench/efficiency.sh MEMTIER [ROUNDS] [N_P1] [N_P16]
# (run from the repository root after `cargo build --release -p respite-loadgen`)
set -euo pipefail
MEMTIER=${1:?path to memtier_benchmark}
ROUNDS=${2:-3}
N1=${3:-1000000}
N16=${4:-4000000}
PORT=7410
LOADGEN=./target/release/respite-loadgen
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
redis-server --port $PORT --save '' --appendonly no --dir "$dir" >/dev/null &
until redis-cli -p $PORT ping >/dev/null 2>&1; do sleep 0.1; done

# Preload 100,000 keys in each tool's naming: loadgen key:0..99999,
# memtier memtier-1..100000, redis-benchmark key:000000000000..000000099999.
$LOADGEN -q -p $PORT --ratio 1:0 --keyspace 100000 --key-pattern sequential \
    -n 100000 -c 1 -P 256 -d 64 >/dev/null
$LOADGEN -q -p $PORT --ratio 1:0 --key-prefix memtier- --key-minimum 1 --key-maximum 100000 \
    --key-pattern sequential -n 100000 -c 1 -P 256 -d 64 >/dev/null
x52=$(printf 'x%.0s' $(seq 52))
awk -v v="$x52" 'BEGIN { for (i = 0; i < 100000; i++) printf "SET key:%012d %s%012d\n", i, v, i }' |
    redis-cli -p $PORT --pipe >/dev/null
echo "keys preloaded: $(redis-cli -p $PORT dbsize)" >&2

# cpu_of FILE: user + system seconds that /usr/bin/time wrote.
cpu_of() { awk '{ print $1 + $2 }' "$1"; }
# One run of TOOL for CMD (set|get) at pipeline P; prints "ops/s cpu_s requests".
run() {
    local tool=$1 cmd=$2 p=$3 n
    n=$([ "$p" = 1 ] && echo $N1 || echo $N16)
    local t="$dir/time" out="$dir/out"
    case $tool in
        loadgen)
            local ratio=$([ $cmd = set ] && echo 1:0 || echo 0:1)
            /usr/bin/time -f "%U %S" -o "$t" $LOADGEN -q -p $PORT -c 50 -P $p -n $n \
                --ratio $ratio --keyspace 100000 -d 64 --json "$dir/lg.json" >/dev/null
            ops=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["targets"][0]["overall"]["ops_per_sec"])' "$dir/lg.json")
            ;;
        memtier)
            local ratio=$([ $cmd = set ] && echo 1:0 || echo 0:1)
            /usr/bin/time -f "%U %S" -o "$t" "$MEMTIER" -s 127.0.0.1 -p $PORT -t 1 -c 50 \
                --pipeline $p -n $((n / 50)) --ratio $ratio --key-pattern R:R \
                --key-minimum 1 --key-maximum 100000 --random-data -d 64 --hide-histogram \
                --distinct-client-seed \
                >"$out" 2>/dev/null
            ops=$(awk '/^Totals/ { print $2 }' "$out")
            ;;
        redis-benchmark)
            local args
            if [ $cmd = set ]; then args=(SET key:__rand_int__ "${x52}__rand_int__"); else args=(GET key:__rand_int__); fi
            /usr/bin/time -f "%U %S" -o "$t" redis-benchmark -p $PORT -c 50 -P $p -n $n \
                -r 100000 --csv "${args[@]}" >"$out" 2>/dev/null
            ops=$(awk -F'"' 'NR == 2 { print $4 }' "$out")
            ;;
    esac
    echo "$ops $(cpu_of "$t") $n"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

tools=(loadgen memtier redis-benchmark)
declare -A ops cpu
for cmd in set get; do
    for p in 1 16; do
        for r in $(seq "$ROUNDS"); do
            for tool in "${tools[@]}"; do
                read -r o c n <<<"$(run $tool $cmd $p)"
                echo "round $r $cmd -P $p $tool: $o ops/s, $c CPU s for $n requests, load $(cut -d' ' -f1 /proc/loadavg)" >&2
                ops[$cmd,$p,$tool]+="$o "
                cpu[$cmd,$p,$tool]+="$(awk -v c="$c" -v n="$n" 'BEGIN { printf "%.3f", c / (n / 1e6) }') "
            done
        done
    done
done
echo "| -c 50, keys over 100k, random 64-byte values | loadgen ops/s | memtier ops/s | redis-benchmark ops/s | loadgen / best other | loadgen CPU s per M | memtier CPU s per M | redis-benchmark CPU s per M |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for cmd in set get; do
    for p in 1 16; do
        l=$(median ${ops[$cmd,$p,loadgen]}); m=$(median ${ops[$cmd,$p,memtier]}); b=$(median ${ops[$cmd,$p,redis-benchmark]})
        awk -v label="${cmd^^}, -P $p" -v l="$l" -v m="$m" -v b="$b" \
            -v lc="$(median ${cpu[$cmd,$p,loadgen]})" -v mc="$(median ${cpu[$cmd,$p,memtier]})" \
            -v bc="$(median ${cpu[$cmd,$p,redis-benchmark]})" 'BEGIN {
            best = (m > b ? m : b)
            printf "| %s | %.0f | %.0f | %.0f | %.2fx | %.2f | %.2f | %.2f |\n", label, l, m, b, l / best, lc, mc, bc }'
    done
done
