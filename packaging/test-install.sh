#!/bin/sh
# packaging/test-install.sh OUTDIR: the packages that packaging/build.sh put
# in OUTDIR, installed and used as an operator would, on Debian 12 as root.
#
#  1. apt-get install ./OUTDIR/*.deb: the user kvd exists, /var/lib/kvd is
#     0750 kvd:kvd, /etc/kvd/kvd.conf is 0640 root:kvd; the man pages,
#     kvd's documentation and kvctl's bash completion (which completes);
#     systemd-analyze verify of the installed unit, and its exposure score
#     (systemd-analyze security --offline=true, printed) at most
#     1.1 (security_max below; when systemd-analyze exists).
#  2. kvd started as its unit would start it (systemd is not PID 1 here):
#     ExecStartPre= (kvd --check-config; ExecReload='s check too, and on a
#     file with a typo, which it refuses) and ExecStart= of the installed
#     kvd.service, as the user kvd, with the
#     unit's UMask= and /run/kvd (RuntimeDirectory=); then kvctl put, get,
#     versions, tenant create, scan; /metrics scraped (metrics_listen set
#     in the installed kvd.conf), its counters moved; a C program built with
#     `pkg-config --cflags --libs kvclient` against the installed files
#     (packaging/test-client.c); SIGTERM, kvd exits 0.
#  3. apt-get remove: /var/lib/kvd and the conffile stay; apt-get purge:
#     both are gone.
#  4. The RPM packages' files against packaging/rpm/expected-files.
#
# It refuses to run where kvd is installed already or /var/lib/kvd or
# /run/kvd exist (a purge would delete someone's data). Whatever happens, it
# stops the kvd it started and purges the packages it installed.
set -eu

[ $# -eq 1 ] || {
	echo "usage: packaging/test-install.sh OUTDIR" >&2
	exit 2
}
out=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
export DEBIAN_FRONTEND=noninteractive

say() { echo "test-install: $*"; }
die() {
	echo "test-install: FAILED: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "run as root (it installs packages)"
debs=$(ls "$out"/*.deb 2>/dev/null) || die "no .deb in $out (packaging/build.sh $1)"
pkgs=""
for f in $debs; do
	pkgs="$pkgs $(dpkg-deb -f "$f" Package)"
done
dpkg-query -W -f='${Status}\n' kvd 2>/dev/null | grep -q "^install ok" &&
	die "kvd is installed already; this test installs and purges it"
[ ! -e /var/lib/kvd ] || die "/var/lib/kvd exists; a purge would delete it"
[ ! -e /run/kvd ] || die "/run/kvd exists: is a kvd running?"

work=$(mktemp -d /tmp/kvd-test-install.XXXXXX)
kvd_pid=""
installed=0
cleanup() {
	rc=$?
	if [ -n "$kvd_pid" ] && kill -0 "$kvd_pid" 2>/dev/null; then
		kill -TERM "$kvd_pid" 2>/dev/null || true
		wait "$kvd_pid" 2>/dev/null || true
	fi
	rm -rf /run/kvd
	if [ $installed = 1 ]; then
		# dpkg, not apt: apt cannot find a package that is neither in its
		# lists nor installed any more.
		# shellcheck disable=SC2086 # one word per package
		dpkg --purge $pkgs >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- 1. install -------------------------------------------------------------
say "apt-get install$pkgs"
# shellcheck disable=SC2086 # one word per file
apt-get install -y -qq $debs >"$work/apt.log" 2>&1 || {
	cat "$work/apt.log" >&2
	die "apt-get install"
}
installed=1

id kvd >/dev/null 2>&1 || die "no user kvd after install"
[ "$(stat -c '%a %U:%G' /var/lib/kvd)" = "750 kvd:kvd" ] ||
	die "/var/lib/kvd is $(stat -c '%a %U:%G' /var/lib/kvd), not 750 kvd:kvd"
[ "$(stat -c '%a %U:%G' /etc/kvd/kvd.conf)" = "640 root:kvd" ] ||
	die "/etc/kvd/kvd.conf is $(stat -c '%a %U:%G' /etc/kvd/kvd.conf), not 640 root:kvd"
# Files beside the programs, by package (docs may be compressed).
for pf in kvd:/usr/share/doc/kvd/README.md kvd:/usr/share/doc/kvd/PROTOCOL.md \
	kvd:/usr/share/doc/kvd/FORMAT.md kvd:/usr/share/doc/kvd/METRICS.md \
	kvd:/usr/share/doc/kvd/SECURITY.md kvd:/usr/share/doc/kvd/kvd-device.conf \
	kvd:/usr/share/man/man8/kvd.8 \
	kvd:/usr/share/man/man5/kvd.conf.5 kvctl:/usr/share/man/man1/kvctl.1 \
	kvctl:/usr/share/bash-completion/completions/kvctl \
	libkvclient-dev:/usr/share/man/man3/libkvclient.3; do
	dpkg -L "${pf%%:*}" | grep -Eqx "${pf#*:}(\.gz)?" || die "${pf%%:*} does not install ${pf#*:}"
done
# shellcheck disable=SC2016 # expanded by bash
bash -c '. /usr/share/bash-completion/completions/kvctl && COMP_WORDS=(kvctl te) &&
	COMP_CWORD=1 && _kvctl && [ "${COMPREPLY[*]}" = tenant ]' ||
	die "the installed bash completion does not complete 'kvctl te' to 'tenant'"

unit=""
for d in /lib/systemd/system /usr/lib/systemd/system; do
	[ -f "$d/kvd.service" ] && unit="$d/kvd.service" && break
done
[ -n "$unit" ] || die "no kvd.service installed"
# The exposure score systemd-analyze security gives the unit (0 best, 10
# worst) may not get worse than this (1.2 without PrivateUsers=).
security_max=1.1
if command -v systemd-analyze >/dev/null 2>&1; then
	say "systemd-analyze verify $unit"
	systemd-analyze verify "$unit" || die "systemd-analyze verify $unit"
	# --offline: the unit file alone, without a running systemd (PID 1 here
	# is not systemd); --threshold is the score times 10.
	say "systemd-analyze security --offline=true $unit"
	threshold=$(echo "$security_max" | awk '{ printf "%d", $1 * 10 + 0.5 }')
	rc=0
	systemd-analyze security --offline=true --no-pager --threshold="$threshold" "$unit" \
		>"$work/security.txt" 2>&1 || rc=$?
	score=$(sed -n 's/.*Overall exposure level for kvd.service: \([0-9.]*\).*/\1/p' \
		"$work/security.txt")
	[ -n "$score" ] || {
		cat "$work/security.txt" >&2
		die "systemd-analyze security printed no score"
	}
	say "systemd-analyze security: exposure $score (at most $security_max)"
	[ $rc -eq 0 ] || {
		grep '✗' "$work/security.txt" >&2
		die "kvd.service's exposure $score is above $security_max"
	}
else
	say "no systemd-analyze: the unit is not verified"
fi
# Where systemd runs, the package started kvd: stop it, this test runs its own.
if [ -d /run/systemd/system ]; then
	systemctl stop kvd.service
fi

# ---- 2. run ----------------------------------------------------------------
# ExecStartPre= (kvd --check-config) as the unit runs it, before ExecStart=
sed -n 's/^ExecStartPre=//p' "$unit" >"$work/execstartpre"
[ -s "$work/execstartpre" ] || die "no ExecStartPre= in $unit"
while read -r pre; do
	say "ExecStartPre as kvd: $pre"
	# shellcheck disable=SC2086 # split into words, as systemd does
	setpriv --reuid=kvd --regid=kvd --init-groups --no-new-privs -- $pre ||
		die "ExecStartPre=$pre failed"
done <"$work/execstartpre"
# ExecReload='s check before the SIGHUP: it passes on the installed file and
# fails, naming the line, on a file with a typo (so would `systemctl reload`)
reload_check=$(sed -n 's/^ExecReload=\(.*--check-config.*\)/\1/p' "$unit")
[ -n "$reload_check" ] || die "no ExecReload= with --check-config in $unit"
# shellcheck disable=SC2086 # split into words, as systemd does
setpriv --reuid=kvd --regid=kvd --init-groups --no-new-privs -- $reload_check >/dev/null ||
	die "ExecReload=$reload_check failed on the installed file"
{
	echo "wrokers = 2"
	cat /etc/kvd/kvd.conf
} >"$work/typo.conf"
chown root:kvd "$work/typo.conf"
chmod 0640 "$work/typo.conf"
chmod 0755 "$work"
bad_check=$(echo "$reload_check" | sed "s|/etc/kvd/kvd.conf|$work/typo.conf|")
rc=0
# shellcheck disable=SC2086 # split into words, as systemd does
setpriv --reuid=kvd --regid=kvd --init-groups --no-new-privs -- $bad_check \
	>/dev/null 2>"$work/typo.err" || rc=$?
if [ $rc -ne 1 ] || ! grep -q "typo.conf line 1: unknown setting 'kvd.wrokers'" "$work/typo.err"; then
	die "ExecReload=$bad_check on a file with a typo: exit $rc, $(cat "$work/typo.err")"
fi
execstart=$(sed -n 's/^ExecStart=//p' "$unit")
umask_unit=$(sed -n 's/^UMask=//p' "$unit")
[ -n "$execstart" ] || die "no ExecStart= in $unit"
install -d -o kvd -g kvd -m 0755 /run/kvd
# metrics on (the installed file has them off): a free port on 127.0.0.1
metrics_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -i "s/^#metrics_listen =.*/metrics_listen = 127.0.0.1:$metrics_port/" /etc/kvd/kvd.conf
grep -q "^metrics_listen = 127.0.0.1:$metrics_port" /etc/kvd/kvd.conf ||
	die "no '#metrics_listen =' line in /etc/kvd/kvd.conf to enable"
say "starting as kvd (umask ${umask_unit:-0022}): $execstart"
# setpriv execs kvd itself (no session, no fork), as systemd does with User=.
# shellcheck disable=SC2086 # ExecStart= is split into words, as systemd does
(umask "${umask_unit:-0022}" && exec setpriv --reuid=kvd --regid=kvd --init-groups \
	--no-new-privs -- $execstart) >"$work/kvd.log" 2>&1 &
kvd_pid=$!

n=0
until kvctl health >/dev/null 2>&1; do
	kill -0 "$kvd_pid" 2>/dev/null || {
		cat "$work/kvd.log" >&2
		kvd_pid=""
		die "kvd exited at start"
	}
	n=$((n + 1))
	[ $n -lt 100 ] || die "kvd did not answer health in 10 s"
	sleep 0.1
done

# expect WHAT WANT GOT
expect() {
	[ "$2" = "$3" ] || die "$1: expected '$2', got '$3'"
}
say "kvctl smoke test"
v1=$(kvctl put greeting hello)
v2=$(kvctl put greeting world)
expect "kvctl put's second version" "$((v1 + 1))" "$v2"
expect "kvctl get" world "$(kvctl get greeting)"
expect "kvctl get --version $v1" hello "$(kvctl get greeting --version "$v1")"
expect "kvctl versions" 2 "$(kvctl versions greeting --values | wc -l)"
kvctl versions greeting --values | grep -q "hello$" || die "kvctl versions --values lacks hello"
kvctl tenant create orders --sync interval --history 5 >/dev/null
kvctl -t orders put 2026-01 january >/dev/null
kvctl -t orders put 2026-02 february >/dev/null
kvctl -t orders put 2027-01 later >/dev/null
expect "kvctl scan --prefix" "$(printf '2026-01\tjanuary\n2026-02\tfebruary')" \
	"$(kvctl -t orders scan --prefix 2026-)"
kvctl -t orders scan --prefix 2026- -o json | grep -q '"count": *2' ||
	die "kvctl scan -o json: $(kvctl -t orders scan --prefix 2026- -o json)"
kvctl tenant list | grep -q "^orders" || die "kvctl tenant list lacks orders"

# metric NAME{LABELS}: its value on the page (empty when absent)
metric() {
	awk -v name="$1" '$1 == name { print $2; exit }' "$work/metrics"
}
say "GET http://127.0.0.1:$metrics_port/metrics"
scrape() {
	python3 - "$metrics_port" >"$work/metrics" <<'PY' || die "GET /metrics"
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10) as r:
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    sys.stdout.write(r.read().decode())
PY
}
scrape
puts0=$(metric 'kvd_requests_total{method="Put",status="OK"}')
gets0=$(metric 'kvd_request_duration_seconds_count{method="Get"}')
kvctl put metric-probe 1 >/dev/null
kvctl get metric-probe >/dev/null
kvctl get metric-probe >/dev/null
scrape
expect "kvd_requests_total Put OK after a put" "$((puts0 + 1))" \
	"$(metric 'kvd_requests_total{method="Put",status="OK"}')"
expect "kvd_request_duration_seconds_count Get after two gets" "$((${gets0:-0} + 2))" \
	"$(metric 'kvd_request_duration_seconds_count{method="Get"}')"
expect "kvd_tenant_state of orders" 1 "$(metric 'kvd_tenant_state{tenant="orders",state="active"}')"
expect "kvd_tenant_keys of orders" 3 "$(metric 'kvd_tenant_keys{tenant="orders"}')"
[ "$(metric kvd_sent_bytes_total)" -gt 0 ] || die "kvd_sent_bytes_total is not above 0"
[ "$(metric 'kvd_tenant_syncs_total{tenant="default"}')" -gt 0 ] ||
	die "no fdatasync counted for the tenant default"

say "a C program built with pkg-config --cflags --libs kvclient"
flags=$(pkg-config --cflags --libs kvclient) || die "pkg-config kvclient"
# shellcheck disable=SC2086 # flags are words
cc -Wall -Wextra -Werror -o "$work/test-client" "$src/packaging/test-client.c" $flags ||
	die "building packaging/test-client.c with: $flags"
"$work/test-client" || die "test-client against the installed kvd"
static=$(pkg-config --static --libs kvclient) || die "pkg-config --static kvclient"
case "$static" in
*/*.so* | *libnng*) die "pkg-config --static --libs kvclient names a library file: $static" ;;
esac
expect "kvctl get from-c" "written by test-client" "$(kvctl get from-c)"

say "SIGTERM"
kill -TERM "$kvd_pid"
rc=0
wait "$kvd_pid" || rc=$?
kvd_pid=""
[ $rc -eq 0 ] || {
	cat "$work/kvd.log" >&2
	die "kvd exited $rc after SIGTERM"
}
rm -rf /run/kvd
bad=$(find /var/lib/kvd ! -user kvd | head -n 3)
[ -z "$bad" ] || die "not owned by kvd: $bad"

# ---- 3. remove, purge ------------------------------------------------------
say "apt-get remove"
# shellcheck disable=SC2086 # one word per package
apt-get remove -y -qq $pkgs >"$work/apt.log" 2>&1 || {
	cat "$work/apt.log" >&2
	die "apt-get remove"
}
[ ! -e /usr/sbin/kvd ] || die "/usr/sbin/kvd is still there after remove"
[ -d /var/lib/kvd/tenants/orders ] || die "remove deleted /var/lib/kvd/tenants/orders"
[ -f /etc/kvd/kvd.conf ] || die "remove deleted the conffile /etc/kvd/kvd.conf"
# Those without conffiles are gone already; apt would not find them.
left=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' $pkgs 2>/dev/null |
	awk '$2 != "un" { print $1 }')
say "apt-get purge" $left
# shellcheck disable=SC2086 # one word per package
apt-get purge -y -qq $left >"$work/apt.log" 2>&1 || {
	cat "$work/apt.log" >&2
	die "apt-get purge"
}
installed=0
[ ! -e /var/lib/kvd ] || die "purge left /var/lib/kvd"
[ ! -e /etc/kvd ] || die "purge left /etc/kvd"

# ---- 4. the RPM's files ----------------------------------------------------
rpms=$(ls "$out"/*.rpm 2>/dev/null) || die "no .rpm in $out"
version=$(rpm -qp --qf '%{VERSION}' "$out"/kvd-[0-9]*.rpm)
version_re=$(echo "$version" | sed 's/\./\\./g')
say "RPM files (version $version) against packaging/rpm/expected-files"
for f in $rpms; do
	rpm -qp --qf '[%{=NAME} %{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILENAMES}\n]' "$f"
done | grep -v ' /usr/lib/\.build-id' | sed -e "s|$version_re|@VERSION@|g" -e 's|\.gz$||' |
	LC_ALL=C sort >"$work/rpm-files"
grep -v '^#' "$src/packaging/rpm/expected-files" | LC_ALL=C sort >"$work/rpm-expected"
diff -u "$work/rpm-expected" "$work/rpm-files" || die "the RPM packages' files differ from packaging/rpm/expected-files (above)"

say "passed"
