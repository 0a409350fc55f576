# respite's tasks. CI runs `just ci` (see .ci/run); every recipe works on a
# developer machine too.

# List the recipes.
default:
    @just --list

# Start the daemon on its embedded default (127.0.0.1:6379, ./respite.db).
run *ARGS:
    cargo run --release -p respite-daemon -- {{ARGS}}

# Build everything in release mode (the daemon and the load generator).
build:
    cargo build --release --workspace

# The test suite. Tests that need redis-server skip where it is absent.
test:
    cargo test --workspace

# The test suite with redis-server required (differential tests and the
# load generator's tests fail instead of skipping if it is missing).
test-redis:
    RESPITE_REQUIRE_REDIS=1 cargo test --workspace

# Formatting and lints, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# What CI runs: lints, then every test with redis-server required.
ci: lint test-redis

# Side-by-side benchmark with redis-benchmark, in one run: respite
# (batching on, and off with --max-batch 1) against redis-server (AOF
# appendfsync always, and no persistence). Every cell is the median of
# ROUNDS runs taken in turn, so a burst of noise hits all columns alike.
bench N="200000" ROUNDS="3":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -p respite-daemon
    dir=$(mktemp -d)
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
    wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
    ./target/release/respited --port 7101 --db "$dir/on.db" 2>"$dir/on.log" &
    ./target/release/respited --port 7102 --db "$dir/off.db" --max-batch 1 2>"$dir/off.log" &
    redis-server --port 7103 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null &
    redis-server --port 7104 --dir "$dir" --save "" --appendonly no --dbfilename none.rdb >/dev/null &
    for p in 7101 7102 7103 7104; do wait_up $p; done
    # rps PORT ARGS...: requests per second of one redis-benchmark run.
    rps() {
        local port=$1; shift
        redis-benchmark -p "$port" -d 64 "$@" --csv -q | awk -F'"' 'NR==2 {print $4}'
    }
    median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    row() { # label, redis-benchmark args...
        local label=$1; shift
        local on=() off=() aof=() mem=()
        for _ in $(seq {{ROUNDS}}); do
            on+=("$(rps 7101 "$@")"); off+=("$(rps 7102 "$@")")
            aof+=("$(rps 7103 "$@")"); mem+=("$(rps 7104 "$@")")
        done
        awk -v l="$label" -v a="$(median "${on[@]}")" -v b="$(median "${off[@]}")" \
            -v c="$(median "${aof[@]}")" -v d="$(median "${mem[@]}")" 'BEGIN {
            printf "| %s | %.0f | %.0f | %.0f | %.0f | %.1fx | %.2fx | %.2fx |\n", l, a, b, c, d, a/b, a/c, a/d }'
    }
    n={{N}}
    echo "| redis-benchmark -c 50 -n $n -d 64 | respite | respite, batching off | redis AOF always | redis, no persistence | respite / off | respite / AOF | respite / redis |"
    echo "|---|---|---|---|---|---|---|---|"
    row "-t set" -c 50 -n $n -t set
    row "-t get" -c 50 -n $n -t get
    row "-t set -P 16" -c 50 -n $n -t set -P 16
    row "-t get -P 16" -c 50 -n $n -t get -P 16
    row "-t set -r 100000 (random keys)" -c 50 -n $n -t set -r 100000
    echo
    echo "| respite SET/s by clients | 16 | 256 | 256 / 16 |"
    echo "|---|---|---|---|"
    a=(); b=()
    for _ in $(seq {{ROUNDS}}); do
        a+=("$(rps 7101 -c 16 -n $n -t set)"); b+=("$(rps 7101 -c 256 -n $n -t set)")
    done
    awk -v a="$(median "${a[@]}")" -v b="$(median "${b[@]}")" 'BEGIN { printf "| -n %d -d 64 -t set | %.0f | %.0f | %.2fx |\n", '"$n"', a, b, b/a }'
    echo
    redis-cli -p 7101 info persistence | grep -E 'group_commit_(batches|ops|ops_per_batch|commit_latency)' | tr -d '\r'

# Compare respite with redis-server using respite-loadgen (both must be
# running).
loadgen-compare redis="127.0.0.1:6379" respite="127.0.0.1:6380" profile="mixed":
    cargo build --release -p respite-loadgen
    ./target/release/respite-loadgen --target redis={{redis}} --target respite={{respite}} -c 50 -n 200000 --profile {{profile}} --json loadgen.json --html loadgen.html --hgrm loadgen.hgrm
