#!/bin/sh
# test_no_hooks.sh — the kvd that is installed carries no test hook: started
# with every KVD_TEST_* variable set, it answers at once and logs no test
# mode; kvd-test, given the same, does (so the check can fail).
set -eu
kvd=$1 kvd_test=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvtest-nohooks.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT INT TERM

# run BIN: starts BIN with the hooks' variables, waits for its log to say it
# is listening (bounded), stops it; its log in $dir/log
run() {
	rm -rf "$dir/data" "$dir/log"
	: >"$dir/kvd.conf" # its own (empty) settings, not /etc/kvd/kvd.conf
	KVD_TEST_REPLY_DELAY_MS=1 KVD_TEST_WORKER_DELAY_MS=1 KVD_TEST_COMPACT_HOLD_MS=1 KVD_TEST_WRITE_DELAY_MS=1 \
		KVD_TEST_FAULT_FILE="$dir/fault" KVD_TEST_MERGE_MIN_BYTES=1 \
		"$1" --config "$dir/kvd.conf" --data-dir "$dir/data" --listen "kv+ipc://$dir/kv.sock" --log-level debug \
		>"$dir/log" 2>&1 &
	pid=$!
	i=0
	while [ ! -S "$dir/kv.sock" ] && [ $i -lt 300 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	[ -S "$dir/kv.sock" ] || { echo "FAIL: $1 did not start"; cat "$dir/log"; exit 1; }
	kill -TERM "$pid"
	wait "$pid"
	pid=
}

run "$kvd_test"
grep -q "test mode" "$dir/log" || { echo "FAIL: kvd-test logged no test mode"; cat "$dir/log"; exit 1; }
run "$kvd"
if grep -q "test mode" "$dir/log"; then
	echo "FAIL: the installed kvd took a test hook:"
	grep "test mode" "$dir/log"
	exit 1
fi
if grep -q "KVD_TEST_" "$kvd"; then
	echo "FAIL: the installed kvd names KVD_TEST_ variables"
	exit 1
fi
echo "1 passed, 0 failed"
