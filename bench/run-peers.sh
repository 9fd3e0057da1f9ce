#!/bin/sh
# run-peers.sh — the six peer experiments, kvd side by side with Redis,
# RocksDB, LevelDB and LMDB, written up in docs/BENCHMARKS.md with plots.
#
#   bench/run-peers.sh [--quick] [--only LIST] [--transport stream|nng]
#                      [--build DIR] [--no-build] [--kvbench PATH]
#                      [--kvd PATH] [--out DIR] [--keep] [--ycsb-seconds N]
#
# Experiments (--only 1,2,…; default all):
#   1  kvbench ycsb: YCSB A-F, 1M records, threads 1,4,16, kvd over ipc
#      (sync=interval, sync=always) against Redis over its Unix socket
#      (appendfsync everysec, always)
#   2  kvbench ycsb: the same workloads through the embedded engines: the
#      engine against RocksDB, LevelDB and LMDB (sync=none, interval)
#   3  kvbench versions: the newest m versions of a key, m = 1…32
#   4  kvbench durable: sync=always puts at 1, 4, 16, 64 clients
#   5  kvbench activate --keys 10000,100000,1000000,10000000
#   6  kvbench coldstart: a new process and k = 1…1000 operations
# The kvd that experiments 1, 3, 4 and 6 start listens on kv+ipc:// and
# kv+tcp:// (kvd's stream framing, libkvclient's default), or with
# --transport nng on nng's ipc:// and tcp://. Experiment 5 starts its own.
#
# What it does: installs what is missing (scripts/deps.sh for the build and
# the peers' libraries, plus redis-server, gnuplot-nox and jq), builds
# kvbench and kvd (ninja, unless --no-build), runs each experiment with
# --json in a directory of its own, stops every process it started (also
# on Ctrl-C), and regenerates, in BENCHMARKS.md, only the part between the
# "run-peers" markers of each experiment that ran (the rest of the file is
# kept as it is); plots go to plots/ beside it. The output directory is
# docs/ of this tree, or with --quick a scratch directory (the smoke run's
# numbers mean nothing and must not replace the real ones); --out sets it.
#
# --ycsb-seconds N: the longest a YCSB run phase of experiments 1 and 2
# lasts (kvbench ycsb --max-seconds; default 60). 30 takes about an hour
# off the full run.
#
# --quick: every experiment at smoke size (each kvbench's --quick), a
# minute or two in all. The full run takes about 3 to 3.5 hours on a
# 2-vCPU machine: experiment 1 about 110 min (72 YCSB runs, each at most
# 60 s after a 2 s warm-up, and 24 loads of 1M records by 16 threads), 2
# about 60 min (144 runs, most of them shorter), 3 about 4 min, 4 about 3
# min, 5 about 10 min (10M keys: a 1.5 GiB log), 6 about 1 min. Run it on a
# quiet machine.
#
# Exit status: 0 when every experiment ran and reported ok, 1 otherwise
# (the report is still written, with the failures in it), 2 for bad usage.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0
ONLY="1,2,3,4,5,6"
BUILD="$ROOT/build"
NO_BUILD=0
KVBENCH=""
KVD=""
OUT=""
KEEP=0
TRANSPORT=stream
YCSB_SECONDS=60

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--only) [ $# -ge 2 ] || { echo "run-peers.sh: --only needs a list" >&2; exit 2; }; ONLY=$2; shift ;;
	--build) [ $# -ge 2 ] || { echo "run-peers.sh: --build needs a directory" >&2; exit 2; }; BUILD=$2; shift ;;
	--no-build) NO_BUILD=1 ;;
	--kvbench) [ $# -ge 2 ] || { echo "run-peers.sh: --kvbench needs a path" >&2; exit 2; }; KVBENCH=$2; shift ;;
	--kvd) [ $# -ge 2 ] || { echo "run-peers.sh: --kvd needs a path" >&2; exit 2; }; KVD=$2; shift ;;
	--out) [ $# -ge 2 ] || { echo "run-peers.sh: --out needs a directory" >&2; exit 2; }; OUT=$2; shift ;;
	--keep) KEEP=1 ;;
	--ycsb-seconds)
		[ $# -ge 2 ] || { echo "run-peers.sh: --ycsb-seconds needs a number" >&2; exit 2; }
		case "$2" in ''|*[!0-9]*) echo "run-peers.sh: --ycsb-seconds is a whole number of seconds, not '$2'" >&2; exit 2 ;; esac
		[ "$2" -ge 1 ] || { echo "run-peers.sh: --ycsb-seconds is at least 1" >&2; exit 2; }
		YCSB_SECONDS=$2; shift ;;
	--transport)
		[ $# -ge 2 ] || { echo "run-peers.sh: --transport needs stream or nng" >&2; exit 2; }
		case "$2" in stream|nng) TRANSPORT=$2 ;; *) echo "run-peers.sh: --transport is stream or nng, not '$2'" >&2; exit 2 ;; esac
		shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run-peers.sh: unknown option '$1' (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done

for n in $(echo "$ONLY" | tr ',' ' '); do
	case "$n" in
	1|2|3|4|5|6) ;;
	*) echo "run-peers.sh: --only takes experiment numbers 1-6, not '$n'" >&2; exit 2 ;;
	esac
done
[ -n "$(echo "$ONLY" | tr -d ', ')" ] || { echo "run-peers.sh: --only is empty" >&2; exit 2; }
selected() { echo ",$ONLY," | grep -q ",$1,"; }

[ -n "$KVBENCH" ] || KVBENCH="$BUILD/bench/kvbench"
[ -n "$KVD" ] || KVD="$BUILD/daemon/kvd"
if [ -z "$OUT" ]; then
	if [ $QUICK = 1 ]; then
		OUT="${TMPDIR:-/tmp}/kvd-run-peers-quick"
		rm -rf "$OUT" # a fresh copy of docs/BENCHMARKS.md every time
	else
		OUT="$ROOT/docs"
	fi
fi
SRC_DOC="$ROOT/docs/BENCHMARKS.md"
[ -f "$OUT/BENCHMARKS.md" ] && SRC_DOC="$OUT/BENCHMARKS.md"

say() { printf '%s\n' "run-peers.sh: $*" >&2; }

# ---- what is needed ------------------------------------------------------------

need_install=""
command -v redis-server >/dev/null 2>&1 || need_install="$need_install redis-server"
command -v gnuplot >/dev/null 2>&1 || need_install="$need_install gnuplot-nox"
command -v jq >/dev/null 2>&1 || need_install="$need_install jq"
if [ "$(id -u)" = 0 ]; then
	sh "$ROOT/scripts/deps.sh" || { say "scripts/deps.sh failed"; exit 1; }
	if [ -n "$need_install" ]; then
		say "installing$need_install"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need_install ||
			{ say "apt-get install$need_install failed"; exit 1; }
	fi
elif [ -n "$need_install" ]; then
	say "missing:$need_install (run as root to install them, or install them yourself)"
	exit 1
fi
if [ $NO_BUILD = 0 ]; then
	if [ ! -f "$BUILD/build.ninja" ]; then
		meson setup "$BUILD" "$ROOT" >/dev/null || { say "meson setup $BUILD failed"; exit 1; }
	fi
	meson configure "$BUILD" -Dtests=true -Dpeers=enabled >/dev/null || { say "meson configure $BUILD failed"; exit 1; }
	ninja -C "$BUILD" bench/kvbench daemon/kvd >/dev/null || { say "building kvbench and kvd in $BUILD failed"; exit 1; }
fi
[ -x "$KVBENCH" ] || { say "no kvbench at $KVBENCH (--kvbench PATH, or build it)"; exit 1; }
[ -x "$KVD" ] || { say "no kvd at $KVD (--kvd PATH, or build it)"; exit 1; }

# ---- processes ----------------------------------------------------------------------

WORK=$(mktemp -d /tmp/kvd-peers.XXXXXX) || exit 1
CURRENT=""   # the kvbench running now
FAILED=0

# Every server kvbench starts has a path below $WORK on its command line:
# those are ours, and only those are stopped here.
ours() {
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$pid" = $$ ] && continue
		if { tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null | grep -q "$WORK/"; then
			echo "$pid"
		fi
	done
}

stop_ours() {
	if [ -n "$CURRENT" ]; then
		kill -TERM "$CURRENT" 2>/dev/null
		wait "$CURRENT" 2>/dev/null
		CURRENT=""
	fi
	left=$(ours)
	[ -z "$left" ] && return 0
	for pid in $left; do kill -TERM "$pid" 2>/dev/null; done
	sleep 2
	for pid in $(ours); do kill -KILL "$pid" 2>/dev/null; done
	return 1
}

cleanup() {
	stop_ours
	if [ $KEEP = 0 ] && [ $FAILED = 0 ]; then rm -rf "$WORK"; else say "files kept in $WORK"; fi
}
trap cleanup EXIT
trap 'say "interrupted"; FAILED=1; exit 1' INT TERM HUP

# ---- the experiments ----------------------------------------------------------------------

if [ $QUICK = 1 ]; then
	Y1="--quick --backend kvd-ipc,redis --sync interval,always --threads 1,4"
	Y2="--quick --backend engine,rocksdb,leveldb,lmdb --sync none,interval --threads 1,4"
	V3="--quick --backend kvd-ipc,redis,kvd-tcp,redis-tcp"
	D4="--quick --backend kvd-ipc,redis,kvd-tcp,redis-tcp,engine"
	A5="--quick"
	C6="--quick"
else
	Y1="--records 1000000 --operations 1000000 --max-seconds $YCSB_SECONDS --load-threads 16 --threads 1,4,16 --backend kvd-ipc,redis --sync interval,always"
	Y2="--records 1000000 --operations 1000000 --max-seconds $YCSB_SECONDS --load-threads 16 --threads 1,4,16 --backend engine,rocksdb,leveldb,lmdb --sync none,interval"
	V3="--backend kvd-ipc,redis,kvd-tcp,redis-tcp"
	D4="--backend kvd-ipc,redis,kvd-tcp,redis-tcp,engine"
	A5="--keys 10000,100000,1000000,10000000 --repeat 3"
	C6=""
fi

# run N SUBCOMMAND ARGS…: kvbench SUBCOMMAND ARGS --json, in the background
# so that a signal reaches the trap; output in $WORK/expN.json, progress in
# $WORK/expN.log.
run() {
	n=$1
	shift
	mkdir -p "$WORK/run$n"
	say "experiment $n: kvbench $* (progress: $WORK/exp$n.log)"
	t0=$(date +%s)
	"$KVBENCH" "$@" --json --dir "$WORK/run$n" > "$WORK/exp$n.json" 2> "$WORK/exp$n.log" &
	CURRENT=$!
	wait "$CURRENT"
	rc=$?
	CURRENT=""
	echo $(( $(date +%s) - t0 )) > "$WORK/exp$n.seconds"
	if [ $rc != 0 ] || ! jq -e '.ok == true' "$WORK/exp$n.json" >/dev/null 2>&1; then
		FAILED=1
		say "experiment $n FAILED (exit $rc): $(grep -E 'FAILED|error|skipped' "$WORK/exp$n.log" | head -3 | tr '\n' ' ')"
	else
		say "experiment $n: ok in $(cat "$WORK/exp$n.seconds") s"
	fi
	if [ -n "$(ours)" ]; then
		FAILED=1
		say "experiment $n left processes behind: $(ours | tr '\n' ' '); stopping them"
		stop_ours
	fi
}

# the argument strings are lists of words: unquoted on purpose
T="--transport $TRANSPORT"
if selected 1; then run 1 ycsb $Y1 $T --kvd "$KVD"; fi
if selected 2; then run 2 ycsb $Y2; fi
if selected 3; then run 3 versions $V3 $T --kvd "$KVD"; fi
if selected 4; then run 4 durable $D4 $T --kvd "$KVD"; fi
if selected 5; then run 5 activate $A5 --kvd "$KVD"; fi
if selected 6; then run 6 coldstart $C6 $T --kvd "$KVD"; fi

# ---- the report -----------------------------------------------------------------------------

mkdir -p "$OUT/plots" "$WORK/md" "$WORK/dat" || exit 1
PLOTS="$OUT/plots"

# The JSON of experiment n, when it produced one.
have() { [ -s "$WORK/exp$1.json" ] && jq -e . "$WORK/exp$1.json" >/dev/null 2>&1; }

JQ_DEFS='
def r($n): (. * pow(10; $n) | round) / pow(10; $n);
def g: floor | tostring | explode | reverse | [_nwise(3)] | map(implode) | join(",") | explode | reverse | implode;
def x: if . == null or . == 0 then "-" else (r(2) | tostring) + "x" end;
def bullets: if .header then .header[] | "- **\(.label)**: \(.value)"
  else .config | to_entries[] | "- **\(.key)**: \(.value)" end;
'

# The section of one experiment: title, command, configuration, its tables.
section_head() {
	n=$1
	title=$2
	{
		echo "### Experiment $n. $title"
		echo
		if [ $QUICK = 1 ]; then
			echo "**A smoke run (\`--quick\`): tiny sizes, the numbers say nothing about performance.**"
			echo
		fi
		if have "$n"; then
			echo "    $(jq -r '.command' "$WORK/exp$n.json")"
			echo
			echo "Took $(cat "$WORK/exp$n.seconds") s; $(jq -r 'if .ok then "every row ok" else "**FAILED**: some rows failed (see the tables), or a server did not exit 0" end' "$WORK/exp$n.json")."
			echo
			echo "<details><summary>configuration</summary>"
			echo
			jq -r "$JQ_DEFS bullets" "$WORK/exp$n.json"
			echo
			echo "</details>"
		else
			echo "**Did not produce a report**; its log ends with:"
			echo
			tail -5 "$WORK/exp$n.log" 2>/dev/null | sed 's/^/    /'
		fi
		echo
	} > "$WORK/md/$n.md"
}

# gnuplot: one PNG of panels; each panel a list of "file|title|using[|style]"
# curves (style: gnuplot line options, e.g. "lc 2 dt 2").
# plot_start OUT COLS ROWS; panel TITLE XLABEL YLABEL LOGX LOGY SPEC…; plot_end
plot_start() {
	GP="$WORK/plot.gp"
	PNG=$1
	w=$(( $2 * 520 )); h=$(( $3 * 380 ))
	{
		echo "set terminal pngcairo size $w,$h font 'sans,9'"
		echo "set output '$PNG'"
		echo "set key top left font 'sans,8'"
		echo "set grid"
		echo "set multiplot layout $3,$2"
	} > "$GP"
}

panel() {
	title=$1; xl=$2; yl=$3; lx=$4; ly=$5
	shift 5
	{
		echo "set title \"$title\""
		echo "set xlabel \"$xl\""
		echo "set ylabel \"$yl\""
		[ "$lx" = 1 ] && echo "set logscale x 2" || echo "unset logscale x"
		[ "$ly" = 1 ] && echo "set logscale y" || echo "unset logscale y"
		[ "$ly" = 1 ] || echo "set yrange [0:*]"
		[ "$ly" = 1 ] && echo "set yrange [*:*]"
		line=""
		for spec in "$@"; do
			f=${spec%%|*}; rest=${spec#*|}; t=${rest%%|*}; u=${rest#*|}
			st=""
			case "$u" in *"|"*) st=${u#*|}; u=${u%%|*} ;; esac
			[ -s "$f" ] || continue
			line="$line${line:+, }'$f' using $u with linespoints $st title \"$t\""
		done
		if [ -n "$line" ]; then
			echo "plot $line"
		else
			echo "set label 1 'no data' at graph 0.5,0.5 center"
			echo "plot NaN notitle"
			echo "unset label 1"
		fi
	} >> "$GP"
}

plot_end() {
	echo "unset multiplot" >> "$GP"
	if gnuplot "$GP" 2> "$WORK/gnuplot.err"; then
		echo "![$(basename "$PNG" .png)](plots/$(basename "$PNG"))"
		echo
	else
		FAILED=1
		say "gnuplot failed for $PNG: $(head -3 "$WORK/gnuplot.err" | tr '\n' ' ')"
	fi
}

# ---- experiments 1 and 2: YCSB --------------------------------------------------------------

# ycsb_section N TITLE REF: tables of REF against every other backend, plots.
ycsb_section() {
	n=$1; title=$2; ref=$3; tag=$4
	section_head "$n" "$title"
	have "$n" || return 0
	j="$WORK/exp$n.json"
	{
		echo "Run phases; \`$ref/peer\` is $ref's ops/s over the peer's (above 1: $ref is faster); p99 per op type, $ref's / the peer's (the worst op type of the row; below 1: $ref's p99 is lower). Loads in the JSON only."
		echo
		echo "| sync | workload | threads | peer | $ref ops/s | peer ops/s | $ref/peer | $ref p99 µs | peer p99 µs | p99 $ref/peer (worst op) |"
		echo "|---|---|--:|---|--:|--:|--:|---|---|--:|"
		jq -r --arg ref "$ref" "$JQ_DEFS"'
		  def p99s: [.ops[] | select(.count > 0) | "\(.op) \(.p99_us | r(0))"] | join(", ");
		  (.results | map(select(.phase == "run"))) as $runs
		  | $runs[] | select(.backend == $ref) as $k
		  | $runs[] | select(.backend != $ref and .sync == $k.sync and .threads == $k.threads and .workload == $k.workload) as $p
		  | if $k.state != "ok" or $p.state != "ok" then
		      "| \($k.sync) | \($k.workload) | \($k.threads) | \($p.backend) | \($k.state) | \($p.state) | | | | \(($k.error + " " + $p.error) | gsub("\\|"; "/")) |"
		    else
		      ([$k.ops[] | select(.count > 0) as $o | ($p.ops[] | select(.op == $o.op and .count > 0 and .p99_us > 0)) as $q | {op: $o.op, v: ($o.p99_us / $q.p99_us)}] | max_by(.v)) as $w
		      | "| \($k.sync) | \($k.workload) | \($k.threads) | \($p.backend) | \($k.ops_per_s | g) | \($p.ops_per_s | g) | **\(if $p.ops_per_s > 0 then ($k.ops_per_s / $p.ops_per_s) else 0 end | x)** | \($k | p99s) | \($p | p99s) | \(if $w == null then "-" else "\($w.v | x) (\($w.op))" end) |"
		    end' "$j"
		echo
	} >> "$WORK/md/$n.md"
	backends=$(jq -r '.config.backends[]' "$j")
	for sync in $(jq -r '.config.sync[]' "$j"); do
		for wl in a b c d e f; do
			case $wl in e) op=SCAN ;; f) op=READ-MODIFY-WRITE ;; *) op=READ ;; esac
			for be in $backends; do
				jq -r --arg s "$sync" --arg w "$wl" --arg b "$be" --arg op "$op" '
				  .results[] | select(.phase == "run" and .state == "ok" and .sync == $s and .workload == $w and .backend == $b)
				  | [.threads, .ops_per_s, ((.ops[] | select(.op == $op) | .p50_us) // 0), ((.ops[] | select(.op == $op) | .p99_us) // 0)] | @tsv' \
				  "$j" > "$WORK/dat/y$n-$sync-$wl-$be.dat"
			done
		done
		for kind in throughput latency; do
			plot_start "$PLOTS/ycsb-$tag-$sync-$kind.png" 3 2
			for wl in a b c d e f; do
				case $wl in e) op=SCAN ;; f) op=READ-MODIFY-WRITE ;; *) op=READ ;; esac
				set --
				c=0
				for be in $backends; do
					c=$((c + 1))
					f="$WORK/dat/y$n-$sync-$wl-$be.dat"
					if [ $kind = throughput ]; then
						set -- "$@" "$f|$be|1:2|lc $c"
					else
						set -- "$@" "$f|$be p50|1:3|lc $c dt 1" "$f|$be p99|1:4|lc $c dt 2"
					fi
				done
				if [ $kind = throughput ]; then
					panel "workload $wl, sync $sync" "client threads" "ops/s" 1 0 "$@"
				else
					panel "workload $wl, sync $sync: $op latency" "client threads" "µs" 1 1 "$@"
				fi
			done
			plot_end >> "$WORK/md/$n.md"
		done
	done
}

if selected 1; then ycsb_section 1 "YCSB A–F: kvd against Redis" kvd-ipc kvd-redis; fi
if selected 2; then
	ycsb_section 2 "YCSB A–F through the embedded API: the engine against RocksDB, LevelDB, LMDB" engine embedded
fi

# ---- experiment 3: versions ---------------------------------------------------------------------

if selected 3; then
	section_head 3 "Version scans: the newest m versions, one Versions call against a Redis chain of m GETs"
	if have 3; then
		j="$WORK/exp3.json"
		{
			echo "Each kvd row against the Redis row of the same transport. \`kvd/redis\` above 1: kvd is faster. Target: at least 10× faster than the Redis chain at m = 32."
			echo
			echo "| value B | m | kvd | reads/s | p50 µs | p99 µs | redis | reads/s | p50 µs | p99 µs | kvd/redis reads/s | redis p50 / kvd p50 |"
			echo "|--:|--:|---|--:|--:|--:|---|--:|--:|--:|--:|--:|"
			jq -r "$JQ_DEFS"'
			  .results as $R | $R[] | select(.kind == "kvd") as $k
			  | if $k.state != "ok" then "| \($k.value_size) | \($k.m) | \($k.backend) | \($k.state): \($k.error | gsub("\\|"; "/")) | | | | | | | | |"
			    else ($R[] | select(.backend == $k.ref and .value_size == $k.value_size and .m == $k.m)) as $p
			    | "| \($k.value_size) | \($k.m) | \($k.backend) | \($k.ops_per_s | g) | \($k.p50_us | r(1)) | \($k.p99_us | r(1)) | \($p.backend) | \($p.ops_per_s | g) | \($p.p50_us | r(1)) | \($p.p99_us | r(1)) | **\($k.ops_ratio | x)** | **\($k.p50_ratio | x)** |" end' "$j"
			jq -r '.results[] | select(.kind == "kvd" and .state == "ok" and .ref == null) | "| \(.value_size) | \(.m) | \(.backend) | no redis row to compare with | | | | | | | | |"' "$j"
			jq -r '.results[] | select(.kind != "kvd" and .state != "ok") | "\n\(.backend), \(.value_size) B, m=\(.m): \(.state): \(.error)"' "$j"
			echo
		} >> "$WORK/md/3.md"
		sizes=$(jq -r '.config.value_sizes[]' "$j")
		ncol=0; for s in $sizes; do ncol=$((ncol + 1)); done
		for be in $(jq -r '.config.backends[]' "$j"); do
			for s in $sizes; do
				jq -r --arg b "$be" --argjson s "$s" '.results[] | select(.backend == $b and .value_size == $s and .state == "ok") | [.m, .ops_per_s, .p50_us, .p99_us] | @tsv' "$j" > "$WORK/dat/v-$be-$s.dat"
			done
		done
		plot_start "$PLOTS/versions-latency.png" "$ncol" 1
		for s in $sizes; do
			set --
			c=0
			for be in $(jq -r '.config.backends[]' "$j"); do
				c=$((c + 1))
				set -- "$@" "$WORK/dat/v-$be-$s.dat|$be p50|1:3|lc $c dt 1" "$WORK/dat/v-$be-$s.dat|$be p99|1:4|lc $c dt 2"
			done
			panel "newest m versions of a key, $s-byte values" "m (versions read)" "µs per read of m versions" 1 1 "$@"
		done
		plot_end >> "$WORK/md/3.md"
	fi
fi

# ---- experiment 4: durable writes ------------------------------------------------------------------

if selected 4; then
	section_head 4 "Durable writes: sync=always puts at 1-64 clients (group commit) against Redis appendfsync always"
	if have 4; then
		j="$WORK/exp4.json"
		{
			echo "\`kvd/redis\`: puts/s over the Redis row of the same transport and client count (above 1: kvd is faster); p99 ratio redis/kvd (above 1: kvd's p99 is lower). puts/fdatasync from kvd's Stats (and the engine's kv_stats) over the recorded window."
			echo
			echo "| clients | backend | puts/s | p50 µs | p99 µs | p999 µs | puts/fdatasync | puts/batch | kvd/redis puts/s | redis p99 / kvd p99 |"
			echo "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|"
			jq -r "$JQ_DEFS"'
			  .results[] | if .state != "ok" then "| \(.clients) | \(.backend) | \(.state): \(.error | gsub("\\|"; "/")) | | | | | | | |"
			  else "| \(.clients) | \(.backend) | \(.ops_per_s | g) | \(.p50_us | r(1)) | \(.p99_us | r(1)) | \(.p999_us | r(1)) | \(.writes_per_sync // 0 | if . == 0 then "-" else r(2) end) | \(.writes_per_batch // 0 | if . == 0 then "-" else r(2) end) | \(if .ref then "**\(.ops_ratio | x)** (\(.ref))" else "-" end) | \(if .ref then (.p99_ratio | x) else "-" end) |" end' "$j"
			echo
		} >> "$WORK/md/4.md"
		for be in $(jq -r '.config.backends[]' "$j"); do
			jq -r --arg b "$be" '.results[] | select(.backend == $b and .state == "ok") | [.clients, .ops_per_s, .p50_us, .p99_us, (.writes_per_sync // 0)] | @tsv' "$j" | sort -n > "$WORK/dat/d-$be.dat"
		done
		plot_start "$PLOTS/durable.png" 2 1
		set --
		c=0
		for be in $(jq -r '.config.backends[]' "$j"); do
			c=$((c + 1))
			set -- "$@" "$WORK/dat/d-$be.dat|$be|1:2|lc $c"
		done
		panel "sync=always puts" "concurrent clients" "puts/s" 1 0 "$@"
		set --
		c=0
		for be in $(jq -r '.config.backends[]' "$j"); do
			c=$((c + 1))
			set -- "$@" "$WORK/dat/d-$be.dat|$be p50|1:3|lc $c dt 1" "$WORK/dat/d-$be.dat|$be p99|1:4|lc $c dt 2"
		done
		panel "sync=always put latency" "concurrent clients" "µs" 1 1 "$@"
		plot_end >> "$WORK/md/4.md"
	fi
fi

# ---- experiment 5: activation -------------------------------------------------------------------------

if selected 5; then
	section_head 5 "Activation of a passive tenant: hint files and log replay"
	if have 5; then
		j="$WORK/exp5.json"
		{
			echo "Medians of the repetitions. In process: kv_store_activate; kvd: TenantActivate's own activation time and the first Get through kvd (activation included)."
			echo
			echo "| keys | from | cache | in process ms | kvd TenantActivate ms | first Get via kvd ms | key directory B/key | log MiB | hint MiB |"
			echo "|--:|---|---|--:|--:|--:|--:|--:|--:|"
			jq -r "$JQ_DEFS"'
			  .sizes[] as $z | if ($z.ok | not) then "| \($z.keys) | FAILED: \($z.error | gsub("\\|"; "/")) | | | | | | | |"
			  else $z.cases[] | "| \($z.keys) | \(.from) | \(.cache) | \(.activate_ms.median | r(1)) | \(.kvd_activate_ms.median // 0 | r(1)) | \(.kvd_first_get_ms.median // 0 | r(1)) | \($z.keydir_bytes_per_key | r(1)) | \($z.disk_bytes / 1048576 | r(1)) | \($z.hint_bytes / 1048576 | r(1)) |" end' "$j"
			echo
		} >> "$WORK/md/5.md"
		for from in hints replay; do
			for cache in warm cold; do
				jq -r --arg f "$from" --arg c "$cache" '.sizes[] | select(.ok) as $z | $z.cases[] | select(.from == $f and .cache == $c) | [$z.keys, .activate_ms.median, (.kvd_first_get_ms.median // 0)] | @tsv' "$j" > "$WORK/dat/a-$from-$cache.dat"
			done
		done
		plot_start "$PLOTS/activate.png" 1 1
		panel "activating a passive tenant" "keys" "ms" 1 1 \
			"$WORK/dat/a-hints-warm.dat|hint files, warm, in process|1:2" \
			"$WORK/dat/a-hints-cold.dat|hint files, cold, in process|1:2" \
			"$WORK/dat/a-replay-warm.dat|log replay, warm, in process|1:2" \
			"$WORK/dat/a-replay-cold.dat|log replay, cold, in process|1:2" \
			"$WORK/dat/a-hints-warm.dat|hint files, warm, first Get via kvd|1:3"
		plot_end >> "$WORK/md/5.md"
	fi
fi

# ---- experiment 6: cold start ----------------------------------------------------------------------------

if selected 6; then
	section_head 6 "Cold start: a new process, k operations"
	if have 6; then
		j="$WORK/exp6.json"
		{
			echo "Medians, ms, from the exec of a new process to its k-th result. \`÷ kvd\`: the row's time over kvd's (the first kvd backend, tenant passive and active); above 1: kvd was faster."
			echo
			echo "| k | row | exec→k-th [min-max] | exec→main | main→open | open→1st | 1st→k-th | kvd activation | ÷ kvd passive | ÷ kvd active |"
			echo "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|"
			jq -r "$JQ_DEFS"'
			  .results[] | (if .state == "-" then .backend else "\(.backend) \(.state)" end) as $row
			  | if (.ok | not) then "| \(.k) | \($row) | FAILED: \(.error | gsub("\\|"; "/")) | | | | | | | |"
			  else "| \(.k) | \($row) | **\(.total_ms | r(2))** [\(.total_min_ms | r(2))-\(.total_max_ms | r(2))] | \(.exec_ms | r(2)) | \(.open_ms | r(2)) | \(.first_ms | r(2)) | \(.rest_ms | r(2)) | \(if .state == "passive" then (.activation_ms | r(2) | tostring) else "-" end) | \(.over_kvd_passive // 0 | x) | \(.over_kvd_active // 0 | x) |" end' "$j"
			echo
		} >> "$WORK/md/6.md"
		set --
		for row in $(jq -r '.results[] | if .state == "-" then .backend else "\(.backend)/\(.state)" end' "$j" | awk '!seen[$0]++'); do
			be=${row%/*}; st=${row#*/}; [ "$st" = "$row" ] && st="-"
			f="$WORK/dat/c-$be-$st.dat"
			jq -r --arg b "$be" --arg s "$st" '.results[] | select(.backend == $b and .state == $s and .ok) | [.k, .total_ms] | @tsv' "$j" > "$f"
			t=$be; [ "$st" != "-" ] && t="$be $st"
			set -- "$@" "$f|$t|1:2"
		done
		plot_start "$PLOTS/coldstart.png" 1 1
		panel "a new process: exec to the k-th result" "k (operations)" "ms" 1 1 "$@"
		plot_end >> "$WORK/md/6.md"
	fi
fi

# ---- BENCHMARKS.md -----------------------------------------------------------------------------------------

{
	echo "## Six experiments, side by side with the peers"
	echo
	echo "Written by \`bench/run-peers.sh\` (the part between each pair of run-peers"
	echo "markers; everything else in this file is kept as it was). A full run takes"
	echo "3 to 3.5 hours on this kind of machine; \`--only N\` reruns one experiment, and"
	echo "each experiment's section names the kvbench command and build it ran."
	echo "Last run: \`bench/run-peers.sh$( [ $QUICK = 1 ] && echo " --quick")$( [ "$ONLY" != "1,2,3,4,5,6" ] && echo " --only $ONLY")$( [ "$YCSB_SECONDS" != 60 ] && echo " --ycsb-seconds $YCSB_SECONDS") --transport $TRANSPORT\`,"
	echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, Linux $(uname -r). kvd is reached over"
	if [ $TRANSPORT = stream ]; then
		echo "kv+ipc:// and kv+tcp:// (its stream framing) in experiments 1, 3, 4 and 6."
	else
		echo "nng's ipc:// and tcp:// in experiments 1, 3, 4 and 6."
	fi
	echo
} > "$WORK/md/0.md"

placeholder() {
	printf '### Experiment %s\n\nNot run yet: `bench/run-peers.sh --only %s`.\n\n' "$1" "$1"
}

mkdir -p "$OUT"
TMP_DOC="$WORK/BENCHMARKS.md"
if [ -f "$SRC_DOC" ]; then cp "$SRC_DOC" "$TMP_DOC"; else echo "# kvd benchmarks" > "$TMP_DOC"; fi
if ! grep -q '<!-- run-peers 0 begin -->' "$TMP_DOC"; then
	{
		echo
		for n in 0 1 2 3 4 5 6; do
			echo "<!-- run-peers $n begin -->"
			if [ -s "$WORK/md/$n.md" ]; then cat "$WORK/md/$n.md"; else placeholder "$n"; fi
			echo "<!-- run-peers $n end -->"
		done
	} >> "$TMP_DOC"
else
	awk -v md="$WORK/md" '
	  /^<!-- run-peers [0-6] begin -->$/ {
	    n = $3; f = md "/" n ".md"; print
	    if ((getline line < f) > 0) {
	      print line; while ((getline line < f) > 0) print line; close(f); skip = 1
	    }
	    next
	  }
	  /^<!-- run-peers [0-6] end -->$/ { skip = 0; print; next }
	  !skip { print }
	' "$TMP_DOC" > "$TMP_DOC.new" && mv "$TMP_DOC.new" "$TMP_DOC"
fi
cp "$TMP_DOC" "$OUT/BENCHMARKS.md" || { say "writing $OUT/BENCHMARKS.md failed"; FAILED=1; }

stop_ours || { FAILED=1; say "processes were left behind and have been stopped"; }
say "report: $OUT/BENCHMARKS.md, plots in $PLOTS"
if [ $FAILED = 0 ]; then
	say "every experiment ok"
	exit 0
fi
say "FAILED: see the report and the logs in $WORK"
exit 1
