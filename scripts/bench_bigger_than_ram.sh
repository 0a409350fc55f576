#!/usr/bin/env bash
# Bigger than RAM (docs/benchmarks.md, "Bigger than RAM"): one database
# file served by respited inside a memory cgroup (v1) far smaller than the
# file, beside the same file served without a limit.
#
#   scripts/bench_bigger_than_ram.sh load RESPITED DIR N
#       loads keys memtier-1..N (100-byte random values, memtier -t 2 -c 10
#       --pipeline 32) into DIR/respite.db, then stops cleanly.
#   scripts/bench_bigger_than_ram.sh serve RESPITED DIR SECS LIMIT_BYTES [NAME=VALUE...]
#       drops the file's pages from the page cache, starts RESPITED on a copy-
#       free DIR/respite.db inside a cgroup of LIMIT_BYTES (0: no cgroup)
#       with the environment NAME=VALUE..., and runs for SECS each at 50
#       connections: random GET (R:R), Zipfian GET (Z:Z), Gaussian GET
#       (G:G), random SET (R:R, --distinct-client-seed); then prints the
#       cgroup's peak, failcnt and page cache, and the bytes the process
#       read and wrote (/proc/PID/io) and its CPU time per operation.
set -euo pipefail
mode=$1; bin=$2; dir=$3
port=6489
mt() { memtier_benchmark -p $port --protocol=redis --key-minimum=1 --key-maximum="$n" \
    --hide-histogram "$@" 2>"$dir/mt.err"; }
up() { until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done; }
totals() { awk '/^Totals/ {printf "%d ops/s (p99 %s ms)", $2, $7}' "$1"; }
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
io() { awk -v k="$2" '$1 == k":" {print $2}' /proc/$1/io; }
# Bytes the disk under DIR read: /proc/diskstats' sectors read (the page
# faults of a memory map are not in /proc/PID/io's read_bytes).
dev=$(lsblk -no PKNAME "$(df --output=source "$dir" | tail -1)" 2>/dev/null | head -1)
[ -n "$dev" ] || dev=$(basename "$(df --output=source "$dir" | tail -1)")
disk_read() { awk -v d="$dev" '$3 == d {printf "%.0f\n", $6 * 512}' /proc/diskstats; }
cg=""
cleanup() { redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; sleep 1
    [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true; }
trap cleanup EXIT

if [ "$mode" = load ]; then
    n=$4
    mkdir -p "$dir"
    "$bin" --port $port --db "$dir/respite.db" --appendfsync always 2>"$dir/log" &
    pid=$!; up
    t0=$(date +%s.%N)
    mt -t 2 -c 10 --pipeline=32 --ratio=1:0 --key-pattern=P:P --requests=allkeys -d 100 -R >/dev/null
    echo "load: $(redis-cli -p $port dbsize) keys in $(echo "$(date +%s.%N) - $t0" | bc) s"
    redis-cli -p $port shutdown >/dev/null 2>&1 || true; wait $pid || true
    echo "file: $(stat -c %s "$dir/respite.db") bytes, $n" >"$dir/keys"
    echo "$n" >"$dir/n"
    exit 0
fi

secs=$4; limit=$5; shift 5
n=$(cat "$dir/n")
db="$dir/respite.db"
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$db"
if [ "$limit" != 0 ]; then
    parent=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
    cg="$parent/respite-btr-$$"
    mkdir "$cg"
    echo "$limit" >"$cg/memory.limit_in_bytes"
    env "$@" sh -c "echo \$\$ >$cg/cgroup.procs && exec $bin --port $port --db $db --appendfsync always" 2>"$dir/log2" &
else
    env "$@" "$bin" --port $port --db "$db" --appendfsync always 2>"$dir/log2" &
fi
pid=$!; up
echo "limit $limit, env: $*"
run() {
    local name=$1; shift
    local c0 r0 w0; c0=$(cpu $pid); r0=$(disk_read); w0=$(io $pid write_bytes)
    mt "$@" >"$dir/out" || echo "  ($name: memtier failed: $(tail -c 300 "$dir/out" | tr "\n" " "))"
    local ops; ops=$(awk '/^Totals/ {print int($2)}' "$dir/out")
    local c1 r1 w1; c1=$(cpu $pid); r1=$(disk_read); w1=$(io $pid write_bytes)
    local total=$((ops * secs))
    echo "  $name: $(totals "$dir/out"); $(( (c1 - c0) * 10000 / (total + 1) )) CPU us/op, disk read $(( (r1 - r0) / (total + 1) )) B/op, wrote $(( (w1 - w0) / (total + 1) )) B/op"
}
run "random GET" -t 2 -c 25 --ratio=0:1 --key-pattern=R:R --test-time="$secs"
run "Zipfian GET" -t 2 -c 25 --ratio=0:1 --key-pattern=Z:Z --test-time="$secs"
run "Gaussian GET" -t 2 -c 25 --ratio=0:1 --key-pattern=G:G --test-time="$secs"
run "random SET" -t 2 -c 25 --ratio=1:0 --key-pattern=R:R --test-time="$secs" -d 100 -R --distinct-client-seed
if [ -n "$cg" ]; then
    echo "  cgroup: peak $(cat "$cg/memory.max_usage_in_bytes"), failcnt $(cat "$cg/memory.failcnt"); $(grep -E '^(total_cache|total_rss|total_mapped_file|total_dirty|total_writeback) ' "$cg/memory.stat" | tr '\n' ' ')"
fi
redis-cli -p $port shutdown >/dev/null 2>&1 || true; wait $pid || true
