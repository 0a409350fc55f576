#!/usr/bin/env bash
# Installs the .deb on this machine for real and runs its maintainer
# scripts through a package's whole life: install, first start, upgrade,
# remove, reinstall, purge. The unpacking test (bin/respited/tests/
# packaging.rs) reads the scripts; this one executes them, with apt-get
# and dpkg, as an admin would.
#
#   RESPITE_DEB_TEST=1 packaging/test-deb.sh [BINARY]    (as root; `just deb-test`)
#
# It installs a package, creates the `respite` system user and writes to
# /etc, /var/lib and /run, so it refuses to run unless it is root and
# RESPITE_DEB_TEST=1 says this machine is a throwaway one (CI's is); a
# developer's `just test` never gets here. It also refuses when a respite
# package, /etc/respite or /var/lib/respite is already there, or port
# 6379 (the shipped config's) is taken. On exit, pass or fail, it purges
# the package and deletes the respite user and group it created, so the
# machine is left as it was.
#
# No systemd runs as PID 1 here (CI runs in a container), so the
# maintainer scripts take their "systemd is not running" path: they create
# the user (systemd-sysusers) and the directories (systemd-tmpfiles), skip
# daemon-reload and the restart, and must not fail. `systemctl enable`
# works offline (it only makes symlinks) and is checked; the start half of
# `systemctl enable --now` is not possible here, so the script starts the
# daemon the way the unit would: the unit's ExecStart, as its User= and
# Group=, with its UMask=, from /, with systemd's short environment. The
# unit itself is checked by `systemd-analyze verify` and the notify
# protocol by the service tests (docs/operations.md says what is left).
#
# Two packages are built from BINARY (default target/debug/respited): the
# workspace's version and a newer one (VERSION+debtest1) to upgrade to.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

if [ "$(id -u)" != 0 ]; then
    echo "test-deb.sh: must run as root: it installs the respite package and creates a system user" >&2
    exit 2
fi
if [ "${RESPITE_DEB_TEST:-}" != 1 ]; then
    echo "test-deb.sh: refusing: this installs and purges the respite package and creates the respite user on" >&2
    echo "this machine; run it on a throwaway machine (CI) with RESPITE_DEB_TEST=1" >&2
    exit 2
fi
bin="$(realpath "${1:-$root/target/debug/respited}")"
[ -x "$bin" ] || { echo "test-deb.sh: no binary at $bin (cargo build -p respite-daemon)" >&2; exit 2; }
for tool in apt-get dpkg-deb setpriv redis-cli systemctl systemd-sysusers systemd-tmpfiles deb-systemd-helper; do
    command -v "$tool" >/dev/null || { echo "test-deb.sh: $tool is missing" >&2; exit 2; }
done
if dpkg-query -W -f='${db:Status-Status}' respite 2>/dev/null | grep -qv '^not-installed$'; then
    echo "test-deb.sh: a respite package is already on this machine ($(dpkg-query -W -f='${Version} ${db:Status-Abbrev}' respite)); not touching it" >&2
    exit 2
fi
for path in /etc/respite /var/lib/respite; do
    [ ! -e "$path" ] || { echo "test-deb.sh: $path exists; not touching it" >&2; exit 2; }
done
if (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
    echo "test-deb.sh: something listens on 127.0.0.1:6379, the port of the shipped config; stop it first" >&2
    exit 2
fi
# systemctl (even offline) leaves a timestamp file here.
had_units_load=no
[ ! -e /run/systemd/systemd-units-load ] || had_units_load=yes
had_user=no
getent passwd respite >/dev/null && had_user=yes
had_group=no
getent group respite >/dev/null && had_group=yes

work="$(mktemp -d)"
# apt-get reads a local .deb as the _apt user when it can.
chmod 0755 "$work"
pid=
cleanup() {
    local rc=$?
    if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
    if dpkg-query -W -f='${db:Status-Status}' respite 2>/dev/null | grep -qv '^not-installed$'; then
        apt-get purge -y -qq respite >/dev/null 2>&1 || dpkg --purge respite >/dev/null 2>&1 || true
    fi
    [ $had_user = yes ] || userdel respite 2>/dev/null || true
    [ $had_units_load = yes ] || rm -f /run/systemd/systemd-units-load
    [ $had_group = yes ] || groupdel respite 2>/dev/null || true
    rm -rf "$work"
    if [ $rc = 0 ]; then echo "test-deb.sh: all checks passed"; else echo "test-deb.sh: FAILED" >&2; fi
}
trap cleanup EXIT

step() { echo "== $*"; }
fail() {
    echo "FAIL: $*" >&2
    [ ! -s "$work/respited.log" ] || { echo "-- respited's log:" >&2; tail -n 20 "$work/respited.log" >&2; }
    exit 1
}
expect() { # expect WHAT ACTUAL WANTED
    [ "$2" = "$3" ] || fail "$1: got '$2', wanted '$3'"
}
status() { dpkg-query -W -f='${db:Status-Abbrev}' respite 2>/dev/null | tr -d ' ' || true; }
owner_mode() { stat -c '%U:%G %a' "$1"; }

v1="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"
v2="$v1+debtest1"
step "building respite $v1 and $v2 from $bin"
deb1="$(RESPITE_DEB_COMPRESS=none RESPITE_DEB_VERSION="$v1" "$here/build-deb.sh" "$bin" "$work")"
deb2="$(RESPITE_DEB_COMPRESS=none RESPITE_DEB_VERSION="$v2" "$here/build-deb.sh" "$bin" "$work")"

# apt-get with the package's maintainer scripts; their output is kept and
# must hold no complaint: a script that fails makes apt-get fail, and one
# that calls systemctl where no systemd runs prints "System has not been
# booted with systemd" even when it goes on.
apt_run() {
    local log="$work/apt.log"
    if ! DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Use-Pty=0 "$@" </dev/null >"$log" 2>&1; then
        cat "$log" >&2
        fail "apt-get $* failed"
    fi
    if grep -iE "error|warning|fail|can't|cannot|not been booted|subprocess|respited?[.:]" "$log" |
        grep -vE "^(Selecting|Preparing|Unpacking|Setting up|Removing|Purging|\(Reading)" >"$work/complaints"; then
        cat "$log" >&2
        fail "apt-get $* printed complaints: $(cat "$work/complaints")"
    fi
}

# respited started the way configs/respited.service starts it.
unit=/lib/systemd/system/respited.service
start_daemon() {
    local exec_start user group umask
    exec_start="$(sed -n 's/^ExecStart=//p' "$unit")"
    user="$(sed -n 's/^User=//p' "$unit")"
    group="$(sed -n 's/^Group=//p' "$unit")"
    umask="$(sed -n 's/^UMask=//p' "$unit")"
    [[ "$exec_start" == /usr/bin/respited\ * ]] || fail "unexpected ExecStart=$exec_start"
    # systemd's environment for a service with User=: PATH, HOME, USER,
    # LOGNAME, SHELL from the user's entry, nothing inherited.
    local home shell
    home="$(getent passwd "$user" | cut -d: -f6)"
    shell="$(getent passwd "$user" | cut -d: -f7)"
    # shellcheck disable=SC2086 # ExecStart's words, split as systemd splits these
    (cd / && umask "$umask" && exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME="$home" USER="$user" LOGNAME="$user" SHELL="$shell" \
        setpriv --reuid="$user" --regid="$group" --init-groups --inh-caps=-all -- $exec_start) \
        >>"$work/respited.log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do
        [ "$(redis-cli -p 6379 PING 2>/dev/null)" = PONG ] && break
        kill -0 "$pid" 2>/dev/null || fail "respited exited at start"
        sleep 0.1
    done
    expect "PING" "$(redis-cli -p 6379 PING 2>/dev/null)" PONG
    expect "respited's user" "$(ps -o user= -p "$pid")" "$user"
}
stop_daemon() {
    kill -TERM "$pid"
    local rc=0
    wait "$pid" || rc=$?
    pid=
    expect "respited's exit status after SIGTERM" "$rc" 0
}

step "apt-get install $deb1"
apt_run install "$deb1"
expect "package status" "$(status)" ii
expect "installed version" "$(dpkg-query -W -f='${Version}' respite)" "$v1"
# sysusers.d: a system user and group, home /var/lib/respite, no shell.
passwd="$(getent passwd respite)" || fail "no respite user"
getent group respite >/dev/null || fail "no respite group"
IFS=: read -r _ _ uid gid _ home shell <<<"$passwd"
[ "$uid" -lt 1000 ] || fail "respite's uid $uid is not a system uid"
expect "respite's primary group" "$(getent group "$gid" | cut -d: -f1)" respite
expect "respite's home" "$home" /var/lib/respite
expect "respite's shell" "$shell" /usr/sbin/nologin
# tmpfiles.d: the data and runtime directories.
expect "/var/lib/respite" "$(owner_mode /var/lib/respite)" "respite:respite 750"
expect "/run/respite" "$(owner_mode /run/respite)" "respite:respite 750"
expect "the config" "$(owner_mode /etc/respite/respite.toml)" "root:respite 640"
expect "Litestream's config" "$(owner_mode /etc/respite/litestream.yml)" "root:respite 640"
expect "is-enabled respite-litestream" "$(systemctl is-enabled respite-litestream.service || true)" disabled
expect "respited --version" "$(/usr/bin/respited --version | cut -d' ' -f1)" respited
# Installing enables nothing and starts nothing.
expect "is-enabled before enable" "$(systemctl is-enabled respited.service || true)" disabled

step "systemctl enable respited (offline: no systemd as PID 1 here)"
systemctl enable respited >"$work/enable.log" 2>&1 || { cat "$work/enable.log"; fail "systemctl enable failed"; }
expect "systemctl is-enabled respited" "$(systemctl is-enabled respited)" enabled
expect "the enable link" "$(readlink /etc/systemd/system/multi-user.target.wants/respited.service)" "$unit"
expect "is-enabled respited.socket" "$(systemctl is-enabled respited.socket || true)" disabled

step "respited as the unit starts it: write a key, SIGTERM"
start_daemon
expect "SET" "$(redis-cli -p 6379 SET pkg:key kept-across-upgrade)" OK
expect "maxclients from the shipped config" "$(redis-cli -p 6379 CONFIG GET maxclients | tail -n1)" 10000
stop_daemon
expect "the database file" "$(owner_mode /var/lib/respite/respite.db)" "respite:respite 640"

step "edit the conffile, upgrade to $v2"
sed -i -e 's/^maxclients = 10000$/maxclients = 777/' \
    -e 's|^# unixsocket = "/run/respite/respite.sock"$|unixsocket = "/run/respite/respite.sock"|' \
    /etc/respite/respite.toml
grep -q '^maxclients = 777$' /etc/respite/respite.toml || fail "the config edit did not apply"
grep -q '^unixsocket = ' /etc/respite/respite.toml || fail "the config edit did not apply"
cp /etc/respite/respite.toml "$work/edited.toml"
apt_run install "$deb2"
expect "package status" "$(status)" ii
expect "installed version" "$(dpkg-query -W -f='${Version}' respite)" "$v2"
cmp -s "$work/edited.toml" /etc/respite/respite.toml || fail "the upgrade changed the edited config"
[ -z "$(ls /etc/respite | grep -v -e '^respite.toml$' -e '^litestream.yml$')" ] || fail "stray files in /etc/respite: $(ls /etc/respite)"
expect "the config" "$(owner_mode /etc/respite/respite.toml)" "root:respite 640"
expect "systemctl is-enabled respited" "$(systemctl is-enabled respited)" enabled
start_daemon
expect "GET after the upgrade" "$(redis-cli -p 6379 GET pkg:key)" kept-across-upgrade
expect "maxclients from the edited config" "$(redis-cli -p 6379 CONFIG GET maxclients | tail -n1)" 777
expect "PING on the edited config's Unix socket" "$(redis-cli -s /run/respite/respite.sock PING)" PONG
stop_daemon

step "apt-get remove respite: data and config stay"
apt_run remove respite
expect "package status" "$(status)" rc
[ ! -e /usr/bin/respited ] || fail "/usr/bin/respited is still there"
[ ! -e "$unit" ] || fail "$unit is still there"
cmp -s "$work/edited.toml" /etc/respite/respite.toml || fail "remove changed the config"
[ -f /var/lib/respite/respite.db ] || fail "remove deleted the database"
getent passwd respite >/dev/null || fail "remove deleted the respite user"
# Enabling is the admin's configuration: remove keeps the link.
[ -L /etc/systemd/system/multi-user.target.wants/respited.service ] || fail "remove deleted the enable link"

step "apt-get install $deb2 again: the kept data is served"
apt_run install "$deb2"
expect "package status" "$(status)" ii
expect "systemctl is-enabled respited" "$(systemctl is-enabled respited)" enabled
start_daemon
expect "GET after remove and reinstall" "$(redis-cli -p 6379 GET pkg:key)" kept-across-upgrade
stop_daemon

step "apt-get purge respite: data, config and enable links go, the user stays"
apt_run purge respite
expect "package status" "$(status)" ""
for path in /var/lib/respite /etc/respite /run/respite /usr/bin/respited \
    /etc/systemd/system/multi-user.target.wants/respited.service \
    /var/lib/systemd/deb-systemd-helper-enabled/respited.service.dsh-also \
    /var/lib/systemd/deb-systemd-helper-enabled/respited.socket.dsh-also \
    /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/respited.service; do
    [ ! -e "$path" ] && [ ! -L "$path" ] || fail "purge left $path"
done
[ -z "$(dpkg-statoverride --list /etc/respite/respite.toml)" ] || fail "purge left the config's stat override"
[ -z "$(dpkg-statoverride --list /etc/respite/litestream.yml)" ] || fail "purge left litestream.yml's stat override"
getent passwd respite >/dev/null || fail "purge deleted the respite user (postrm promises it stays)"
