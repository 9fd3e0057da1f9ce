/*
 * bench/runenv.h — what `kvbench versions`, `durable` and `coldstart`
 * share (ycsb some of it): their common options as entries of an option
 * table (bench/opt.h), the parsing of backend lists, the run's directory,
 * the kvd and redis-server binaries behind a struct yb_env
 * (bench/ycsb_backend.h, whose kvd is a struct kvd_run of harness/kvdrun.h),
 * and the report header's common lines and JSON arrays (bench/report.h).
 *
 * Every parse function prints its own one-line error ("kvbench CMD: …") to
 * stderr and returns -EINVAL; everything else here returns 0 or -1 with a
 * message printed. Single-threaded: call it from the benchmark's main thread.
 */
#ifndef KV_BENCH_RUNENV_H
#define KV_BENCH_RUNENV_H

#include "opt.h"
#include "report.h"
#include "ycsb_backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RUNENV_LIST_MAX 16 /* entries of a list option */

/* One run of a benchmark: its directory and the processes it may start. */
struct runenv {
	const char *cmd; /* "versions"… */
	char command[4096];
	char base[YB_PATH_MAX]; /* the run's directory */
	char fs[64];            /* its file system */
	char kvd_path[YB_PATH_MAX];
	char kvd_bin[YB_PATH_MAX + 16]; /* the pinned copy the run starts */
	char redis_path[YB_PATH_MAX];
	struct yb_env env;
	bool kvd_failed; /* the kvd the run started did not exit 0 */
	char kvd_err[512];
};

/* The options versions, durable and coldstart share. */
struct runenv_opts {
	uint64_t seed;
	double seconds, warmup; /* timed experiments */
	bool seconds_set, warmup_set;
	bool stream; /* --transport stream (the default) */
	const char *kvd, *endpoint, *redis_server, *dir;
	bool quick, json, markdown;
};

#define RUNENV_OPTS_N 12 /* entries runenv_opts_table writes at most */

/* Defaults: seed 1, the stream transport. */
void runenv_opts_init(struct runenv_opts *o);
/* Writes the shared options' entries of an option table (bench/opt.h) to
 * t: --seed (its help seed_help), with timed --seconds, --warmup and
 * --redis-server, --kvd, --endpoint, --transport, --dir, --quick (its help
 * quick_help), --markdown and --json. The number of entries written. */
size_t runenv_opts_table(struct runenv_opts *o, bool timed, const char *seed_help,
                         const char *quick_help, struct bench_opt *t);
/* After the options: not --json and --markdown both. 0 or -EINVAL (said). */
int runenv_opts_done(const char *cmd, const struct runenv_opts *o);

/* --transport: "nng" (kvd's ipc:// and tcp://) or "stream" (kv+ipc://,
 * kv+tcp://). */
int runenv_parse_transport(const char *cmd, const char *s, bool *ret_stream);
/* A comma-separated list of distinct backend names of bench/ycsb_backend.h,
 * each one of allowed (NULL-terminated). */
int runenv_parse_backends(const char *cmd, const char *s, const char *const *allowed,
                          const struct yb_backend **vals, size_t max, size_t *ret_n);

/* Fills r: the command line, the run's directory (mkdtemp under dir, or
 * /tmp), kvd (given, or next to kvbench; copied into the directory) when
 * need_kvd and no endpoint, redis-server (given, or from PATH; a missing
 * one is not an error: its backends are skipped). */
int runenv_init(struct runenv *r, const char *cmd, int argc, char **argv, const char *dir,
                const char *kvd, const char *endpoint, const char *redis_server, bool need_kvd);
/* Stops the kvd the run started (r->kvd_failed when it did not exit 0) and
 * removes the directory when remove is true. 0, or -1 when kvd failed. */
int runenv_fini(struct runenv *r, bool remove);
/* The end of a run: on failure says so and where its files are kept
 * (what = "a cell failed or had errors"), otherwise removes the run's
 * directory. The exit code: 0 when ok, 1 when not. */
int runenv_finish(const struct runenv *r, bool ok, const char *what);

/* Fills n bytes with printable characters drawn from seed. */
void runenv_fill_pool(char *pool, size_t n, uint64_t seed);
/* Asks each backend whether it can run here; a reason it cannot goes to
 * the skip row i (skip_len bytes a row) and, with ", skipped", to progress.
 * The number of backends that can run. */
size_t runenv_skip_unavailable(const struct runenv *r, const struct yb_backend *const *backends,
                               size_t n, char *skip, size_t skip_len, FILE *progress);

/* Header lines (bench/report.h): date, machine, build, command, directory. */
void runenv_lines_common(struct report *rep, const struct runenv *r);
/* kvd's command line and version, when the run started one. */
void runenv_lines_kvd(struct report *rep, const struct runenv *r);

/* The backends' names as a JSON array. */
json_t *runenv_json_backends(const struct yb_backend *const *backends, size_t n);
/* The backends runenv_skip_unavailable skipped, as a JSON array of
 * {"backend", "reason"} objects. */
json_t *runenv_json_skipped(const struct yb_backend *const *backends, size_t n, const char *skip,
                            size_t skip_len);

/* /proc/loadavg's 1-minute figure, -1 when unknown. */
double runenv_loadavg(void);
/* Median of n values (sorted in place), 0 when n == 0. */
double runenv_median(double *v, size_t n);

#endif
