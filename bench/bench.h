/*
 * bench.h — kvbench subcommands. Each takes the arguments after its name and
 * returns the process exit code.
 */
#ifndef KV_BENCH_H
#define KV_BENCH_H

/* kvbench engine: db_bench-style workloads against the engine and its peers. */
int bench_engine(int argc, char **argv);

/* kvbench keydir: key-directory memory per key and operation speed. */
int bench_keydir(int argc, char **argv);

/* kvbench open: time to open a database from hint files and by log scan. */
int bench_open(int argc, char **argv);

/* kvbench merge: merge time, space reclaimed, writer latency during a merge. */
int bench_merge(int argc, char **argv);

#endif
