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

#endif
