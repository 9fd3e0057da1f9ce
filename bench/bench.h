/*
 * bench.h — kvbench subcommands. Each takes the arguments after its name and
 * returns the process exit code.
 */
#ifndef KV_BENCH_H
#define KV_BENCH_H

#include "proc.h"
#include "sys.h"

/* kvbench engine: db_bench-style workloads against the engine and its peers. */
int bench_engine(int argc, char **argv);

/* kvbench keydir: key-directory memory per key and operation speed. */
int bench_keydir(int argc, char **argv);

/* kvbench open: time to open a database from hint files and by log scan. */
int bench_open(int argc, char **argv);

/* kvbench merge: merge time, space reclaimed, writer latency during a merge. */
int bench_merge(int argc, char **argv);

/* kvbench rpc: Get/Put throughput and latency through a kvd it starts, with
 * nng, plain-socket, disk and sockperf baselines. */
int bench_rpc(int argc, char **argv);

/* kvbench activate: time to activate a passive tenant (hint files, log
 * replay), key-directory bytes per key, first Get through kvd. */
int bench_activate(int argc, char **argv);

/* kvbench ycsb: the YCSB core workloads A-F against kvd, Redis and the
 * embedded engines (bench/ycsb.c). */
int bench_ycsb(int argc, char **argv);

/* kvbench versions: the newest m versions of a key, kvd's Versions call
 * against a chain of keys in Redis (bench/versions.c). */
int bench_versions(int argc, char **argv);

/* kvbench durable: put throughput and latency with sync=always at several
 * client counts, kvd's group commit against Redis appendfsync always
 * (bench/durable.c). */
int bench_durable(int argc, char **argv);

/* kvbench coldstart: a new process opening a database (or connecting to
 * kvd) and doing k operations, from exec to the k-th result
 * (bench/coldstart.c). */
int bench_coldstart(int argc, char **argv);

#endif
