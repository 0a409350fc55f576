#!/usr/bin/env bash
# The load runs of docs/durability.md ("Under load"):
#
#   scripts/soak.sh mixed [SECS] [CONNECTIONS]   (default 60 s, 1000)
#   scripts/soak.sh ttl   [SECS] [CONNECTIONS]   (default 60 s, 50)
#
# mixed: CONNECTIONS concurrent connections run respite-loadgen's `mixed`
#   profile (50% SET / 50% GET over a preloaded keyspace) for SECS; the
#   run fails if any reply is an error (loadgen's exit status 3).
# ttl: SET of random keys with a 1-second TTL (SET k v EX 1) at full
#   speed, pipelined, for SECS: the keys expire as fast as they come.
#
# Both start a release respited on a fresh database in a temporary
# directory (appendfsync always, the default) and sample, every few
# seconds, its RSS, the database file, the WAL and the key count (DBSIZE),
# then print the peak RSS (VmHWM), the largest WAL and database file seen,
# and loadgen's latency percentiles. Needs release builds of respited and
# respite-loadgen (`just soak-mixed` and `just soak-ttl` build them) and
# redis-cli.
set -euo pipefail

mode=${1:?usage: soak.sh mixed|ttl [SECS] [CONNECTIONS]}
secs=${2:-60}
case $mode in
mixed) conns=${3:-1000} ;;
ttl) conns=${3:-50} ;;
*)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
respited=$root/target/release/respited
loadgen=$root/target/release/respite-loadgen
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$respited" --port "$port" --db "$dir/respite.db" --maxclients 10000 2>"$dir/respited.log" &
pid=$!
cleanup() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 100); do
    redis-cli -p "$port" PING >/dev/null 2>&1 && break
    sleep 0.1
done

size() { stat -c %s "$1" 2>/dev/null || echo 0; }
sample() {
    local t0=$SECONDS
    printf '%6s %10s %12s %12s %10s\n' secs rss_mb db_bytes wal_bytes keys
    while kill -0 "$pid" 2>/dev/null; do
        rss=$(awk '/VmRSS/ {print int($2/1024)}' "/proc/$pid/status")
        keys=$(redis-cli -p "$port" DBSIZE 2>/dev/null || echo '?')
        printf '%6s %10s %12s %12s %10s\n' $((SECONDS - t0)) "$rss" \
            "$(size "$dir/respite.db")" "$(size "$dir/respite.db-wal")" "$keys"
        sleep 5
    done
}
sample >"$dir/samples.txt" &
sampler=$!

case $mode in
mixed)
    args=(--profile mixed -c "$conns" -t 2 --duration "${secs}s")
    ;;
ttl)
    args=(--ratio 1:0 --expire-range 1-1 --keyspace 100000000 -c "$conns" -t 2
        -P 8 --duration "${secs}s")
    ;;
esac
status=0
"$loadgen" --port "$port" "${args[@]}" -q --json "$dir/run.json" >"$dir/loadgen.txt" || status=$?
sleep 6 # one more sample after the run: expired keys go on being deleted
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true

echo "== respite-loadgen ${args[*]} (exit status $status)"
cat "$dir/loadgen.txt"
echo "== samples every 5 s"
cat "$dir/samples.txt"
echo "== peak"
awk '/VmHWM/ {print "peak RSS (VmHWM): " int($2/1024) " MB"}' "/proc/$pid/status"
awk 'NR > 1 {if ($3 > db) db = $3; if ($4 > wal) wal = $4; if ($5 > k) k = $5}
    END {print "largest database file: " db " bytes, largest WAL: " wal " bytes, most keys: " k}' \
    "$dir/samples.txt"
grep -c 'WARN\|ERROR' "$dir/respited.log" | sed 's/^/warnings and errors in the log: /' || true
exit "$status"
