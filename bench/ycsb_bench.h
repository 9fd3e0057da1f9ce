/*
 * bench/ycsb_bench.h — what the files of kvbench ycsb share: its limits, its
 * options, the results of a phase and the bench's state.
 *
 *   ycsb.c         workloads, records, phases, the sequence, options, entry
 *   ycsb_report.c  progress rows and the text, markdown and JSON reports
 *
 * Single-threaded: the report runs on the benchmark's main thread.
 */
#ifndef KV_BENCH_YCSB_BENCH_H
#define KV_BENCH_YCSB_BENCH_H

#include "report.h"
#include "runenv.h"
#include "ycsb_backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define YC_RECORDS_DEFAULT    100000ull
#define YC_OPERATIONS_DEFAULT 1000000ull
#define YC_WARMUP_DEFAULT     2.0
#define YC_SYNC_INTERVAL_MS   1000u /* = Redis's appendfsync everysec */
#define YC_QUICK_RECORDS      300ull
#define YC_QUICK_OPERATIONS   600ull
#define YC_QUICK_THREADS      2u
#define YC_QUICK_WARMUP       0.05
#define YC_RECORDS_MAX        2000000000ull /* YCSB's key numbers are Java ints */
#define YC_OPERATIONS_MAX     (1ull << 40)
#define YC_THREADS_MAX        256u
#define YC_TLIST_MAX          16  /* entries of --threads */
#define YC_BACKENDS_MAX       9   /* entries of --backend: every backend, engine-dev too */
#define YC_FIELDS             10  /* YCSB's fieldcount */
#define YC_FIELD_LEN          100 /* YCSB's fieldlength */
#define YC_FIELD_NAME_MAX     16  /* bytes of "field<n>" */
#define YC_RECORD_MAX         (YC_FIELDS * (8 + YC_FIELD_NAME_MAX + YC_FIELD_LEN))
#define YC_POOL_BYTES         (1u << 20) /* random printable bytes fields are cut from */
#define YC_ERRORS_MAX         1000       /* a thread stops after this many errors */
#define YC_ERR_MAX            512
#define YC_INFO_MAX           1024
#define YC_RESULTS_MAX        4096 /* phases of one run */
#define YC_INFOS_MAX          64   /* backend descriptions kept for the header */

enum yc_op { OP_READ, OP_UPDATE, OP_INSERT, OP_SCAN, OP_RMW, OP_COUNT };
extern const char *const yc_op_names[OP_COUNT];

struct yc_opts {
	uint64_t records, operations, seed;
	unsigned threads[YC_TLIST_MAX];
	size_t nthreads;
	unsigned load_threads; /* 0: the run's thread count */
	double target;         /* ops/s of all threads together; 0: as fast as possible */
	enum yb_sync syncs[3];
	size_t nsyncs;
	uint32_t sync_interval_ms;
	double warmup, max_seconds;
	bool workload[26]; /* by letter */
	const struct yb_backend *backends[YC_BACKENDS_MAX];
	size_t nbackends;
	const char *kvd, *endpoint, *redis_server, *dir;
	const char *device;     /* engine-dev's device, formatted for every database */
	bool yes_format, force; /* --yes-format, --force */
	bool stream;            /* --transport stream: kvd over kv+ipc:// and kv+tcp:// */
	bool quick, json, markdown;
	bool records_set, operations_set, threads_set, warmup_set, sync_set, backends_set;
};

struct yc_opstat {
	uint64_t count; /* recorded */
	uint64_t errors, not_found, wrong;
	uint64_t p50, p95, p99, p999, max, mean; /* ns */
	uint64_t scanned;                        /* SCAN: records returned */
};

struct yc_result {
	const struct yb_backend *be;
	enum yb_sync sync;
	unsigned threads; /* client threads of the phase */
	char workload;    /* 'a'…'f' */
	bool load;        /* the load phase (with `workload`'s file) */
	bool ran;         /* false: skipped after the load failed */
	bool failed;      /* the phase, its database or its server failed */
	bool early;       /* stopped by --max-seconds */
	uint64_t planned; /* operations asked for */
	uint64_t ops;     /* operations recorded */
	uint64_t warmup_ops;
	double seconds; /* the measured window */
	struct yc_opstat op[OP_COUNT];
	uint64_t errors; /* every kind, every op type, warm-up included */
	double loadavg;  /* /proc/loadavg's 1-minute figure at the end: other work */
	char err[YC_ERR_MAX];
};

struct yc_info {
	const struct yb_backend *be;
	enum yb_sync sync;
	char text[YC_INFO_MAX];
};

struct yc_skip {
	const struct yb_backend *be;
	char reason[YC_ERR_MAX];
};

struct yc_bench {
	struct yc_opts o;
	struct runenv run; /* the command line, the run's directory, kvd and redis */
	char *pool;        /* YC_POOL_BYTES + YC_FIELD_LEN printable random bytes */
	size_t record_size;
	struct yc_result *res;
	size_t nres;
	struct yc_info info[YC_INFOS_MAX];
	size_t ninfo;
	struct yc_skip skip[YC_BACKENDS_MAX];
	size_t nskip;
	FILE *progress;
};

static inline double yc_rate(const struct yc_result *r)
{
	return r->seconds > 0 ? (double)r->ops / r->seconds : 0;
}

/* ycsb_report.c */
void yc_progress_head(FILE *f);
/* Result r as progress rows: its total, then one row per op type. */
void yc_progress(FILE *f, const struct yc_result *r);
/* The report's header lines. */
void yc_header(const struct yc_bench *b, struct report *rep);
void yc_report_text(const struct yc_bench *b);
void yc_report_markdown(const struct yc_bench *b, const struct report *h);
void yc_report_json(const struct yc_bench *b, struct report *rep, bool ok);

#endif
