#!/usr/bin/env bash
# The cost of the ACL check and of MONITOR, side by side in one run:
# one respited (appendfsync no, so the check rather than the fsync is what
# could show) and one redis-server (no persistence), driven in turn by
# redis-benchmark; each round runs the default user, a restricted user
# (respite only), and the default user with one `redis-cli MONITOR`
# attached. docs/benchmarks.md, "The ACL check" and "MONITOR", has the
# figures.
#
#   scripts/acl_monitor_bench.sh [RESPITED] [ROUNDS]
set -u
B="${1:-target/release/respited}"
ROUNDS="${2:-5}"
D=$(mktemp -d)
"$B" --port 6400 --db "$D/b.db" --appendfsync no 2>"$D/log" & P=$!
redis-server --port 6401 --save "" --appendonly no --dir "$D" >/dev/null & R=$!
trap 'kill $P $R 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
sleep 1
redis-cli -p 6400 ACL SETUSER bench on '>benchpw' '~key:*' '~counter:*' \
    +get +set +incr +ping '+config|get' >/dev/null
run() {
    local port=$1; shift
    redis-benchmark -p "$port" "$@" -t get,set -n 400000 -c 50 -P 16 -r 100000 -q 2>/dev/null |
        tr '\r' '\n' | grep -o '^[A-Z]*: [0-9.]* requests' | awk '{printf "%s %s ", $1, $2}'
}
monitored() {
    local port=$1
    redis-cli -p "$port" MONITOR >/dev/null & local m=$!
    sleep 0.3
    run "$port"
    kill $m; wait $m 2>/dev/null
}
for r in $(seq "$ROUNDS"); do
    echo "r$r respite default    $(run 6400)"
    echo "r$r respite restricted $(run 6400 --user bench -a benchpw)"
    echo "r$r respite monitor    $(monitored 6400)"
    echo "r$r redis default      $(run 6401)"
    echo "r$r redis monitor      $(monitored 6401)"
done
