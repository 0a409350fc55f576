#!/usr/bin/env bash
# Scripts and functions against redis-server and against MULTI/EXEC, one
# pair of servers per run (each run is meant to be one short hold of the
# machine), with loadgen's `script_calls` example as the client:
#   rmw:   EVALSHA and FCALL of GET+INCR+EXPIRE on one random key,
#          respite (durable by default) against redis-server with
#          appendonly yes, appendfsync always;
#   multi: on respite alone, the EVALSHA against the same three commands
#          sent as MULTI/EXEC in one buffer;
#   ro:    EVALSHA_RO of three GETs, respite against redis-server without
#          persistence.
# Each cell is the median of ROUNDS runs of SECS seconds, the cells taken
# in turn within a round; beside each rate the server's CPU microseconds
# per call, whole process (/proc/PID/stat).
#
# Usage: scripts/bench_scripts.sh rmw|multi|ro RESPITED SCRIPT_CALLS [KEYS] [ROUNDS] [SECS] [CLIENTS]
# Example:
#   cargo build --release -p respite-daemon -p respite-loadgen --examples
#   scripts/bench_scripts.sh rmw target/release/respited target/release/examples/script_calls
set -euo pipefail
pair=$1 bin=$2 client=$3 keys=${4:-100000} rounds=${5:-3} secs=${6:-10} clients=${7:-50}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
respite=7661 redis=7662
"$bin" --port $respite --db "$dir/r.db" 2>"$dir/r.log" &
case $pair in
rmw)
    mkdir -p "$dir/a"
    redis-server --port $redis --dir "$dir/a" --save "" --appendonly yes --appendfsync always >/dev/null &
    cells=(--cell "respite-evalsha=127.0.0.1:$respite=evalsha" --cell "redis-always-evalsha=127.0.0.1:$redis=evalsha"
        --cell "respite-fcall=127.0.0.1:$respite=fcall" --cell "redis-always-fcall=127.0.0.1:$redis=fcall")
    ;;
multi)
    cells=(--cell "respite-evalsha=127.0.0.1:$respite=evalsha" --cell "respite-multi=127.0.0.1:$respite=multi")
    ;;
ro)
    mkdir -p "$dir/n"
    redis-server --port $redis --dir "$dir/n" --save "" --appendonly no >/dev/null &
    cells=(--cell "respite-evalsha_ro=127.0.0.1:$respite=evalsha_ro" --cell "redis-none-evalsha_ro=127.0.0.1:$redis=evalsha_ro")
    ;;
*)
    echo "pair: rmw, multi or ro" >&2
    exit 2
    ;;
esac
wait_up $respite
[ "$pair" = multi ] || wait_up $redis
"$client" "${cells[@]}" --clients "$clients" --keys "$keys" --seconds "$secs" --rounds "$rounds"
echo "$("$bin" --version 2>/dev/null || echo "$bin"), $(redis-server --version | awk '{print $3}'), $(nproc) cores"
