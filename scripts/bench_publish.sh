#!/usr/bin/env bash
# PUBLISH measured at the subscribers, respited and redis-server side by
# side in one run: starts one of each (redis-server without persistence;
# PUBLISH touches no disk on either), runs loadgen's `pubsub` example
# against both in turn (PUBLISHERS publishers with one request in flight
# each, SUBS subscribers to the one channel, 64-byte payloads carrying
# their send time), and stops them. Reported per server (medians of
# ROUNDS): PUBLISH/s, messages delivered/s as the subscribers counted
# them, publish-to-receipt latency p50/p99/p99.9, and from the server's
# /proc: CPU µs per delivered message, write syscalls per delivered
# message and context switches per PUBLISH (see
# loadgen/examples/pubsub.rs).
#
# Usage: scripts/bench_publish.sh RESPITED PUBSUB_EXAMPLE SUBS [SECS] [ROUNDS] [PUBLISHERS]
# Example (one pair of servers per run, under the shared lock):
#   flock -o /tmp/respite-heavy.lock scripts/bench_publish.sh \
#       target/release/respited target/release/examples/pubsub 100 5 3
set -euo pipefail
bin=$1 example=$2 subs=$3 secs=${4:-5} rounds=${5:-3} publishers=${6:-50}
dir=$(mktemp -d)
ours=7661 theirs=7662
"$bin" --port $ours --db "$dir/r.db" 2>"$dir/r.log" &
rpid=$!
redis-server --port $theirs --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
spid=$!
trap 'kill $rpid $spid 2>/dev/null || true; wait $rpid $spid 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
wait_up $ours; wait_up $theirs
"$example" --target redis-server=127.0.0.1:$theirs --target respited=127.0.0.1:$ours \
    --publishers "$publishers" --subscribers "$subs" --seconds "$secs" --rounds "$rounds"
echo
echo "$bin ($(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')), redis-server $(redis-server --version | awk '{print $3}'), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
