#!/bin/sh
# test_kvctl.sh — kvctl against a real kvd: every command and flag, binary values byte-exact (a newline after a value on a terminal only), JSON output, each exit code, per-command help, the token from KVD_TOKEN and --token-file, the bash completion, SIGTERM.
#
# usage: test_kvctl.sh KVD KVCTL   (meson passes the built binaries)
#
# Starts kvd on a temporary directory with a kv+ipc (stream) and an ipc
# (nng) socket; the checks use the stream one, a few the nng one. Waits until
# `kvctl health` answers (a bounded readiness poll), runs the checks, then
# stops kvd with SIGTERM and expects exit status 0. Prints every failed
# check and exits 1 if there was any; exits 77 (skipped, with the reason)
# when python3, which parses the JSON output, is missing.

set -u

KVD=${1:?usage: test_kvctl.sh KVD KVCTL}
KVCTL=${2:?usage: test_kvctl.sh KVD KVCTL}

# Debian's own python3 when there is one: a version manager's shim in PATH
# can take most of a second to start, and the checks start it often.
PYTHON=${PYTHON:-python3}
[ -x /usr/bin/python3 ] && [ "$PYTHON" = python3 ] && PYTHON=/usr/bin/python3
if ! command -v "$PYTHON" >/dev/null 2>&1; then
	echo "SKIP: python3 is needed to parse kvctl's JSON output"
	exit 77
fi
for f in "$KVD" "$KVCTL"; do
	if [ ! -x "$f" ]; then
		echo "FAIL: $f is not an executable"
		exit 1
	fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvtest-kvctl-XXXXXX") || exit 1
SOCK="kv+ipc://$TMP/kv.sock"
NSOCK="ipc://$TMP/kvd.sock"
KVD_PID=
TOKEN_PID=
failures=0
checks=0
TAB=$(printf '\t')

# shellcheck disable=SC2317 # run by the trap
cleanup() {
	for pid in $KVD_PID $TOKEN_PID; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

fail() {
	failures=$((failures + 1))
	echo "FAIL: $*"
}

# kv ARGS...: kvctl against our kvd.
kv() {
	"$KVCTL" -e "$SOCK" "$@"
}

# run WANT_EXIT WHAT CMD...: runs CMD with stdout in $TMP/out and stderr in
# $TMP/err; fails the check unless it exits WANT_EXIT. Returns 0 if it did.
run() {
	want=$1
	what=$2
	shift 2
	checks=$((checks + 1))
	"$@" >"$TMP/out" 2>"$TMP/err"
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "$what: exit $got, want $want; stderr: $(head -c 300 "$TMP/err")"
		return 1
	fi
	return 0
}

# out_matches WHAT ERE: every line of stdout of the last run matches ERE
# (and there is at least one).
out_matches() {
	if [ ! -s "$TMP/out" ] || grep -Evq -- "$2" "$TMP/out"; then
		fail "$1: output '$(head -c 300 "$TMP/out")' does not match $2"
	fi
}

# err_is WHAT TEXT: stderr of the last run is exactly TEXT plus a newline.
err_is() {
	printf '%s\n' "$2" >"$TMP/want"
	if ! cmp -s "$TMP/want" "$TMP/err"; then
		fail "$1: stderr '$(head -c 300 "$TMP/err")', want '$2'"
	fi
}

# json WHAT EXPR: stdout of the last run is exactly one JSON document d for
# which the python expression EXPR is true (b64 is base64.b64decode, raw()
# reads a file under $TMP as bytes).
json() {
	checks=$((checks + 1))
	if ! "$PYTHON" -c '
import base64, json, sys
b64 = base64.b64decode
def raw(name):
    with open(sys.argv[3] + "/" + name, "rb") as f:
        return f.read()
with open(sys.argv[1]) as f:
    d = json.load(f)
sys.exit(0 if eval(sys.argv[2]) else 1)
' "$TMP/out" "$2" "$TMP" 2>"$TMP/pyerr"; then
		fail "$1: $2 does not hold for $(head -c 400 "$TMP/out") $(cat "$TMP/pyerr")"
	fi
}

# same_bytes WHAT FILE: stdout of the last run has exactly FILE's bytes.
same_bytes() {
	checks=$((checks + 1))
	if ! cmp -s "$2" "$TMP/out"; then
		fail "$1: output differs from $2 ($(wc -c <"$TMP/out") bytes, want $(wc -c <"$2"))"
	fi
}

# within SECONDS WANT_EXIT WHAT CMD...: like run, and CMD also has to finish
# in less than SECONDS of wall time.
within() {
	limit=$1
	want=$2
	what=$3
	shift 3
	checks=$((checks + 1))
	"$PYTHON" -c '
import subprocess, sys, time
t = time.monotonic()
with open(sys.argv[2], "wb") as out, open(sys.argv[3], "wb") as err:
    rc = subprocess.call(sys.argv[5:], stdout=out, stderr=err)
took = time.monotonic() - t
with open(sys.argv[4], "w") as f:
    if took >= float(sys.argv[1]):
        f.write("took %.2f s" % took)
sys.exit(rc if rc >= 0 else 128 - rc)
' "$limit" "$TMP/out" "$TMP/err" "$TMP/took" "$@"
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "$what: exit $got, want $want; stderr: $(head -c 300 "$TMP/err")"
	fi
	if [ -s "$TMP/took" ]; then
		fail "$what: $(cat "$TMP/took"), want less than $limit s"
	fi
}

# ---- start kvd and wait until it answers -------------------------------------------

: >"$TMP/kvd.conf" # its own (empty) settings, not /etc/kvd/kvd.conf
"$KVD" --config "$TMP/kvd.conf" --data-dir "$TMP/data" --listen "$SOCK" --listen "$NSOCK" --workers 2 \
	>"$TMP/kvd.out" 2>"$TMP/kvd.log" &
KVD_PID=$!

tries=0
until kv health >/dev/null 2>&1; do
	tries=$((tries + 1))
	if [ "$tries" -ge 150 ]; then
		echo "FAIL: kvd did not answer 'kvctl health' after $tries tries; its log:"
		cat "$TMP/kvd.log"
		exit 1
	fi
	sleep 0.1
done

# ---- help, version, usage errors (exit 2) ------------------------------------------------

run 0 "--version" "$KVCTL" --version && out_matches "--version" '^kvctl [0-9]'
run 0 "--help" "$KVCTL" --help
for word in put get del scan versions tenant stats compact health json key_b64 value_b64; do
	grep -q -- "$word" "$TMP/out" || fail "--help does not mention $word"
done
# Each command's own help: on stdout, exit 0, its synopsis first; the same
# as `kvctl help COMMAND`.
for c in put get del scan versions "tenant create" "tenant list" "tenant info" \
	"tenant drop" "tenant passivate" "tenant activate" "tenant release" "tenant adopt" \
	"tenant backup" stats compact health help; do
	# shellcheck disable=SC2086 # "tenant create" is two words
	run 0 "$c --help" "$KVCTL" $c --help || continue
	grep -q "^usage: kvctl $c" "$TMP/out" || fail "$c --help: '$(head -n 1 "$TMP/out")'"
	[ -s "$TMP/err" ] && fail "$c --help wrote on stderr: $(head -c 200 "$TMP/err")"
	mv "$TMP/out" "$TMP/help-cmd"
	# shellcheck disable=SC2086
	run 0 "help $c" "$KVCTL" help $c && same_bytes "help $c is $c --help" "$TMP/help-cmd"
done
run 0 "get KEY --help (after the arguments)" kv get k --help
grep -q -- "--as-of V" "$TMP/out" || fail "get --help lacks --as-of: $(cat "$TMP/out")"
run 0 "tenant --help" "$KVCTL" tenant --help
for a in create list info drop passivate activate release adopt backup; do
	grep -q "^  kvctl tenant $a" "$TMP/out" || fail "tenant --help lacks $a"
done
mv "$TMP/out" "$TMP/help-cmd"
run 0 "help tenant" "$KVCTL" help tenant && same_bytes "help tenant" "$TMP/help-cmd"
run 0 "tenant create -h" "$KVCTL" tenant create -h
grep -q -- "--max-keys N" "$TMP/out" || fail "tenant create -h lacks --max-keys"
grep -q -- "--evict refuse|oldest" "$TMP/out" || fail "tenant create -h lacks --evict"
grep -q -- "--max-bytes N" "$TMP/out" || fail "tenant create -h lacks --max-bytes"
run 0 "kvctl help" "$KVCTL" help
"$KVCTL" --help >"$TMP/help-all"
same_bytes "kvctl help is kvctl --help" "$TMP/help-all"
run 2 "help of an unknown command" "$KVCTL" help frob
[ -s "$TMP/out" ] && fail "help frob wrote on stdout"
run 2 "help of an unknown action" "$KVCTL" help tenant frob
run 2 "an action is not a command of its own" kv "tenant list"
run 2 "tenant without an action" kv tenant
err_is "tenant without an action" "kvctl: tenant: usage: kvctl tenant create|list|info|drop|passivate|activate|release|adopt|backup ...
Try 'kvctl tenant --help'."
run 2 "a usage error points to the command's help" kv get
err_is "get without a key's message" "kvctl: get: usage: kvctl get KEY [--version V | --as-of V]
Try 'kvctl get --help'."
[ -s "$TMP/out" ] && fail "a usage error wrote on stdout"
run 2 "no command" "$KVCTL"
run 2 "unknown command" kv frobnicate
err_is "unknown command's message" "kvctl: unknown command 'frobnicate'
Try 'kvctl --help'."
run 2 "unknown option" kv get k --frob
run 2 "option without its value" kv scan --limit
run 2 "get without a key" kv get
run 2 "get with two keys" kv get a b
run 2 "an empty key" kv get ''
run 2 "not a number" kv put k v --if-version twelve
run 2 "a negative number" kv versions k --limit -1
run 2 "--version with --as-of" kv get k --version 1 --as-of 1
run 2 "--version 0" kv get k --version 0
run 2 "bad --output" kv -o yaml health
run 2 "bad --sync" kv tenant create t --sync sometimes
run 2 "bad tenant action" kv tenant frob
run 2 "--timeout 0" kv --timeout 0 health
run 2 "a bad endpoint" "$KVCTL" -e 'nonsense://x' health
run 2 "usage error as JSON" kv -o json get
json "usage error document" 'd["error"]["exit"] == 2'

# ---- health, put, get, del --------------------------------------------------------------

run 0 "health" kv health && out_matches "health" '^(status: serving|version: .*|uptime_s: [0-9]+)$'
run 0 "health -o json" kv -o json health
json "health document" 'd["status"] == "serving" and isinstance(d["uptime_s"], int) and d["version"]'
run 0 "health via KVD_ENDPOINT" env KVD_ENDPOINT="$SOCK" "$KVCTL" health
run 0 "health with --token and --timeout" kv --token secret --timeout 5000 health
run 0 "health with -o text" kv -o text health

run 0 "put" kv put user:1 Ada && out_matches "put prints the version" '^[0-9]+$'
v1=$(cat "$TMP/out")
run 0 "get" kv get user:1
printf 'Ada' >"$TMP/ada"
same_bytes "get prints the value without a newline" "$TMP/ada"
# On a terminal (script(1), util-linux, gives kvctl a pty, which shows a
# newline as CR LF) the value is followed by a newline unless it ends with
# one; into a pipe or a file (above) it stays byte for byte.
tty_get() {
	run 0 "$1" script -qec "'$KVCTL' -e '$SOCK' get '$2'" /dev/null </dev/null
}
tty_get "get on a terminal" user:1
printf 'Ada\r\n' >"$TMP/want"
same_bytes "get on a terminal ends the value with a newline" "$TMP/want"
run 0 "put a value ending with a newline" kv put nl "$(printf 'x\ny')
"
tty_get "get it on a terminal" nl
printf 'x\r\ny\r\n' >"$TMP/want"
same_bytes "a value's own newline is not doubled on a terminal" "$TMP/want"
run 0 "get it through a pipe" kv get nl
printf 'x\ny\n' >"$TMP/want"
same_bytes "a value's own newline through a pipe" "$TMP/want"
run 0 "put again" kv put user:1 Grace
v2=$(cat "$TMP/out")
[ "$v2" -gt "$v1" ] 2>/dev/null || fail "versions grow: $v1 then $v2"
run 0 "put -o json" kv put user:2 Bob -o json
json "put document" 'd["key"] == "user:2" and b64(d["key_b64"]) == b"user:2" and d["version"] > 0'
run 0 "get -o json" kv get user:1 -o json
json "get document" 'd["key"] == "user:1" and d["value"] == "Grace" and b64(d["value_b64"]) == b"Grace" and d["version"] == '"$v2"' and d["timestamp_ms"] > 0 and d["timestamp"].endswith("Z") and len(d["timestamp"]) == 24 and d["expiry_ms"] == 0'

# values through stdin: NUL bytes, newlines, bytes that are not UTF-8
printf 'a\000b\nc\n\000\377\376 end\n\n' >"$TMP/bin"
run 0 "put from stdin" kv put bin <"$TMP/bin"
run 0 "get binary" kv get bin && same_bytes "binary value round trip" "$TMP/bin"
run 0 "put from stdin with -" kv put bin2 - <"$TMP/bin"
run 0 "get binary (-)" kv get bin2 && same_bytes "binary value round trip (-)" "$TMP/bin"
run 0 "get binary -o json" kv -o json get bin
json "binary value in JSON" '"value" not in d and b64(d["value_b64"]) == raw("bin")'
dd if=/dev/urandom of="$TMP/big" bs=1024 count=1024 2>/dev/null
run 0 "put 1 MiB from stdin" kv put big <"$TMP/big"
run 0 "get 1 MiB" kv get big && same_bytes "1 MiB value round trip" "$TMP/big"
: >"$TMP/empty"
run 0 "put an empty value" kv put empty <"$TMP/empty"
run 0 "get an empty value" kv get empty && same_bytes "empty value round trip" "$TMP/empty"
tty_get "get an empty value on a terminal" empty
printf '\r\n' >"$TMP/want"
same_bytes "an empty value on a terminal is a newline" "$TMP/want"
printf 'h\303\251llo w\303\266rld' >"$TMP/utf8"
run 0 "put UTF-8" kv put utf8 <"$TMP/utf8"
run 0 "get UTF-8 -o json" kv -o json get utf8
json "UTF-8 value as a string" 'd["value"].encode() == raw("utf8") and b64(d["value_b64"]) == raw("utf8")'
run 0 "a value with tabs and spaces" kv put spaced "a${TAB}b c"
run 0 "get it" kv get spaced
printf 'a\tb c' >"$TMP/spaced"
same_bytes "value with tabs and spaces" "$TMP/spaced"

# keys that look like options, options after arguments
run 0 "put a key starting with -" kv put -- -dash minus
run 0 "get a key starting with -" kv get -- -dash && printf 'minus' >"$TMP/minus" &&
	same_bytes "key starting with -" "$TMP/minus"
run 0 "global options after the arguments" kv get user:1 -o json -t default --timeout 3000
json "options after arguments" 'd["value"] == "Grace"'

# not found (exit 1) and the error line
run 1 "get a missing key" kv get nope
case $(cat "$TMP/err") in
"kvctl: get nope: "?*) ;;
*) fail "error line: '$(cat "$TMP/err")', want 'kvctl: get nope: <message>'" ;;
esac
run 1 "get a missing key -o json" kv -o json get nope
json "not found document" 'd["error"]["name"] == "NOT_FOUND" and d["error"]["code"] == 5 and d["error"]["exit"] == 1 and d["error"]["message"]'

# conditions (exit 3)
run 3 "put --if-version (wrong)" kv put user:1 X --if-version "$v1"
run 0 "put --if-version (right)" kv put user:1 Hopper --if-version "$v2"
v3=$(cat "$TMP/out")
run 3 "put --if-version 0 on an existing key" kv put user:1 X --if-version 0
run 0 "put --if-version 0 on a new key" kv put fresh 1 --if-version 0
run 3 "put --if-version -o json" kv -o json put user:1 X --if-version 1
json "failed precondition document" 'd["error"]["name"] == "FAILED_PRECONDITION" and d["error"]["exit"] == 3'

# del
run 3 "del --if-version (wrong)" kv del user:1 --if-version "$v2"
run 0 "del --if-version (right)" kv del user:1 --if-version "$v3" && out_matches "del prints the version" '^[0-9]+$'
vdel=$(cat "$TMP/out")
[ "$vdel" -gt "$v3" ] 2>/dev/null || fail "the tombstone's version $vdel follows $v3"
run 1 "get after del" kv get user:1
run 1 "del of a missing key" kv del user:1
run 0 "del -o json" kv -o json del user:2
json "del document" 'd["key"] == "user:2" and d["version"] > 0'

# TTL: the key reads until it expires
run 0 "put --ttl" kv put ephemeral soon --ttl 1
run 0 "get before expiry -o json" kv -o json get ephemeral
json "expiry_ms set by --ttl" 'd["expiry_ms"] > d["timestamp_ms"]'
tries=0
while kv get ephemeral >/dev/null 2>&1; do
	tries=$((tries + 1))
	if [ "$tries" -ge 100 ]; then
		fail "a key put with --ttl 1 still reads after 10 s"
		break
	fi
	sleep 0.1
done
run 1 "get after expiry" kv get ephemeral
run 0 "put --ttl 0 (no expiry)" kv put lasting v --ttl 0
run 0 "get it -o json" kv -o json get lasting
json "--ttl 0 never expires" 'd["expiry_ms"] == 0'
# the largest --ttl: capped at 2^64-2 ms, never wrapped into the past
run 0 "put --ttl 18446744073709550 (the most kvctl takes)" kv put far v --ttl 18446744073709550
run 0 "get it at once -o json" kv -o json get far
json "--ttl near 2^64 s is capped, not wrapped" 'int(d["expiry_ms"]) == 2**64 - 2'
run 2 "--ttl one more is a usage error" kv put far v --ttl 18446744073709551

# ---- tenants ------------------------------------------------------------------------------

run 0 "tenant create with every flag" kv tenant create hist --sync interval --history 5 --ttl 3600 --max-keys 3
run 0 "tenant info" kv tenant info hist
out_matches "tenant info text" '^[a-z_]+: .+$'
grep -qx 'history: 5' "$TMP/out" || fail "tenant info text lacks 'history: 5'"
run 0 "tenant info -o json" kv -o json tenant info hist
json "tenant info document" 'd["name"] == "hist" and d["state"] in ("active", "passive") and d["sync"] == "interval" and d["history"] == 5 and d["ttl_ms"] == 3600000 and d["max_keys"] == 3 and "keys" in d and "disk_bytes" in d'
run 0 "tenant create --sync none" kv tenant create nosync --sync none
run 0 "tenant create --sync always -o json" kv -o json tenant create always --sync always
json "tenant create document" 'd == {"name": "always"}'
run 5 "tenant create of an existing tenant" kv tenant create hist
run 5 "an invalid tenant name" kv tenant create .hidden
run 0 "tenant create --compression" kv tenant create zt --compression zstd:5
run 0 "tenant info of a compressing tenant" kv tenant info zt
grep -qx 'compression: zstd:5' "$TMP/out" || fail "tenant info lacks 'compression: zstd:5'"
run 5 "tenant create --compression gzip" kv tenant create zbad --compression gzip
zval=$(printf 'compressible text %.0s' $(seq 1 200))
run 0 "put into a compressing tenant" kv -t zt put ztext "$zval"
run 0 "get from a compressing tenant" kv -t zt get ztext
[ "$(cat "$TMP/out")" = "$zval" ] || fail "a compressed value did not read back as written"
run 0 "stats of a compressing tenant -o json" kv -t zt -o json stats
json "stored below logical" 'd["compression"] == "zstd:5" and d["values_compressed"] == 1 and d["value_logical_bytes"] == 3600 and d["value_stored_bytes"] < 1800'
run 0 "tenant create --max-bytes --evict oldest" kv tenant create ev --max-bytes 1000 --evict oldest
run 0 "tenant info of an evicting tenant" kv tenant info ev
grep -qx 'evict: oldest' "$TMP/out" || fail "tenant info lacks 'evict: oldest'"
grep -qx 'max_bytes: 1000' "$TMP/out" || fail "tenant info lacks 'max_bytes: 1000'"
run 2 "tenant create --evict lru" kv tenant create evbad --evict lru
run 2 "tenant create --max-bytes x" kv tenant create evbad --max-bytes x
# records of 48 + 3 + 100 bytes: 6 fit in 1000, 12 puts evict the first 6
eval_val=$(printf 'v%.0s' $(seq 1 100))
for i in 01 02 03 04 05 06 07 08 09 10 11 12; do
	run 0 "put k$i into an evicting tenant" kv -t ev put "k$i" "$eval_val"
done
run 1 "get of an evicted key" kv -t ev get k06
run 0 "get of a key kept" kv -t ev get k07
run 0 "stats of an evicting tenant -o json" kv -t ev -o json stats
json "evictions counted" 'd["evict"] == "oldest" and d["max_bytes"] == 1000 and d["evictions"] == 6 and d["keys"] == 6 and d["live_bytes"] - d["tombstone_bytes"] == 906 and d["tombstone_bytes"] == 6 * 51'
run 0 "tenant create --evict refuse" kv tenant create evr --max-bytes 300 --evict refuse
run 0 "put within max_bytes" kv -t evr put k01 "$eval_val"
run 5 "put past max_bytes under refuse" kv -t evr -o json put k02 "$eval_val"
json "max_bytes resource exhausted" 'd["error"]["name"] == "RESOURCE_EXHAUSTED" and d["error"]["exit"] == 5'
run 0 "tenant list" kv tenant list
for t in default hist nosync always zt; do
	grep -Eq "^$t${TAB}(active|passive)\$" "$TMP/out" || fail "tenant list lacks $t: $(cat "$TMP/out")"
done
run 0 "tenant list -o json" kv -o json tenant list
json "tenant list document" '[t["name"] for t in d["tenants"]] == sorted(t["name"] for t in d["tenants"]) and {"default", "hist", "nosync", "always"} <= {t["name"] for t in d["tenants"]}'

# versions, get --version/--as-of, in a tenant that keeps 5 of them; -t
run 0 "put in a tenant (-t)" kv -t hist put k one
h1=$(cat "$TMP/out")
run 0 "put again (--tenant)" kv --tenant hist put k two
h2=$(cat "$TMP/out")
run 0 "del in the tenant" kv -t hist del k
h3=$(cat "$TMP/out")
run 0 "put after del" env KVD_TENANT=hist "$KVCTL" -e "$SOCK" put k three
h4=$(cat "$TMP/out")
run 1 "tenants are separate" kv get k
run 0 "get via KVD_TENANT" env KVD_TENANT=hist "$KVCTL" -e "$SOCK" get k
printf 'three' >"$TMP/three"
same_bytes "KVD_TENANT" "$TMP/three"
run 0 "get --version" kv -t hist get k --version "$h1"
printf 'one' >"$TMP/one"
same_bytes "get --version" "$TMP/one"
run 0 "get --as-of" kv -t hist get k --as-of "$h2"
printf 'two' >"$TMP/two"
same_bytes "get --as-of" "$TMP/two"
run 1 "get --as-of a deleted version" kv -t hist get k --as-of "$h3"
run 1 "get --version of a tombstone" kv -t hist get k --version "$h3"

run 0 "versions" kv -t hist versions k
ts='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'
out_matches "versions lines" "^[0-9]+${TAB}${ts}(${TAB}deleted)?\$"
printf '%s\n%s\n%s\n%s\n' "$h4" "$h3" "$h2" "$h1" >"$TMP/want"
cut -f1 "$TMP/out" | cmp -s - "$TMP/want" || fail "versions newest first: $(cut -f1 "$TMP/out" | tr '\n' ' ')"
[ "$(sed -n 2p "$TMP/out" | cut -f3)" = deleted ] || fail "versions marks the tombstone: $(sed -n 2p "$TMP/out")"
[ "$(sed -n 1p "$TMP/out" | cut -f3)" = "" ] || fail "versions marks a live version: $(sed -n 1p "$TMP/out")"
run 0 "versions --values" kv -t hist versions k --values
[ "$(sed -n 1p "$TMP/out" | cut -f4)" = three ] || fail "versions --values: $(sed -n 1p "$TMP/out")"
[ "$(sed -n 4p "$TMP/out" | cut -f4)" = one ] || fail "versions --values: $(sed -n 4p "$TMP/out")"
[ "$(sed -n 2p "$TMP/out" | cut -f3)" = deleted ] || fail "versions --values marks the tombstone"
run 0 "versions --limit 2" kv -t hist versions k --limit 2
[ "$(wc -l <"$TMP/out")" -eq 2 ] || fail "versions --limit 2 printed $(wc -l <"$TMP/out") lines"
run 0 "versions --values -o json" kv -t hist -o json versions k --values
json "versions document" 'd["key"] == "k" and [v["version"] for v in d["versions"]] == ['"$h4, $h3, $h2, $h1"'] and [v["deleted"] for v in d["versions"]] == [False, True, False, False] and d["versions"][0]["value"] == "three" and b64(d["versions"][3]["value_b64"]) == b"one" and "value" not in d["versions"][1] and "value_b64" not in d["versions"][1] and d["versions"][0]["timestamp"].endswith("Z") and d["truncated"] in (True, False)'
run 0 "versions without --values -o json" kv -t hist -o json versions k
json "versions without values" 'all("value_b64" not in v for v in d["versions"])'
run 0 "versions of an unknown key" kv versions never-written
[ -s "$TMP/out" ] && fail "versions of an unknown key printed: $(cat "$TMP/out")"

# max_keys 3: the fourth key is refused (exit 5)
run 0 "second key" kv -t hist put k2 v
run 0 "third key" kv -t hist put k3 v
run 5 "a key past --max-keys" kv -t hist put k4 v
run 5 "past --max-keys -o json" kv -t hist -o json put k4 v
json "resource exhausted document" 'd["error"]["name"] == "RESOURCE_EXHAUSTED" and d["error"]["exit"] == 5'

# passivate, activate, drop
run 0 "tenant passivate" kv tenant passivate hist
run 0 "tenant info after passivate -o json" kv -o json tenant info hist
json "passive" 'd["state"] == "passive"'
run 0 "a passive tenant still reads" kv -t hist get k
same_bytes "read from a passivated tenant" "$TMP/three"
run 0 "tenant passivate -o json" kv -o json tenant passivate hist
json "passivate document" 'd["name"] == "hist" and d["state"] == "passive"'
run 0 "tenant activate" kv tenant activate hist
run 0 "tenant activate -o json" kv -o json tenant activate hist
json "activate document" 'd["name"] == "hist" and d["state"] == "active" and isinstance(d["activation_us"], int)'
run 0 "tenant info after activate -o json" kv -o json tenant info hist
json "active" 'd["state"] == "active"'
run 0 "tenant drop" kv tenant drop nosync
run 0 "tenant drop -o json" kv -o json tenant drop always
json "drop document" 'd == {"name": "always"}'
run 0 "tenant list after drop" kv tenant list
grep -q "^nosync${TAB}" "$TMP/out" && fail "a dropped tenant is still listed"
run 1 "tenant drop of a dropped tenant" kv tenant drop nosync
run 1 "tenant info of a dropped tenant" kv tenant info nosync
run 1 "tenant passivate of a missing tenant" kv tenant passivate nosuch
run 1 "tenant activate of a missing tenant" kv tenant activate nosuch
run 5 "tenant drop default" kv tenant drop default

# tenant backup: kvd writes it on its own host (docs/BACKUP.md)
run 0 "tenant backup" kv tenant backup hist "$TMP/bk"
checks=$((checks + 1))
grep -Eq '^version: [0-9]+$' "$TMP/out" || fail "tenant backup printed no version: $(head -c 300 "$TMP/out")"
[ -f "$TMP/bk/BACKUP" ] && [ -f "$TMP/bk/TENANT" ] || fail "tenant backup wrote no BACKUP or TENANT"
run 0 "tenant backup -o json" kv -o json tenant backup hist "$TMP/bk2"
json "backup document" 'd["name"] == "hist" and d["version"] >= 3 and d["segments"] >= 1 and d["files"] >= 3'
run 3 "tenant backup into a directory that is not empty" kv tenant backup hist "$TMP/bk"
run 2 "tenant backup into a relative path" kv tenant backup hist bk
run 1 "tenant backup of a missing tenant" kv tenant backup nosuch "$TMP/bk3"

# ---- scan ----------------------------------------------------------------------------------

run 0 "tenant create scans" kv tenant create scans
for k in c a d b; do
	run 0 "put scan/$k" kv -t scans put "scan/$k" "v$k"
done
run 0 "put outside the prefix" kv -t scans put other x
run 0 "scan --prefix" kv -t scans scan --prefix scan/
printf 'scan/a\tva\nscan/b\tvb\nscan/c\tvc\nscan/d\tvd\n' >"$TMP/want"
cmp -s "$TMP/want" "$TMP/out" || fail "scan --prefix: $(cat "$TMP/out")"
run 0 "scan (all)" kv -t scans scan
[ "$(wc -l <"$TMP/out")" -eq 5 ] || fail "scan of all printed $(wc -l <"$TMP/out") lines"
run 0 "scan --keys-only" kv -t scans scan --prefix scan/ --keys-only
printf 'scan/a\nscan/b\nscan/c\nscan/d\n' >"$TMP/want"
cmp -s "$TMP/want" "$TMP/out" || fail "scan --keys-only: $(cat "$TMP/out")"
run 0 "scan --reverse" kv -t scans scan --prefix scan/ --reverse --keys-only
printf 'scan/d\nscan/c\nscan/b\nscan/a\n' >"$TMP/want"
cmp -s "$TMP/want" "$TMP/out" || fail "scan --reverse: $(cat "$TMP/out")"
run 0 "scan --start --end" kv -t scans scan --start scan/b --end scan/d
printf 'scan/b\tvb\nscan/c\tvc\n' >"$TMP/want"
cmp -s "$TMP/want" "$TMP/out" || fail "scan --start --end: $(cat "$TMP/out")"
run 0 "scan --limit" kv -t scans scan --prefix scan/ --limit 2
printf 'scan/a\tva\nscan/b\tvb\n' >"$TMP/want"
cmp -s "$TMP/want" "$TMP/out" || fail "scan --limit 2: $(cat "$TMP/out")"
run 0 "scan -o json" kv -t scans -o json scan --prefix scan/
json "scan document" '[i["key"] for i in d["items"]] == ["scan/a", "scan/b", "scan/c", "scan/d"] and [i["value"] for i in d["items"]] == ["va", "vb", "vc", "vd"] and b64(d["items"][0]["key_b64"]) == b"scan/a" and all(i["version"] > 0 for i in d["items"]) and d["count"] == 4 and d["revision"] >= max(i["version"] for i in d["items"])'
run 0 "scan --keys-only -o json" kv -t scans -o json scan --prefix scan/ --keys-only --reverse --limit 3
json "keys-only document" '[i["key"] for i in d["items"]] == ["scan/d", "scan/c", "scan/b"] and all("value_b64" not in i for i in d["items"]) and d["count"] == 3'
run 0 "binary keys in a scan" kv put "$(printf 'bk\001\002')" x
run 0 "scan a binary key -o json" kv -o json scan --prefix bk
json "binary key" 'len(d["items"]) == 1 and b64(d["items"][0]["key_b64"]) == b"bk\x01\x02"'

# ---- stats, compact -------------------------------------------------------------------------

run 0 "stats" kv -t hist stats && out_matches "stats text" '^[a-z_]+: .+$'
run 0 "stats -o json" kv -t hist -o json stats
json "stats document" 'd["name"] == "hist" and d["keys"] == 3 and d["last_version"] >= '"$h4"' and all(f in d for f in ("dead_bytes", "segments", "tombstones", "merges", "compact_revision", "disk_bytes"))'
run 0 "stats --daemon" kv stats --daemon && out_matches "stats --daemon text" '^([a-z_]+|connections (stream|nng) [a-z+]+://[^ ]+): .+$'
grep -qx "connections stream $SOCK: [1-9][0-9]*" "$TMP/out" || fail "stats --daemon text lacks its own connection on $SOCK"
run 0 "stats --daemon -o json" kv -o json stats --daemon
json "daemon stats document" 'd["workers"] == 2 and d["tenants"] >= 3 and d["requests"] > 0 and d["version"] and "uptime_s" in d and "keydir_bytes" in d and "in_flight" in d and "active_tenants" in d'
# no metrics_listen here: nothing counted per method, connections per listener all the same
json "daemon stats figures (metrics off)" 'd["counting"] is False and d["methods"] == [] and d["received_bytes"] == 0 and [(c["transport"], c["listen"]) for c in d["connections"]] == [("stream", "'"$SOCK"'"), ("nng", "'"$NSOCK"'")] and d["connections"][0]["open"] >= 1'
run 0 "compact" kv -t hist compact && out_matches "compact text" '^(compact_revision|disk_bytes_before|disk_bytes_after): [0-9]+$'
run 0 "compact --revision -o json" kv -t hist -o json compact --revision "$h2"
json "compact document" 'd["compact_revision"] == '"$h2"' and isinstance(d["disk_bytes_before"], int) and isinstance(d["disk_bytes_after"], int)'
run 5 "get --version of compacted history (OUT_OF_RANGE)" kv -t hist -o json get k --version "$h1"
json "out of range document" 'd["error"]["name"] == "OUT_OF_RANGE" and d["error"]["exit"] == 5'
run 5 "compact --revision in the future" kv -t hist compact --revision 999999999

# ---- blobs ------------------------------------------------------------------------------------

head -c 9437187 /dev/urandom >"$TMP/blob.in" # 9 MiB and 3 bytes: more than one append, a partial chunk
run 0 "blob put FILE" kv blob put big "$TMP/blob.in" && out_matches "blob put prints the version" '^[0-9]+$'
bv=$(cat "$TMP/out")
checks=$((checks + 1))
[ -s "$TMP/err" ] && fail "blob put wrote on stderr, which is no terminal: $(head -c 200 "$TMP/err")"
# on a terminal (script(1) gives it one) a progress line, ending at 100%
run 0 "blob put on a terminal" script -qec "$KVCTL -e $SOCK blob put progress $TMP/blob.in </dev/null" /dev/null
grep -q "MiB of 9.0 MiB 100%" "$TMP/out" || fail "no progress line on a terminal: $(head -c 300 "$TMP/out" | od -c | head -5)"
run 0 "blob get (stdout)" kv blob get big && same_bytes "blob get bytes" "$TMP/blob.in"
run 0 "blob get -o FILE" kv blob get big -o "$TMP/blob.out"
checks=$((checks + 1))
cmp -s "$TMP/blob.in" "$TMP/blob.out" || fail "blob get -o FILE: the file differs"
[ -s "$TMP/out" ] && fail "blob get -o FILE printed on stdout"
run 0 "blob get --offset --length" kv blob get big --offset 65530 --length 100000
tail -c +65531 "$TMP/blob.in" | head -c 100000 >"$TMP/blob.part"
same_bytes "blob get range" "$TMP/blob.part"
run 0 "blob get --length past the end" kv blob get big --offset 9437180 --length 100
tail -c 7 "$TMP/blob.in" >"$TMP/blob.part"
same_bytes "blob get range at the end" "$TMP/blob.part"
run 0 "blob get --offset past the end" kv blob get big --offset 9437187
checks=$((checks + 1))
[ -s "$TMP/out" ] && fail "blob get past the end printed $(wc -c <"$TMP/out") bytes"
run 0 "blob put - (stdin)" sh -c '"$1" -e "$2" blob put fromstdin - <"$3"' _ "$KVCTL" "$SOCK" "$TMP/blob.in"
run 0 "blob get of the stdin blob" kv blob get fromstdin && same_bytes "stdin blob bytes" "$TMP/blob.in"
run 0 "blob info" kv blob info big && out_matches "blob info text" '^[a-z_0-9]+: .+$'
grep -qx "size: 9437187" "$TMP/out" || fail "blob info: no 'size: 9437187' in $(cat "$TMP/out")"
grep -qx "version: $bv" "$TMP/out" || fail "blob info: no 'version: $bv'"
run 0 "blob info -o json" kv -o json blob info big
json "blob info document" 'd["key"] == "big" and d["size"] == 9437187 and d["version"] == '"$bv"' and d["chunk_size"] == 65536 and d["chunks"] == 145 and len(d["xxh64"]) == 16 and d["stored_bytes"] > 0 and d["expiry_ms"] == 0 and "timestamp" in d'
run 0 "blob put -o json --chunk-size --ttl" kv -o json blob put small "$TMP/blob.part" --chunk-size 4096 --ttl 3600
json "blob put document" 'd["key"] == "small" and d["size"] == 7 and d["version"] > '"$bv"
sv=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$TMP/out")
run 0 "blob info --version" kv -o json blob info small --version "$sv"
json "blob info of a chunk size and TTL" 'd["chunk_size"] == 4096 and d["size"] == 7 and d["expiry_ms"] > d["timestamp_ms"]'
run 0 "blob get -o FILE -o json" kv -o json blob get big --offset 1 --length 10 -o "$TMP/blob.ten"
json "blob get document" 'd["bytes"] == 10 and d["offset"] == 1 and d["size"] == 9437187 and d["version"] == '"$bv"' and raw("blob.ten") == raw("blob.in")[1:11]'
run 2 "blob get -o json without a file" kv -o json blob get big
run 5 "get of a blob key" kv get big
err_is "get of a blob: one line" "kvctl: get big: version $bv is a blob of 9437187 bytes: read it with 'kvctl blob get'"
checks=$((checks + 1))
[ -s "$TMP/out" ] && fail "get of a blob printed on stdout"
run 0 "get -o json of a blob key" kv -o json get big
json "get document of a blob" 'd["blob"] is True and d["blob_size"] == 9437187 and d["version"] == '"$bv"' and "value" not in d'
run 0 "scan -o json with blobs" kv -o json scan --prefix fromstdin
json "scan document of a blob" 'd["items"][0]["blob"] is True and d["items"][0]["blob_size"] == 9437187 and "value" not in d["items"][0]'
run 0 "export of a tenant with blobs" kv export --history --file "$TMP/blobs.jsonl"
checks=$((checks + 1))
head -n 1 "$TMP/blobs.jsonl" | grep -q '"format_version":2' || fail "export with blobs: header $(head -n 1 "$TMP/blobs.jsonl")"
checks=$((checks + 1))
grep -q '^{"blob_part":"' "$TMP/blobs.jsonl" || fail "export with blobs: no part lines"
grep -q "blobs of" "$TMP/out" || fail "export summary lacks the blobs: $(cat "$TMP/out")"
run 0 "tenant create for an import with blobs" kv tenant create blobcopy --history 5
run 0 "import of an export with blobs" kv -t blobcopy import --file "$TMP/blobs.jsonl"
grep -q "blobs of" "$TMP/out" || fail "import summary lacks the blobs: $(cat "$TMP/out")"
run 0 "blob get of an imported blob" kv -t blobcopy blob get fromstdin && same_bytes "imported blob bytes" "$TMP/blob.in"
run 0 "blob get of an imported blob (2)" kv -t blobcopy blob get big && same_bytes "imported blob bytes (2)" "$TMP/blob.in"
run 0 "versions of a blob" kv versions fromstdin --values
out_matches "versions of a blob: marked, no bytes" "^[0-9]+${TAB}[-0-9T:.Z]+${TAB}blob\$"
run 0 "versions -o json of a blob" kv -o json versions fromstdin --values
json "versions document of a blob" 'd["versions"][0]["blob"] is True and d["versions"][0]["blob_size"] == 9437187 and "value" not in d["versions"][0]'
run 0 "put over a blob" kv put big plain
run 5 "blob info of a value" kv blob info big
grep -q "not a blob" "$TMP/err" || fail "blob info of a value: '$(cat "$TMP/err")'"
run 1 "blob get of a missing key" kv blob get nosuchblob
run 3 "blob put --if-version that does not hold" kv blob put big "$TMP/blob.part" --if-version 1
run 5 "blob put of a missing file" kv blob put x "$TMP/nosuchfile"
run 2 "blob put without a file" kv blob put x

# ---- bash completion (cli/kvctl.bash-completion, sourced without bash-completion) ----------

COMPLETION=$(dirname "$0")/../../cli/kvctl.bash-completion
checks=$((checks + 1))
bash -n "$COMPLETION" || fail "bash -n $COMPLETION"
# completes WANT WORD...: _kvctl, on a line of the WORDs with the cursor at the
# end of the last, offers exactly WANT (space-separated)
completes() {
	want=$1
	shift
	checks=$((checks + 1))
	# shellcheck disable=SC2016 # expanded by bash -c
	got=$(bash -c '. "$1" && shift && COMP_WORDS=("$@") && COMP_CWORD=$(($# - 1)) &&
		COMP_LINE="$*" && COMP_POINT=${#COMP_LINE} && _kvctl && echo "${COMPREPLY[*]}"' \
		_ "$COMPLETION" "$@" 2>&1)
	[ "$got" = "$want" ] || fail "completion of '$*': '$got', want '$want'"
}
completes "tenant" kvctl te
completes "put" kvctl -o json p
completes "create" kvctl tenant cr
completes "info" kvctl -t x tenant i
completes "stats" kvctl st
completes "create list info drop passivate activate release adopt backup" kvctl tenant ''
completes "text json" kvctl -o ''
completes "always interval none" kvctl tenant create t --sync ''
completes "--as-of" kvctl get k --as
completes "--max-keys --max-bytes" kvctl tenant create t --max
completes "refuse oldest" kvctl tenant create t --evict ''
completes "--evict" kvctl tenant create t --ev
completes "blob" kvctl bl
completes "put get info" kvctl blob ''
completes "--chunk-size" kvctl blob put k f --ch
completes "--offset" kvctl blob get k --off
completes "put get info" kvctl help blob ''
completes "export" kvctl exp
completes "--history" kvctl export --hi
completes "--batch" kvctl import --ba
completes "" kvctl tenant create t --history ''
completes "--token --token-file" kvctl --tok
completes "" kvctl get --version ''
completes "create list info drop passivate activate release adopt backup" kvctl help tenant ''
# tenant names, from the daemon the line's -e names
completes "hist" "$KVCTL" -e "$SOCK" tenant info h
completes "scans" "$KVCTL" -e "$SOCK" -t sc
completes "" "$KVCTL" -e "kv+ipc://$TMP/nobody.sock" tenant drop ''

# ---- the same commands over nng ----------------------------------------------------------------

nkv() {
	"$KVCTL" -e "$NSOCK" "$@"
}
run 0 "put over nng" nkv put nk "over nng"
run 0 "get over the stream of a key put over nng" kv get nk
[ "$(cat "$TMP/out")" = "over nng" ] || fail "get nk: '$(cat "$TMP/out")'"
run 0 "versions over nng" nkv -o json versions nk --values
json "versions over nng document" 'len(d["versions"]) == 1 and d["versions"][0]["value"] == "over nng"'
run 0 "scan over nng" nkv -t scans -o json scan --prefix scan/ --limit 2
json "scan over nng document" '[i["key"] for i in d["items"]] == ["scan/a", "scan/b"]'

# ---- a daemon that wants a token: --token, KVD_TOKEN, --token-file -----------------------

printf '[kvd]\ntoken = s3cret\n' >"$TMP/token.conf"
TSOCK="kv+ipc://$TMP/token.sock"
"$KVD" --config "$TMP/token.conf" --data-dir "$TMP/tokendata" --listen "$TSOCK" --workers 1 \
	>/dev/null 2>"$TMP/token-kvd.log" &
TOKEN_PID=$!
tries=0
until "$KVCTL" -e "$TSOCK" health >/dev/null 2>&1; do # Health needs no token
	tries=$((tries + 1))
	if [ "$tries" -ge 150 ]; then
		fail "the kvd with a token did not answer 'kvctl health': $(tail -n 5 "$TMP/token-kvd.log")"
		break
	fi
	sleep 0.1
done
tkv() {
	"$KVCTL" -e "$TSOCK" "$@"
}
# token_file NAME MODE CONTENT: a token file under $TMP
token_file() {
	# shellcheck disable=SC2059 # the content is a printf format
	printf "$3" >"$TMP/$1"
	chmod "$2" "$TMP/$1"
}
run 5 "no token (UNAUTHENTICATED)" tkv put k v
run 5 "a wrong --token" tkv --token wrong put k v
run 0 "--token" tkv --token s3cret put k v
run 0 "KVD_TOKEN" env KVD_TOKEN=s3cret "$KVCTL" -e "$TSOCK" get k
run 5 "a wrong KVD_TOKEN" env KVD_TOKEN=wrong "$KVCTL" -e "$TSOCK" get k
token_file tok 600 's3cret\n'
run 0 "--token-file (0600)" tkv --token-file "$TMP/tok" get k
run 0 "--token-file after the arguments" tkv get k --token-file "$TMP/tok"
run 0 "--token-file wins over KVD_TOKEN" env KVD_TOKEN=wrong "$KVCTL" -e "$TSOCK" --token-file "$TMP/tok" get k
run 5 "the last of --token-file and --token wins" tkv --token-file "$TMP/tok" --token wrong get k
run 0 "the last of --token and --token-file wins" tkv --token wrong --token-file "$TMP/tok" get k
token_file tok-group 640 's3cret\n'
run 0 "--token-file readable by its group (0640)" tkv --token-file "$TMP/tok-group" get k
token_file tok-bare 400 's3cret'
run 0 "--token-file without a newline" tkv --token-file "$TMP/tok-bare" get k
token_file tok-crlf 600 's3cret\r\n'
run 0 "--token-file with CR LF" tkv --token-file "$TMP/tok-crlf" get k
token_file tok-lines 600 's3cret\nnot the token\n'
run 0 "--token-file: the first line only" tkv --token-file "$TMP/tok-lines" get k
token_file tok-wrong 600 'wrong\n'
run 5 "--token-file with a wrong token" tkv --token-file "$TMP/tok-wrong" get k
token_file tok-world 644 's3cret\n'
run 2 "--token-file readable by others (0644) is refused" tkv --token-file "$TMP/tok-world" get k
err_is "the refusal's message" "kvctl: get k: --token-file $TMP/tok-world: others may read or write it (mode 0644); chmod o= the file"
token_file tok-empty 600 '\ns3cret\n'
run 2 "--token-file with an empty first line" tkv --token-file "$TMP/tok-empty" get k
head -c 1025 /dev/zero | tr '\0' t >"$TMP/tok-long"
chmod 600 "$TMP/tok-long"
run 2 "--token-file with a line of 1025 bytes" tkv --token-file "$TMP/tok-long" get k
run 2 "a missing --token-file" tkv --token-file "$TMP/nothing" get k
run 2 "a directory as --token-file" tkv --token-file "$TMP" get k
run 2 "--token-file without a value" tkv get k --token-file
run 2 "--token-file refused -o json" tkv -o json --token-file "$TMP/tok-world" get k
json "token file refusal document" 'd["error"]["name"] == "INVALID_ARGUMENT" and d["error"]["exit"] == 2'
kill -TERM "$TOKEN_PID"
wait "$TOKEN_PID" 2>/dev/null
TOKEN_PID=

# ---- the daemon goes away ---------------------------------------------------------------------

within 3 4 "a daemon that is not there (exit 4, fast)" "$KVCTL" -e "kv+ipc://$TMP/nobody.sock" health
case $(cat "$TMP/err") in
"kvctl: health: cannot reach kv+ipc://$TMP/nobody.sock: "?*) ;;
*) fail "unreachable message: '$(cat "$TMP/err")'" ;;
esac
within 3 4 "unreachable -o json" "$KVCTL" -e "kv+ipc://$TMP/nobody.sock" -o json get k
json "unavailable document" 'd["error"]["name"] == "UNAVAILABLE" and d["error"]["exit"] == 4'
within 3 4 "unreachable tcp" "$KVCTL" -e tcp://127.0.0.1:1 health
within 3 4 "unreachable kv+tcp" "$KVCTL" -e kv+tcp://127.0.0.1:1 health
within 3 4 "a daemon that is not there over nng (exit 4, fast)" "$KVCTL" -e "ipc://$TMP/nobody.sock" health
case $(cat "$TMP/err") in
"kvctl: health: cannot reach ipc://$TMP/nobody.sock: "?*) ;;
*) fail "unreachable message over nng: '$(cat "$TMP/err")'" ;;
esac
# the wrong kind of listener says so
within 3 4 "kv+ipc:// against the nng socket" "$KVCTL" -e "kv+$NSOCK" health
grep -q "nng REQ/REP listener" "$TMP/err" || fail "kv+ against nng: '$(cat "$TMP/err")'"

kill -TERM "$KVD_PID"
# a watchdog, so that a kvd that ignores SIGTERM cannot hang the test
(sleep 20 && kill -KILL "$KVD_PID") >/dev/null 2>&1 &
watchdog=$!
wait "$KVD_PID"
status=$?
KVD_PID=
kill "$watchdog" 2>/dev/null
checks=$((checks + 1))
[ "$status" -eq 0 ] || fail "kvd exited $status after SIGTERM, want 0; its log: $(tail -n 60 "$TMP/kvd.log")"
[ -s "$TMP/kvd.out" ] && fail "kvd printed on stdout: $(head -c 200 "$TMP/kvd.out")"
within 3 4 "health after kvd stopped (exit 4, fast)" "$KVCTL" -e "$SOCK" health

if [ "$failures" -gt 0 ]; then
	echo "$failures of $checks checks failed"
	exit 1
fi
echo "all $checks checks passed"
exit 0
