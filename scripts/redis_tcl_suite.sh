#!/usr/bin/env bash
# Runs one of redis 7.0's own Tcl unit test files (tests/unit/FILE.tcl)
# against a respited that is already running, as a conformance check.
# Not part of CI: redis's test tree comes from a git mirror of redis/redis,
# not from this repo.
#
#   scripts/redis_tcl_suite.sh MIRROR PORT FILE [SKIP ...]
#
# MIRROR: a git directory of redis/redis with the tag 7.0.15 (for example
# /work/.mirror/redis+redis/repo). PORT: the respited to test; start it
# with `enable_debug_command = "yes"` in its config file. FILE: a unit
# file without `.tcl` (introspection, type/list...). SKIP: test names to
# skip, or regexes when they start with `/` (the harness's --skiptest),
# e.g. "/GEO|EVAL|script|function|XREAD|XGROUP|LCS|MIGRATE" for features
# respite does not have. Runs in --durable mode (an exception fails one
# test, not the file); prints the counts and each failure. A failure
# inside MULTI leaves the harness's connection in MULTI and fails later
# tests with QUEUED: skip such a test and run again.
set -euo pipefail
mirror=$1; port=$2; file=$3; shift 3
tree=${REDIS_TCL_TREE:-/tmp/redis-7.0.15-tests}
if [ ! -d "$tree/tests" ]; then
    mkdir -p "$tree/src"
    git -C "$mirror" archive 7.0.15 tests | tar -x -C "$tree"
    # The external-server setup calls FUNCTION FLUSH, which respite lacks.
    sed -i 's/^\(\s*\)r function flush/\1catch {r function flush}/' "$tree/tests/support/server.tcl"
    ln -sf "$(command -v redis-cli)" "$tree/src/redis-cli"
    ln -sf "$(command -v redis-server)" "$tree/src/redis-server"
fi
skips=()
for s in "$@"; do skips+=(--skiptest "$s"); done
out=$(mktemp)
# The harness's own listening ports (--baseport, 21079 by default, and the
# --portcount after it): a block of 100 derived from PORT, so that runs
# against servers whose ports differ by less than 350 do not clash. The
# harness also binds each port plus 10000, which must stay under 65536.
baseport=$((20000 + (port % 350) * 100))
(cd "$tree" && timeout 900 tclsh tests/test_helper.tcl --host 127.0.0.1 --port "$port" --baseport "$baseport" --portcount 100 \
    --single "unit/$file" --clients 1 --durable "${skips[@]}" >"$out" 2>&1) || true
sed 's/\x1b\[[0-9;]*m//g' "$out" | grep -a -E '^\[(ok|err|exception|skip)\]' | awk '{print $1}' | sort | uniq -c
sed 's/\x1b\[[0-9;]*m//g' "$out" | grep -a -E -A2 '^\[(err|exception)\]' | grep -a -v '^--' | cut -c1-220
rm -f "$out"
