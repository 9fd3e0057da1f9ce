#!/bin/sh
# run_long.sh — a long libFuzzer run of every target, one after another:
# SECONDS each (default 600), corpora kept in OUT/corpus-TARGET (default
# /tmp/kvd-fuzz-long), each target's log in OUT/TARGET.log, anything found
# in OUT/art-TARGET/. Prints one line per target: executions, coverage and
# whether it ended clean. Exit status 1 when any target found something.
#
#   fuzz/run_long.sh [SECONDS] [OUT]     (after: CC=clang meson setup build-fuzz -Dfuzz=true -Db_lundef=false && ninja -C build-fuzz)
set -u
seconds=${1:-600}
out=${2:-/tmp/kvd-fuzz-long}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-fuzz}
status=0

UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS ASAN_OPTIONS
mkdir -p "$out"
for t in request reply record hint commit tenant config; do
	bin="$build/fuzz/fuzz_$t"
	[ -x "$bin" ] || { echo "run_long: no $bin (build with -Dfuzz=true)" >&2; exit 2; }
	max=16384
	case $t in commit | tenant | config) max=4096 ;; esac
	set -- -max_len=$max -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
		-artifact_prefix="$out/art-$t/" -max_total_time="$seconds"
	[ -f "$root/fuzz/$t.dict" ] && set -- "$@" -dict="$root/fuzz/$t.dict"
	mkdir -p "$out/corpus-$t" "$out/art-$t"
	"$bin" "$@" "$out/corpus-$t" "$root/fuzz/corpus/$t" > "$out/$t.log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log")
	cov=$(grep -o 'cov: [0-9]*' "$out/$t.log" | tail -1)
	found=$(find "$out/art-$t" -type f | wc -l)
	if [ $rc = 0 ] && [ "$found" = 0 ]; then
		echo "$t: ${runs:-?} runs, ${cov:-cov: ?}, clean"
	else
		echo "$t: ${runs:-?} runs, ${cov:-cov: ?}, FOUND something (exit $rc, $found file(s) in $out/art-$t)"
		status=1
	fi
done
exit $status
