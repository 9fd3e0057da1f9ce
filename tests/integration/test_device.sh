#!/bin/sh
# test_device.sh — kvd on a block device, on real loop devices and on a regular file used as one: kvd --format refuses a device carrying ext4 (naming it) unless --force; a formatted device serves put/get/del/versions/scan through kvctl and keeps them across a restart (data_dir untouched); a second kvd on the same device and --check while one serves it are refused after waiting 5 s for its lock (--format at once); a zeroed block 0 is reported by kvd --check and kvd still opens through the end copy of the superblock; a full device answers RESOURCE_EXHAUSTED, still reads, and writes again after deletes and kvctl compact; kvd --check of a clean device exits 0; a kvd SIGKILLed while writing is followed at once by a new kvd or kvd --check, which wait for the lock the dead kvd's I/O teardown still holds (never "in use"), --check finding no damage (the open segment a note) and the new kvd logging the open segment sealed, not a torn write.
#
# usage: test_device.sh KVD KVCTL   (meson passes the built binaries)
#
# Every device lives in a temporary directory: a sparse file, attached with
# `losetup --find --show --direct-io=on --sector-size 4096` (loop mode) or
# used as it is (file mode); every loop device attached is detached by the
# exit trap, every kvd started is killed by it. Each kvd has its own empty
# settings file and a kv+ipc:// socket in the temporary directory, and is
# polled with `kvctl health` a bounded number of times (at most 150 tries,
# none once it has exited). Prints every failed check and exits 1 if there
# was any; exits 77 (skipped, saying why) only when not run as root or
# when losetup or the loop driver is missing — the loop cases need both.

set -u

KVD=${1:?usage: test_device.sh KVD KVCTL}
KVCTL=${2:?usage: test_device.sh KVD KVCTL}

for f in "$KVD" "$KVCTL"; do
	if [ ! -x "$f" ]; then
		echo "FAIL: $f is not an executable"
		exit 1
	fi
done
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: loop devices need root (this runs as uid $(id -u))"
	exit 77
fi
if ! command -v losetup >/dev/null 2>&1; then
	echo "SKIP: losetup (util-linux, mount package) is not installed"
	exit 77
fi
if [ ! -e /dev/loop-control ]; then
	echo "SKIP: no /dev/loop-control: the loop driver is not available here"
	exit 77
fi
if ! command -v mkfs.ext4 >/dev/null 2>&1; then
	echo "FAIL: mkfs.ext4 (e2fsprogs, scripts/deps.sh) is not installed"
	exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvtest-device-XXXXXX") || exit 1
LOOPS=
KVD_PID=
KVD2_PID=
HOLDER=
failures=0
checks=0
TAB=$(printf '\t')

# shellcheck disable=SC2317 # run by the trap
cleanup() {
	for pid in $KVD_PID $KVD2_PID $HOLDER; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	for l in $LOOPS; do
		losetup -d "$l" 2>/dev/null || echo "WARNING: could not detach $l"
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

fail() {
	failures=$((failures + 1))
	echo "FAIL: [$MODE] $*"
}

# run WANT_EXIT WHAT CMD...: CMD with stdout in $TMP/out and stderr in
# $TMP/err; fails the check unless it exits WANT_EXIT. 0 if it did.
run() {
	want=$1
	what=$2
	shift 2
	checks=$((checks + 1))
	"$@" >"$TMP/out" 2>"$TMP/err"
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "$what: exit $got, want $want; stdout: $(head -c 600 "$TMP/out"); stderr: $(head -c 600 "$TMP/err")"
		return 1
	fi
	return 0
}

# err_one_line WHAT PATTERN...: stderr of the last run is one line holding
# each (case-insensitive, extended) PATTERN.
err_one_line() {
	what=$1
	shift
	checks=$((checks + 1))
	if [ "$(wc -l <"$TMP/err")" -ne 1 ]; then
		fail "$what: want one line on stderr, got: $(cat "$TMP/err")"
		return
	fi
	for p in "$@"; do
		grep -Eqi -- "$p" "$TMP/err" || fail "$what: stderr lacks /$p/: $(cat "$TMP/err")"
	done
}

# out_has WHAT ERE: a line of the last run's stdout matches ERE.
out_has() {
	checks=$((checks + 1))
	grep -Eq -- "$2" "$TMP/out" || fail "$1: no line matches /$2/ in: $(head -c 800 "$TMP/out")"
}

# out_is WHAT TEXT: stdout of the last run is exactly TEXT (no newline).
out_is() {
	checks=$((checks + 1))
	printf '%s' "$2" >"$TMP/want"
	cmp -s "$TMP/want" "$TMP/out" || fail "$1: got '$(head -c 300 "$TMP/out")', want '$2'"
}

# versions_are WHAT "V1 V2 ": the last run printed these versions, in order.
versions_are() {
	checks=$((checks + 1))
	got=$(cut -f1 "$TMP/out" | tr '\n' ' ')
	[ "$got" = "$2" ] || fail "$1: versions '$got', want '$2' ($(cat "$TMP/out"))"
}

# new_device NAME SIZE: a device of SIZE (truncate's units) in $DEV: a
# sparse file NAME.img, attached to a loop device in loop mode.
new_device() {
	img=$TMP/$MODE-$1.img
	rm -f "$img"
	truncate -s "$2" "$img" || {
		echo "FAIL: truncate -s $2 $img"
		exit 1
	}
	if [ "$MODE" = file ]; then
		DEV=$img
		return
	fi
	if ! DEV=$(losetup --find --show --direct-io=on --sector-size 4096 "$img" 2>"$TMP/losetup.err"); then
		echo "FAIL: losetup --find --show --direct-io=on --sector-size 4096 $img: $(cat "$TMP/losetup.err")"
		exit 1
	fi
	LOOPS="$LOOPS $DEV"
}

# zero_block0: zeros over the first 4096 bytes of $DEV (O_DIRECT on a loop
# device, as the engine writes it).
zero_block0() {
	if [ "$MODE" = loop ]; then
		dd if=/dev/zero of="$DEV" bs=4096 count=1 oflag=direct conv=notrunc status=none
	else
		dd if=/dev/zero of="$DEV" bs=4096 count=1 conv=notrunc status=none
	fi
}

SOCK=
# kv ARGS...: kvctl against the kvd on $SOCK.
kv() {
	"$KVCTL" -e "$SOCK" "$@"
}

# start NAME: kvd --device $DEV on its own socket (and an empty settings
# file), waited for with `kvctl health`; its log in $TMP/NAME.log. Fails
# the check and returns 1 when it does not come up.
start() {
	name=$1
	SOCK=kv+ipc://$TMP/$MODE-kv.sock
	: >"$TMP/empty.conf"
	"$KVD" --config "$TMP/empty.conf" --device "$DEV" --data-dir "$TMP/$MODE-no-data" \
		--listen "$SOCK" --workers 2 >"$TMP/$name.out" 2>"$TMP/$name.log" &
	KVD_PID=$!
	tries=0
	checks=$((checks + 1))
	until kv --timeout 2000 health >/dev/null 2>&1; do
		tries=$((tries + 1))
		if ! kill -0 "$KVD_PID" 2>/dev/null || [ "$tries" -ge 150 ]; then
			fail "$name: kvd on $DEV did not answer health after $tries tries; its log:"
			sed 's/^/    /' "$TMP/$name.log"
			kill -KILL "$KVD_PID" 2>/dev/null
			wait "$KVD_PID" 2>/dev/null
			KVD_PID=
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# stop NAME: SIGTERM to the kvd, which must exit 0 (a watchdog kills one
# that hangs after 30 s).
stop() {
	[ -n "$KVD_PID" ] || return
	kill -TERM "$KVD_PID"
	(sleep 30 && kill -KILL "$KVD_PID") >/dev/null 2>&1 &
	watchdog=$!
	wait "$KVD_PID"
	status=$?
	KVD_PID=
	kill "$watchdog" 2>/dev/null
	wait "$watchdog" 2>/dev/null
	checks=$((checks + 1))
	if [ "$status" -ne 0 ]; then
		fail "$1: kvd exited $status after SIGTERM, want 0; its log:"
		tail -n 40 "$TMP/$1.log" | sed 's/^/    /'
	fi
}

# refused NAME PATTERN...: a (second) kvd on $DEV (on another socket) exits
# non-zero on its own, with one line naming PATTERNs; it is killed if it is
# still up after 150 tries.
refused() {
	name=$1
	shift
	refused_status "$name" ""
	err_one_line "$name" "$@"
}

# refused_status NAME [WANT]: a (second) kvd on $DEV (on another socket)
# exits non-zero on its own (WANT: with that status); its stdout and stderr
# in $TMP/out and $TMP/err; it is killed if it is still up after 150 tries.
refused_status() {
	name=$1
	want=$2
	: >"$TMP/empty.conf"
	"$KVD" --config "$TMP/empty.conf" --device "$DEV" --listen "kv+ipc://$TMP/$MODE-kv2.sock" \
		>"$TMP/out" 2>"$TMP/err" &
	KVD2_PID=$!
	tries=0
	while kill -0 "$KVD2_PID" 2>/dev/null && [ $tries -lt 150 ]; do
		tries=$((tries + 1))
		sleep 0.1
	done
	kill -KILL "$KVD2_PID" 2>/dev/null
	wait "$KVD2_PID"
	status=$?
	KVD2_PID=
	checks=$((checks + 1))
	if [ "$status" -eq 0 ] || [ "$status" -ge 128 ]; then
		fail "$name: the second kvd exited $status (killed: it served), want a refusal"
	elif [ -n "$want" ] && [ "$status" -ne "$want" ]; then
		fail "$name: the second kvd exited $status, want $want"
	fi
}

# ms: milliseconds of a monotonic-enough clock (GNU date).
ms() {
	echo $(($(date +%s%N) / 1000000))
}

# err_wait_then_refusal WHAT T0 PATTERN...: stderr of the last run is two
# lines, the notice that kvd waits for the device's lock, then the refusal
# naming each PATTERN; and the run ended after the wait (5 s) and within
# 5 s more of it (T0: ms when it started).
err_wait_then_refusal() {
	what=$1
	t0=$2
	shift 2
	took=$(($(ms) - t0))
	checks=$((checks + 1))
	if [ "$(wc -l <"$TMP/err")" -ne 2 ]; then
		fail "$what: want two lines on stderr (waiting, refused), got: $(cat "$TMP/err")"
		return
	fi
	head -n 1 "$TMP/err" | grep -Eq -- "is locked: waiting up to 5 s" ||
		fail "$what: the first line does not say it waits for the lock: $(cat "$TMP/err")"
	for p in "$@"; do
		tail -n 1 "$TMP/err" | grep -Eqi -- "$p" ||
			fail "$what: the refusal lacks /$p/: $(cat "$TMP/err")"
	done
	checks=$((checks + 1))
	if [ "$took" -lt 4900 ] || [ "$took" -gt 10000 ]; then
		fail "$what: refused after $took ms, want the 5 s wait (and at most 5 s more)"
	fi
}

# writers N PREFIX: N shell loops putting 16K values under keys PREFIX-W-I
# to tenant t1 until a put fails, $TMP/stop exists or 400 puts each; their
# pids in WRITERS.
writers() {
	WRITERS=
	rm -f "$TMP/stop"
	head -c 16384 /dev/urandom >"$TMP/val16k"
	w=0
	while [ $w -lt "$1" ]; do
		w=$((w + 1))
		(
			i=0
			while [ $i -lt 400 ] && [ ! -e "$TMP/stop" ] &&
				"$KVCTL" -e "$SOCK" --timeout 2000 -t t1 put "$2-$w-$i" - <"$TMP/val16k" >/dev/null 2>&1; do
				i=$((i + 1))
			done
		) &
		WRITERS="$WRITERS $!"
	done
}

# ---- one pass: MODE is loop (real loop devices) or file (a regular file) ----

suite() {
	MODE=$1

	# (a) A device carrying ext4 is refused, naming it; --force formats it.
	new_device fs 64M
	run 0 "mkfs.ext4" mkfs.ext4 -q -F "$DEV"
	run 1 "--format over ext4" "$KVD" --format "$DEV" --extent-size 1M
	err_one_line "--format over ext4" "ext4" "force"
	run 0 "--format --force over ext4" "$KVD" --format "$DEV" --extent-size 1M --force &&
		out_has "--format --force says so" "formatted"
	run 0 "--check after --format --force" "$KVD" --check "$DEV" &&
		out_has "--check's summary" "no damage$"
	run 2 "--format with a bad --extent-size" "$KVD" --format "$DEV" --extent-size 3M
	err_one_line "--extent-size 3M" "power of two"

	# (b) Format, serve, use every kvctl command, restart: all still there.
	new_device main 256M
	run 0 "--format" "$KVD" --format "$DEV" --extent-size 1M || return
	# (f) A fresh device checks clean.
	run 0 "--check a fresh device" "$KVD" --check "$DEV" &&
		out_has "--check's summary" "no damage$"
	start serve1 || return
	run 0 "tenant create" kv tenant create t1 --history 5
	run 0 "put 1" kv -t t1 put k1 one
	v1=$(cat "$TMP/out")
	run 0 "put 2" kv -t t1 put k1 two
	v2=$(cat "$TMP/out")
	run 0 "put k2" kv -t t1 put k2 gone
	run 0 "del k2" kv -t t1 del k2
	run 0 "put in default" kv put dk dv
	printf 'x%.0s' $(seq 1 5000) >"$TMP/big"
	run 0 "put 5000 bytes" sh -c "'$KVCTL' -e '$SOCK' -t t1 put big - <'$TMP/big'"
	run 0 "get" kv -t t1 get k1 && out_is "get the newest" two
	run 1 "get a deleted key" kv -t t1 get k2
	run 0 "get --version" kv -t t1 get k1 --version "$v1" && out_is "get --version" one
	run 0 "versions" kv -t t1 versions k1 && versions_are "versions" "$v2 $v1 "
	run 0 "scan" kv -t t1 scan --keys-only && out_is "scan" "big
k1
"
	run 0 "stats" kv -t t1 stats
	stop serve1

	run 0 "--check after a clean stop" "$KVD" --check "$DEV" &&
		out_has "--check's summary" "^[0-9]+ tenant\(s\), [0-9]+ extent\(s\) in use, [0-9]+ free, [0-9]+ records checked: no damage$"
	checks=$((checks + 1))
	[ -e "$TMP/$MODE-no-data" ] && fail "kvd on a device created its data_dir $TMP/$MODE-no-data"

	start serve2 || return
	run 0 "get after restart" kv -t t1 get k1 && out_is "get after restart" two
	run 0 "get --version after restart" kv -t t1 get k1 --version "$v1" &&
		out_is "get --version after restart" one
	run 1 "a deleted key stays deleted" kv -t t1 get k2
	run 0 "default's key after restart" kv get dk && out_is "default's key" dv
	run 0 "5000 bytes after restart" kv -t t1 get big &&
		{ cmp -s "$TMP/out" "$TMP/big" || fail "the 5000-byte value differs after restart"; }
	run 0 "tenant list after restart" kv tenant list &&
		out_has "tenant list" "^t1${TAB}(active|passive)$"
	run 0 "versions after restart" kv -t t1 versions k1 &&
		versions_are "versions after restart" "$v2 $v1 "
	if run 0 "a put after restart" kv -t t1 put k1 three; then
		checks=$((checks + 1))
		[ "$(cat "$TMP/out")" -gt "$v2" ] || fail "version after restart $(cat "$TMP/out") <= $v2"
	fi

	# (c) While it serves: a second kvd, --format (even --force) and --check
	# are refused.
	# A second kvd and --check wait 5 s for the lock, saying so, then refuse.
	t0=$(ms)
	refused_status "a second kvd on the device" 1
	err_wait_then_refusal "a second kvd on the device" "$t0" "in use" "another kvd holds its lock"
	run 1 "--format --force of a served device" "$KVD" --format "$DEV" --force
	err_one_line "--format of a served device" "in use|lock|busy|serving"
	t0=$(ms)
	run 2 "--check of a served device" "$KVD" --check "$DEV"
	err_wait_then_refusal "--check of a served device" "$t0" "in use by a running kvd"
	run 0 "still serving after the refusals" kv -t t1 get k1 && out_is "still serving" three
	stop serve2

	# (d) Block 0 zeroed: --check reports the damaged superblock copy; kvd
	# opens through the end copy.
	zero_block0
	run 1 "--check with block 0 zeroed" "$KVD" --check "$DEV"
	out_has "--check names superblock 0 as damaged" "^$DEV: superblock 0 at "
	out_has "--check's summary" "damage found$"
	start serve3 || return
	grep -q "one of its two superblock copies is damaged" "$TMP/serve3.log" ||
		fail "kvd started on a device with block 0 zeroed without a warning: $(cat "$TMP/serve3.log")"
	run 0 "get with block 0 zeroed" kv -t t1 get k1 && out_is "get with block 0 zeroed" three
	run 0 "put with block 0 zeroed" kv -t t1 put k3 v3
	stop serve3

	# (e) Full: a 64M device of 1M extents takes puts of 192K until
	# RESOURCE_EXHAUSTED; reads go on; deletes and a compact make room.
	new_device full 64M
	run 0 "--format a small device" "$KVD" --format "$DEV" --extent-size 1M || return
	start serve4 || return
	head -c 196608 /dev/urandom >"$TMP/val"
	i=0
	full=no
	# 64M holds at most 341 such values: 500 puts must hit the end
	while [ $i -lt 500 ]; do
		i=$((i + 1))
		if ! "$KVCTL" -e "$SOCK" -o json put "key$i" - <"$TMP/val" >"$TMP/out" 2>"$TMP/err"; then
			full=yes
			break
		fi
	done
	checks=$((checks + 1))
	if [ $full != yes ]; then
		fail "500 puts of 192K fit on a 64M device"
	else
		grep -q '"RESOURCE_EXHAUSTED"' "$TMP/out" ||
			fail "put $i on a full device: want RESOURCE_EXHAUSTED, got $(cat "$TMP/out" "$TMP/err")"
		checks=$((checks + 1))
		grep -Eqi 'space|full' "$TMP/out" ||
			fail "put $i on a full device: the message does not say the device is full: $(cat "$TMP/out")"
		checks=$((checks + 1))
		[ $i -gt 100 ] || fail "the 64M device was full after $((i - 1)) puts of 192K"
		run 0 "a read on a full device" kv get key1 &&
			{ cmp -s "$TMP/out" "$TMP/val" || fail "key1 differs on a full device"; }
		last=$((i - 1))
		run 0 "the last value written on a full device" kv get "key$last" &&
			{ cmp -s "$TMP/out" "$TMP/val" || fail "key$last differs on a full device"; }
		j=1
		while [ $j -lt "$last" ]; do
			run 0 "del key$j on a full device" kv del "key$j" || break
			j=$((j + 1))
		done
		run 0 "compact after the deletes" kv compact
		run 0 "a put after the compact" sh -c "'$KVCTL' -e '$SOCK' put again - <'$TMP/val'"
		for k in 1 2 3 4 5 6 7 8; do
			run 0 "put $k more after the compact" sh -c "'$KVCTL' -e '$SOCK' put more$k - <'$TMP/val'" ||
				break
		done
		run 0 "the key kept through the compact" kv get "key$last" &&
			{ cmp -s "$TMP/out" "$TMP/val" || fail "key$last differs after the compact"; }
		run 1 "a deleted key after the compact" kv get key1
	fi
	stop serve4
	run 0 "--check of the device that was full" "$KVD" --check "$DEV" &&
		out_has "--check's summary" "no damage$"

	# (g) SIGKILL while writes go on, then at once (as systemd's restart
	# would, but without its delay) a new kvd, or kvd --check: the lock the
	# killed kvd's io_uring teardown still holds is waited for, never
	# refused. --check finds no damage (the rest of the open segment's
	# extent is a note), and the new kvd logs the open segment sealed, not
	# a torn write.
	new_device crash 256M
	run 0 "--format the crash device" "$KVD" --format "$DEV" --extent-size 1M || return
	# First the wait itself, on a lock held for 1 s by flock(1) standing in
	# for a dead kvd's teardown: kvd --check and kvd wait, say so once, and
	# go on once it is free.
	for what in check serve; do
		flock -x "$DEV" -c "sleep 1" &
		HOLDER=$!
		tries=0
		while flock -n -s "$DEV" true && [ $tries -lt 100 ]; do
			tries=$((tries + 1))
			sleep 0.01
		done
		if [ "$what" = check ]; then
			t0=$(ms)
			run 0 "--check while the lock is held for 1 s" "$KVD" --check "$DEV" &&
				out_has "--check after the lock came free" "no damage$"
			took=$(($(ms) - t0))
			cp "$TMP/err" "$TMP/held.log"
		else
			t0=$(ms)
			start crash0 || return
			took=$(($(ms) - t0))
			cp "$TMP/crash0.log" "$TMP/held.log"
		fi
		wait "$HOLDER"
		checks=$((checks + 1))
		[ "$(grep -c "is locked: waiting up to 5 s" "$TMP/held.log")" -eq 1 ] ||
			fail "$what while the lock is held: want one line saying it waits, got: $(cat "$TMP/held.log")"
		checks=$((checks + 1))
		[ "$took" -lt 5000 ] || fail "$what while the lock is held for 1 s took $took ms"
	done
	run 0 "tenant create t1 on the crash device" kv tenant create t1
	round=0
	while [ $round -lt 6 ]; do
		round=$((round + 1))
		writers 3 "r$round"
		# until 30 puts of the round landed (or 20 s): writes go on now
		tries=0
		until [ "$(kv -t t1 scan --keys-only --prefix "r$round-" 2>/dev/null | wc -l)" -ge 30 ] ||
			[ $tries -ge 200 ]; do
			tries=$((tries + 1))
			sleep 0.1
		done
		kill -KILL "$KVD_PID"
		: >"$TMP/stop"
		wait "$KVD_PID" 2>/dev/null
		KVD_PID=
		if [ $((round % 2)) -eq 0 ]; then
			# --check at once: it waits for the lock, then finds no damage
			if run 0 "round $round: --check right after a SIGKILL" "$KVD" --check "$DEV"; then
				out_has "round $round: --check's summary" "no damage$"
				out_has "round $round: --check notes the open segment" \
					"^$DEV: note: tenant t1 [0-9a-f]{8}\.seg at [0-9]+: open \(not sealed\): [0-9]+ bytes of records"
			fi
			checks=$((checks + 1))
			grep -q "torn end" "$TMP/out" && fail "round $round: --check reports a torn end: $(cat "$TMP/out")"
			waits=$((waits + $(grep -c "is locked: waiting" "$TMP/err")))
		fi
		start "crash$round" || return
		for pid in $WRITERS; do
			wait "$pid"
		done
		checks=$((checks + 1))
		grep -q "in use" "$TMP/crash$round.log" &&
			fail "round $round: the restart says the device is in use: $(cat "$TMP/crash$round.log")"
		# the tenant is activated (and recovered) by its first request
		run 0 "round $round: a scan after the restart" kv -t t1 scan --keys-only --prefix "r$round-"
		checks=$((checks + 1))
		grep -q "segment [0-9a-f]\{8\} was left open: its records end at [0-9]" "$TMP/crash$round.log" ||
			fail "round $round: the restart does not log the open segment: $(cat "$TMP/crash$round.log")"
		checks=$((checks + 1))
		grep -q "torn write" "$TMP/crash$round.log" &&
			fail "round $round: the restart logs a torn write: $(cat "$TMP/crash$round.log")"
		waits=$((waits + $(grep -c "is locked: waiting" "$TMP/crash$round.log")))
	done
	stop crash6
	run 0 "--check of the crash device after a clean stop" "$KVD" --check "$DEV" &&
		out_has "--check's summary" "no damage$"
	echo "[$MODE] restarts and checks right after a SIGKILL that found the lock still held: $waits of 6"
}

waits=0
suite loop
waits=0
suite file

# Refusals that need no device of kvd's.
MODE=paths
: >"$TMP/empty.conf"
run 1 "--device that does not exist" "$KVD" --config "$TMP/empty.conf" --device "$TMP/nothing" \
	--listen "kv+ipc://$TMP/x.sock"
err_one_line "--device that does not exist" "$TMP/nothing" "does not exist"
run 1 "--device a directory" "$KVD" --config "$TMP/empty.conf" --device "$TMP" \
	--listen "kv+ipc://$TMP/x.sock"
err_one_line "--device a directory" "a directory, not a block device or a regular file"
run 1 "--check-config with a character device" "$KVD" --check-config "$TMP/empty.conf" \
	--device /dev/null
err_one_line "--check-config with a character device" "/dev/null is a character device"
printf '[kvd]\ndevice = %s\n' "$TMP/nothing" >"$TMP/device.conf"
run 1 "--check-config: device = a missing path" "$KVD" --check-config "$TMP/device.conf"
err_one_line "--check-config: device = a missing path" "device.conf: device .*nothing does not exist"
printf '[kvd]\ndevice_cache = 4K\n' >"$TMP/cache.conf"
run 1 "--check-config: device_cache too small" "$KVD" --check-config "$TMP/cache.conf"
err_one_line "--check-config: device_cache = 4K" "device_cache must be at least 1M"
run 2 "--force without --format" "$KVD" --force
err_one_line "--force without --format" "--format"
run 1 "--format of a missing path" "$KVD" --format "$TMP/nothing"
err_one_line "--format of a missing path" "does not exist"
# A device never formatted: kvd and --check refuse it, saying so.
DEV=$TMP/blank.img
truncate -s 16M "$DEV"
refused "kvd on a device never formatted" "not a kvd device" "kvd --format"
run 2 "--check of a device never formatted" "$KVD" --check "$DEV"
err_one_line "--check of a device never formatted" "not a kvd device"
run 2 "--extent-size 2G" "$KVD" --format "$DEV" --extent-size 2G
err_one_line "--extent-size 2G" "from 1M to 1G"

if [ "$failures" -gt 0 ]; then
	echo "$failures of $checks checks failed"
	exit 1
fi
echo "all $checks checks passed"
exit 0
