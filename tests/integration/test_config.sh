#!/bin/sh
# test_config.sh — the shipped systemd/kvd.conf is accepted by kvd as it is and with every default uncommented, lists (as kvd.conf(5) does) every setting kvd knows, lines of any length work (a 255-byte token, a 3000-byte data_dir), and a typo, a bad value, an unknown section, a ninth listen line or a directory in place of the file is refused with exit 1 and one line naming what; kvd --check-config says ok or the error with its line (exit 0/1); refusals carry the "<3>" priority prefix when stderr is the journal.
#
# usage: test_config.sh KVD KVCTL SOURCE_ROOT   (meson passes them)
#
# Each kvd runs with the file under test plus --data-dir and --listen on a
# temporary directory (flags override the file), is polled with
# `kvctl health` a bounded number of times, then stopped with SIGTERM, which
# must give exit status 0. Prints every failed check; exits 1 if there was
# any.

set -u

KVD=${1:?usage: test_config.sh KVD KVCTL SOURCE_ROOT}
KVCTL=${2:?usage: test_config.sh KVD KVCTL SOURCE_ROOT}
SRC=${3:?usage: test_config.sh KVD KVCTL SOURCE_ROOT}
CONF=$SRC/systemd/kvd.conf
MAN=$SRC/docs/kvd.conf.5
CONFIG_C=$SRC/daemon/config.c

for f in "$KVD" "$KVCTL"; do
	if [ ! -x "$f" ]; then
		echo "FAIL: $f is not an executable"
		exit 1
	fi
done
for f in "$CONF" "$MAN" "$CONFIG_C"; do
	if [ ! -r "$f" ]; then
		echo "FAIL: $f is missing"
		exit 1
	fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvtest-config-XXXXXX") || exit 1
KVD_PID=
failures=0
checks=0

# shellcheck disable=SC2317 # run by the trap
cleanup() {
	if [ -n "$KVD_PID" ]; then
		kill -KILL "$KVD_PID" 2>/dev/null
		wait "$KVD_PID" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

fail() {
	failures=$((failures + 1))
	echo "FAIL: $*"
}

# serve NAME FILE [KVCTL-FLAG...]: kvd with FILE answers health, a put and
# a get (kvctl given the flags), and exits 0 on SIGTERM. With SERVE_DATA
# set, the file's data_dir is used (no --data-dir flag).
serve() {
	name=$1
	file=$2
	shift 2
	dir=$TMP/$name
	sock=ipc://$dir/kvd.sock
	mkdir -p "$dir"
	datadir="--data-dir=$dir/data"
	if [ -n "${SERVE_DATA:-}" ]; then
		datadir=
	fi
	# shellcheck disable=SC2086 # datadir is one word or none
	"$KVD" --config "$file" $datadir --listen "$sock" 2>"$dir/kvd.log" &
	KVD_PID=$!
	up=no
	tries=0
	# bounded readiness poll: at most 100 tries (kvctl fails at once
	# while nothing listens)
	while [ $tries -lt 100 ]; do
		if "$KVCTL" -e "$sock" --timeout 1000 health >/dev/null 2>&1; then
			up=yes
			break
		fi
		if ! kill -0 "$KVD_PID" 2>/dev/null; then
			break
		fi
		tries=$((tries + 1))
		sleep 0.1
	done
	checks=$((checks + 1))
	if [ $up != yes ]; then
		fail "$name: kvd did not answer health after $tries tries"
		sed 's/^/    /' "$dir/kvd.log"
		kill -KILL "$KVD_PID" 2>/dev/null
		wait "$KVD_PID" 2>/dev/null
		KVD_PID=
		return
	fi
	checks=$((checks + 1))
	if ! "$KVCTL" -e "$sock" "$@" put greeting hello >/dev/null 2>"$dir/err" ||
		[ "$("$KVCTL" -e "$sock" "$@" get greeting 2>>"$dir/err")" != hello ]; then
		fail "$name: put/get: $(cat "$dir/err")"
	fi
	kill -TERM "$KVD_PID"
	wait "$KVD_PID"
	status=$?
	KVD_PID=
	checks=$((checks + 1))
	if [ $status -ne 0 ]; then
		fail "$name: kvd exited $status after SIGTERM, want 0"
		sed 's/^/    /' "$dir/kvd.log"
	fi
}

# refuse NAME FILE PATTERN: kvd with FILE exits 1 with one line on stderr
# that contains PATTERN (a fixed string).
refuse() {
	name=$1
	file=$2
	pattern=$3
	dir=$TMP/$name
	mkdir -p "$dir"
	"$KVD" --config "$file" --data-dir "$dir/data" --listen "ipc://$dir/kvd.sock" \
		>"$dir/out" 2>"$dir/err" &
	KVD_PID=$!
	# kvd refuses before it starts anything; one that takes the file
	# anyway is stopped after a bounded wait (100 tries)
	tries=0
	while kill -0 "$KVD_PID" 2>/dev/null && [ $tries -lt 100 ]; do
		tries=$((tries + 1))
		sleep 0.1
	done
	if kill -0 "$KVD_PID" 2>/dev/null; then
		kill -TERM "$KVD_PID"
	fi
	wait "$KVD_PID"
	status=$?
	KVD_PID=
	checks=$((checks + 1))
	if [ $status -ne 1 ]; then
		fail "$name: exit $status, want 1"
	fi
	lines=$(wc -l <"$dir/err")
	checks=$((checks + 1))
	if [ "$lines" -ne 1 ]; then
		fail "$name: $lines lines on stderr, want 1:"
		sed 's/^/    /' "$dir/err"
	fi
	checks=$((checks + 1))
	if ! grep -qF -- "$pattern" "$dir/err"; then
		fail "$name: stderr lacks '$pattern': $(cat "$dir/err")"
	fi
	checks=$((checks + 1))
	if [ -s "$dir/out" ]; then
		fail "$name: something on stdout: $(cat "$dir/out")"
	fi
}

# 1. The file as shipped: everything commented out, kvd runs on defaults.
serve shipped "$CONF"

# 2. Every setting uncommented with the default the file states.
sed -E 's/^#([a-z_]+ =)/\1/' "$CONF" >"$TMP/uncommented.conf"
n=$(grep -cE '^[a-z_]+ =' "$TMP/uncommented.conf")
checks=$((checks + 1))
if [ "$n" -lt 20 ]; then
	fail "only $n settings found in $CONF (each as '#key = default')"
fi
serve uncommented "$TMP/uncommented.conf"

# 3. Every setting config.c knows is in the shipped file and in kvd.conf(5);
# and the file shows nothing config.c does not know.
known=$(grep -oE '!strcmp\(k, "[a-z_]+"\)' "$CONFIG_C" | sed -E 's/.*"([a-z_]+)".*/\1/' | sort -u)
checks=$((checks + 1))
if [ -z "$known" ]; then
	fail "no settings found in $CONFIG_C"
fi
for k in $known; do
	checks=$((checks + 1))
	grep -qE "^#$k =( |\$)" "$CONF" || fail "setting '$k' is not in $CONF as '#$k = default'"
	checks=$((checks + 1))
	grep -qE "^\\.BI $k " "$MAN" || fail "setting '$k' is not described in $MAN"
done
grep -oE '^#[a-z_]+ =' "$CONF" | sed -E 's/^#([a-z_]+) =/\1/' >"$TMP/shown"
while read -r k; do
	checks=$((checks + 1))
	echo "$known" | grep -qx "$k" || fail "$CONF shows '$k', which kvd does not know"
done <"$TMP/shown"

# 4. A typo in a setting's name: refused, naming it and its line.
line=$(grep -nE '^#workers = ' "$CONF" | cut -d: -f1)
sed -E 's/^#workers = .*/wrokers = 2/' "$CONF" >"$TMP/typo.conf"
refuse typo "$TMP/typo.conf" "line $line: unknown setting 'kvd.wrokers'"

# 5. A typo in a section's name.
sed -E 's/^\[tenant-defaults\]/[tenant-default]/; s/^#history = /history = /' "$CONF" \
	>"$TMP/section.conf"
refuse section "$TMP/section.conf" "unknown section '[tenant-default]'"

# 6. A value that is not one: refused, naming the line.
line=$(grep -nE '^#idle_timeout = ' "$CONF" | cut -d: -f1)
sed -E 's/^#idle_timeout = .*/idle_timeout = 5 minutes/' "$CONF" >"$TMP/value.conf"
refuse value "$TMP/value.conf" "line $line: bad value '5 minutes'"

# 7. A comment after a value with '#' is part of the value (kvd.conf(5)).
sed -E 's/^#log_level = .*/log_level = debug # more/' "$CONF" >"$TMP/hash.conf"
refuse hash-comment "$TMP/hash.conf" "bad value 'debug # more'"

# 8. A combination that cannot hold.
sed -E 's/^#max_value_size = .*/max_value_size = 64M/' "$CONF" >"$TMP/combo.conf"
refuse combination "$TMP/combo.conf" "max_message_size must leave room"

# 9. Lines of any length: a token of 255 bytes (the most there may be), a
# data_dir of about 3000 bytes, a comment of 1000.
token=$(printf '%0255d' 0 | tr 0 t)
long=$TMP/long/$(printf '%0200d' 0 | tr 0 d)
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do
	long=$long/$(printf '%0200d' "$i")
done
mkdir -p "$long"
{
	echo "# $(printf '%01000d' 0)"
	echo "[kvd]"
	echo "token = $token"
	echo "data_dir = $long/data"
} >"$TMP/long.conf"
SERVE_DATA=1 serve long-lines "$TMP/long.conf" --token "$token"
checks=$((checks + 1))
if [ ! -d "$long/data/tenants/default" ]; then
	fail "long-lines: the data_dir of ${#long} bytes was not used"
fi
{
	echo "[kvd]"
	echo "token = ${token}t"
} >"$TMP/token256.conf"
refuse token-256 "$TMP/token256.conf" "line 2: 'token' is 256 bytes, at most 255 allowed"

# 10. A directory given as the settings file.
mkdir -p "$TMP/dir.conf"
refuse directory "$TMP/dir.conf" "dir.conf: a directory, not a settings file"

# 11. A ninth listen line names the limit.
for i in 1 2 3 4 5 6 7 8 9; do
	echo "listen = kv+ipc://$TMP/x$i.sock"
done >"$TMP/listen9.conf"
refuse listen-9 "$TMP/listen9.conf" "line 9: at most 8 listen addresses"

# 12. A tenant setting under [kvd] says where it belongs.
printf '[kvd]
history = 5
' >"$TMP/misplaced.conf"
refuse misplaced "$TMP/misplaced.conf" \
	"line 2: unknown setting 'kvd.history' (it belongs under [tenant-defaults])"

# 13. An unknown section is refused even when empty.
printf '[kvd]
[bogus]
' >"$TMP/bogus.conf"
refuse empty-section "$TMP/bogus.conf" "line 2: unknown section '[bogus]'"

# 14. What kvd.conf(5) says of values: numbers are digits only ("5m" is
# refused), workers at most 1024, max_queue at least 1, max_message_size at
# most 4G, control bytes shown as such.
printf 'idle_timeout = 5m
' >"$TMP/suffix.conf"
refuse number-suffix "$TMP/suffix.conf" "line 1: bad value '5m' for 'idle_timeout'"
printf '[tenant-defaults]\ncompression = zstd:23\n' >"$TMP/codec.conf"
refuse compression "$TMP/codec.conf" "line 2: bad value 'zstd:23' for 'compression'"
printf '[tenant-defaults]\nevict = lru\n' >"$TMP/evict.conf"
refuse evict "$TMP/evict.conf" "line 2: bad value 'lru' for 'evict'"
printf '[tenant-defaults]\nmax_bytes = 1G\n' >"$TMP/maxbytes.conf"
refuse max-bytes "$TMP/maxbytes.conf" "line 2: bad value '1G' for 'max_bytes'"
printf 'workers = 4294967295
' >"$TMP/workers.conf"
refuse workers "$TMP/workers.conf" "workers must be 0 (one per CPU) .. 1024"
printf 'max_queue = 0
' >"$TMP/queue.conf"
refuse max-queue "$TMP/queue.conf" "max_queue must be at least 1"
printf 'max_message_size = 16000T
' >"$TMP/msgsize.conf"
refuse message-size "$TMP/msgsize.conf" "max_message_size must be at most 4G"
printf 'workers = \001\002\n' >"$TMP/control.conf"
refuse control-bytes "$TMP/control.conf" "bad value '\x01\x02' for 'workers'"

# 15. kvd --check-config [FILE] says "ok" (exit 0) for a sound file, the
# error with its line (exit 1) for a bad one, and takes the flags into
# account as kvd would at start.
# check_config NAME WANT-STATUS PATTERN ARGS...: kvd --check-config ARGS
# exits WANT-STATUS with one line containing PATTERN (stdout for 0, stderr
# otherwise) and nothing on the other stream.
check_config() {
	name=$1
	want=$2
	pattern=$3
	shift 3
	dir=$TMP/check-$name
	mkdir -p "$dir"
	"$KVD" --check-config "$@" >"$dir/out" 2>"$dir/err"
	status=$?
	checks=$((checks + 1))
	[ $status -eq "$want" ] || fail "check-config $name: exit $status, want $want"
	said=$dir/out
	quiet=$dir/err
	if [ "$want" -ne 0 ]; then
		said=$dir/err
		quiet=$dir/out
	fi
	checks=$((checks + 1))
	if [ "$(wc -l <"$said")" -ne 1 ] || ! grep -qF -- "$pattern" "$said"; then
		fail "check-config $name: want one line with '$pattern', got: $(cat "$said")"
	fi
	checks=$((checks + 1))
	[ ! -s "$quiet" ] || fail "check-config $name: unexpected output: $(cat "$quiet")"
}
check_config shipped 0 "$CONF: ok" "$CONF"
check_config shipped-eq 0 "$CONF: ok" "--config=$CONF"
check_config uncommented 0 "uncommented.conf: ok" "$TMP/uncommented.conf"
line=$(grep -nE '^#workers = ' "$CONF" | cut -d: -f1)
check_config typo 1 "typo.conf line $line: unknown setting 'kvd.wrokers'" "$TMP/typo.conf"
check_config typo-eq 1 "line $line: unknown setting 'kvd.wrokers'" "--check-config=$TMP/typo.conf"
check_config combination 1 "combo.conf: max_message_size must leave room" "$TMP/combo.conf"
check_config flags 1 "listen address 'bogus://x'" "$CONF" --listen bogus://x
check_config missing 1 "$TMP/none.conf: No such file or directory" "$TMP/none.conf"
printf '[kvd]\nmetrics_listen = 127.0.0.1\n' >"$TMP/metrics.conf"
check_config metrics-listen 1 "metrics_listen '127.0.0.1': expected HOST:PORT" \
	"$TMP/metrics.conf"
# cluster mode (docs/CLUSTER.md): the combinations checked before etcd is asked
printf '[kvd]\netcd = http://127.0.0.1:2379\n' >"$TMP/etcd-alone.conf"
check_config etcd-without-cluster 1 "etcd needs cluster" "$TMP/etcd-alone.conf"
printf '[kvd]\ncluster = c\nnode_id = n1\n' >"$TMP/cluster-alone.conf"
check_config cluster-without-etcd 1 "cluster, node_id and advertise need etcd" \
	"$TMP/cluster-alone.conf"
printf '[kvd]\netcd = http://127.0.0.1:2379\ncluster = c\nlease_ttl = 1\n' >"$TMP/ttl.conf"
check_config lease-ttl 1 "lease_ttl must be 2..3600" "$TMP/ttl.conf"

# 16. When stderr is the journal (JOURNAL_STREAM names its device and inode,
# as systemd sets it), a refusal carries the priority prefix journald reads
# (sd-daemon's SD_ERR, "<3>"); on any other stderr it does not.
# journal NAME PATTERN ARGS...: kvd ARGS, stderr a file JOURNAL_STREAM
# names, exits non-zero with "<3>kvd: " and PATTERN on its one line.
journal() {
	name=$1
	pattern=$2
	shift 2
	err=$TMP/journal-$name.err
	: >"$err"
	JOURNAL_STREAM=$(stat -c '%d:%i' "$err") "$KVD" "$@" 2>>"$err" >/dev/null
	status=$?
	checks=$((checks + 1))
	[ $status -ne 0 ] || fail "journal $name: exit 0"
	checks=$((checks + 1))
	if [ "$(wc -l <"$err")" -ne 1 ] || ! grep -q '^<3>kvd: ' "$err" ||
		! grep -qF -- "$pattern" "$err"; then
		fail "journal $name: want one '<3>kvd: ' line with '$pattern', got: $(cat "$err")"
	fi
}
journal bad-option "unknown option '--bogus'" --bogus
journal no-argument "option '--listen' needs an argument" --listen
journal bad-file "unknown setting 'kvd.wrokers'" --config "$TMP/typo.conf" \
	--data-dir "$TMP/journal-data" --listen "ipc://$TMP/journal.sock"
journal check-config "unknown setting 'kvd.wrokers'" --check-config "$TMP/typo.conf"
mkdir -p "$TMP/journal-locked"
journal data-dir "cannot open data directory" --data-dir "$TMP/journal-locked/x/y" \
	--listen "ipc://$TMP/journal.sock"
JOURNAL_STREAM=1:1 "$KVD" --bogus 2>"$TMP/journal-other.err"
checks=$((checks + 1))
grep -q '^kvd: unknown option' "$TMP/journal-other.err" ||
	fail "with JOURNAL_STREAM naming another file: $(cat "$TMP/journal-other.err")"

if [ $failures -gt 0 ]; then
	echo "$failures of $checks checks failed"
	exit 1
fi
echo "all $checks checks passed"
exit 0
