#!/bin/sh
# peer-check.sh — each peer measured by its own tool and by kvbench's
# backend for it, in one run, with the kvd engine (or kvd) beside both:
# does kvbench handicap a peer, or do the workloads differ?
#
#   bench/peer-check.sh [--quick] [--num N] [--dir DIR] [--build DIR]
#                       [--no-build] [--out FILE] [--keep]
#
# What it runs, one after the other (about 7 minutes on a 2-vCPU machine):
#   RocksDB  db_bench (rocksdb-tools) --benchmarks=fillrandom,readrandom
#            --num=N --key_size=16 --value_size=100 --compression_type=none
#            --sync=false, once with db_bench's defaults and once with the
#            options kvbench's rocksdb backend sets (bloom 10 bits/key,
#            dynamic level bytes, bytes_per_sync 1 MiB); then kvbench engine
#            --backends engine,rocksdb,lmdb --sync none with the same key
#            count and sizes, with db_bench's readrandom keys (--read-keys
#            any: ~37% absent) and with kvbench's own (--read-keys existing).
#   LMDB     kvbench's lmdb backend (in the runs above, MDB_NOSYNC |
#            MDB_WRITEMAP) and once more with the flags it had before
#            (KVB_LMDB_WRITEMAP=0: MDB_NOSYNC only); LMDB's own bulk loader,
#            mdb_load (lmdb-utils), on the same N random keys: 100 puts per
#            transaction, and Debian's 0.9.24 mdb_load opens without
#            MDB_NOSYNC, so every commit is fdatasync'ed (LMDB ships no
#            benchmark of its own; this is the one tool that loads).
#   Redis    redis-benchmark (redis-tools) over a Unix socket against a
#            redis-server configured as kvbench configures it, at 16 and 64
#            clients: SET of 100-byte values with appendfsync always beside
#            kvbench durable (redis and kvd-ipc); GET of 1140-byte values
#            (a YCSB record) with appendfsync no beside kvbench ycsb
#            workload c --sync none (redis and kvd-ipc); and, for reference,
#            SET and GET of 100 bytes at 16 clients against a redis-server
#            without persistence (--save "" --appendonly no).
# It prints a markdown table: the peer's figure by its own tool, by
# kvbench, their ratio, and the engine's (or kvd's) figure with its ratio
# against both; then the commands it ran.
#
# --num N: keys of the RocksDB and LMDB runs (default 1000000). --dir DIR:
# the run's scratch directory is made in DIR (default /var/tmp: a disk, as
# kvbench engine's databases should be), removed afterwards unless --keep
# or a step failed. --out FILE: the table also goes to FILE. --quick: a
# smoke run (N = 20000, short Redis runs); its numbers mean nothing.
#
# Installs what is missing when run as root (rocksdb-tools, redis-tools,
# redis-server, lmdb-utils, jq; scripts/deps.sh for the build), builds
# kvbench and kvd with ninja unless --no-build, stops every server it
# started (also on Ctrl-C).
#
# Exit status: 0 when every step ran and produced its figure, 1 otherwise
# (the table is still printed, "-" where a figure is missing), 2 for bad
# usage.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0
NUM=1000000
NUM_SET=0
PARENT=/var/tmp
BUILD="$ROOT/build"
NO_BUILD=0
OUTFILE=""
KEEP=0

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--num)
		[ $# -ge 2 ] || { echo "peer-check.sh: --num needs a number" >&2; exit 2; }
		case "$2" in ''|*[!0-9]*) echo "peer-check.sh: --num is a whole number, not '$2'" >&2; exit 2 ;; esac
		[ "$2" -ge 1000 ] || { echo "peer-check.sh: --num is at least 1000" >&2; exit 2; }
		NUM=$2; NUM_SET=1; shift ;;
	--dir) [ $# -ge 2 ] || { echo "peer-check.sh: --dir needs a directory" >&2; exit 2; }; PARENT=$2; shift ;;
	--build) [ $# -ge 2 ] || { echo "peer-check.sh: --build needs a directory" >&2; exit 2; }; BUILD=$2; shift ;;
	--no-build) NO_BUILD=1 ;;
	--out) [ $# -ge 2 ] || { echo "peer-check.sh: --out needs a file" >&2; exit 2; }; OUTFILE=$2; shift ;;
	--keep) KEEP=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "peer-check.sh: unknown option '$1' (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done

if [ $QUICK = 1 ]; then
	[ $NUM_SET = 1 ] || NUM=20000
	RB_SET_ALWAYS=2000  # redis-benchmark requests, appendfsync always
	RB_FILL=20000       # SETs that fill the GET server
	RB_REQ=20000        # redis-benchmark requests of the other runs
	DU_SECONDS=1; DU_WARMUP=0.5
	YC_RECORDS=5000; YC_SECONDS=1; YC_WARMUP=0.5
else
	RB_SET_ALWAYS=30000
	RB_FILL=300000
	RB_REQ=200000
	DU_SECONDS=5; DU_WARMUP=1
	YC_RECORDS=100000; YC_SECONDS=8; YC_WARMUP=1
fi
KEYSPACE=100000     # redis-benchmark -r and kvbench durable --keys
YCSB_BYTES=1140     # a YCSB record as kvbench ycsb stores it: 10 fields of 100 bytes, named
CLIENTS="16 64"

say() { printf '%s\n' "peer-check.sh: $*" >&2; }

# ---- what is needed ---------------------------------------------------------

need=""
command -v db_bench >/dev/null 2>&1 || need="$need rocksdb-tools"
command -v redis-benchmark >/dev/null 2>&1 || need="$need redis-tools"
command -v redis-cli >/dev/null 2>&1 || need="$need redis-tools"
command -v redis-server >/dev/null 2>&1 || need="$need redis-server"
command -v mdb_load >/dev/null 2>&1 || need="$need lmdb-utils"
command -v jq >/dev/null 2>&1 || need="$need jq"
need=$(echo "$need" | tr ' ' '\n' | awk 'NF && !seen[$0]++' | tr '\n' ' ')
if [ "$(id -u)" = 0 ]; then
	if [ $NO_BUILD = 0 ]; then
		sh "$ROOT/scripts/deps.sh" || { say "scripts/deps.sh failed"; exit 1; }
	fi
	if [ -n "$need" ]; then
		say "installing $need"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need ||
			{ say "apt-get install $need failed"; exit 1; }
	fi
elif [ -n "$need" ]; then
	say "missing: $need(run as root to install them, or install them yourself)"
	exit 1
fi
if [ $NO_BUILD = 0 ]; then
	if [ ! -f "$BUILD/build.ninja" ]; then
		meson setup -Dpeers=enabled "$BUILD" "$ROOT" >/dev/null || { say "meson setup $BUILD failed"; exit 1; }
	fi
	ninja -C "$BUILD" bench/kvbench daemon/kvd >/dev/null || { say "building kvbench and kvd in $BUILD failed"; exit 1; }
fi
KVBENCH="$BUILD/bench/kvbench"
KVD="$BUILD/daemon/kvd"
[ -x "$KVBENCH" ] || { say "no kvbench at $KVBENCH (--build DIR, or build it)"; exit 1; }
[ -x "$KVD" ] || { say "no kvd at $KVD (--build DIR, or build it)"; exit 1; }

# ---- processes --------------------------------------------------------------

mkdir -p "$PARENT" || exit 1
WORK=$(mktemp -d "$PARENT/kvd-peer-check.XXXXXX") || exit 1
CURRENT=""  # the tool running now
SERVER=""   # the redis-server started here, if one runs
FAILED=0

stop_server() {
	[ -n "$SERVER" ] || return 0
	kill -TERM "$SERVER" 2>/dev/null
	wait "$SERVER" 2>/dev/null
	SERVER=""
}

cleanup() {
	if [ -n "$CURRENT" ]; then
		kill -TERM "$CURRENT" 2>/dev/null
		wait "$CURRENT" 2>/dev/null
		CURRENT=""
	fi
	stop_server
	if [ $KEEP = 0 ] && [ $FAILED = 0 ]; then rm -rf "$WORK"; else say "files kept in $WORK"; fi
}
trap cleanup EXIT
trap 'say "interrupted"; FAILED=1; exit 1' INT TERM HUP

# step NAME CMD…: runs CMD in the background (a signal reaches the trap),
# stdout to $WORK/NAME.out, stderr to $WORK/NAME.err; the command line is
# kept for the report. 0 or 1.
step() {
	name=$1
	shift
	say "$name: $*"
	echo "$*" | sed "s|$WORK|\$WORK|g" > "$WORK/$name.cmd"
	"$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
	CURRENT=$!
	wait "$CURRENT"
	rc=$?
	CURRENT=""
	if [ $rc != 0 ]; then
		FAILED=1
		say "$name FAILED (exit $rc): $(tail -3 "$WORK/$name.err" | tr '\n' ' ')"
		return 1
	fi
	return 0
}

# redis_start NAME ARGS…: a redis-server on $WORK/NAME.sock (no TCP port)
# with ARGS; waits until it answers PING.
redis_start() {
	name=$1
	shift
	mkdir -p "$WORK/$name"
	redis-server --port 0 --unixsocket "$WORK/$name.sock" --unixsocketperm 700 \
		--dir "$WORK/$name" --daemonize no "$@" > "$WORK/$name.log" 2>&1 &
	SERVER=$!
	echo "redis-server --port 0 --unixsocket \$WORK/$name.sock $*" | sed 's/--save  /--save "" /' > "$WORK/$name.cmd"
	i=0
	while [ $i -lt 100 ]; do
		if redis-cli -s "$WORK/$name.sock" ping 2>/dev/null | grep -q PONG; then
			return 0
		fi
		kill -0 "$SERVER" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	say "redis-server $name did not answer PING (log: $WORK/$name.log)"
	FAILED=1
	stop_server
	return 1
}

T0=$(date +%s)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# ---- RocksDB: db_bench, then kvbench engine -----------------------------------

DBB="--benchmarks=fillrandom,readrandom --num=$NUM --key_size=16 --value_size=100 --compression_type=none --sync=false --seed=1"
# the options kvbench's rocksdb backend sets beyond db_bench's defaults
DBB_KV="--bloom_bits=10 --level_compaction_dynamic_level_bytes=true --bytes_per_sync=1048576"
# the argument strings are lists of words: unquoted on purpose
step dbbench db_bench $DBB --db="$WORK/dbbench"
rm -rf "$WORK/dbbench"
step dbbench_kv db_bench $DBB $DBB_KV --db="$WORK/dbbench"
rm -rf "$WORK/dbbench"
EB="engine --sync none --backends engine,rocksdb,lmdb --benchmarks fillrandom,readrandom --num $NUM --key-size 16 --value-size 100 --dir $WORK --json"
step engine_any "$KVBENCH" $EB --read-keys any
step engine_existing "$KVBENCH" $EB --read-keys existing

# ---- LMDB: kvbench with the old flags, mdb_load ---------------------------------

step lmdb_old env KVB_LMDB_WRITEMAP=0 "$KVBENCH" engine --sync none --backends lmdb \
	--benchmarks fillrandom,readrandom --num "$NUM" --key-size 16 --value-size 100 \
	--dir "$WORK" --read-keys any --json
# mdb_load's input: mdb_dump's format, N keys drawn uniformly with
# replacement in [0, N) as "%016d" (kvbench's and db_bench_mdb's keys),
# 100-byte values; its map sized as kvbench's lmdb backend sizes it.
awk -v n="$NUM" 'BEGIN {
	map = (16 + 100 + 64) * n * 4; if (map < 1073741824) map = 1073741824
	print "VERSION=3"; print "format=bytevalue"; print "type=btree"
	printf "mapsize=%d\n", map; print "HEADER=END"
	srand(1)
	for (i = 0; i < 64; i++) { v = ""; for (j = 0; j < 100; j++) v = v sprintf("%02x", int(rand() * 256)); val[i] = v }
	for (i = 0; i < n; i++) {
		k = sprintf("%016d", int(rand() * n)); gsub(/./, "3&", k)   # hex of the digits
		print " " k; print " " val[i % 64]
	}
	print "DATA=END"
}' > "$WORK/mdb_load.in" || { FAILED=1; say "writing mdb_load's input failed"; }
mkdir -p "$WORK/mdb_load.db"
t_a=$(date +%s.%N)
MDB_LOAD_RATE=""
if step mdb_load mdb_load -f "$WORK/mdb_load.in" "$WORK/mdb_load.db"; then
	t_b=$(date +%s.%N)
	MDB_LOAD_RATE=$(awk -v n="$NUM" -v a="$t_a" -v b="$t_b" 'BEGIN { if (b > a) printf "%.0f", n / (b - a) }')
fi
rm -rf "$WORK/mdb_load.in" "$WORK/mdb_load.db"

# ---- Redis: redis-benchmark, kvbench durable and ycsb --------------------------------

# rb NAME -t TEST ARGS…: redis-benchmark on the running server's socket, CSV
rb() {
	name=$1
	shift
	step "$name" redis-benchmark -s "$WORK/$SOCK.sock" --csv "$@"
}

SOCK=always
if redis_start always --save "" --appendonly yes --appendfsync always; then
	for c in $CLIENTS; do
		rb "rb_set_always_$c" -t set -n "$RB_SET_ALWAYS" -c "$c" -d 100 -r "$KEYSPACE"
	done
	stop_server
fi
SOCK=no
if redis_start no --save "" --appendonly yes --appendfsync no; then
	rb rb_fill -t set -n "$RB_FILL" -c 16 -d "$YCSB_BYTES" -r "$KEYSPACE"
	for c in $CLIENTS; do
		rb "rb_get_no_$c" -t get -n "$RB_REQ" -c "$c" -d "$YCSB_BYTES" -r "$KEYSPACE"
	done
	stop_server
fi
SOCK=plain
if redis_start plain --save "" --appendonly no; then
	rb rb_plain -t set,get -n "$RB_REQ" -c 16 -d 100 -r "$KEYSPACE"
	stop_server
fi
step durable "$KVBENCH" durable --backend kvd-ipc,redis --clients 16,64 --value-size 100 \
	--keys "$KEYSPACE" --seconds "$DU_SECONDS" --warmup "$DU_WARMUP" --kvd "$KVD" \
	--dir "$WORK" --json
step ycsb "$KVBENCH" ycsb --backend kvd-ipc,redis --workload c --sync none \
	--records "$YC_RECORDS" --operations 10000000 --max-seconds "$YC_SECONDS" \
	--warmup "$YC_WARMUP" --threads 16,64 --kvd "$KVD" --dir "$WORK" --json

T1=$(date +%s)

# ---- the table ----------------------------------------------------------------------

# figures; "" when missing
dbb() { # FILE BENCH: ops/sec of a db_bench line
	[ -s "$WORK/$1.out" ] || return 0
	awk -v b="$2" '$1 == b { for (i = 1; i <= NF; i++) if ($i == "ops/sec") { print $(i - 1); exit } }' "$WORK/$1.out"
}
dbb_found() { # FILE: "found of total" of its readrandom line
	[ -s "$WORK/$1.out" ] || return 0
	sed -n 's/^readrandom .*(\([0-9]*\) of \([0-9]*\) found).*/\1 of \2/p' "$WORK/$1.out" | head -1
}
eb() { # FILE WORKLOAD BACKEND [FIELD]
	[ -s "$WORK/$1.out" ] || return 0
	jq -r --arg w "$2" --arg b "$3" --arg f "${4:-ops_per_sec}" \
		'.results[] | select(.sync == "none" and .workload == $w and .backend == $b and .status == "ok") | .[$f] // empty' \
		"$WORK/$1.out" 2>/dev/null | head -1
}
rbv() { # FILE TEST: rps of a redis-benchmark CSV line
	[ -s "$WORK/$1.out" ] || return 0
	awk -F'"' -v t="$2" '$2 == t { print $4; exit }' "$WORK/$1.out"
}
du() { # BACKEND CLIENTS
	[ -s "$WORK/durable.out" ] || return 0
	jq -r --arg b "$1" --argjson c "$2" '.results[] | select(.backend == $b and .clients == $c and .state == "ok") | .ops_per_s' \
		"$WORK/durable.out" 2>/dev/null | head -1
}
yc() { # BACKEND THREADS
	[ -s "$WORK/ycsb.out" ] || return 0
	jq -r --arg b "$1" --argjson t "$2" '.results[] | select(.backend == $b and .threads == $t and .phase == "run" and .state == "ok") | .ops_per_s' \
		"$WORK/ycsb.out" 2>/dev/null | head -1
}

# grouped number, or "-"
n() {
	if [ -z "$1" ]; then printf -- '-'; return; fi
	awk -v v="$1" 'BEGIN { s = sprintf("%.0f", v); while (s ~ /[0-9][0-9][0-9][0-9]/) { if (!sub(/[0-9][0-9][0-9](,|$)/, ",&", s)) break; sub(/^,/, "", s); if (s !~ /[0-9][0-9][0-9][0-9]/) break } printf "%s", s }'
}
# a / b as "1.23x", or "-"
x() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "-" }'; else printf -- '-'; fi; }

# row PEER WORKLOAD OWN_LABEL OWN KV_LABEL KV REF_LABEL REF
row() {
	printf '| %s | %s | %s %s | %s %s | %s | %s %s | %s | %s |\n' "$1" "$2" "$3" "$(n "$4")" \
		"$5" "$(n "$6")" "$(x "$6" "$4")" "$7" "$(n "$8")" "$(x "$8" "$4")" "$(x "$8" "$6")"
}

TABLE="$WORK/table.md"
{
	echo "Run $STARTED, $(nproc) CPUs, Linux $(uname -r), $((T1 - T0)) s in all; N = $NUM keys of 16 bytes, 100-byte values, sync off, no compression.$( [ $QUICK = 1 ] && echo " **Smoke run (--quick): the numbers mean nothing.**")"
	echo
	echo "| peer | workload | own tool | kvbench's backend | kvbench / own | engine or kvd | ÷ own tool | ÷ kvbench's |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|"
	row RocksDB "fillrandom, N keys with replacement" "db_bench" "$(dbb dbbench fillrandom)" \
		"rocksdb" "$(eb engine_any fillrandom rocksdb)" "engine" "$(eb engine_any fillrandom engine)"
	row RocksDB "fillrandom (db_bench with kvbench's options)" "db_bench" "$(dbb dbbench_kv fillrandom)" \
		"rocksdb" "$(eb engine_any fillrandom rocksdb)" "engine" "$(eb engine_any fillrandom engine)"
	row RocksDB "readrandom, keys uniform in [0, N) ($(dbb_found dbbench) found by db_bench, $(n "$(eb engine_any readrandom rocksdb found)") by kvbench)" \
		"db_bench" "$(dbb dbbench readrandom)" \
		"rocksdb" "$(eb engine_any readrandom rocksdb)" "engine" "$(eb engine_any readrandom engine)"
	row RocksDB "readrandom, same keys (db_bench with kvbench's options: $(dbb_found dbbench_kv) found)" \
		"db_bench" "$(dbb dbbench_kv readrandom)" \
		"rocksdb" "$(eb engine_any readrandom rocksdb)" "engine" "$(eb engine_any readrandom engine)"
	row RocksDB "readrandom, keys that exist (kvbench's default; db_bench has no such mode)" "" "" \
		"rocksdb" "$(eb engine_existing readrandom rocksdb)" "engine" "$(eb engine_existing readrandom engine)"
	row LMDB "fillrandom; own tool: mdb_load, 100 puts a transaction, each commit fdatasync'ed" "mdb_load" "$MDB_LOAD_RATE" \
		"lmdb" "$(eb engine_any fillrandom lmdb)" "engine" "$(eb engine_any fillrandom engine)"
	row LMDB "fillrandom, kvbench's lmdb with its old flags (MDB_NOSYNC, no MDB_WRITEMAP)" "mdb_load" "$MDB_LOAD_RATE" \
		"lmdb" "$(eb lmdb_old fillrandom lmdb)" "engine" "$(eb engine_any fillrandom engine)"
	row LMDB "readrandom, keys uniform in [0, N) (no LMDB tool)" "" "" \
		"lmdb" "$(eb engine_any readrandom lmdb)" "engine" "$(eb engine_any readrandom engine)"
	for c in $CLIENTS; do
		row Redis "SET 100 B, $c clients, appendfsync always (kvbench durable)" "redis-benchmark" \
			"$(rbv "rb_set_always_$c" SET)" "redis" "$(du redis "$c")" "kvd-ipc" "$(du kvd-ipc "$c")"
	done
	for c in $CLIENTS; do
		row Redis "GET $YCSB_BYTES B, $c clients, appendfsync no (kvbench ycsb c, zipfian)" "redis-benchmark" \
			"$(rbv "rb_get_no_$c" GET)" "redis" "$(yc redis "$c")" "kvd-ipc" "$(yc kvd-ipc "$c")"
	done
	row Redis "SET 100 B, 16 clients, no persistence (reference only)" "redis-benchmark" "$(rbv rb_plain SET)" "" "" "" ""
	row Redis "GET 100 B, 16 clients, no persistence (reference only)" "redis-benchmark" "$(rbv rb_plain GET)" "" "" "" ""
	echo
	echo "Commands (\$WORK: the run's scratch directory; kvbench is $KVBENCH):"
	echo
	for f in dbbench dbbench_kv engine_any engine_existing lmdb_old mdb_load always rb_set_always_16 no rb_fill rb_get_no_16 plain rb_plain durable ycsb; do
		[ -s "$WORK/$f.cmd" ] && echo "    $(sed "s|$ROOT/||g" "$WORK/$f.cmd")"
	done
	echo
	echo "kvbench's backend settings, as its header states them:"
	echo
	jq -r '.config.header[]? | select(.label == "rocksdb" or .label == "lmdb" or .label == "engine") | "- **\(.label)**: \(.value)"' \
		"$WORK/engine_any.out" 2>/dev/null
} > "$TABLE"
cat "$TABLE"
if [ -n "$OUTFILE" ]; then cp "$TABLE" "$OUTFILE" || FAILED=1; fi
if [ $FAILED = 0 ]; then
	say "every step ran, $((T1 - T0)) s"
	exit 0
fi
say "FAILED: a step failed (its log in $WORK)"
exit 1
