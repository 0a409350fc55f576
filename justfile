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

# The test suite with redis-server and the systemd tools required
# (differential tests, the load generator's tests, socket activation,
# systemd-analyze and the .deb fail instead of skipping if they are
# missing). The load generator's headless-browser test skips without
# chromium unless RESPITE_REQUIRE_CHROMIUM=1 (which .ci/run sets).
test-redis:
    RESPITE_REQUIRE_REDIS=1 RESPITE_REQUIRE_SYSTEMD_TOOLS=1 cargo test --workspace

# Formatting and lints, as CI checks them; then no import cycle between the
# modules of any crate (scripts/module_cycles.py, tested on its fixtures
# first). Allowed: the command table naming the families; and, still to
# cut, the replication master (repl.rs), which the shared state holds and
# which reads the running server through the whole `Shared`.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    scripts/module_cycles.py --self-test
    scripts/module_cycles.py --allow 'crates/server:command::table->cmd::*' --allow 'crates/server:state->repl' crates/engine crates/rdb crates/script crates/server bin/respited loadgen

# What CI runs: lints, then every test with redis-server and the systemd
# tools required (the tests run systemd-analyze verify on the units and
# build and unpack the .deb from the debug binary).
ci: lint test-redis

# The applications people run on Redis (apps/README.md): Celery, BullMQ,
# Sidekiq, python-rq, redis-py, limits, and the pub/sub of redis-py,
# node-redis and ioredis, each scenario run against a redis-server and a
# respited it starts (the debug build); the crash runs of four job
# frameworks (docs/durability.md) and a restart under a client pool kill
# and restart their own server. Installs the pinned versions first
# (apps/install.sh). Scenarios waiting for a capability or a fix respite
# lacks are listed in apps/run.py's PENDING and reported as xfail; one
# that passes anyway fails the run. ARGS: scenario names, --only
# respite|redis, -v, --keep. Example: just apps rq -v
apps *ARGS:
    cargo build -p respite-daemon
    apps/install.sh
    target/apps/venv/bin/python apps/run.py {{ARGS}}

# Crash safety (bin/respited/tests/crash.rs) for N cycles: writer
# clients record every acknowledged write while respited is SIGKILLed at
# random moments, restarted on the same files and checked (every
# acknowledged write present, every MULTI/EXEC whole or absent,
# integrity_check ok, the recovery reported in the log). FSYNC is always,
# everysec, no, or mixed (each in turn); SEED replays a run. A release
# build, for speed; `just ci` runs the same test for 21 cycles in debug.
# Example: just crash 300 everysec. Prints what it checked.
crash N="200" FSYNC="mixed" SEED="":
    RESPITE_CRASH_CYCLES={{N}} RESPITE_CRASH_FSYNC={{FSYNC}} RESPITE_CRASH_SEED={{SEED}} \
        cargo test --release -p respite-daemon --test crash -- --nocapture

# Runs each fuzz target (fuzz/README.md; all of them without TARGETS) for
# SECS seconds from its corpus in fuzz/corpus, with nightly and cargo-fuzz
# (`cargo install cargo-fuzz`). What libFuzzer finds new goes to a scratch
# directory, so the checkout stays as it is; a crash stops the run and is
# saved under fuzz/artifacts. CI runs `just fuzz 20`.
fuzz SECS="60" *TARGETS:
    #!/usr/bin/env bash
    set -euo pipefail
    cd fuzz
    targets="{{TARGETS}}"
    [ -n "$targets" ] || targets=$(cargo +nightly fuzz list)
    for t in $targets; do
        scratch=$(mktemp -d)
        trap 'rm -rf "$scratch"' EXIT
        cargo +nightly fuzz run "$t" "$scratch" "corpus/$t" -- -max_total_time={{SECS}} -timeout=10 -print_final_stats=1
        rm -rf "$scratch"
    done

# The Debian package from a release build: target/deb/respite_*.deb
# (packaging/build-deb.sh, with dpkg-deb; see docs/operations.md).
deb:
    cargo build --release -p respite-daemon
    packaging/build-deb.sh target/release/respited target/deb

# The .deb installed for real (apt-get install, upgrade, remove, reinstall,
# purge) with its maintainer scripts run, respited started as the unit
# starts it: packaging/test-deb.sh. It changes the machine (a package, the
# respite user, /etc, /var/lib), so it runs only as root with
# RESPITE_DEB_TEST=1, on a throwaway machine: CI's. It cleans up after
# itself. Example: sudo RESPITE_DEB_TEST=1 just deb-test
deb-test:
    cargo build -p respite-daemon
    packaging/test-deb.sh target/debug/respited

# The .deb under a real systemd as PID 1, in a throwaway container booted
# from this machine's own / with an overlay (packaging/test-deb-systemd.sh,
# needs systemd-nspawn from systemd-container): `systemctl enable --now`,
# reload, an upgrade while running, stop, socket activation, remove,
# purge. Root and RESPITE_DEB_TEST=1 only; the machine is not changed.
# Skips (exit 0) where no container can be booted, unless
# RESPITE_REQUIRE_NSPAWN=1.
deb-test-systemd:
    cargo build -p respite-daemon
    packaging/test-deb-systemd.sh target/debug/respited

# systemd-analyze verify on the unit files, ExecStart pointed at a built
# binary (also checked by the packaging test).
verify-units BIN="target/debug/respited":
    #!/usr/bin/env bash
    set -euo pipefail
    dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
    sed "s#/usr/bin/respited#$(realpath {{BIN}})#" configs/respited.service > "$dir/respited.service"
    cp configs/respited.socket "$dir/"
    systemd-analyze verify "$dir/respited.service" "$dir/respited.socket"

# Side-by-side benchmark with redis-benchmark, in one run: respite
# (default; batching off with --max-batch 1; value cache off) against
# redis-server (AOF appendfsync always, and no persistence). Every cell is
# the median of ROUNDS runs taken in turn, so a burst of noise hits all
# columns alike. The first table is the issue's command as written; the
# second makes every SET change the stored value (see docs/benchmarks.md
# for why that matters to SQLite and not to Redis). Given the binaries of
# Redka and Redlite (built from their own sources, see docs/benchmarks.md),
# a third table compares respite with them.
bench N="200000" ROUNDS="3" REDKA="" REDLITE="":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -p respite-daemon
    dir=$(mktemp -d)
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
    wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
    ./target/release/respited --port 7101 --db "$dir/on.db" 2>"$dir/on.log" &
    ./target/release/respited --port 7102 --db "$dir/off.db" --max-batch 1 2>"$dir/off.log" &
    ./target/release/respited --port 7105 --db "$dir/nocache.db" --read-cache-bytes 0 2>"$dir/nocache.log" &
    redis-server --port 7103 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null &
    redis-server --port 7104 --dir "$dir" --save "" --appendonly no --dbfilename none.rdb >/dev/null &
    for p in 7101 7102 7103 7104 7105; do wait_up $p; done
    # rps PORT ARGS...: requests per second of one redis-benchmark run.
    rps() {
        local port=$1; shift
        redis-benchmark -p "$port" --csv -q "$@" 2>/dev/null | awk -F'"' 'NR==2 {print $4}'
    }
    median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    # medians PORTS -- ARGS...: the median rate of each port, rounds taken
    # in turn across the ports.
    medians() {
        local ports=() ; while [ "$1" != "--" ]; do ports+=("$1"); shift; done; shift
        local -A runs=()
        for _ in $(seq {{ROUNDS}}); do
            for p in "${ports[@]}"; do runs[$p]+="$(rps "$p" "$@") "; done
        done
        for p in "${ports[@]}"; do median ${runs[$p]}; done | tr '\n' ' '
    }
    n={{N}}
    echo "| redis-benchmark -c 50 -n $n -d 64 | respite | respite, batching off | respite, cache off | redis AOF always | redis, no persistence | respite / off | respite / AOF | respite / redis | cache off / redis |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for args in "-t set" "-t get" "-t set -P 16" "-t get -P 16"; do
        read -r on off nocache aof mem <<<"$(medians 7101 7102 7105 7103 7104 -- -c 50 -n $n -d 64 $args)"
        awk -v l="$args" -v a=$on -v b=$off -v c=$nocache -v d=$aof -v e=$mem 'BEGIN {
            printf "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.1fx | %.2fx | %.2fx | %.2fx |\n", l, a, b, c, d, e, a/b, a/d, a/e, c/e }'
    done
    echo
    echo "| respite SET/s by clients | 16 | 256 | 256 / 16 |"
    echo "|---|---|---|---|"
    a=(); b=()
    for _ in $(seq {{ROUNDS}}); do
        a+=("$(rps 7101 -c 16 -n $n -d 64 -t set)"); b+=("$(rps 7101 -c 256 -n $n -d 64 -t set)")
    done
    awk -v a="$(median "${a[@]}")" -v b="$(median "${b[@]}")" 'BEGIN { printf "| -n %d -d 64 -t set | %.0f | %.0f | %.2fx |\n", '"$n"', a, b, b/a }'
    echo
    # Every SET changes the stored value: 52 x's and a random number make a
    # 64-byte value that differs from the last one written to the key.
    value="$(printf 'x%.0s' $(seq 52))__rand_int__"
    echo "| every SET changes the value, -c 50 -n $n -r 1000000 | respite | respite, batching off | redis AOF always | respite / off | respite / AOF |"
    echo "|---|---|---|---|---|---|"
    for shape in "one key:SET key:one" "random keys:SET key:__rand_int__"; do
        label=${shape%%:*}; cmd=${shape#*:}
        for pipe in 1 16; do
            read -r on off aof <<<"$(medians 7101 7102 7103 -- -c 50 -n $n -r 1000000 -P $pipe $cmd "$value")"
            awk -v l="$label, -P $pipe" -v a=$on -v b=$off -v c=$aof 'BEGIN {
                printf "| %s | %.0f | %.0f | %.0f | %.1fx | %.2fx |\n", l, a, b, c, a/b, a/c }'
        done
    done
    echo
    redis-cli -p 7101 info persistence | grep -E 'group_commit_(batches|ops|ops_per_batch|commit_latency)' | tr -d '\r'
    redis-cli -p 7102 info persistence | grep -E 'group_commit_(batches|commit_latency)' | sed 's/^/batching off: /' | tr -d '\r'
    redis-cli -p 7101 info stats | grep -E 'read_cache_(hits|misses)' | tr -d '\r'
    if [ -n "{{REDKA}}" ] && [ -n "{{REDLITE}}" ]; then
        # The peers commit with synchronous=NORMAL (no fsync per commit):
        # respite with appendfsync everysec is the like-for-like column.
        # Fresh respite servers, so every column starts from an empty file.
        ./target/release/respited --port 7109 --db "$dir/always2.db" 2>"$dir/always2.log" &
        ./target/release/respited --port 7106 --db "$dir/everysec.db" --appendfsync everysec 2>"$dir/everysec.log" &
        "{{REDKA}}" -h 127.0.0.1 -p 7107 "$dir/redka.db" >"$dir/redka.log" 2>&1 &
        "{{REDLITE}}" --db "$dir/redlite.db" --addr 127.0.0.1:7108 >"$dir/redlite.log" 2>&1 &
        for p in 7109 7106 7107 7108; do wait_up $p; done
        m=$((n / 4))
        echo
        echo "| -c 50 -n $m | respite (always) | respite (everysec) | Redka | Redlite | respite always / Redka | respite always / Redlite |"
        echo "|---|---|---|---|---|---|---|"
        for row in "-t set:-d 64 -t set" "-t get:-d 64 -t get" "one key, value changes:-r 1000000 SET key:one $value" "random keys:-r 1000000 SET key:__rand_int__ $value"; do
            label=${row%%:*}; args=${row#*:}
            read -r a b c d <<<"$(medians 7109 7106 7107 7108 -- -c 50 -n $m $args)"
            awk -v l="$label" -v a=$a -v b=$b -v c=$c -v d=$d 'BEGIN {
                printf "| %s | %.0f | %.0f | %.0f | %.0f | %.1fx | %.1fx |\n", l, a, b, c, d, a/c, a/d }'
        done
    fi

# CPU seconds per million requests that the server on PORT spends on one
# redis-benchmark run (ARGS must include -n N), from /proc: the efficiency
# figure of docs/benchmarks.md. Example: just cpu 6379 -c 50 -n 1000000 -t get
cpu PORT *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    pid=$(ss -ltnpH "sport = :{{PORT}}" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
    ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
    before=$(ticks)
    redis-benchmark -p {{PORT}} -q {{ARGS}} >/dev/null
    after=$(ticks)
    n=$(printf '%s\n' {{ARGS}} | awk 'prev == "-n" {print $1} {prev = $1}')
    awk -v a="$after" -v b="$before" -v t="$(getconf CLK_TCK)" -v n="$n" \
        'BEGIN { printf "%.2f CPU s per million requests\n", (a - b) / t / (n / 1e6) }'

# Compare respite with redis-server using respite-loadgen (both must be
# running).
loadgen-compare redis="127.0.0.1:6379" respite="127.0.0.1:6380" profile="mixed":
    cargo build --release -p respite-loadgen
    ./target/release/respite-loadgen --target redis={{redis}} --target respite={{respite}} -c 50 -n 200000 --profile {{profile}} --json loadgen.json --html loadgen.html --hgrm loadgen.hgrm

# The batching benchmark on a slow disk, emulated: an LD_PRELOAD shim makes
# every fsync and fdatasync US microseconds slower, for respite (batched and
# with batching off) and redis-server with AOF always alike. Each server
# runs alone. See docs/benchmarks.md, "On a disk with a slow fsync".
bench-slow-fsync US="2000":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -p respite-daemon
    tmp=$(mktemp -d)
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
    cat >"$tmp/slowsync.c" <<'C'
    #define _GNU_SOURCE
    #include <dlfcn.h>
    #include <stdlib.h>
    #include <unistd.h>
    static unsigned delay(void) { const char *s = getenv("SLOWSYNC_US"); return s ? (unsigned)atoi(s) : 0; }
    int fsync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fsync"); usleep(delay()); return real(fd); }
    int fdatasync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fdatasync"); usleep(delay()); return real(fd); }
    C
    cc -O2 -shared -fPIC -o "$tmp/slowsync.so" "$tmp/slowsync.c" -ldl
    export SLOWSYNC_US={{US}}
    value="$(printf 'x%.0s' $(seq 52))__rand_int__"
    rows=("one key, -P 1|1|-r 1000000 SET key:one $value" "one key, -P 16|16|-r 1000000 SET key:one $value" "random keys, -P 1|1|-r 1000000 SET key:__rand_int__ $value" "the issue's -t set (no-op SETs), -P 1|1|-d 64 -t set")
    declare -A res
    for server in on off aof; do
        dir="$tmp/$server"; mkdir "$dir"
        case $server in
            on) LD_PRELOAD="$tmp/slowsync.so" ./target/release/respited --port 7121 --db "$dir/x.db" 2>/dev/null & n=60000 ;;
            off) LD_PRELOAD="$tmp/slowsync.so" ./target/release/respited --port 7121 --db "$dir/x.db" --max-batch 1 2>/dev/null & n=3000 ;;
            aof) LD_PRELOAD="$tmp/slowsync.so" redis-server --port 7121 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null & n=60000 ;;
        esac
        pid=$!
        until redis-cli -p 7121 ping >/dev/null 2>&1; do sleep 0.1; done
        for i in "${!rows[@]}"; do
            IFS='|' read -r label pipe args <<<"${rows[$i]}"
            res[$server,$i]=$(redis-benchmark -p 7121 -c 50 -n $n -q --csv -P $pipe $args | tail -1 | cut -d'"' -f4)
        done
        kill $pid; wait $pid 2>/dev/null || true
    done
    echo "| every fsync +{{US}} µs, -c 50 | respite | respite, batching off | redis AOF always | respite / off | respite / AOF |"
    echo "|---|---|---|---|---|---|"
    for i in "${!rows[@]}"; do
        IFS='|' read -r label pipe args <<<"${rows[$i]}"
        awk -v l="$label" -v a="${res[on,$i]}" -v b="${res[off,$i]}" -v c="${res[aof,$i]}" 'BEGIN {
            printf "| %s | %.0f | %.0f | %.0f | %.1fx | %.2fx |\n", l, a, b, c, a/b, a/c }'
    done

# The write-path benchmark of docs/benchmarks.md and docs/storage.md, with
# memtier_benchmark (MEMTIER: its path; build it from RedisLabs'
# memtier_benchmark sources, see docs/benchmarks.md): every SET writes a
# fresh random 64-byte value (--random-data), keys uniform over KEYS
# (--key-pattern R:R), the keyspace filled first. Servers side by side:
# respite (default), respite with batching off, respite with the layout of
# before docs/storage.md (4 KiB pages, copy the WAL after every commit),
# redis-server with AOF always, and with no persistence. Every cell is the
# median of ROUNDS runs of SECS seconds taken in turn across the servers;
# bytes written per write (/proc/PID/io write_bytes over every SET applied)
# and CPU seconds per million commands (/proc/PID/stat) are summed over all
# rounds. Example: just bench-writes /usr/local/bin/memtier_benchmark 1000000
bench-writes MEMTIER KEYS="100000" ROUNDS="3" SECS="10" WORKLOADS="all":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -p respite-daemon
    dir=$(mktemp -d)
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
    keys={{KEYS}}
    wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
    ./target/release/respited --port 7201 --db "$dir/on.db" 2>"$dir/on.log" &
    ./target/release/respited --port 7202 --db "$dir/off.db" --max-batch 1 2>"$dir/off.log" &
    ./target/release/respited --port 7205 --db "$dir/old.db" --page-size 4096 --checkpoint-wal-bytes 0 2>"$dir/old.log" &
    redis-server --port 7203 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null &
    redis-server --port 7204 --dir "$dir" --save "" --appendonly no --dbfilename none.rdb >/dev/null &
    servers=(7201 7205 7203 7204 7202)
    declare -A name=([7201]=respite [7205]="respite, old layout" [7203]="redis AOF always" [7204]="redis, no persistence" [7202]="respite, batching off")
    for p in "${servers[@]}"; do wait_up $p; done
    pid_of() { redis-cli -p "$1" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}'; }
    declare -A pid
    for p in "${servers[@]}"; do pid[$p]=$(pid_of $p); done
    wbytes() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
    ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
    # Writes applied so far (respite: INFO's group_commit_ops; redis: SET
    # calls), and commands processed so far.
    sets() {
        { redis-cli -p "$1" info persistence; redis-cli -p "$1" info commandstats; } | tr -d '\r' |
            awk -F'[=,:]' '/^group_commit_ops:/ {n = $2} /^cmdstat_set:/ {n = $3} END {print n + 0}'
    }
    cmds() { redis-cli -p "$1" info stats | tr -d '\r' | awk -F: '/^total_commands_processed/ {print $2}'; }
    mt() { "{{MEMTIER}}" -p "$1" --key-minimum 1 --key-maximum "$keys" --random-data -d 64 --hide-histogram "${@:2}"; }
    for p in "${servers[@]}"; do
        mt $p -t 2 -c 10 --pipeline 64 --ratio 1:0 --key-pattern P:P -n allkeys >/dev/null 2>&1
    done
    # One untimed pass of GETs and SETs on every server, so that no column
    # is measured cold (respite's value cache and mapped pages fill as the
    # keys are read; a cold respite does 0.55-0.7x of its warm GETs).
    for p in "${servers[@]}"; do
        [ $p = 7202 ] || mt $p -t 2 -c 25 --ratio 1:1 --key-pattern R:R --test-time {{SECS}} >/dev/null 2>&1
    done
    median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    declare -A rate p99 dbytes dsets dticks dcmds
    run() { # PORT KEY ARGS...: one memtier run, figures added under KEY
        local p=$1 k=$2; shift 2
        local b0 t0 s0 c0 out
        b0=$(wbytes ${pid[$p]}); t0=$(ticks ${pid[$p]}); s0=$(sets $p); c0=$(cmds $p)
        out=$(mt $p --key-pattern R:R --distinct-client-seed --test-time {{SECS}} --print-percentiles 99 "$@" 2>/dev/null | awk '/^Totals/ {print $2, $6}')
        rate[$k]+="${out% *} "; p99[$k]+="${out#* } "
        dbytes[$k]=$(( ${dbytes[$k]:-0} + $(wbytes ${pid[$p]}) - b0 ))
        dsets[$k]=$(( ${dsets[$k]:-0} + $(sets $p) - s0 ))
        dticks[$k]=$(( ${dticks[$k]:-0} + $(ticks ${pid[$p]}) - t0 ))
        dcmds[$k]=$(( ${dcmds[$k]:-0} + $(cmds $p) - c0 ))
    }
    workloads=("SET, 50 conns|-t 2 -c 25 --ratio 1:0|off"
               "SET, 50 conns, --pipeline 16|-t 2 -c 25 --ratio 1:0 --pipeline 16|off"
               "SET, 200 conns|-t 2 -c 100 --ratio 1:0|"
               "80% SET / 20% GET, 50 conns|-t 2 -c 25 --ratio 4:1|"
               "80% SET / 20% GET, 200 conns|-t 2 -c 100 --ratio 4:1|"
               "50% SET / 50% GET, 50 conns|-t 2 -c 25 --ratio 1:1|"
               "50% SET / 50% GET, 200 conns|-t 2 -c 100 --ratio 1:1|"
               "GET, 50 conns|-t 2 -c 25 --ratio 0:1|")
    if [ "{{WORKLOADS}}" != all ]; then
        keep=(); for i in {{WORKLOADS}}; do keep+=("${workloads[$i]}"); done; workloads=("${keep[@]}")
    fi
    for w in "${workloads[@]}"; do
        IFS='|' read -r label args off <<<"$w"
        for _ in $(seq {{ROUNDS}}); do
            for p in "${servers[@]}"; do
                [ $p = 7202 ] && [ -z "$off" ] && continue
                run $p "$label,$p" $args
            done
        done
    done
    med() { [ -n "${rate[$1]:-}" ] && median ${rate[$1]} || echo 0; }
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b }'; }
    bps() { [ "${dsets[$1]:-0}" -gt 0 ] && echo $(( ${dbytes[$1]} / ${dsets[$1]} )) || echo -; }
    cpu() { [ "${dcmds[$1]:-0}" -gt 0 ] && awk -v t="${dticks[$1]}" -v c="${dcmds[$1]}" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz / (c / 1e6) }' || echo -; }
    lat() { [ -n "${p99[$1]:-}" ] && printf '%.2f' "$(median ${p99[$1]})" || echo -; }
    echo "memtier_benchmark, keys uniform over $keys, a fresh random 64-byte value per SET, {{ROUNDS}} rounds of {{SECS}} s"
    echo
    echo "| ops/s | respite | respite, old layout | redis AOF always | redis, no persistence | respite, batching off | respite / AOF | respite / old layout | batching on / off |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for w in "${workloads[@]}"; do
        IFS='|' read -r label args off <<<"$w"
        on=$(med "$label,7201"); offr=$(med "$label,7202")
        echo "| $label | ${on%.*} | $(med "$label,7205" | cut -d. -f1) | $(med "$label,7203" | cut -d. -f1) | $(med "$label,7204" | cut -d. -f1) | ${off:+${offr%.*}} | $(ratio $on $(med "$label,7203")) | $(ratio $on $(med "$label,7205")) | ${off:+$(ratio $on $offr)} |"
    done
    echo
    echo "| p99 ms; bytes written per SET; CPU s per million commands | p99 respite | p99 AOF | p99 respite / AOF | B/SET respite | B/SET old layout | B/SET AOF | CPU respite | CPU old layout | CPU AOF | CPU no persistence |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for w in "${workloads[@]}"; do
        IFS='|' read -r label args off <<<"$w"
        echo "| $label | $(lat "$label,7201") | $(lat "$label,7203") | $(ratio $(lat "$label,7201") $(lat "$label,7203")) | $(bps "$label,7201") | $(bps "$label,7205") | $(bps "$label,7203") | $(cpu "$label,7201") | $(cpu "$label,7205") | $(cpu "$label,7203") | $(cpu "$label,7204") |"
    done
    echo
    # The same SET workload through respite-loadgen, against the same
    # servers, so the two load generators can be compared.
    cargo build --release -p respite-loadgen 2>/dev/null
    for mix in 1:0 4:1; do
        echo "respite-loadgen --ratio $mix -t 2 -c 50 --keyspace $keys -d 64 --duration {{SECS}}s:"
        ./target/release/respite-loadgen -q --target respite=127.0.0.1:7201 --target aof=127.0.0.1:7203 \
            --ratio $mix -t 2 -c 50 --keyspace "$keys" --key-prefix memtier- -d 64 --duration {{SECS}}s 2>&1 | grep -vE '^\s*$' || true
    done
    echo
    for f in on old; do
        echo "respite ($f): database $(stat -c %s "$dir/$f.db") bytes, WAL $(stat -c %s "$dir/$f.db-wal" 2>/dev/null || echo 0) bytes"
    done
    redis-cli -p 7201 info persistence | tr -d '\r' | grep -E 'group_commit_(ops_per_batch_mean|commit_latency)|write_bytes|page_size|wal_'

# Hashes and sets against strings and against redis-server, side by side
# in one run (redis-benchmark, 50 clients, N requests, keys over 100,000;
# every write stores a value that changes): the speed targets of the hash
# and set issue. Every cell is the median of ROUNDS runs taken in turn
# across the servers. Given the binaries of Redka and Redlite (built from
# their sources, see docs/benchmarks.md), they get columns too. Example:
# just bench-types 200000 3 /tmp/peers/bin/redka /tmp/peers/bin/redlite
bench-types N="200000" ROUNDS="3" REDKA="" REDLITE="":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -p respite-daemon
    dir=$(mktemp -d)
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
    wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
    ./target/release/respited --port 7301 --db "$dir/r.db" 2>"$dir/r.log" &
    redis-server --port 7303 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null &
    redis-server --port 7304 --dir "$dir" --save "" --appendonly no --dbfilename none.rdb >/dev/null &
    ports=(7301 7303 7304)
    if [ -n "{{REDKA}}" ] && [ -n "{{REDLITE}}" ]; then
        "{{REDKA}}" -h 127.0.0.1 -p 7305 "$dir/redka.db" >"$dir/redka.log" 2>&1 &
        "{{REDLITE}}" --db "$dir/redlite.db" --addr 127.0.0.1:7306 >"$dir/redlite.log" 2>&1 &
        ports+=(7305 7306)
    fi
    for p in "${ports[@]}"; do wait_up $p; done
    x="$(printf 'x%.0s' $(seq 52))"
    # The data the reads find: 100,000 strings, hashes of one field and sets
    # of one member, and one hash of 100 fields and one set of 100 members.
    for p in "${ports[@]}"; do
        redis-benchmark -p $p -c 50 -n 100000 -r 100000 -P 32 -q SET key:__rand_int__ "$x" >/dev/null
        redis-benchmark -p $p -c 50 -n 100000 -r 100000 -P 32 -q HSET h:__rand_int__ f "$x" >/dev/null
        redis-benchmark -p $p -c 50 -n 100000 -r 100000 -P 32 -q SADD s:__rand_int__ m >/dev/null
        hargs=(); sargs=()
        for i in $(seq 100); do hargs+=("field:$i" "$x"); sargs+=("member:$i"); done
        redis-cli -p $p HSET h100 "${hargs[@]}" >/dev/null
        redis-cli -p $p SADD s100 "${sargs[@]}" >/dev/null
    done
    rps() { local p=$1; shift; redis-benchmark -p "$p" --csv -q "$@" 2>/dev/null | awk -F'"' 'NR==2 {print $4}'; }
    median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    declare -A res
    rows=("SET|-r 100000 SET key:__rand_int__ ${x}__rand_int__"
          "HSET, one field|-r 100000 HSET h:__rand_int__ f ${x}__rand_int__"
          "SADD|-r 100000 SADD s:__rand_int__ m__rand_int__"
          "HINCRBY|-r 100000 HINCRBY h:__rand_int__ n 1"
          "GET|-r 100000 GET key:__rand_int__"
          "HGET|-r 100000 HGET h:__rand_int__ f"
          "SISMEMBER|-r 100000 SISMEMBER s:__rand_int__ m"
          "HGETALL, 100 fields|HGETALL h100"
          "SMEMBERS, 100 members|SMEMBERS s100")
    for i in "${!rows[@]}"; do
        IFS='|' read -r label args <<<"${rows[$i]}"
        for _ in $(seq {{ROUNDS}}); do
            for p in "${ports[@]}"; do res[$i,$p]+="$(rps $p -c 50 -n {{N}} $args) "; done
        done
    done
    m() { median ${res[$1,$2]}; }
    echo "| redis-benchmark -c 50 -n {{N}} | respite | redis AOF always | redis, no persistence | respite / AOF | respite / no persistence | respite / its SET or GET |"
    echo "|---|---|---|---|---|---|---|"
    for i in "${!rows[@]}"; do
        IFS='|' read -r label args <<<"${rows[$i]}"
        base=0; [ $i -le 3 ] && base=$(m 0 7301); [ $i -ge 4 ] && [ $i -le 6 ] && base=$(m 4 7301)
        awk -v l="$label" -v a="$(m $i 7301)" -v b="$(m $i 7303)" -v c="$(m $i 7304)" -v s="$base" 'BEGIN {
            printf "| %s | %.0f | %.0f | %.0f | %.2fx | %.2fx | %s |\n", l, a, b, c, a/b, a/c, (s > 0 ? sprintf("%.2fx", a/s) : "") }'
    done
    if [ ${#ports[@]} -gt 3 ]; then
        echo
        echo "| redis-benchmark -c 50 -n {{N}} | respite | Redka | Redlite | respite / Redka | respite / Redlite |"
        echo "|---|---|---|---|---|---|"
        for i in "${!rows[@]}"; do
            IFS='|' read -r label args <<<"${rows[$i]}"
            awk -v l="$label" -v a="$(m $i 7301)" -v b="$(m $i 7305)" -v c="$(m $i 7306)" 'BEGIN {
                printf "| %s | %.0f | %.0f | %.0f | %.1fx | %.1fx |\n", l, a, b, c, (b > 0 ? a/b : 0), (c > 0 ? a/c : 0) }'
        done
    fi
    echo
    # One HSET of 1000 fields (values that change every time), one client:
    # the time per command.
    hargs=(); for i in $(seq 1000); do hargs+=("field:$i" "v__rand_int__"); done
    echo "| HSET of 1000 fields, -c 1 -n 500 | ms per command |"
    echo "|---|---|"
    declare -A names=([7301]=respite [7303]="redis AOF always" [7304]="redis, no persistence" [7305]=Redka [7306]=Redlite)
    for p in "${ports[@]}"; do
        r=$(rps $p -c 1 -n 500 -r 1000000 HSET h1000 "${hargs[@]}")
        awk -v n="${names[$p]}" -v r="$r" 'BEGIN { printf "| %s | %.3f |\n", n, (r > 0 ? 1000 / r : 0) }'
    done

# Lists and sorted sets against SET and against redis-server, side by side
# in one run (redis-benchmark, 50 clients, N requests, keys over 100,000;
# every push and ZADD stores a value that changes, and every pop finds an
# element: the lists are filled with ten elements each first): the speed
# targets of the lists and sorted sets issue. Every cell is the median of
# ROUNDS runs taken in turn across the servers. Given the binaries of Redka
# and Redlite, they get columns too. Example:
# just bench-lists 200000 3 /tmp/peers/bin/redka /tmp/peers/bin/redlite
bench-lists N="200000" ROUNDS="3" REDKA="" REDLITE="":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -p respite-daemon
    dir=$(mktemp -d)
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
    wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
    ./target/release/respited --port 7501 --db "$dir/r.db" 2>"$dir/r.log" &
    redis-server --port 7503 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null &
    redis-server --port 7504 --dir "$dir" --save "" --appendonly no --dbfilename none.rdb >/dev/null &
    ports=(7501 7503 7504)
    if [ -n "{{REDKA}}" ] && [ -n "{{REDLITE}}" ]; then
        "{{REDKA}}" -h 127.0.0.1 -p 7505 "$dir/redka.db" >"$dir/redka.log" 2>&1 &
        "{{REDLITE}}" --db "$dir/redlite.db" --addr 127.0.0.1:7506 >"$dir/redlite.log" 2>&1 &
        ports+=(7505 7506)
    fi
    for p in "${ports[@]}"; do wait_up $p; done
    x="$(printf 'x%.0s' $(seq 52))"
    # The data: 100,000 strings, 100,000 lists of about ten elements, one
    # list of 1,000 elements, sorted sets of 1,000 and 100,000 members.
    for p in "${ports[@]}"; do
        redis-benchmark -p $p -c 50 -n 100000 -r 100000 -P 32 -q SET key:__rand_int__ "$x" >/dev/null
        redis-benchmark -p $p -c 50 -n 1000000 -r 100000 -P 32 -q RPUSH list:__rand_int__ "$x" >/dev/null
        redis-benchmark -p $p -c 50 -n 1000 -P 32 -q RPUSH list1000 "v__rand_int__" >/dev/null
        redis-benchmark -p $p -c 50 -n 100000 -r 1000 -P 32 -q ZADD z1000 __rand_int__ m__rand_int__ >/dev/null
        redis-benchmark -p $p -c 50 -n 300000 -r 100000 -P 32 -q ZADD z100k __rand_int__ m__rand_int__ >/dev/null
    done
    rps() { local p=$1; shift; redis-benchmark -p "$p" --csv -q "$@" 2>/dev/null | awk -F'"' 'NR==2 {print $4}'; }
    median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    declare -A res
    rows=("SET|-r 100000 SET key:__rand_int__ ${x}__rand_int__"
          "LPUSH|-r 100000 LPUSH list:__rand_int__ ${x}__rand_int__"
          "RPUSH|-r 100000 RPUSH list:__rand_int__ ${x}__rand_int__"
          "LPOP|-r 100000 LPOP list:__rand_int__"
          "RPOP|-r 100000 RPOP list:__rand_int__"
          "ZADD, one member|-r 100000 ZADD zs:__rand_int__ __rand_int__ m__rand_int__"
          "LRANGE 0 99|LRANGE list1000 0 99"
          "ZRANGE 0 99 WITHSCORES|ZRANGE z1000 0 99 WITHSCORES"
          "ZRANGEBYSCORE LIMIT 0 10|-r 100000 ZRANGEBYSCORE z100k __rand_int__ +inf LIMIT 0 10"
          "ZRANK, 95,000 members|-r 100000 ZRANK z100k m__rand_int__"
          "LINDEX middle of 1,000|LINDEX list1000 500")
    for i in "${!rows[@]}"; do
        IFS='|' read -r label args <<<"${rows[$i]}"
        for _ in $(seq {{ROUNDS}}); do
            for p in "${ports[@]}"; do res[$i,$p]+="$(rps $p -c 50 -n {{N}} $args) "; done
        done
    done
    m() { median ${res[$1,$2]}; }
    echo "| redis-benchmark -c 50 -n {{N}} | respite | redis AOF always | redis, no persistence | respite / AOF | respite / no persistence | respite / its SET |"
    echo "|---|---|---|---|---|---|---|"
    for i in "${!rows[@]}"; do
        IFS='|' read -r label args <<<"${rows[$i]}"
        base=0; [ $i -le 5 ] && base=$(m 0 7501)
        awk -v l="$label" -v a="$(m $i 7501)" -v b="$(m $i 7503)" -v c="$(m $i 7504)" -v s="$base" 'BEGIN {
            printf "| %s | %.0f | %.0f | %.0f | %.2fx | %.2fx | %s |\n", l, a, b, c, a/b, a/c, (s > 0 ? sprintf("%.2fx", a/s) : "") }'
    done
    if [ ${#ports[@]} -gt 3 ]; then
        echo
        echo "| redis-benchmark -c 50 -n {{N}} | respite | Redka | Redlite | respite / Redka | respite / Redlite |"
        echo "|---|---|---|---|---|---|"
        for i in "${!rows[@]}"; do
            IFS='|' read -r label args <<<"${rows[$i]}"
            awk -v l="$label" -v a="$(m $i 7501)" -v b="$(m $i 7505)" -v c="$(m $i 7506)" 'BEGIN {
                printf "| %s | %.0f | %.0f | %.0f | %.1fx | %.1fx |\n", l, a, b, c, (b > 0 ? a/b : 0), (c > 0 ? a/c : 0) }'
        done
    fi
    echo
    echo "elements left in one list (every pop above found one): respite $(redis-cli -p 7501 llen list:000000000001), redis $(redis-cli -p 7503 llen list:000000000001)"

# The load run of docs/durability.md, "Under load": 1,000
# connections running the mixed profile for SECS against a release
# respited, with RSS, database, WAL and key count sampled every 5 s; fails
# on any error reply. Heavy: run it on a quiet machine.
soak-mixed SECS="60" CONNS="1000":
    cargo build --release -p respite-daemon -p respite-loadgen
    scripts/soak.sh mixed {{SECS}} {{CONNS}}

# TTL churn: SET of random keys with EX 1 at full speed for SECS, sampled
# as above: the database file, WAL and key count must stay bounded.
soak-ttl SECS="60" CONNS="50":
    cargo build --release -p respite-daemon -p respite-loadgen
    scripts/soak.sh ttl {{SECS}} {{CONNS}}

# Long commands (docs/benchmarks.md, "Long commands"): MSET and DEL of N
# keys against a release respited on a fresh database, with a probe client
# doing SET meanwhile; the writer thread's CPU time is read from /proc.
long-commands N="1000000":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -p respite-daemon
    dir=$(mktemp -d)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    target/release/respited --port "$port" --db "$dir/respite.db" 2>"$dir/log" &
    pid=$!
    trap 'kill $pid; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
    for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
    scripts/long_commands.py {{N}} "$port" MSET,DEL "$pid"
    scripts/long_commands.py {{N}} "$port" MSET,DEL "$pid"

# Data growth, the long run: load N keys of 100-byte values (memtier
# --pipeline 32), random SET/GET at 50 connections, SECS seconds of random
# SETs, SET/GET again; then the same file served inside a memory cgroup of
# LIMIT bytes; redis-server AOF always and without persistence beside it
# (scripts/bench_long.sh; docs/benchmarks.md, "Data growth"). Needs
# memtier_benchmark, fio, and a writable memory cgroup (v1).
growth N="10000000" SECS="600" LIMIT="402653184":
    cargo build --release -p respite-daemon
    scripts/bench_long.sh target/release/respited {{N}} {{SECS}} 20 {{LIMIT}}
