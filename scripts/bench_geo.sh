#!/usr/bin/env bash
# GEOSEARCH BYRADIUS over 100,000 members returning 44: respite
# (appendfsync always; the search is a read) beside redis-server 7.0
# without persistence, ROUNDS rounds taken in turn. The points spread
# evenly over two degrees by two around Sicily (GEOADD pts in 100 batches
# of 1,000, longitudes 12..14, latitudes 37..39, six decimals, Python's
# random seeded 26). Beside each rate: the server's CPU microseconds per
# search (/proc/PID/stat utime+stime over the searches).
#
# Usage: scripts/bench_geo.sh RESPITED [ROUNDS] [MEMTIER]
# Example: scripts/bench_geo.sh /tmp/respited-rel 2 /usr/local/bin/memtier_benchmark
set -euo pipefail
bin=$1 rounds=${2:-2} memtier=${3:-memtier_benchmark}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
"$bin" --port 7671 --db "$dir/r.db" --appendfsync always 2>"$dir/r.log" &
redis-server --port 7672 --dir "$dir" --save "" --appendonly no >/dev/null &
ports=(7671 7672)
for p in "${ports[@]}"; do wait_up "$p"; done
python3 - >"$dir/load.resp" <<'PY'
import random, sys
random.seed(26)
out = sys.stdout.buffer
n = 0
for _ in range(100):
    args = [b"GEOADD", b"pts"]
    for i in range(1000):
        lon = "%.6f" % random.uniform(12, 14)
        lat = "%.6f" % random.uniform(37, 39)
        args += [lon.encode(), lat.encode(), b"p%d" % n]
        n += 1
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY
for p in "${ports[@]}"; do redis-cli -p "$p" --pipe <"$dir/load.resp" >/dev/null; done
search=(GEOSEARCH pts FROMLONLAT 13 38 BYRADIUS 2.5 km)
for p in "${ports[@]}"; do
    echo "port $p: $(redis-cli -p "$p" zcard pts) members, $(redis-cli -p "$p" "${search[@]}" | wc -l) results"
done
declare -A pid
for p in "${ports[@]}"; do
    pid[$p]=$(redis-cli -p "$p" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}')
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
echo
echo "| round | respite ops/s | redis ops/s | respite / redis | respite CPU µs/op | redis CPU µs/op | CPU ratio redis / respite |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
    declare -A rate cpu
    for p in "${ports[@]}"; do
        t0=$(ticks "${pid[$p]}")
        "$memtier" -s 127.0.0.1 -p "$p" --protocol=redis -t 2 -c 10 -n 2000 --hide-histogram \
            --command="${search[*]}" >"$dir/mt.out" 2>&1 || true
        rate[$p]=$(awk '/^Totals/ {printf "%.0f", $2}' "$dir/mt.out")
        [ -n "${rate[$p]}" ] || { cat "$dir/mt.out" >&2; rate[$p]=0; }
        t1=$(ticks "${pid[$p]}")
        cpu[$p]=$(awk -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN {printf "%.0f", t / hz / 40000 * 1e6}')
    done
    a=7671 b=7672
    echo "| $r | ${rate[$a]} | ${rate[$b]} | $(awk -v x="${rate[$a]}" -v y="${rate[$b]}" 'BEGIN {printf "%.2fx", x/y}') \
| ${cpu[$a]} | ${cpu[$b]} | $(awk -v x="${cpu[$a]}" -v y="${cpu[$b]}" 'BEGIN {printf "%.2fx", y/x}') |"
done
if [ -n "${PERF_SECS:-}" ]; then
    # A profile of respited under the same load (perf record -g).
    "$memtier" -s 127.0.0.1 -p 7671 --protocol=redis -t 2 -c 10 --test-time "$PERF_SECS" \
        --hide-histogram --command="${search[*]}" >/dev/null 2>&1 &
    perf record -F 2000 -g -p "${pid[7671]}" -o "${PERF_OUT:-/tmp/geo.perf}" -- sleep "$PERF_SECS" 2>/dev/null
    wait %%
fi
