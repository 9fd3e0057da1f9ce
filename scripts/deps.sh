#!/bin/sh
# Installs what kvd needs to build, test and benchmark on Debian 12 (run as root).
# build-essential brings gcc's ASan, UBSan and TSan runtimes; the fuzz build
# (-Dfuzz=true) needs clang and its libFuzzer and sanitizer runtimes, which
# clang only recommends. libcurl and jansson build kvd's etcd client
# (daemon/etcd.c); etcd-server is the real etcd its test (test_etcd) starts.
set -e
export DEBIAN_FRONTEND=noninteractive
PKGS="build-essential meson ninja-build pkg-config cmake
 liburing-dev libnng-dev libmsgpack-dev libsystemd-dev libcmocka-dev
 libisal-dev libxxhash-dev libinih-dev libjansson-dev libmicrohttpd-dev libssl-dev
 liblz4-dev libzstd-dev
 libblkid-dev e2fsprogs fio
 libcurl4-openssl-dev etcd-server
 librocksdb-dev libleveldb-dev liblmdb-dev libhiredis-dev redis-server
 clang libclang-rt-14-dev"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing
fi
