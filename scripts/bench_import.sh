#!/usr/bin/env bash
# RDB import speed: a redis-server 7.0 `SAVE` of KEYS keys of mixed types
# (six tenths strings of 64 bytes, a tenth of them with a TTL; a tenth each
# of 5-field hashes, 5-element lists, 5-member sets and 5-member sorted
# sets), made once in WORK/import.rdb, then loaded by redis-server at start
# and by `respited import` of each build given (release builds, default
# settings: `appendfsync always`), each into a fresh database. Prints the
# time (the whole process, from start to exit: the import's commit and the
# checkpoint that copies its WAL into the database included), the rate, the
# CPU time of the process (user + system) per key, the peak RSS
# (/usr/bin/time -v) and the database size. Then each imported database is
# served by that build and its DEBUG DIGEST compared with redis-server's
# over the same file ("equal" or "DIFFERENT").
# With LOCK set, each load takes that lock on its own (flock -o), so the
# whole run never holds it.
#
# Usage: scripts/bench_import.sh WORK KEYS RESPITED [RESPITED ...]
# Example: LOCK=/tmp/respite-heavy.lock scripts/bench_import.sh /tmp/imp 1000000 \
#              /tmp/before/respited /tmp/after/respited
set -euo pipefail
work=$1 keys=$2
shift 2
mkdir -p "$work"
locked() { if [ -n "${LOCK:-}" ]; then flock -o "$LOCK" "$@"; else "$@"; fi; }
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
rdb=$work/import.rdb
if [ ! -s "$rdb" ]; then
    redis-server --port 7701 --dir "$work" --dbfilename import.rdb --save "" --appendonly no \
        >"$work/gen.log" 2>&1 &
    gen=$!
    wait_up 7701
    # RESP commands for the dataset, piped into redis-cli --pipe.
    python3 - "$keys" <<'PY' | redis-cli -p 7701 --pipe >/dev/null
import sys, random
n = int(sys.argv[1])
rnd = random.Random(42)
out = sys.stdout.buffer
def cmd(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    out.write(b"".join(parts))
def val(k):
    return bytes(rnd.getrandbits(8) % 26 + 97 for _ in range(k))
for i in range(n):
    kind = i % 10
    if kind < 6:
        if kind == 0:
            cmd("SET", "s:%d" % i, val(64), "EX", 86400)
        else:
            cmd("SET", "s:%d" % i, val(64))
    elif kind == 6:
        args = ["HSET", "h:%d" % i]
        for f in range(5):
            args += ["f%d" % f, val(16)]
        cmd(*args)
    elif kind == 7:
        cmd("RPUSH", "l:%d" % i, *[val(16) for _ in range(5)])
    elif kind == 8:
        cmd("SADD", "t:%d" % i, *[val(16) for _ in range(5)])
    else:
        args = ["ZADD", "z:%d" % i]
        for m in range(5):
            args += [rnd.random() * 1000, val(16)]
        cmd(*args)
PY
    redis-cli -p 7701 save >/dev/null
    kill "$gen"
    wait "$gen" || true
fi
echo "$(ls -l "$rdb" | awk '{print $5}') bytes: $rdb ($keys keys)"
echo
echo "| loader | time | keys/s | CPU (user + sys) | CPU µs per key | peak RSS | database size | DEBUG DIGEST |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
# redis-server loading the file at start (the time until it answers PING
# without LOADING), for scale.
redis_load() {
    local t0 t1 pid
    t0=$(date +%s.%N)
    redis-server --port 7702 --dir "$work" --dbfilename import.rdb --save "" --appendonly no \
        --enable-debug-command yes >/dev/null 2>&1 &
    pid=$!
    until [ "$(redis-cli -p 7702 ping 2>/dev/null)" = PONG ]; do sleep 0.01; done
    t1=$(date +%s.%N)
    local rss
    rss=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
    redis-cli -p 7702 debug digest >"$work/redis.digest"
    kill "$pid"
    wait "$pid" || true
    awk -v a="$t0" -v b="$t1" -v k="$keys" -v rss="$rss" \
        'BEGIN {printf "| redis-server at start | %.2f s | %.0f | - | - | %.0f MB | - | - |\n", b - a, k / (b - a), rss / 1024}'
}
locked bash -c "$(declare -f redis_load); work=$work keys=$keys; redis_load"
# The digest of a respited serving the imported database.
respite_digest() {
    local pid
    printf 'enable_debug_command = "yes"\n' >"$work/debug.toml"
    "$1" --config "$work/debug.toml" --db "$work/db/r.db" --port 7703 >/dev/null 2>&1 &
    pid=$!
    wait_up 7703
    redis-cli -p 7703 debug digest
    kill "$pid"
    wait "$pid" || true
}
for bin in "$@"; do
    rm -rf "$work/db"
    mkdir -p "$work/db"
    locked /usr/bin/time -v "$bin" --db "$work/db/r.db" import "$rdb" 2>"$work/import.log" >/dev/null
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$work/import.log")
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$work/import.log")
    rss=$(awk -F: '/Maximum resident set size/ {print $2}' "$work/import.log")
    size=$(du -sb "$work/db" | awk '{print $1}')
    if [ "$(locked bash -c "$(declare -f respite_digest wait_up); work=$work; respite_digest $bin")" = "$(cat "$work/redis.digest")" ]; then
        digest=equal
    else
        digest=DIFFERENT
    fi
    awk -v s="$wall" -v c="$cpu" -v k="$keys" -v rss="$rss" -v size="$size" -v bin="$bin" -v d="$digest" \
        'BEGIN {printf "| `%s import` | %.2f s | %.0f | %.2f s | %.1f | %.0f MB | %.0f MB | %s |\n", bin, s, k / s, c, c * 1e6 / k, rss / 1024, size / 1e6, d}'
done
rm -rf "$work/db"
