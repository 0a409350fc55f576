#!/usr/bin/env bash
# The long data-growth run (docs/benchmarks.md, "Data growth"): N keys of
# 100-byte values, then random writes for LONG seconds, then the same file
# served from inside a memory cgroup far smaller than it; beside it
# redis-server with appendfsync always and without persistence.
#
#   scripts/bench_long.sh RESPITED N LONG SECS LIMIT_BYTES
#
# 0. The disk: fio 4 KiB random reads (direct, queue depth 1 and 32) and
#    fsync'd 4 KiB random writes, 10 s each, on a 1 GiB file.
# 1. respited (defaults, appendfsync always): load keys memtier-1..N
#    (memtier -t 2 -c 10 --pipeline 32), DBSIZE sampled every second for the
#    load rate as the keys grow; random SET and GET at 50 connections for
#    SECS each; CONFIG RESETSTAT, then random SETs for LONG seconds (commit
#    latency, WAL peak and pauses from INFO over exactly that stretch); SET,
#    GET, Gaussian GET (G:G) and Zipfian GET (Z:Z) for SECS each; a clean
#    stop, timed, and the next start checked for "recovering".
# 2. The same file, its pages dropped from the page cache (fadvise
#    DONTNEED), served by a respited inside a memory cgroup (v1) of
#    LIMIT_BYTES, which its anonymous memory and the page cache it faults
#    are charged to: random GET, random SET, Gaussian GET and Zipfian GET
#    for SECS each; the cgroup's peak usage.
# 3. redis-server appendfsync always, then redis-server without
#    persistence: the same load, SET and GET for SECS each.
# Random SETs use --distinct-client-seed (a SET changes the value).
set -euo pipefail
bin=$1; n=$2; long=$3; secs=$4; limit=$5
port=6487
root=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}")
cg=""
cleanup() {
    kill $(jobs -p) 2>/dev/null || true
    sleep 1
    [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true
    rm -rf "$root"
}
trap cleanup EXIT

totals() { awk '/^Totals/ {printf "%d ops/s (p99 %s ms)", $2, $7}' "$1"; }
mt() { memtier_benchmark -p $port --protocol=redis --key-minimum=1 --key-maximum="$n" \
    --hide-histogram "$@" 2>/dev/null; }
set_for() { mt -t 2 -c 25 --ratio=1:0 --key-pattern=R:R --test-time="$1" -d 100 -R \
    --distinct-client-seed >"$root/out"; totals "$root/out"; }
get_for() { mt -t 2 -c 25 --ratio=0:1 --key-pattern="$2" --test-time="$1" >"$root/out"; totals "$root/out"; }
info() { redis-cli -p $port info "$1" | tr -d '\r' | grep -E "^($2):" | tr '\n' ' '; }
up() { until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done; }
# load: memtier's load with DBSIZE sampled every second into $root/curve.
load() {
    : >"$root/curve"
    ( t0=$(date +%s.%N); while sleep 1; do
        k=$(redis-cli -p $port dbsize 2>/dev/null) || break
        echo "$(echo "$(date +%s.%N) - $t0" | bc) $k" >>"$root/curve"; done ) &
    local sampler=$!
    local t0; t0=$(date +%s.%N)
    mt -t 2 -c 10 --pipeline=32 --ratio=1:0 --key-pattern=P:P --requests=allkeys -d 100 -R \
        >/dev/null || true
    local t1; t1=$(date +%s.%N)
    kill $sampler 2>/dev/null || true
    echo "load: $(redis-cli -p $port dbsize) keys in $(echo "$t1 - $t0" | bc) s"
    # Rate between the samples nearest each mark.
    awk -v n="$n" 'BEGIN { split("1000000 2000000 5000000 10000000 20000000", m, " ") }
        { t[NR] = $1; k[NR] = $2 }
        END { for (j = 1; j <= 5; j++) { if (m[j] > n) break
            for (i = 2; i <= NR; i++) if (k[i] >= m[j]) {
                lo = i > 3 ? i - 3 : 1
                printf "  at %d keys: %d keys/s (over the 3 s before)\n", m[j],
                    (k[i] - k[lo]) / (t[i] - t[lo]); break } } }' "$root/curve"
}

echo "== disk (fio, 1 GiB file, 10 s each)"
for spec in "randread 1" "randread 32" "randwrite-fsync 1"; do
    set -- $spec
    extra=""; rw=$1
    [ "$rw" = randwrite-fsync ] && rw=randwrite && extra="--fsync=1"
    fio --name=d --filename="$root/fio" --size=1G --rw=$rw --bs=4k --direct=1 --ioengine=libaio \
        --iodepth=$2 --runtime=10 --time_based $extra --output-format=terse --terse-version=3 \
        | awk -F';' -v s="$spec" '{ printf "  %s: read %d IOPS, write %d IOPS\n", s, $8, $49 }'
done
rm -f "$root/fio"

echo "== respite"
mkdir -p "$root/r"
db="$root/r/respite.db"
"$bin" --port $port --db "$db" --appendfsync always 2>"$root/r/log" &
pid=$!; up
( peak=0; while kill -0 $pid 2>/dev/null; do
    s=$(stat -c %s "$db-wal" 2>/dev/null || echo 0)
    [ "$s" -gt "$peak" ] && peak=$s && echo $peak >"$root/walpeak"
    sleep 0.1; done ) &
load
echo "after the load: SET $(set_for "$secs"), GET $(get_for "$secs" R:R)"
echo "  $(info persistence 'group_commit_commit_latency_(p99|max)_us|wal_size_peak_bytes|wal_pause_max_us|wal_restart_max_us|db_size_bytes|page_size')"
redis-cli -p $port config resetstat >/dev/null
w0=$(awk '/^write_bytes/ {print $2}' /proc/$pid/io)
echo "random SETs for $long s: $(set_for "$long")"
w1=$(awk '/^write_bytes/ {print $2}' /proc/$pid/io)
echo "  $(info persistence 'group_commit_commit_latency_(p50|p99|max)_us|group_commit_ops|wal_size_peak_bytes|wal_pause_max_us|wal_restart_max_us|db_size_bytes|vacuum_freed_pages')"
echo "  bytes written: $((w1 - w0))"
echo "after $long s of writes: SET $(set_for "$secs"), GET $(get_for "$secs" R:R), Gaussian GET $(get_for "$secs" G:G), Zipfian GET $(get_for "$secs" Z:Z)"
echo "  WAL file peak over the run: $(cat "$root/walpeak" 2>/dev/null || echo 0) bytes"
echo "  $(info memory 'used_memory|used_memory_rss|used_memory_db_page_cache')"
t0=$(date +%s.%N); redis-cli -p $port shutdown >/dev/null 2>&1 || true; wait $pid 2>/dev/null || true
echo "clean stop: $(echo "$(date +%s.%N) - $t0" | bc) s; db $(stat -c %s "$db") bytes, WAL $(stat -c %s "$db-wal" 2>/dev/null || echo 0) bytes"
grep -E "recover|emptied" "$root/r/log" | cut -c1-160 | sed 's/^/  log: /'

echo "== respite in a memory cgroup of $limit bytes"
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$db"
echo "  cached pages of the file: $(fincore -b -n -o RES "$db")"
parent=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
cg="$parent/respite-bench-$$"
mkdir "$cg"
echo "$limit" >"$cg/memory.limit_in_bytes"
# Started from a shell already in the cgroup, so every page it touches is charged there.
sh -c "echo \$\$ >$cg/cgroup.procs && exec $bin --port $port --db $db --appendfsync always" 2>"$root/r/log2" &
pid=$!; up
grep -E "recover" "$root/r/log2" | cut -c1-160 | sed 's/^/  log: /' || true
echo "  GET $(get_for "$secs" R:R)"
echo "  SET $(set_for "$secs")"
echo "  Gaussian GET $(get_for "$secs" G:G)"
echo "  Zipfian GET $(get_for "$secs" Z:Z)"
echo "  cgroup: limit $(cat "$cg/memory.limit_in_bytes"), peak $(cat "$cg/memory.max_usage_in_bytes"), failcnt $(cat "$cg/memory.failcnt"); $(grep -E '^(total_cache|total_rss|total_mapped_file) ' "$cg/memory.stat" | tr '\n' ' ')"
echo "  cached pages of the file: $(fincore -b -n -o RES "$db")"
redis-cli -p $port shutdown >/dev/null 2>&1 || true; wait $pid 2>/dev/null || true
rmdir "$cg" && cg=""
rm -rf "$root/r"

for mode in always none; do
    echo "== redis-server, $mode"
    mkdir -p "$root/redis"
    if [ $mode = always ]; then
        redis-server --port $port --dir "$root/redis" --appendonly yes --appendfsync always \
            --save '' --logfile "$root/redis/log" &
    else
        redis-server --port $port --dir "$root/redis" --appendonly no --save '' \
            --logfile "$root/redis/log" &
    fi
    pid=$!; up
    load
    echo "after the load: SET $(set_for "$secs"), GET $(get_for "$secs" R:R)"
    echo "  $(info memory 'used_memory'); files $(du -sb "$root/redis" | cut -f1) bytes"
    redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; wait $pid 2>/dev/null || true
    rm -rf "$root/redis"
done
