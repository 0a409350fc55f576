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

# Side-by-side benchmark: respite (batching on and off) against redis-server
# (no persistence, and AOF with appendfsync always), with redis-benchmark.
# Writes its table to stdout; docs/benchmarks.md records a run.
# N is redis-benchmark's request count for the batched runs; the run with
# batching off uses N/10 (one fsync per write makes it slow).
bench N="200000":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -p respite-daemon
    dir=$(mktemp -d)
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
    start_respite() { # port, extra flags...
        local port=$1; shift
        ./target/release/respited --port "$port" --db "$dir/r$port.db" "$@" 2>"$dir/r$port.log" &
        until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
    }
    start_redis() { # port, extra flags...
        local port=$1; shift
        redis-server --port "$port" --dir "$dir" --save "" --dbfilename "d$port.rdb" "$@" >/dev/null &
        until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
    }
    rps() { # port, test, clients, requests, pipeline -> requests per second
        redis-benchmark -p "$1" -t "$2" -c "$3" -n "$4" -P "$5" -d 64 -r 100000 --csv -q \
            | awk -F'"' 'NR==2 {print $4}'
    }
    start_respite 7101
    start_respite 7102 --max-batch 1
    start_redis 7103 --appendonly yes --appendfsync always --appendfilename aof7103
    start_redis 7104 --appendonly no
    n={{N}}
    echo "| workload | respite | respite, batching off | redis AOF always | redis no persistence |"
    echo "|---|---|---|---|---|"
    for p in 1 16; do
        for t in set get; do
            a=$(rps 7101 $t 50 $n $p)
            b=$(rps 7102 $t 50 $((n / 10)) $p)
            c=$(rps 7103 $t 50 $n $p)
            d=$(rps 7104 $t 50 $n $p)
            echo "| ${t^^} -c 50 -P $p | $a | $b | $c | $d |"
            awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v t="${t^^}" -v p="$p" 'BEGIN {
                printf "| ratio %s -P %s | 1.00 | respite/off = %.1fx | respite/aof = %.2fx | respite/redis = %.2fx |\n", t, p, a/b, a/c, a/d }'
        done
    done
    echo
    echo "| clients | respite SET/s |"
    echo "|---|---|"
    for c in 16 256; do
        echo "| $c | $(rps 7101 set $c $n 1) |"
    done
    redis-cli -p 7101 info persistence | grep -E 'group_commit_(ops_per_batch|commit_latency)' | tr -d '\r'

# Compare respite with redis-server using respite-loadgen (both must be
# running).
loadgen-compare redis="127.0.0.1:6379" respite="127.0.0.1:6380" profile="mixed":
    cargo build --release -p respite-loadgen
    ./target/release/respite-loadgen --target redis={{redis}} --target respite={{respite}} -c 50 -n 200000 --profile {{profile}} --json loadgen.json --html loadgen.html --hgrm loadgen.hgrm
