#!/usr/bin/env bash
# HyperLogLog against SET and GET: respite (appendfsync always) beside
# redis-server 7.0 with appendfsync always and without persistence, each
# test run on the three in turn. redis-benchmark, 50 connections, the
# `__rand_int__` placeholders drawn independently with -r 100: 100 HLL keys
# `h<n>`, and elements of three placeholders each (a million distinct), so
# a PFADD of 10 elements keeps changing registers. Tests:
#   SET, GET           64-byte values over 100 keys (the baseline); each
#                      SET's value differs from the one it replaces (a
#                      placeholder in it), since SQLite skips rewriting a
#                      row whose bytes are unchanged and a SET of the same
#                      value would write nothing
#   PFADD              10 elements to one of the 100 HLLs
#   PFCOUNT            one key, its cached cardinality valid
#   PFCOUNT 3 keys     the union of three (never cached)
#   PFCOUNT stale      one key right after a PFADD made its cache stale:
#                      memtier_benchmark counts 100,000 fresh keys each
#                      PFADDed once (10 elements), each key once
#   PFMERGE            one of 100 destinations from two of the HLLs
# Beside each rate: the server's CPU microseconds per command
# (/proc/PID/stat utime+stime over the commands sent) and, for the tests
# that write, the bytes the server wrote to disk per command
# (/proc/PID/io write_bytes: WAL or AOF, and checkpoints).
#
# Usage: scripts/bench_hll.sh RESPITED [REQUESTS] [MEMTIER]
# Example: scripts/bench_hll.sh /tmp/respited-rel 100000 /usr/local/bin/memtier_benchmark
# With BEFORE=OTHER_RESPITED, a fourth server (that build, same settings)
# runs each test too, its column beside the first (an A/B of two builds in
# one run). ONLY="SET|PFADD" runs only the tests whose label starts with one
# of those words.
set -euo pipefail
bin=$1 n=${2:-100000} memtier=${3:-memtier_benchmark}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
ports=(7661 7662 7663)
names=("respite, always" "redis, always" "redis, no persistence")
"$bin" --port 7661 --db "$dir/r.db" --appendfsync always 2>"$dir/r.log" &
redis-server --port 7662 --dir "$dir" --save "" --appendonly yes --appendfsync always \
    --appendfilename a.aof >/dev/null &
redis-server --port 7663 --dir "$dir" --save "" --appendonly no >/dev/null &
if [ -n "${BEFORE:-}" ]; then
    ports=(7661 7664 7662 7663)
    names=("respite, always" "respite before, always" "redis, always" "redis, no persistence")
    "$BEFORE" --port 7664 --db "$dir/b.db" --appendfsync always 2>"$dir/b.log" &
fi
for p in "${ports[@]}"; do wait_up "$p"; done
declare -A pid
for p in "${ports[@]}"; do
    pid[$p]=$(redis-cli -p "$p" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}')
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
written() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
hz=$(getconf CLK_TCK)
e='e__rand_int____rand_int____rand_int__'
els="$e $e $e $e $e $e $e $e $e $e"
tests=(
    "SET|SET k__rand_int__ v__rand_int__xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    "GET|GET k__rand_int__"
    "PFADD, 10 elements|PFADD h__rand_int__ $els"
    "PFCOUNT, one key (cached)|PFCOUNT h__rand_int__"
    "PFCOUNT, 3 keys|PFCOUNT h__rand_int__ h__rand_int__ h__rand_int__"
    "PFCOUNT, one key (stale cache)|stale"
    "PFMERGE, 2 sources|PFMERGE m__rand_int__ h__rand_int__ h__rand_int__"
)
echo "redis-benchmark -c 50 -n $n -r 100 (memtier_benchmark -t 2 -c 25 for the stale cache)"
echo
header="| test |"
rule="|---|"
for nm in "${names[@]}"; do header="$header $nm |"; rule="$rule---|"; done
if [ -n "${BEFORE:-}" ]; then header="$header respite / respite before |"; rule="$rule---|"; fi
echo "$header respite / redis always | respite / redis no persistence |"
echo "$rule---|---|"
declare -A rate cpu wb
for t in "${tests[@]}"; do
    label=${t%%|*} cmd=${t#*|}
    if [ -n "${ONLY:-}" ] && ! [[ "$label" =~ ^($ONLY) ]]; then continue; fi
    for p in "${ports[@]}"; do
        w0=$(written "${pid[$p]}")
        if [ "$cmd" = stale ]; then
            # 100,000 fresh HLLs, each with a stale cache, counted once each.
            # (memtier takes --command-key-pattern after the --command; with
            # P each of the 50 clients walks its own 2,000 keys.)
            mt() { "$memtier" -p "$p" -t 2 -c 25 --command="$1" --command-key-pattern=P --key-prefix "s:" \
                --key-minimum 1 --key-maximum 100000 -n 2000 --hide-histogram >/dev/null 2>&1; }
            mt "PFADD __key__ a b c d e f g h i j"
            t0=$(ticks "${pid[$p]}")
            s0=$(date +%s.%N)
            mt "PFCOUNT __key__"
            s1=$(date +%s.%N)
            t1=$(ticks "${pid[$p]}")
            r=$(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.0f", 100000 / (b - a)}')
            c=100000
        else
            t0=$(ticks "${pid[$p]}")
            # shellcheck disable=SC2086
            r=$(redis-benchmark -p "$p" -c 50 -n "$n" -r 100 -q $cmd 2>/dev/null |
                tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | awk '{print $1}')
            t1=$(ticks "${pid[$p]}")
            c=$n
        fi
        # Let the fsyncs and a checkpoint the test set off finish first.
        sleep 1
        w1=$(written "${pid[$p]}")
        rate[$p]=${r%.*}
        cpu[$p]=$(awk -v t=$((t1 - t0)) -v c="$c" -v hz="$hz" 'BEGIN {printf "%.1f", t / hz / c * 1e6}')
        wb[$p]=$(awk -v w=$((w1 - w0)) -v c="$c" 'BEGIN {printf "%.0f", w / c}')
    done
    line="| $label |"
    for p in "${ports[@]}"; do
        case $label in
            SET* | PF[AM]*) line="$line ${rate[$p]}/s, ${cpu[$p]} µs, ${wb[$p]} B |" ;;
            *) line="$line ${rate[$p]}/s, ${cpu[$p]} µs |" ;;
        esac
    done
    a=7661
    if [ -n "${BEFORE:-}" ]; then
        line="$line $(awk -v x="${rate[$a]}" -v y="${rate[7664]}" 'BEGIN {printf "%.2fx", x/y}') |"
    fi
    echo "$line $(awk -v x="${rate[$a]}" -v y="${rate[7662]}" 'BEGIN {printf "%.2fx", x/y}') | \
$(awk -v x="${rate[$a]}" -v y="${rate[7663]}" 'BEGIN {printf "%.2fx", x/y}') |"
done
echo
echo "$bin ($("$bin" --version 2>/dev/null || echo '?'))${BEFORE:+, before: $BEFORE}, $(redis-server --version | awk '{print $3}')"
