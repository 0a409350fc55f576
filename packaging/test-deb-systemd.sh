#!/usr/bin/env bash
# The .deb under a real systemd running as PID 1: what packaging/test-deb.sh
# cannot do on a machine without one. It boots this machine's own system
# in a throwaway container (systemd-nspawn, from Debian's systemd-container
# package) and, inside, installs the package with apt-get and runs
# `systemctl enable --now respited`, `systemctl reload`, an upgrade while it
# runs, `systemctl stop`, a watchdog restart, socket activation through
# respited.socket, Litestream beside it (respite-litestream.service:
# replication, and the restore of a lost database at start), `apt-get
# remove` and `apt-get purge`.
#
#   RESPITE_DEB_TEST=1 packaging/test-deb-systemd.sh [BINARY]   (as root; `just deb-test-systemd`)
#
# No image to download: the container's root is an overlay whose lower
# layer is this machine's / (read only) and whose upper layer is a tmpfs,
# so everything the container writes (the package, the user, /etc, the
# journal) vanishes with it and the machine itself is not changed. It
# boots basic.target (none of the machine's own enabled services start)
# on a private network (its own 127.0.0.1:6379), with its own machine id.
# A /usr/sbin/policy-rc.d, which container images carry to keep services
# from starting, is removed inside the container only, so the maintainer
# scripts act as on a real machine.
#
# It refuses to run unless root with RESPITE_DEB_TEST=1 (it mounts file
# systems and runs a container). When the container cannot be started at
# all (no systemd-nspawn, no overlayfs, not allowed to mount: an
# unprivileged CI container), it says so and exits 0, before the package
# is involved, unless RESPITE_REQUIRE_NSPAWN=1; once systemd runs, every
# check must pass. Takes about 15 s.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

if [ "$(id -u)" != 0 ] || [ "${RESPITE_DEB_TEST:-}" != 1 ]; then
    echo "test-deb-systemd.sh: run as root with RESPITE_DEB_TEST=1 (it mounts an overlay of / and boots a container)" >&2
    exit 2
fi
bin="$(realpath "${1:-$root/target/debug/respited}")"
[ -x "$bin" ] || { echo "test-deb-systemd.sh: no binary at $bin (cargo build -p respite-daemon)" >&2; exit 2; }
skip() {
    if [ "${RESPITE_REQUIRE_NSPAWN:-}" = 1 ]; then
        echo "test-deb-systemd.sh: FAILED: cannot boot a container here: $*" >&2
        exit 1
    fi
    echo "test-deb-systemd.sh: SKIPPED: cannot boot a container here: $*"
    skipped=yes
    exit 0
}
command -v systemd-nspawn >/dev/null || skip "no systemd-nspawn (apt-get install systemd-container)"
[ -x /lib/systemd/systemd ] || skip "no /lib/systemd/systemd"

work="$(mktemp -d)"
ct="$work/merged"
nspawn_pid=
skipped=no
had_nspawn_run=no
[ ! -e /run/systemd/nspawn ] || had_nspawn_run=yes
# The cgroups systemd-nspawn creates beside itself, if not there already.
new_cgroups=()
for hierarchy in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
    [ -e "$hierarchy/cgroup.procs" ] || continue
    case "$hierarchy" in
    */systemd) own="$(sed -n 's/^[0-9]*:name=systemd://p' /proc/self/cgroup)" ;;
    *) own="$(sed -n 's/^0:://p' /proc/self/cgroup)" ;;
    esac
    for d in payload supervisor; do
        [ -e "$hierarchy${own%/}/$d" ] || new_cgroups+=("$hierarchy${own%/}/$d")
    done
done
cleanup() {
    local rc=$?
    if [ -n "$nspawn_pid" ]; then
        # SIGTERM asks nspawn to shut the container down cleanly.
        kill -TERM "$nspawn_pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$nspawn_pid" 2>/dev/null || true
        wait "$nspawn_pid" 2>/dev/null || true
    fi
    # nspawn leaves its empty "payload" and "supervisor" cgroups behind
    # where no systemd on the host would collect them: remove the ones it
    # made (never any other cgroup).
    local d
    for d in "${new_cgroups[@]}"; do
        [ ! -d "$d" ] || find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
    # And its lock and mount-propagation directories, if it made them.
    [ $had_nspawn_run = yes ] || [ ! -d /run/systemd/nspawn ] ||
        find /run/systemd/nspawn -depth -type d -exec rmdir {} \; 2>/dev/null || true
    mountpoint -q "$ct" && umount "$ct"
    mountpoint -q "$work" && umount "$work"
    rm -rf "$work"
    if [ $skipped = yes ]; then :; elif [ $rc = 0 ]; then echo "test-deb-systemd.sh: all checks passed"; else echo "test-deb-systemd.sh: FAILED" >&2; fi
}
trap cleanup EXIT

step() { echo "== $*"; }
fail() {
    echo "FAIL: $*" >&2
    if [ -n "$nspawn_pid" ]; then
        echo "-- the container's journal for respited:" >&2
        in_ct journalctl --no-pager -u respited -u respited.socket 2>&1 | tail -n 30 >&2 || true
    fi
    exit 1
}
expect() { # expect WHAT ACTUAL WANTED
    [ "$2" = "$3" ] || fail "$1: got '$2', wanted '$3'"
}

mount -t tmpfs -o size=2g,mode=0700 respite-deb-test "$work" 2>/dev/null || skip "cannot mount a tmpfs"
mkdir -p "$work/upper" "$work/ovl-work" "$ct"
mount -t overlay respite-deb-test -o lowerdir=/,upperdir="$work/upper",workdir="$work/ovl-work" "$ct" 2>/dev/null ||
    skip "cannot mount an overlay of /"
systemd-id128 new >"$ct/etc/machine-id"
rm -f "$ct/usr/sbin/policy-rc.d"
# No timers in the container: apt-daily and friends would take dpkg's lock.
ln -sf /dev/null "$ct/etc/systemd/system/timers.target"
# Nothing of the package may be there already (the overlay shows this
# machine's own state).
if chroot "$ct" dpkg-query -W -f='${db:Status-Status}' respite 2>/dev/null | grep -qv '^not-installed$'; then
    echo "test-deb-systemd.sh: a respite package is installed on this machine; the container would inherit it" >&2
    exit 2
fi

v1="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"
v2="$v1+debtest1"
step "building respite $v1 and $v2 from $bin"
mkdir -p "$ct/root/respite-debs"
deb1="$(RESPITE_DEB_COMPRESS=none RESPITE_DEB_VERSION="$v1" "$here/build-deb.sh" "$bin" "$ct/root/respite-debs")"
deb2="$(RESPITE_DEB_COMPRESS=none RESPITE_DEB_VERSION="$v2" "$here/build-deb.sh" "$bin" "$ct/root/respite-debs")"
deb1="/root/respite-debs/$(basename "$deb1")"
deb2="/root/respite-debs/$(basename "$deb2")"

# Litestream for the replication step: the container sees this machine's
# /usr/local/bin, but CI may have built it elsewhere (go install's GOBIN).
litestream_bin="$(command -v litestream || true)"
[ -n "$litestream_bin" ] || { echo "test-deb-systemd.sh: litestream not found (go install github.com/benbjohnson/litestream/cmd/litestream@v0.5.18)" >&2; exit 2; }
install -D -m 0755 "$litestream_bin" "$ct/usr/local/bin/litestream"

step "booting the container (systemd as PID 1)"
# --keep-unit --register=no: no systemd or machined on the host to talk to.
systemd-nspawn --quiet --directory="$ct" --machine="respite-deb-test-$$" \
    --private-network --register=no --keep-unit --link-journal=no --console=pipe \
    --boot systemd.unit=basic.target </dev/null >"$work/nspawn.log" 2>&1 &
nspawn_pid=$!
leader=
for _ in $(seq 100); do
    leader="$(pgrep -P "$nspawn_pid" -x systemd || true)"
    [ -n "$leader" ] && break
    kill -0 "$nspawn_pid" 2>/dev/null || { nspawn_pid=; skip "systemd-nspawn exited: $(tail -n 3 "$work/nspawn.log")"; }
    sleep 0.1
done
[ -n "$leader" ] || skip "no systemd in the container after 10 s"
in_ct() {
    nsenter --target "$leader" --all env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive "$@"
}
state=
for _ in $(seq 120); do
    state="$(in_ct systemctl is-system-running 2>/dev/null || true)"
    case "$state" in running | degraded) break ;; esac
    sleep 0.5
done
case "$state" in running | degraded) ;; *) skip "the container's systemd did not come up (state '$state')" ;; esac
expect "PID 1 in the container" "$(in_ct cat /proc/1/comm)" systemd
in_ct test -d /run/systemd/system || fail "no /run/systemd/system in the container"

apt_run() {
    local log="$work/apt.log"
    if ! in_ct apt-get -y -o Dpkg::Use-Pty=0 "$@" </dev/null >"$log" 2>&1; then
        cat "$log" >&2
        fail "apt-get $* failed"
    fi
    if grep -iE "error|warning|fail|can't|cannot|not been booted|subprocess|policy-rc|respited?[.:]" "$log" |
        grep -vE "^(Selecting|Preparing|Unpacking|Setting up|Removing|Purging|\(Reading)" >"$work/complaints"; then
        cat "$log" >&2
        fail "apt-get $* printed complaints: $(cat "$work/complaints")"
    fi
}
prop() { in_ct systemctl show -P "$2" "$1"; }
cli() { in_ct redis-cli "$@" 2>&1 | tr -d '\r'; }
wait_for() { # wait_for WHAT COMMAND...: up to 10 s
    local what="$1"; shift
    for _ in $(seq 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    fail "$what"
}
journal_has() { in_ct journalctl --no-pager -q -u respited -g "$1" >/dev/null; }
# systemd's own lines about the unit (journal_has reads the unit's).
journal_has_unit_line() { in_ct journalctl --no-pager -q _PID=1 UNIT=respited.service -g "$1" >/dev/null; }

step "apt-get install $deb1: nothing starts"
apt_run install "$deb1"
expect "respited after install" "$(prop respited.service ActiveState)" inactive
expect "is-enabled after install" "$(in_ct systemctl is-enabled respited || true)" disabled

step "systemctl enable --now respited"
in_ct systemctl enable --now respited >"$work/enable.log" 2>&1 || { cat "$work/enable.log"; fail "systemctl enable --now failed"; }
expect "is-enabled" "$(in_ct systemctl is-enabled respited)" enabled
# Type=notify: `systemctl start` returns once READY=1 came, so the port
# answers now.
expect "ActiveState" "$(prop respited.service ActiveState)" active
expect "PING" "$(cli PING)" PONG
expect "the service's user" "$(in_ct ps -o user= -p "$(prop respited.service MainPID)")" respite
[[ "$(prop respited.service StatusText)" == *clients*ops/s* ]] || fail "no STATUS= line: '$(prop respited.service StatusText)'"
expect "SET" "$(cli SET pkg:key kept)" OK
expect "the database file" "$(in_ct stat -c '%U:%G %a' /var/lib/respite/respite.db)" "respite:respite 640"
journal_has 'listening on tcp 127.0.0.1:6379' || fail "the journal has no 'listening on' line"

step "systemctl reload respited: SIGHUP re-reads the config"
pid="$(prop respited.service MainPID)"
in_ct sed -i 's/^maxclients = 10000$/maxclients = 777/' /etc/respite/respite.toml
in_ct systemctl reload respited || fail "systemctl reload failed"
expect "maxclients after reload" "$(cli CONFIG GET maxclients | tail -n1)" 777
expect "MainPID after reload" "$(prop respited.service MainPID)" "$pid"
journal_has 'configuration reloaded, applied: maxclients 10000 -> 777' || fail "no reload line in the journal"
# A broken file is refused, logged at priority err (the `<3>` prefix read
# by journald), and the service keeps running on its settings.
in_ct cp /etc/respite/respite.toml /root/respite.toml.good
echo 'maxclients = "many"' | in_ct tee -a /etc/respite/respite.toml >/dev/null
in_ct systemctl reload respited || fail "systemctl reload (broken file) failed"
wait_for "no 'reload refused' line at priority err" \
    in_ct journalctl --no-pager -q -u respited -p err..err -g 'reload refused, the running settings stay'
expect "ActiveState after a refused reload" "$(prop respited.service ActiveState)" active
expect "maxclients after a refused reload" "$(cli CONFIG GET maxclients | tail -n1)" 777
in_ct cp /root/respite.toml.good /etc/respite/respite.toml

step "upgrade to $v2 while it runs: restarted on the new package, config and data kept"
apt_run install "$deb2"
expect "installed version" "$(in_ct dpkg-query -W -f='${Version}' respite)" "$v2"
expect "ActiveState after the upgrade" "$(prop respited.service ActiveState)" active
[ "$(prop respited.service MainPID)" != "$pid" ] || fail "the upgrade did not restart respited (MainPID $pid)"
expect "GET after the upgrade" "$(cli GET pkg:key)" kept
expect "maxclients after the upgrade" "$(cli CONFIG GET maxclients | tail -n1)" 777

step "systemctl stop respited: clean exit"
in_ct systemctl stop respited
expect "ActiveState after stop" "$(prop respited.service ActiveState)" inactive
expect "Result after stop" "$(prop respited.service Result)" success
expect "exit status" "$(prop respited.service ExecMainStatus)" 0
journal_has 'respited stopped cleanly' || fail "no clean-stop line in the journal"

step "the watchdog: a stalled writer gets respited killed and restarted"
# WatchdogSec=2s in a drop-in (the unit's 30 s would make this slow), and
# DEBUG SLEEP allowed from loopback, to stall the writer on purpose.
in_ct mkdir -p /etc/systemd/system/respited.service.d
printf '[Service]\nWatchdogSec=2s\n' | in_ct tee /etc/systemd/system/respited.service.d/watchdog.conf >/dev/null
in_ct sed -i 's/^enable_debug_command = "no"$/enable_debug_command = "local"/' /etc/respite/respite.toml
in_ct systemctl daemon-reload
in_ct systemctl start respited || fail "systemctl start failed"
pid="$(prop respited.service MainPID)"
expect "NRestarts before the stall" "$(prop respited.service NRestarts)" 0
cli DEBUG SLEEP 8 >/dev/null &
sleeper=$!
wait_for "no watchdog timeout within 10 s" journal_has_unit_line 'Watchdog timeout'
prop_is() { [ "$(prop "$1" "$2")" = "$3" ]; }
wait_for "not restarted after the watchdog timeout" prop_is respited.service NRestarts 1
wait_for "not active again after the restart" prop_is respited.service ActiveState active
expect "Result of the killed run" "$(in_ct journalctl --no-pager -q _PID=1 UNIT=respited.service -g "Failed with result 'watchdog'" -o cat)" \
    "respited.service: Failed with result 'watchdog'."
[ "$(prop respited.service MainPID)" != "$pid" ] || fail "same main pid after the watchdog restart"
expect "GET after the watchdog restart" "$(cli GET pkg:key)" kept
wait "$sleeper" || true
in_ct systemctl stop respited
in_ct rm -r /etc/systemd/system/respited.service.d
in_ct systemctl daemon-reload

step "Litestream beside respited: respite-litestream.service replicates, and restores a lost database at start"
in_ct install -d -o respite -g respite /srv/backup/respite
in_ct systemctl enable respite-litestream.service >/dev/null 2>&1 || fail "systemctl enable respite-litestream failed"
# With respite checkpointing the WAL itself, the unit refuses to start.
in_ct systemctl start respited || fail "systemctl start respited failed"
wait_for "respite-litestream did not fail beside checkpoint = auto" prop_is respite-litestream.service Result exit-code
in_ct journalctl --no-pager -q -u respite-litestream -g 'set checkpoint = "external"' >/dev/null ||
    fail "respite-litestream did not say why it refused"
in_ct systemctl stop respited
in_ct systemctl reset-failed respite-litestream.service
in_ct sed -i 's/^checkpoint = "auto"$/checkpoint = "external"/' /etc/respite/respite.toml
in_ct systemctl start respited || fail "systemctl start respited (external) failed"
expect "respite-litestream beside respited" "$(prop respite-litestream.service ActiveState)" active
expect "checkpoint_mode" "$(cli INFO persistence | grep '^checkpoint_mode:')" "checkpoint_mode:external"
expect "SET through the replicated respited" "$(cli SET lt:key replicated)" OK
wait_for "no LTX file in the replica" in_ct sh -c 'ls /srv/backup/respite/ltx/0/*.ltx'
sleep 3 # one sync interval (1 s) and more: the SET is in the replica
in_ct systemctl stop respited
expect "respite-litestream stopped with respited" "$(prop respite-litestream.service ActiveState)" inactive
in_ct sh -c 'rm -f /var/lib/respite/respite.db /var/lib/respite/respite.db-wal /var/lib/respite/respite.db-shm'
in_ct systemctl start respited || fail "systemctl start respited (restore) failed"
in_ct journalctl --no-pager -q -u respite-litestream -g 'restor' >/dev/null || fail "no restore in respite-litestream's journal"
expect "GET of the replicated key after the restore" "$(cli GET lt:key)" replicated
expect "GET of an older key after the restore" "$(cli GET pkg:key)" kept
in_ct systemctl stop respited
in_ct systemctl disable respite-litestream.service >/dev/null 2>&1

step "socket activation: respited.socket starts respited on the first connection"
in_ct systemctl disable respited >/dev/null 2>&1
in_ct systemctl enable --now respited.socket >/dev/null 2>&1 || fail "systemctl enable --now respited.socket failed"
expect "respited before the first connection" "$(prop respited.service ActiveState)" inactive
expect "GET through the socket unit's Unix socket" "$(cli -s /run/respite/respite.sock GET pkg:key)" kept
expect "respited after the first connection" "$(prop respited.service ActiveState)" active
expect "GET through the socket unit's TCP socket" "$(cli -p 6379 GET pkg:key)" kept
journal_has 'socket from systemd: tcp 127.0.0.1:6379' || fail "respited did not log the passed TCP socket"
journal_has 'socket from systemd: unix /run/respite/respite.sock' || fail "respited did not log the passed Unix socket"

step "apt-get remove respite: stops it, keeps the data and the config"
apt_run remove respite
expect "respited after remove" "$(prop respited.service ActiveState)" inactive
expect "respited.socket after remove" "$(prop respited.socket ActiveState)" inactive
in_ct test -f /var/lib/respite/respite.db || fail "remove deleted the database"
in_ct grep -q '^maxclients = 777$' /etc/respite/respite.toml || fail "remove lost the config edit"

step "apt-get purge respite: data, config and enable links go"
apt_run purge respite
for path in /var/lib/respite /etc/respite /run/respite /etc/systemd/system/sockets.target.wants/respited.socket; do
    in_ct test ! -e "$path" -a ! -L "$path" || fail "purge left $path"
done
expect "LoadState after purge" "$(prop respited.service LoadState)" not-found
