/*
 * bench.h — kvbench subcommands. Each takes the arguments after its name and
 * returns the process exit code.
 *
 * Errors:
 *   - Exit codes: 0 the run finished and every cell is sound (also after
 *     --help); 1 the run failed: a cell failed or had errors, a kvd or
 *     redis-server it started exited badly, out of memory, a file could not
 *     be written (ycsb, versions, durable, coldstart and activate then keep
 *     the run's directory and say where it is); 2 a
 *     usage error: an unknown option, a bad value, options that exclude each
 *     other. kvbench itself answers 2 to a missing or unknown subcommand.
 *     Nothing exits 77: a peer or transport that cannot run here is left out
 *     of the report with the reason, not skipped as a whole.
 *   - Options: a subcommand's parse returns 0 to run, 1 after printing
 *     --help, or -EINVAL after saying what is wrong on stderr as "kvbench
 *     CMD: NAME takes ..." (opt.h's bench_parse_*, runenv.h's runenv_opt);
 *     the subcommand turns that into 0 or 2 (`rv > 0 ? 0 : 2`). maint.c's
 *     parse_common (open, merge) returns the exit code itself (1 for --help,
 *     2 for an error; its callers map 1 to 0), and its own range check says
 *     "kvbench:" without the subcommand.
 *   - Below the subcommands nothing exits kvbench. proc.h and sys.h return 0 or
 *     -errno, with a one-line reason in err where they take one, and never
 *     print; nor do the backend interfaces (peers.h, ycsb_backend.h), which
 *     return -1 with a one-line message in an err buffer. The subcommand
 *     prints it, once, on stderr, prefixed "kvbench CMD: ". runenv.h (the
 *     run shared by ycsb, versions, durable and coldstart) speaks for its
 *     subcommand: it prints "kvbench CMD: ..." itself and returns -EINVAL
 *     (options), -1 (runenv_init, runenv_fini) or the exit code
 *     (runenv_finish).
 */
#ifndef KV_BENCH_H
#define KV_BENCH_H

#include "proc.h"
#include "sys.h"

/* kvbench codec: put/get throughput and stored/logical bytes per value codec. */
int bench_codec(int argc, char **argv);
/* kvbench blob: bench/blob.c */
int bench_blob(int argc, char **argv);

/* kvbench evict: the memory and put speed of evict=oldest. */
int bench_evict(int argc, char **argv);

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

/* kvbench device: the block-device backend's puts and gets, each cell
 * followed by fio on the same device (bench/device.c). */
int bench_device(int argc, char **argv);

/* kvbench handover: a tenant moved between two nodes of a shared device
 * against a passivation and activation on one node (bench/handover.c). */
int bench_handover(int argc, char **argv);

#endif
