#!/usr/bin/env bash
# The cost of MONITOR to the other clients, side by side in one run: one
# respited (appendfsync no, so the monitor rather than the fsync is what
# could show) and one redis-server (no persistence), driven in turn by
# redis-benchmark; each round runs respite with no monitor, respite with
# one `redis-cli MONITOR` attached, then the same for redis-server. Prints
# every round and the medians. docs/benchmarks.md, "MONITOR", has the
# figures.
#
#   scripts/monitor_bench.sh [RESPITED] [ROUNDS]
set -u
B="${1:-target/release/respited}"
ROUNDS="${2:-5}"
D=$(mktemp -d)
"$B" --port 6400 --db "$D/b.db" --appendfsync no 2>"$D/log" & P=$!
redis-server --port 6401 --save "" --appendonly no --dir "$D" >/dev/null & R=$!
trap 'kill $P $R 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
sleep 1
run() {
    redis-benchmark -p "$1" -t set,get -n 400000 -c 50 -P 16 -r 100000 -q 2>/dev/null |
        tr '\r' '\n' | grep -o '^[A-Z]*: [0-9.]* requests' | awk '{printf "%s %s ", $1, $2}'
}
monitored() {
    redis-cli -p "$1" MONITOR >/dev/null & local m=$!
    sleep 0.3
    run "$1"
    kill $m; wait $m 2>/dev/null
}
out="$D/rounds"
for r in $(seq "$ROUNDS"); do
    for case in "respite none 6400 run" "respite monitor 6400 monitored" \
                "redis none 6401 run" "redis monitor 6401 monitored"; do
        set -- $case
        echo "r$r $1 $2 $($4 "$3")" | tee -a "$out"
    done
done
echo "medians (requests/s):"
for server in respite redis; do
    for m in none monitor; do
        for t in SET GET; do
            v=$(grep " $server $m " "$out" | grep -o "$t: [0-9.]*" | awk '{print $2}' | sort -n |
                awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
            printf '%s %s %s %s\n' "$server" "$m" "$t" "$v"
        done
    done
done
