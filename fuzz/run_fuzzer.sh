#!/bin/sh
# run_fuzzer.sh — the fuzz suite's short run of one target: every input in
# its regressions directory once, then its seed corpus and SECONDS of
# fuzzing. Fails on any crash, leak, timeout or sanitizer report; the input
# that did it is kept in ARTIFACT_DIR. New corpus entries go to a scratch
# directory, never into the source tree.
#
#   run_fuzzer.sh FUZZER SECONDS SEED_DIR REGRESSION_DIR ARTIFACT_DIR [libFuzzer flags…]
set -eu
fuzzer=$1 seconds=$2 seeds=$3 regressions=$4 artifacts=$5
shift 5

work=$(mktemp -d "${TMPDIR:-/tmp}/kvd-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$artifacts"
# UBSan findings are fatal (the build says so too); leaks are reported.
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS ASAN_OPTIONS

fail() {
	echo "run_fuzzer: $1 failed; the input that did it is in $artifacts/" >&2
	echo "run_fuzzer: reproduce with: $fuzzer $artifacts/<crash-…>" >&2
	exit 1
}

if [ -d "$regressions" ]; then
	inputs=$(find "$regressions" -type f ! -name 'README*' | sort)
	if [ -n "$inputs" ]; then
		echo "run_fuzzer: $(echo "$inputs" | wc -l) regression input(s)"
		# shellcheck disable=SC2086 # one file name per word
		"$fuzzer" "$@" -artifact_prefix="$artifacts/" $inputs || fail "$(basename "$fuzzer") on a regression input"
	fi
fi

"$fuzzer" "$@" -artifact_prefix="$artifacts/" -max_total_time="$seconds" \
	"$work" "$seeds" || fail "$(basename "$fuzzer")"
