#!/usr/bin/env bash
# Builds respite_<version>_<arch>.deb from a built respited binary, with
# Debian's own dpkg-deb: no cargo-deb to install (it takes minutes to
# build), and every file of the package listed right here.
#
#   packaging/build-deb.sh target/release/respited [OUTDIR]
#
# RESPITE_DEB_VERSION overrides the version (default: the workspace's, from
# Cargo.toml), so packaging/test-deb.sh can build a newer package to
# upgrade to. RESPITE_DEB_COMPRESS is dpkg-deb's -Z (default xz; the tests
# package the 80 MB debug binary and use none: xz takes a minute there).
#
# The layout: /usr/bin/respited, the units in /lib/systemd/system, the
# default config in /etc/respite (a conffile: an upgrade keeps local
# edits), the optional Litestream unit and its config, sysusers.d and
# tmpfiles.d entries, and the docs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
bin="${1:?usage: build-deb.sh BINARY [OUTDIR]}"
out="${2:-$root/target/deb}"
version="${RESPITE_DEB_VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)}"
arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 "$bin" "$stage/usr/bin/respited"
install -D -m 0644 "$root/configs/respited.service" "$stage/lib/systemd/system/respited.service"
install -D -m 0644 "$root/configs/respited.socket" "$stage/lib/systemd/system/respited.socket"
install -D -m 0640 "$root/configs/respite.toml" "$stage/etc/respite/respite.toml"
# Optional: Litestream beside respited (docs/operations.md). The unit is
# installed, never enabled by the package; Litestream is not a dependency.
install -D -m 0644 "$root/configs/respite-litestream.service" "$stage/lib/systemd/system/respite-litestream.service"
install -D -m 0640 "$root/configs/litestream.yml" "$stage/etc/respite/litestream.yml"
install -D -m 0644 "$here/respite.sysusers" "$stage/usr/lib/sysusers.d/respite.conf"
install -D -m 0644 "$here/respite.tmpfiles" "$stage/usr/lib/tmpfiles.d/respite.conf"
for doc in README.md docs/operations.md docs/durability.md; do
    install -D -m 0644 "$root/$doc" "$stage/usr/share/doc/respite/$(basename "$doc")"
done
printf 'respite\nLicense: MIT\n' > "$stage/usr/share/doc/respite/copyright"
install -d "$stage/DEBIAN"
size="$(du -sk --exclude=DEBIAN "$stage" | cut -f1)"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
    "$here/deb/control" > "$stage/DEBIAN/control"
install -m 0644 "$here/deb/conffiles" "$stage/DEBIAN/conffiles"
for script in postinst prerm postrm; do
    install -m 0755 "$here/deb/$script" "$stage/DEBIAN/$script"
done
mkdir -p "$out"
deb="$out/respite_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Z"${RESPITE_DEB_COMPRESS:-xz}" --build "$stage" "$deb" >/dev/null
echo "$deb"
