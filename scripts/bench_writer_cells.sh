#!/usr/bin/env bash
# What the writer spends per write command, beside the whole process and
# redis-server with `appendfsync always`, side by side in one run: up to
# four respited builds (named A, B, C, D in the table) and redis-server,
# 100,000 keys filled with SETs first, then each cell SECS seconds per
# server in turn (ROUNDS times). Per cell: ops/s and p99 (memtier), CPU µs
# per command of the whole process (/proc/PID/stat) and of respited's
# writer thread (/proc/PID/task/TID/stat of `respite-writer`), bytes
# written per command (/proc/PID/io), context switches per command (all
# threads, /proc/PID/task/*/status). The queue cell is
# loadgen/examples/queue.rs (50 producers LPUSH, 50 consumers BRPOP), per
# job. Cells: set (50 conns), set10, set200, p16 (SET --pipeline 16),
# lpush, rpop (the lists lpush filled), zadd, queue.
#
# KEYS (100,000 unless set) is the keyspace; at the end, each server's
# resident memory (VmRSS and its peak VmHWM, /proc/PID/status) and, for
# respite, INFO persistence's commit latency p99 and max, WAL peak and
# longest WAL pause and restart.
#
# Usage: [ROUNDS=N] [KEYS=N] scripts/bench_writer_cells.sh MEMTIER QUEUE SECS CELLS RESPITED [RESPITED...]
# Example: ROUNDS=2 scripts/bench_writer_cells.sh /usr/local/bin/memtier_benchmark \
#            target/release/examples/queue 8 set,lpush,rpop,zadd target/release/respited
set -euo pipefail
memtier=$1 queue=$2 secs=$3 cells=$4 rounds=${ROUNDS:-1} keys=${KEYS:-100000}
shift 4
bins=("$@")
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done; }
servers=(); declare -A name
port=7711; i=0
for b in "${bins[@]}"; do
  "$b" --port "$port" --db "$dir/$port.db" 2>"$dir/$port.log" &
  servers+=("$port"); name[$port]=$(echo ABCD | cut -c$((i+1))); port=$((port+1)); i=$((i+1))
done
redis-server --port 7798 --dir "$dir" --save "" --appendonly yes --appendfsync always >/dev/null &
servers+=(7798); name[7798]=redis
for p in "${servers[@]}"; do wait_up "$p"; done
declare -A pid
for p in "${servers[@]}"; do pid[$p]=$(redis-cli -p "$p" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}'); done
hz=$(getconf CLK_TCK)
wbytes() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
switches() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
wticks() { for t in /proc/$1/task/*; do if grep -q respite-writer $t/comm 2>/dev/null; then awk '{print $14+$15}' $t/stat; return; fi; done; echo 0; }
# The writer thread's read calls (its `pread`s of pages whose newest copy
# is in the WAL and that its page cache does not hold).
wreads() { for t in /proc/$1/task/*; do if grep -q respite-writer $t/comm 2>/dev/null; then awk '/^syscr/ {print $2}' $t/io; return; fi; done; echo 0; }
cmds() { redis-cli -p "$1" info stats | tr -d '\r' | awk -F: '/^total_commands_processed/ {print $2}'; }
mt() { "$memtier" -p "$1" --key-minimum 1 --key-maximum "$keys" --random-data -d 64 --hide-histogram "${@:2}"; }
for p in "${servers[@]}"; do mt "$p" -t 2 -c 10 --pipeline 64 --ratio 1:0 --key-pattern P:P -n allkeys >/dev/null 2>&1; done
echo "| cell | server | ops/s | p99 ms | CPU µs/op | writer µs/op | writer reads/op | bytes/op | switches/op |"
echo "|---|---|---|---|---|---|---|---|---|"
IFS=, read -ra cl <<<"$cells"
for c in "${cl[@]}"; do
 for r in $(seq $rounds); do
  case $c in
    set) args=(-t 2 -c 25 --ratio 1:0 --key-pattern R:R --distinct-client-seed);;
    set10) args=(-t 2 -c 5 --ratio 1:0 --key-pattern R:R --distinct-client-seed);;
    set200) args=(-t 2 -c 100 --ratio 1:0 --key-pattern R:R --distinct-client-seed);;
    p16) args=(-t 2 -c 25 --pipeline 16 --ratio 1:0 --key-pattern R:R --distinct-client-seed);;
    lpush) args=(-t 2 -c 25 --command "LPUSH l__key__ __data__" --command-key-pattern R --distinct-client-seed);;
    rpop) args=(-t 2 -c 25 --command "RPOP l__key__" --command-key-pattern R --distinct-client-seed);;
    zadd) args=(-t 2 -c 25 --command "ZADD z__key__ 1 __data__" --command-key-pattern R --distinct-client-seed);;
    queue) args=();;
  esac
  for p in "${servers[@]}"; do
    b0=$(wbytes "${pid[$p]}"); t0=$(ticks "${pid[$p]}"); w0=$(wticks "${pid[$p]}"); r0=$(wreads "${pid[$p]}"); c0=$(cmds "$p"); s0=$(switches "${pid[$p]}")
    if [ "$c" = queue ]; then
      out=$("$queue" --target "x=127.0.0.1:$p" --producers 50 --consumers 50 --seconds "$secs" --rounds 1 2>/dev/null | awk -F'|' '/^\| x/ {print $3, $5}' | sed 's/ ms//g')
    else
      out=$(mt "$p" "${args[@]}" --test-time "$secs" 2>/dev/null | awk '/^Totals/ {print $2, $(NF-2)}')
    fi
    b1=$(wbytes "${pid[$p]}"); t1=$(ticks "${pid[$p]}"); w1=$(wticks "${pid[$p]}"); r1=$(wreads "${pid[$p]}"); c1=$(cmds "$p"); s1=$(switches "${pid[$p]}")
    n=$((c1 - c0 - 1)); [ "$c" = queue ] && n=$(( n / 2 ))
    read -r rate p99 <<<"$out"
    awk -v l="$c r$r" -v s="${name[$p]}" -v r="$rate" -v q="$p99" -v t=$((t1-t0)) -v w=$((w1-w0)) -v hz=$hz -v n=$n -v b=$((b1-b0)) -v rd=$((r1-r0)) -v x=$((s1-s0)) \
      'BEGIN {printf "| %s | %s | %d | %s | %.1f | %.1f | %.2f | %d | %.2f |\n", l, s, r, q, t/hz/n*1e6, w/hz/n*1e6, rd/n, b/n, x/n}'
  done
 done
done
for p in "${servers[@]}"; do
  [ "$p" = 7798 ] || echo "${name[$p]}: $(redis-cli -p "$p" info persistence | tr -d '\r' |
    grep -E '^(group_commit_commit_latency_(p99|max)_us|wal_size_peak_bytes|wal_pause_max_us|wal_restart_max_us):' | tr '\n' ' ')"
  awk -v s="${name[$p]}" '/^VmRSS/ {r = $2} /^VmHWM/ {h = $2} END {printf "%s: RSS %.0f MB, peak %.0f MB\n", s, r / 1024, h / 1024}' "/proc/${pid[$p]}/status"
done
