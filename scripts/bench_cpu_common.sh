# Sourced by scripts/bench_cpu.sh and scripts/bench_cpu_cell.sh (not run
# on its own): the servers they measure side by side and the figures they
# read from /proc and INFO.
#
# Sourcing it makes the scratch directory `dir` (removed, and every server
# started stopped, when the script exits), the arrays `servers` (ports, in
# the order they are measured), `name` (port -> label in the tables) and
# `pid` (port -> process id, filled by `bench_pids`), and `hz` (clock ticks
# per second).

dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
servers=()
declare -A name
declare -A pid
hz=$(getconf CLK_TCK)

wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }

# bench_respiteds FIRST_PORT LABEL BIN...: starts each respited build on
# ports from FIRST_PORT up, each with its own database in `dir`. LABEL
# `always` names each "respite (BIN's file name)"; `if-several` names it
# plain "respite" when there is only one build.
bench_respiteds() {
    local port=$1 label=$2 b
    shift 2
    for b in "$@"; do
        "$b" --port "$port" --db "$dir/$port.db" 2>"$dir/$port.log" &
        servers+=("$port")
        if [ "$label" = always ] || [ "$#" -gt 1 ]; then
            name[$port]="respite ($(basename "$b"))"
        else
            name[$port]="respite"
        fi
        port=$((port + 1))
    done
}

# bench_redis PORT LABEL ARG...: starts redis-server on PORT with its files
# in `dir`, no RDB snapshots, and ARG... (its persistence).
bench_redis() {
    local port=$1 label=$2
    shift 2
    redis-server --port "$port" --dir "$dir" --save "" "$@" >/dev/null &
    servers+=("$port")
    name[$port]=$label
}

# bench_pids: waits for every server to answer, then notes its process id.
bench_pids() {
    local p
    for p in "${servers[@]}"; do wait_up "$p"; done
    for p in "${servers[@]}"; do
        pid[$p]=$(redis-cli -p "$p" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}')
    done
}

# CPU clock ticks (user + system) of process $1.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Context switches (voluntary + nonvoluntary) of every thread of process $1.
switches() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
# Commands the server on port $1 has run (INFO's total_commands_processed).
cmds() { redis-cli -p "$1" info stats | tr -d '\r' | awk -F: '/^total_commands_processed/ {print $2}'; }
