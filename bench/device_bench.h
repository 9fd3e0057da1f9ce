/*
 * bench/device_bench.h — what kvbench device's files share: its options,
 * its cells (kvd's side and fio's), the run, and the figures and report
 * (device_report.c) the cells of device.c feed.
 */
#ifndef KV_BENCH_DEVICE_BENCH_H
#define KV_BENCH_DEVICE_BENCH_H

#include "bench.h"
#include "report.h"
#include "runenv.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define DV_SECONDS_DEFAULT  5.0
#define DV_WARMUP_DEFAULT   0.5
#define DV_QUICK_SECONDS    0.2
#define DV_QUICK_WARMUP     0.05
#define DV_GET_KEYS_DEFAULT 65536ull     /* 256 MiB of 4 KiB values */
#define DV_QUICK_GET_KEYS   2048ull      /* 8 MiB */
#define DV_CACHE_DEFAULT    (8ull << 20) /* the get cell's read cache */
#define DV_QUICK_CACHE      (1ull << 20)
#define DV_GET_VALUE        4096u
#define DV_FILL_THREADS     4u
#define DV_LIST_MAX         8
#define DV_WRITERS_MAX      256ull
#define DV_VALUE_MAX        (16ull << 20)
#define DV_POOL_BYTES       (DV_VALUE_MAX + (1u << 20))
#define DV_KEY_MAX          32
#define DV_ERRORS_MAX       100 /* a thread stops after this many failed operations */
#define DV_ERR_MAX          512
#define DV_TENANT           "bench"
#define DV_GRACE_NS         (30ull * 1000000000ull) /* a thread's first recorded op, at most */
#define DV_FIO_ARGS         24
#define DV_FIO_ALIGN        4096u /* fio's block sizes: whole 4 KiB sectors (O_DIRECT) */

/* A put cell's tenant sync: none; always (a synced append is one RWF_DSYNC
 * write, KV_DEV_SYNC_DSYNC); flush (always, the write linked to an
 * fdatasync, KV_DEV_SYNC_FLUSH). */
enum dv_sync { DV_SYNC_NONE, DV_SYNC_ALWAYS, DV_SYNC_FLUSH, DV_SYNC_MODES };

extern const char *const dv_sync_names[DV_SYNC_MODES]; /* by enum dv_sync */

struct dv_opts {
	const char *device, *fio, *dir;
	bool yes_format, force, no_fio, quick, json, markdown;
	uint64_t file_size, extent_size, get_keys, read_cache;
	uint64_t sizes[DV_LIST_MAX], writers[DV_LIST_MAX];
	size_t nsizes, nwriters;
	bool sync[DV_SYNC_MODES]; /* by enum dv_sync */
	double seconds, warmup;
	bool seconds_set, warmup_set, writers_set, get_keys_set, read_cache_set;
};

enum dv_state { DV_NOT_RUN, DV_SKIPPED, DV_OK, DV_FAILED };

static inline const char *dv_state_name(enum dv_state s)
{
	return s == DV_OK        ? "ok"
	       : s == DV_FAILED  ? "failed"
	       : s == DV_SKIPPED ? "skipped"
	                         : "not run";
}

/* What one fio run measured. */
struct dv_fio {
	enum dv_state state;
	char command[2048];
	double bw_bytes, iops, seconds;
	double clat_p50, clat_p99, clat_mean, lat_mean; /* us */
	char err[DV_ERR_MAX];
};

/* One cell: kvd's side and fio's. */
struct dv_cell {
	bool get; /* the get cell; else a put cell */
	uint64_t size;
	enum dv_sync sync;
	unsigned threads;
	enum dv_state state;
	uint64_t ops, errors, wrong, bytes;
	double seconds, loadavg;
	bool full;                    /* a put met -ENOSPC: the cell ended there */
	bool budget_hit;              /* the cell wrote its byte budget before --seconds */
	uint64_t p50, p99, p999, max; /* ns */
	uint64_t batches, writes, syncs;
	double activate_ms; /* get cell: kv_store_get activating the tenant */
	uint64_t region;    /* get cell: bytes fio reads from */
	struct dv_fio fio;
	char err[DV_ERR_MAX];
};

struct dv_bench {
	struct dv_opts o;
	struct runenv run;
	char *pool;
	uint64_t dev_bytes, budget;
	bool is_block, formatted;
	char dev_info[1024];
	char fio_path[BENCH_PATH_MAX];
	char fio_version[64];
	char fio_skip[DV_ERR_MAX]; /* why fio does not run, "" when it does */
	unsigned fio_seq;
	struct dv_cell *cells;
	size_t ncells, cap;
	FILE *progress;
};

/* ---- device_report.c ---------------------------------------------------- */

/* A target of the issue, measured or not (DV_OK: measured). */
struct dv_target {
	char name[160];
	double kvd, fio, ratio, want; /* ratio >= want: met */
	const char *unit;
	enum dv_state state; /* DV_OK: measured */
	char why[DV_ERR_MAX];
};

/* A cell's ops/s, MB/s, and kvd's figure over fio's (0 when either is
 * missing); its name ("put 4KiB always x16"). */
double dv_rate(const struct dv_cell *c);
double dv_mbs(const struct dv_cell *c);
double dv_ratio(const struct dv_cell *c);
void dv_cell_name(const struct dv_cell *c, char *buf, size_t len);
/* The progress table's head, and one cell's line. */
void dv_progress_head(FILE *f);
void dv_progress(FILE *f, const struct dv_cell *c);
/* The targets the run measured (at most max) into out; how many. */
size_t dv_targets(const struct dv_bench *b, struct dv_target *out, size_t max);
/* The report: its header, then text, markdown or JSON. */
void dv_header(const struct dv_bench *b, struct report *h);
void dv_report_text(const struct dv_bench *b, struct report *h, const struct dv_target *t,
                    size_t nt);
void dv_report_markdown(const struct dv_bench *b, struct report *h, const struct dv_target *t,
                        size_t nt);
void dv_report_json(const struct dv_bench *b, struct report *rep, bool ok,
                    const struct dv_target *t, size_t nt);

#endif
