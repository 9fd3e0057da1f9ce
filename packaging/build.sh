#!/bin/sh
# packaging/build.sh OUTDIR: builds kvd's Debian packages (.deb) and RPM
# packages (.rpm) from this checkout into OUTDIR, and runs lintian on the
# Debian ones (its output also goes to OUTDIR/lintian.txt; the builds' to
# OUTDIR/build-deb.log and build-rpm.log).
#
# The version is meson.build's project(version:), and only that: it becomes
# debian/changelog (written here, upstream version + "-1") and the spec's
# Version (rpmbuild --define kvd_version). The tree is copied as it is
# (tracked and untracked files that git does not ignore, edits included) to a
# scratch folder; packaging/debian becomes debian/ there, never in the
# checkout.
#
# DEB_BUILD_OPTIONS=nocheck skips the tests in both builds (and cmocka).
# rpmbuild runs with --nodeps: on Debian, rpm's database knows none of the
# build dependencies (they are Debian packages); the .deb build checks the
# same libraries through dpkg. Needs (Debian 12): debhelper, dpkg-dev,
# lintian, rpm, and the build dependencies in packaging/debian/control.
set -eu

usage() {
	echo "usage: packaging/build.sh OUTDIR" >&2
	exit 2
}
[ $# -eq 1 ] || usage
mkdir -p "$1"
out=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)

say() { echo "build.sh: $*"; }
die() {
	echo "build.sh: $*" >&2
	exit 1
}

for tool in dpkg-buildpackage dh lintian rpmbuild meson python3 git; do
	command -v "$tool" >/dev/null 2>&1 ||
		die "$tool not found (apt-get install debhelper dpkg-dev lintian rpm meson git)"
done

version=$(meson introspect --projectinfo "$src/meson.build" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
[ -n "$version" ] || die "no version in meson.build"

# The library package is named after the soname (Debian policy 8.1).
soversion=$(sed -n "s/^kvclient_soversion = '\(.*\)'$/\1/p" "$src/meson.build")
grep -q "^Package: libkvclient$soversion\$" "$src/packaging/debian/control" ||
	die "meson.build's kvclient_soversion is '$soversion': rename libkvclient<N> in packaging/debian/control (and its .install file) and packaging/rpm/kvd.spec"

work=$(mktemp -d /tmp/kvd-pkg.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
tree="$work/kvd-$version"
mkdir "$tree"

say "kvd $version from $src"
(cd "$src" && git ls-files -z --cached --others --exclude-standard) |
	(cd "$src" && python3 -c '
import os, sys
names = sys.stdin.buffer.read().split(b"\0")
sys.stdout.buffer.write(b"\0".join(n for n in names if n and os.path.lexists(n)))') |
	(cd "$src" && tar --null -T - -cf -) | tar -xf - -C "$tree"

# ---- rpm source tarball (before debian/ exists in the tree) -----------------
mkdir -p "$work/rpm/SOURCES"
tar -C "$work" -czf "$work/rpm/SOURCES/kvd-$version.tar.gz" "kvd-$version"
cp "$tree/systemd/kvd.sysusers" "$work/rpm/SOURCES/kvd.sysusers"

# ---- Debian ----------------------------------------------------------------
cp -R "$tree/packaging/debian" "$tree/debian"
# The changelog's date is that of the last commit, so that a rebuild of the
# same commit gives the same packages (SOURCE_DATE_EPOCH comes from it).
date=$(git -C "$src" log -1 --format=%cD 2>/dev/null || date -R)
maint=$(sed -n 's/^Maintainer: //p' "$tree/debian/control")
cat >"$tree/debian/changelog" <<EOF
kvd ($version-1) unstable; urgency=medium

  * kvd $version, built from its source tree by packaging/build.sh.

 -- $maint  $date
EOF

say "dpkg-buildpackage (DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-})"
rm -f "$out"/*.deb "$out"/*.rpm "$out"/*.log
(cd "$tree" && dpkg-buildpackage -us -uc -b) >"$out/build-deb.log" 2>&1 || {
	tail -n 60 "$out/build-deb.log" >&2
	die "dpkg-buildpackage failed (the end of $out/build-deb.log above)"
}
cp "$work"/*.deb "$out"/

say "lintian"
lintian_rc=0
(cd "$work" && lintian --display-info --pedantic --show-overrides \
	"kvd_${version}-1_$(dpkg-architecture -qDEB_HOST_ARCH).changes") >"$out/lintian.txt" 2>&1 ||
	lintian_rc=$?
cat "$out/lintian.txt"
[ $lintian_rc -eq 0 ] || die "lintian found errors (exit $lintian_rc)"

# ---- RPM -------------------------------------------------------------------
check=""
case " ${DEB_BUILD_OPTIONS:-} " in
*" nocheck "*) check="--without check" ;;
esac
say "rpmbuild --nodeps $check"
# shellcheck disable=SC2086 # $check is zero or two words
rpmbuild -bb --nodeps $check \
	--define "_topdir $work/rpm" \
	--define "kvd_version $version" \
	"$tree/packaging/rpm/kvd.spec" >"$out/build-rpm.log" 2>&1 || {
	tail -n 60 "$out/build-rpm.log" >&2
	die "rpmbuild failed (the end of $out/build-rpm.log above)"
}
cp "$work"/rpm/RPMS/*/*.rpm "$out"/

say "packages in $out:"
ls -l "$out"
