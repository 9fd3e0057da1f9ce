/*
 * bench/ycsb.c — kvbench ycsb: the YCSB core workloads A–F against kvd,
 * Redis and the embedded engines, with YCSB's own generators.
 *
 *   kvbench ycsb [--workload LIST] [--backend LIST] [--records N]
 *                [--operations N] [--threads LIST] [--load-threads N]
 *                [--target OPS] [--sync LIST] [--sync-interval-ms MS]
 *                [--warmup S] [--max-seconds S] [--seed S] [--kvd PATH]
 *                [--endpoint URL] [--transport nng|stream]
 *                [--redis-server PATH] [--dir DIR]
 *                [--device PATH --yes-format [--force]]
 *                [--quick] [--json | --markdown]
 *
 * The sequence is the one YCSB's documentation gives ("Running a Workload",
 * core workloads): load the database with workload A's file, run A, B, C,
 * F and D, delete the data, load again with E's file, run E. For every
 * sync mode of --sync, every thread count of --threads and every backend
 * of --backend (so the rows of one table are next to each other):
 *   1. a fresh database (ycsb_backend.h), the load phase: recordcount
 *      inserts of records 0..N-1 (CounterGenerator, hashed key names) by
 *      --load-threads threads, all measured;
 *   2. each selected workload of A, B, C, F, D in that order: --warmup
 *      seconds of the workload, not recorded, then operationcount
 *      operations (YCSB's split between threads), recorded; --max-seconds
 *      ends a run early, like YCSB's maxexecutiontime;
 *   3. the database closed and removed; for E a second fresh database,
 *      loaded the same way, and E.
 * Workloads follow YCSB's files (workloads/workloada…f) and CoreWorkload:
 * operation proportions, request distribution (scrambled zipfian with
 * constant 0.99, `latest`, uniform scan lengths 1–100 for E), key names
 * "user" + fnvhash64(keynum), inserts through an acknowledged counter,
 * records of fieldcount 10 × fieldlength 100. Departures from YCSB are
 * listed in docs/BENCHMARKS.md and in the report's header.
 *
 * engine-dev is the engine in a store on a block device (--device, formatted
 * for every fresh database; bench/peer_kvd.c): `--device DEV --yes-format`
 * alone runs engine (files) and engine-dev side by side, engine-dev's
 * ratios against engine's.
 *
 * Every operation is timed with CLOCK_MONOTONIC into a log-linear histogram
 * per operation type (READ, UPDATE, INSERT, SCAN, READ-MODIFY-WRITE; as in
 * YCSB, the read and the update inside a read-modify-write are also
 * counted under READ and UPDATE). ops/s of a run = operations completed
 * after the warm-up / (last thread's end - warm-up end).
 *
 * Checks: a read must find its record and get fieldcount×(4+name+4+
 * fieldlength) bytes; a scan must return 1..count records of that size.
 * Anything else, and every failed call, is an error. The exit code is 0
 * only when every backend that could run here completed every phase with
 * zero errors and every server it started exited 0; a backend not built or
 * not installed is reported as skipped and counts neither way.
 */
#include "ycsb_bench.h"

#include "bench.h"
#include "hist.h"
#include "runenv.h"
#include "ycsb_backend.h"
#include "ycsb_gen.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- workloads --------------------------------------------------------------- */

const char *const yc_op_names[OP_COUNT] = {"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"};

/* A YCSB core workload file (workloads/workloada…f). */
struct yc_workload {
	char id;
	const char *summary;
	double proportion[OP_COUNT]; /* readproportion, updateproportion, insertproportion,
	                                scanproportion, readmodifywriteproportion */
	enum yg_dist dist;           /* requestdistribution */
	const char *dist_name;
	int64_t min_scan, max_scan; /* minscanlength, maxscanlength (uniform) */
};

#define YC_WORKLOADS 6
static const struct yc_workload yc_workloads[YC_WORKLOADS] = {
        {'a',
         "update heavy: 50% read, 50% update",
         {0.5, 0.5, 0, 0, 0},
         YG_DIST_ZIPFIAN,
         "zipfian",
         1,
         1000},
        {'b',
         "read mostly: 95% read, 5% update",
         {0.95, 0.05, 0, 0, 0},
         YG_DIST_ZIPFIAN,
         "zipfian",
         1,
         1000},
        {'c', "read only: 100% read", {1, 0, 0, 0, 0}, YG_DIST_ZIPFIAN, "zipfian", 1, 1000},
        {'d',
         "read latest: 95% read, 5% insert",
         {0.95, 0, 0.05, 0, 0},
         YG_DIST_LATEST,
         "latest",
         1,
         1000},
        {'e',
         "short ranges: 95% scan of 1-100 records, 5% insert",
         {0, 0, 0.05, 0.95, 0},
         YG_DIST_ZIPFIAN,
         "zipfian",
         1,
         100},
        {'f',
         "read-modify-write: 50% read, 50% read-modify-write",
         {0.5, 0, 0, 0, 0.5},
         YG_DIST_ZIPFIAN,
         "zipfian",
         1,
         1000},
};

/* YCSB's documented order: load with A's file, A, B, C, F, D; reload with
 * E's file, E. */
static const char yc_group1[] = "abcfd";
static const char yc_group2[] = "e";

static const struct yc_workload *yc_workload(char id)
{
	for (int i = 0; i < YC_WORKLOADS; i++)
		if (yc_workloads[i].id == id)
			return &yc_workloads[i];
	return NULL;
}

/* ---- records -------------------------------------------------------------------------
 *
 * A record is stored as one value: for each field, a 4-byte big-endian name
 * length, the name ("field0"…), a 4-byte big-endian value length and the
 * value, as YCSB's RocksDB binding serializes a record. */

static size_t yc_record_layout(char *buf)
{
	size_t n = 0;

	for (unsigned f = 0; f < YC_FIELDS; f++) {
		char name[YC_FIELD_NAME_MAX];
		uint32_t nl = (uint32_t)snprintf(name, sizeof name, "field%u", f);
		uint32_t vl = YC_FIELD_LEN;
		unsigned char be[4] = {(unsigned char)(nl >> 24), (unsigned char)(nl >> 16),
		                       (unsigned char)(nl >> 8), (unsigned char)nl};
		if (buf != NULL)
			memcpy(buf + n, be, 4);
		n += 4;
		if (buf != NULL)
			memcpy(buf + n, name, nl);
		n += nl;
		be[0] = (unsigned char)(vl >> 24);
		be[1] = (unsigned char)(vl >> 16);
		be[2] = (unsigned char)(vl >> 8);
		be[3] = (unsigned char)vl;
		if (buf != NULL)
			memcpy(buf + n, be, 4);
		n += 4;
		n += vl; /* the value, filled per write */
	}
	return n;
}

/* Offset of field f's value in a record. */
static size_t yc_field_offset(unsigned f)
{
	size_t n = 0;

	for (unsigned i = 0; i < f; i++)
		n += 8 + (size_t)snprintf(NULL, 0, "field%u", i) + YC_FIELD_LEN;
	return n + 8 + (size_t)snprintf(NULL, 0, "field%u", f);
}

/* ---- one phase ------------------------------------------------------------------------ */

struct yc_phase {
	struct yc_bench *b;
	const struct yb_backend *be;
	struct yb_db *db;
	const struct yc_workload *w; /* the run's workload; NULL: load */
	unsigned nthreads;
	uint64_t ops;
	size_t field_off[YC_FIELDS];
	/* generators shared by the threads */
	struct yg_counter keysequence; /* load: CounterGenerator(insertstart) */
	struct yg_acked inserts;       /* run: transactioninsertkeysequence */
	bool inserts_init;
	struct yg_keychooser keychooser; /* template copied into each thread */
	struct yg_discrete operationchooser;
	struct yg_uniform scanlength;
	struct yg_uniform fieldchooser;
	uint64_t seed;
	/* start gate */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned ready;
	int go;                                   /* 0 wait, 1 run, -1 cancelled */
	uint64_t t_start, t_warm_end, t_deadline; /* ns; deadline 0: none */
	uint64_t tick_ns;                         /* per-thread op interval for --target */
};

struct yc_thread {
	struct yc_phase *ph;
	unsigned idx;
	pthread_t tid;
	struct yb_worker w;
	bool worker_ok;
	struct yg_rng rng;
	struct yg_keychooser kc;
	uint64_t quota; /* operations after the warm-up */
	uint64_t done, warmup_ops;
	bool early;
	struct hist *h; /* OP_COUNT histograms */
	uint64_t errors[OP_COUNT], not_found[OP_COUNT], wrong[OP_COUNT];
	uint64_t scanned, nerrors;
	uint64_t t_end;
	char *buf;   /* a record read back (RMW) */
	char *value; /* a record to write */
	size_t vpos; /* next position in the pool */
	char err[YB_ERR_MAX];
};

/* New random values for the fields of t->value (all of them, or field f). */
static void yc_fill(struct yc_thread *t, char *rec, int f)
{
	const struct yc_phase *ph = t->ph;

	for (unsigned i = 0; i < YC_FIELDS; i++) {
		if (f >= 0 && i != (unsigned)f)
			continue;
		memcpy(rec + ph->field_off[i], ph->b->pool + t->vpos, YC_FIELD_LEN);
		t->vpos = (t->vpos + 4099) % YC_POOL_BYTES;
	}
}

static void yc_error(struct yc_thread *t, enum yc_op op, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void yc_error(struct yc_thread *t, enum yc_op op, const char *fmt, ...)
{
	va_list ap;

	t->errors[op]++;
	t->nerrors++;
	if (t->err[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(t->err, sizeof t->err, fmt, ap);
	va_end(ap);
}

static void yc_record(struct yc_thread *t, enum yc_op op, bool measured, uint64_t ns)
{
	if (measured)
		hist_add(&t->h[op], ns);
}

/* A read; buf NULL for a plain READ. 0 when the record was found whole. */
static int yc_read(struct yc_thread *t, const char *key, size_t kl, bool measured, char *buf)
{
	const struct yb_backend *be = t->ph->be;
	size_t len = 0;
	uint64_t t0 = bench_now_ns();
	int rv = be->read(&t->w, key, kl, buf, buf ? t->ph->b->record_size : 0, &len);
	uint64_t t1 = bench_now_ns();

	if (rv < 0) {
		yc_error(t, OP_READ, "READ %.*s: %s", (int)kl, key, t->w.err);
		return -1;
	}
	yc_record(t, OP_READ, measured, t1 - t0);
	if (rv == YB_NOTFOUND) {
		t->not_found[OP_READ]++;
		yc_error(t, OP_READ, "READ %.*s: not found", (int)kl, key);
		return -1;
	}
	if (len != t->ph->b->record_size) {
		t->wrong[OP_READ]++;
		yc_error(t, OP_READ, "READ %.*s: %zu bytes, not %zu", (int)kl, key, len,
		         t->ph->b->record_size);
		return -1;
	}
	return 0;
}

static int yc_write(struct yc_thread *t, enum yc_op op, const char *key, size_t kl, bool measured,
                    const char *rec)
{
	const struct yb_backend *be = t->ph->be;
	uint64_t t0 = bench_now_ns();
	int rv = (op == OP_INSERT ? be->insert : be->update)(&t->w, key, kl, rec,
	                                                     t->ph->b->record_size);
	uint64_t t1 = bench_now_ns();

	if (rv != 0) {
		yc_error(t, op, "%s %.*s: %s", yc_op_names[op], (int)kl, key, t->w.err);
		return -1;
	}
	yc_record(t, op, measured, t1 - t0);
	return 0;
}

/* One operation of the load (an insert) or of the run (a transaction). */
static void yc_one(struct yc_thread *t, bool measured)
{
	struct yc_phase *ph = t->ph;
	char key[YG_KEY_MAX];
	int64_t keynum;
	size_t kl;
	int op;

	if (ph->w == NULL) {
		/* CoreWorkload.doInsert: keysequence.nextValue().intValue() */
		keynum = (int32_t)yg_counter_next(&ph->keysequence);
		kl = yg_key_name(key, keynum, 1, false);
		yc_fill(t, t->value, -1);
		(void)yc_write(t, OP_INSERT, key, kl, measured, t->value);
		return;
	}
	op = yg_discrete_next(&ph->operationchooser, &t->rng);
	switch (op) {
	case OP_READ:
		keynum = yg_keychooser_next(&t->kc, &t->rng);
		kl = yg_key_name(key, keynum, 1, false);
		(void)yc_read(t, key, kl, measured, NULL);
		break;
	case OP_UPDATE:
		keynum = yg_keychooser_next(&t->kc, &t->rng);
		kl = yg_key_name(key, keynum, 1, false);
		yc_fill(t, t->value, -1);
		(void)yc_write(t, OP_UPDATE, key, kl, measured, t->value);
		break;
	case OP_INSERT: {
		int rv;
		keynum = yg_acked_next(&ph->inserts);
		kl = yg_key_name(key, keynum, 1, false);
		yc_fill(t, t->value, -1);
		(void)yc_write(t, OP_INSERT, key, kl, measured, t->value);
		/* acknowledged also after a failure, as YCSB's finally does */
		if ((rv = yg_acked_ack(&ph->inserts, keynum)) != 0)
			yc_error(t, OP_INSERT, "too many unacknowledged insertion keys");
		break;
	}
	case OP_SCAN: {
		uint64_t len, n = 0, wrong = 0, t0, t1;
		keynum = yg_keychooser_next(&t->kc, &t->rng);
		kl = yg_key_name(key, keynum, 1, false);
		len = (uint64_t)yg_uniform_next(&ph->scanlength, &t->rng);
		t0 = bench_now_ns();
		if (ph->be->scan(&t->w, key, kl, len, ph->b->record_size, &n, &wrong) != 0) {
			yc_error(t, OP_SCAN, "SCAN %s: %s", key, t->w.err);
			break;
		}
		t1 = bench_now_ns();
		yc_record(t, OP_SCAN, measured, t1 - t0);
		if (measured)
			t->scanned += n;
		/* the start key exists: at least it comes back */
		if (n == 0 || n > len || wrong > 0) {
			t->wrong[OP_SCAN]++;
			yc_error(t, OP_SCAN,
			         "SCAN %s of %" PRIu64 ": %" PRIu64 " records, %" PRIu64
			         " of the wrong size",
			         key, len, n, wrong);
		}
		break;
	}
	case OP_RMW: {
		/* CoreWorkload.doTransactionReadModifyWrite: read, then update one
		 * field (writeallfields=false), timed from before the read to
		 * after the write; the read and the write are also READ and
		 * UPDATE */
		uint64_t t0, t1;
		keynum = yg_keychooser_next(&t->kc, &t->rng);
		kl = yg_key_name(key, keynum, 1, false);
		t0 = bench_now_ns();
		if (yc_read(t, key, kl, measured, t->buf) != 0) {
			t->errors[OP_RMW]++;
			break;
		}
		yc_fill(t, t->buf, (int)yg_uniform_next(&ph->fieldchooser, &t->rng));
		if (yc_write(t, OP_UPDATE, key, kl, measured, t->buf) != 0) {
			t->errors[OP_RMW]++;
			break;
		}
		t1 = bench_now_ns();
		yc_record(t, OP_RMW, measured, t1 - t0);
		break;
	}
	default:
		break;
	}
}

static void *yc_thread_main(void *arg)
{
	struct yc_thread *t = arg;
	struct yc_phase *ph = t->ph;
	uint64_t n = 0, now;
	int go;

	t->w.db = ph->db;
	t->worker_ok = ph->be->worker_init(&t->w) == 0;
	if (!t->worker_ok)
		bench_fmt(t->err, sizeof t->err, "worker setup: %s", t->w.err);
	pthread_mutex_lock(&ph->mu);
	ph->ready++;
	pthread_cond_broadcast(&ph->cv);
	while (ph->go == 0)
		pthread_cond_wait(&ph->cv, &ph->mu);
	go = ph->go;
	pthread_mutex_unlock(&ph->mu);
	if (!t->worker_ok || go < 0)
		goto out;

	/* the warm-up: not recorded, not counted in the operations */
	while ((now = bench_now_ns()) < ph->t_warm_end && t->nerrors < YC_ERRORS_MAX) {
		if (ph->tick_ns > 0) {
			uint64_t due = ph->t_start + n * ph->tick_ns;
			if (due > now) {
				bench_sleep_until_ns(due < ph->t_warm_end ? due : ph->t_warm_end);
				continue;
			}
		}
		yc_one(t, false);
		n++;
		t->warmup_ops++;
	}
	for (uint64_t i = 0; i < t->quota && t->nerrors < YC_ERRORS_MAX; i++) {
		if (ph->tick_ns > 0) {
			uint64_t due = ph->t_start + n * ph->tick_ns;
			if (due > bench_now_ns())
				bench_sleep_until_ns(due);
		}
		if (ph->t_deadline != 0 && bench_now_ns() >= ph->t_deadline) {
			t->early = true;
			break;
		}
		yc_one(t, true);
		n++;
		t->done++;
	}
out:
	t->t_end = bench_now_ns();
	if (t->worker_ok)
		ph->be->worker_fini(&t->w);
	return NULL;
}

/* Runs one phase with ph->nthreads threads; fills r. */
static void yc_phase_run(struct yc_phase *ph, struct yc_result *r)
{
	struct yc_bench *b = ph->b;
	const struct yc_opts *o = &b->o;
	struct yc_thread *th = calloc(ph->nthreads, sizeof(*th));
	struct hist *all = calloc((size_t)ph->nthreads + 1, OP_COUNT * sizeof(struct hist));
	uint64_t t_last = 0;
	unsigned started = 0;

	r->ran = true;
	r->planned = ph->ops;
	pthread_mutex_init(&ph->mu, NULL);
	pthread_cond_init(&ph->cv, NULL);
	ph->ready = 0;
	ph->go = 0;
	if (th == NULL || all == NULL) {
		snprintf(r->err, sizeof r->err, "out of memory for %u threads", ph->nthreads);
		r->failed = true;
		goto out;
	}
	for (started = 0; started < ph->nthreads; started++) {
		struct yc_thread *t = &th[started];
		uint64_t share = ph->ops / ph->nthreads + (started < ph->ops % ph->nthreads);
		t->ph = ph;
		t->idx = started;
		t->quota = share; /* YCSB's threadopcount */
		t->h = &all[(size_t)(started + 1) * OP_COUNT];
		t->kc = ph->keychooser;
		/* the same streams for every backend of a table */
		yg_rng_seed(&t->rng, ph->seed ^ (0x9e3779b97f4a7c15ull * (started + 1)));
		t->vpos = ((size_t)started * 65537u) % YC_POOL_BYTES;
		t->buf = malloc(b->record_size);
		t->value = malloc(b->record_size);
		if (t->buf == NULL || t->value == NULL) {
			free(t->buf);
			free(t->value);
			t->buf = t->value = NULL;
			break;
		}
		yc_record_layout(t->value);
		if (pthread_create(&t->tid, NULL, yc_thread_main, t) != 0) {
			free(t->buf);
			free(t->value);
			t->buf = t->value = NULL;
			break;
		}
	}
	pthread_mutex_lock(&ph->mu);
	while (ph->ready < started)
		pthread_cond_wait(&ph->cv, &ph->mu);
	ph->go = started == ph->nthreads ? 1 : -1;
	for (unsigned i = 0; i < started; i++)
		if (!th[i].worker_ok)
			ph->go = -1;
	ph->t_start = bench_now_ns();
	ph->t_warm_end = ph->t_start + (ph->w != NULL ? (uint64_t)(o->warmup * 1e9) : 0);
	ph->t_deadline = ph->w != NULL && o->max_seconds > 0
	                         ? ph->t_warm_end + (uint64_t)(o->max_seconds * 1e9)
	                         : 0;
	ph->tick_ns = o->target > 0 ? (uint64_t)(1e9 * ph->nthreads / o->target) : 0;
	pthread_cond_broadcast(&ph->cv);
	pthread_mutex_unlock(&ph->mu);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i].tid, NULL);
	if (started < ph->nthreads) {
		snprintf(r->err, sizeof r->err, "could not start thread %u of %u", started + 1,
		         ph->nthreads);
		r->failed = true;
	}
	for (unsigned i = 0; i < started; i++) {
		struct yc_thread *t = &th[i];
		for (int op = 0; op < OP_COUNT; op++) {
			hist_merge(&all[op], &t->h[op]);
			r->op[op].errors += t->errors[op];
			r->op[op].not_found += t->not_found[op];
			r->op[op].wrong += t->wrong[op];
		}
		r->op[OP_SCAN].scanned += t->scanned;
		r->ops += t->done;
		r->warmup_ops += t->warmup_ops;
		r->errors += t->nerrors;
		r->early |= t->early;
		if (t->t_end > t_last)
			t_last = t->t_end;
		if (r->err[0] == '\0' && t->err[0] != '\0')
			snprintf(r->err, sizeof r->err, "%s", t->err);
		if (!t->worker_ok)
			r->failed = true;
		free(t->buf);
		free(t->value);
	}
	r->seconds = t_last > ph->t_warm_end ? (double)(t_last - ph->t_warm_end) / 1e9 : 0;
	for (int op = 0; op < OP_COUNT; op++) {
		struct yc_opstat *s = &r->op[op];
		const struct hist *h = &all[op];
		s->count = h->n;
		s->p50 = hist_pct(h, 0.50);
		s->p95 = hist_pct(h, 0.95);
		s->p99 = hist_pct(h, 0.99);
		s->p999 = hist_pct(h, 0.999);
		s->max = h->max;
		s->mean = h->n ? h->sum / h->n : 0;
	}
	if (r->errors > 0 && r->err[0] == '\0')
		snprintf(r->err, sizeof r->err, "%" PRIu64 " errors", r->errors);
	r->loadavg = runenv_loadavg();
	if (!r->failed && r->ops == 0 && ph->ops > 0) {
		r->failed = true;
		if (r->err[0] == '\0')
			snprintf(r->err, sizeof r->err, "no operation completed");
	}
out:
	pthread_cond_destroy(&ph->cv);
	pthread_mutex_destroy(&ph->mu);
	free(th);
	free(all);
}

/* ---- the sequence of one backend ---------------------------------------------------------- */

static struct yc_result *yc_result_new(struct yc_bench *b, const struct yb_backend *be,
                                       enum yb_sync sync, unsigned threads, char workload,
                                       bool load)
{
	struct yc_result *r;

	if (b->nres == YC_RESULTS_MAX)
		return NULL;
	r = &b->res[b->nres++];
	memset(r, 0, sizeof(*r));
	r->be = be;
	r->sync = sync;
	r->threads = threads;
	r->workload = workload;
	r->load = load;
	return r;
}

static void yc_keep_info(struct yc_bench *b, const struct yb_backend *be, enum yb_sync sync,
                         struct yb_db *db)
{
	for (size_t i = 0; i < b->ninfo; i++)
		if (b->info[i].be == be && b->info[i].sync == sync)
			return;
	if (b->ninfo == YC_INFOS_MAX)
		return;
	b->info[b->ninfo].be = be;
	b->info[b->ninfo].sync = sync;
	be->describe(db, b->info[b->ninfo].text, sizeof b->info[b->ninfo].text);
	b->ninfo++;
}

static void yc_init_field_offsets(struct yc_phase *ph)
{
	for (unsigned f = 0; f < YC_FIELDS; f++)
		ph->field_off[f] = yc_field_offset(f);
}

/* The phase's seed: the same for every backend, distinct per phase. */
static uint64_t yc_phase_seed(const struct yc_opts *o, size_t si, unsigned threads, char wl,
                              bool load)
{
	return o->seed ^ ((uint64_t)si << 56) ^ ((uint64_t)threads << 40) ^
	       ((uint64_t)(unsigned char)wl << 8) ^ (load ? 1u : 0u);
}

/* A fresh database, the load with `file`'s workload, then the runs of
 * `runs` that were asked for. */
static void yc_group(struct yc_bench *b, const struct yb_backend *be, size_t si, unsigned threads,
                     const char *runs, char file)
{
	const struct yc_opts *o = &b->o;
	enum yb_sync sync = o->syncs[si];
	unsigned load_threads = o->load_threads ? o->load_threads : threads;
	struct yc_result *load;
	struct yb_config cfg = {
	        .sync = sync,
	        .sync_interval_ms = o->sync_interval_ms,
	        .threads = threads > load_threads ? threads : load_threads,
	        .records = o->records + o->operations,
	        .key_size = 24,
	        .value_size = b->record_size,
	};
	char err[YC_ERR_MAX] = "";
	struct yb_db *db = NULL;
	struct yc_phase ph;
	size_t i0 = b->nres;
	bool any = false;

	for (const char *c = runs; *c; c++)
		any |= o->workload[*c - 'a'];
	if (!any)
		return;
	load = yc_result_new(b, be, sync, load_threads, file, true);
	if (load == NULL)
		return;
	if (be->open(be, &b->run.env, &cfg, &db, err, sizeof err) != 0) {
		load->ran = true;
		load->failed = true;
		snprintf(load->err, sizeof load->err, "open: %s", err);
		yc_progress(b->progress, load);
		return;
	}
	yc_keep_info(b, be, sync, db);

	/* load */
	memset(&ph, 0, sizeof ph);
	ph.b = b;
	ph.be = be;
	ph.db = db;
	ph.nthreads = load->threads;
	ph.ops = o->records;
	ph.seed = yc_phase_seed(o, si, threads, file, true);
	yc_init_field_offsets(&ph);
	yg_counter_init(&ph.keysequence, 0);
	yc_phase_run(&ph, load);
	yc_progress(b->progress, load);

	for (const char *c = runs; *c; c++) {
		const struct yc_workload *w = yc_workload(*c);
		struct yc_result *r;
		if (!o->workload[*c - 'a'])
			continue;
		if ((r = yc_result_new(b, be, sync, threads, *c, false)) == NULL)
			break;
		if (load->failed || load->errors > 0) {
			snprintf(r->err, sizeof r->err, "the load failed");
			yc_progress(b->progress, r);
			continue;
		}
		memset(&ph, 0, sizeof ph);
		ph.b = b;
		ph.be = be;
		ph.db = db;
		ph.w = w;
		ph.nthreads = threads;
		ph.ops = o->operations;
		ph.seed = yc_phase_seed(o, si, threads, *c, false);
		yc_init_field_offsets(&ph);
		/* CoreWorkload.init() */
		if (yg_acked_init(&ph.inserts, (int64_t)o->records) != 0) {
			r->ran = r->failed = true;
			snprintf(r->err, sizeof r->err, "out of memory");
			yc_progress(b->progress, r);
			continue;
		}
		{
			double ip = w->proportion[OP_INSERT] * 2.0 * (double)o->operations;
			int64_t expectednewkeys = ip > INT_MAX ? INT_MAX : (int64_t)ip;
			yg_keychooser_init(&ph.keychooser, w->dist, 0, (int64_t)o->records,
			                   expectednewkeys, &ph.inserts);
		}
		yg_discrete_init(&ph.operationchooser);
		for (int op = 0; op < OP_COUNT; op++)
			if (w->proportion[op] > 0)
				(void)yg_discrete_add(&ph.operationchooser, w->proportion[op], op);
		yg_uniform_init(&ph.scanlength, w->min_scan, w->max_scan);
		yg_uniform_init(&ph.fieldchooser, 0, YC_FIELDS - 1);
		yc_phase_run(&ph, r);
		yg_acked_fini(&ph.inserts);
		yc_progress(b->progress, r);
	}
	if (be->close(db, err, sizeof err) != 0) {
		/* the server did not exit cleanly or a background sync failed:
		 * every phase on this database fails */
		for (size_t i = i0; i < b->nres; i++) {
			b->res[i].failed = true;
			if (b->res[i].err[0] == '\0')
				snprintf(b->res[i].err, sizeof b->res[i].err, "close: %s", err);
		}
		fprintf(b->progress, "%s: close: %s\n", be->name, err);
	}
}

/* ---- options ------------------------------------------------------------------------------------
 */

/* --workload: a,b,c,d,e,f or all. */
static int parse_workloads(const char *cmd, const char *name, const char *arg, void *val)
{
	bool *workload = val; /* by letter */
	char buf[512], *save = NULL;

	(void)name;
	snprintf(buf, sizeof buf, "%s", arg);
	memset(workload, 0, 26 * sizeof(bool));
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "all") == 0) {
			for (int i = 0; i < YC_WORKLOADS; i++)
				workload[yc_workloads[i].id - 'a'] = true;
			continue;
		}
		if (strlen(t) != 1 || yc_workload((char)(t[0] | 0x20)) == NULL) {
			fprintf(stderr, "kvbench %s: unknown workload '%s' (a-f, all)\n", cmd, t);
			return -EINVAL;
		}
		workload[(t[0] | 0x20) - 'a'] = true;
	}
	return 0;
}

static int parse_backends(const char *cmd, const char *name, const char *arg, void *val)
{
	struct yc_opts *o = val;
	char buf[512], *save = NULL;

	(void)name;
	snprintf(buf, sizeof buf, "%s", arg);
	o->nbackends = 0;
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		const struct yb_backend *be = yb_find(t);
		if (be == NULL) {
			fprintf(stderr,
			        "kvbench %s: unknown backend '%s' (kvd-ipc, kvd-tcp, redis, "
			        "redis-tcp, engine, rocksdb, leveldb, lmdb, engine-dev)\n",
			        cmd, t);
			return -EINVAL;
		}
		for (size_t i = 0; i < o->nbackends; i++)
			if (o->backends[i] == be) {
				fprintf(stderr, "kvbench %s: backend '%s' twice\n", cmd, t);
				return -EINVAL;
			}
		if (o->nbackends == YC_BACKENDS_MAX)
			return -EINVAL;
		o->backends[o->nbackends++] = be;
	}
	if (o->nbackends == 0) {
		fprintf(stderr, "kvbench %s: --backend is empty\n", cmd);
		return -EINVAL;
	}
	return 0;
}

static int parse_threads(const char *cmd, const char *name, const char *arg, void *val)
{
	struct yc_opts *o = val;
	char buf[512], *save = NULL;
	uint64_t v;

	snprintf(buf, sizeof buf, "%s", arg);
	o->nthreads = 0;
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		if (o->nthreads == YC_TLIST_MAX) {
			fprintf(stderr, "kvbench %s: at most %d thread counts\n", cmd,
			        YC_TLIST_MAX);
			return -EINVAL;
		}
		if (bench_parse_u64(cmd, name, t, 1, YC_THREADS_MAX, &v) != 0)
			return -EINVAL;
		o->threads[o->nthreads++] = (unsigned)v;
	}
	if (o->nthreads == 0) {
		fprintf(stderr, "kvbench %s: --threads is empty\n", cmd);
		return -EINVAL;
	}
	return 0;
}

static int parse_syncs(const char *cmd, const char *name, const char *arg, void *val)
{
	struct yc_opts *o = val;
	char buf[512], *save = NULL;

	(void)name;
	snprintf(buf, sizeof buf, "%s", arg);
	o->nsyncs = 0;
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		enum yb_sync s;
		if (strcmp(t, "always") == 0) {
			s = YB_SYNC_ALWAYS;
		} else if (strcmp(t, "interval") == 0) {
			s = YB_SYNC_INTERVAL;
		} else if (strcmp(t, "none") == 0) {
			s = YB_SYNC_NONE;
		} else {
			fprintf(stderr, "kvbench %s: unknown sync '%s' (always, interval, none)\n",
			        cmd, t);
			return -EINVAL;
		}
		for (size_t i = 0; i < o->nsyncs; i++)
			if (o->syncs[i] == s) {
				fprintf(stderr, "kvbench %s: sync '%s' twice\n", cmd, t);
				return -EINVAL;
			}
		o->syncs[o->nsyncs++] = s;
	}
	if (o->nsyncs == 0) {
		fprintf(stderr, "kvbench %s: --sync is empty\n", cmd);
		return -EINVAL;
	}
	return 0;
}

static int parse_transport(const char *cmd, const char *name, const char *arg, void *val)
{
	(void)name;
	return runenv_parse_transport(cmd, arg, val);
}

/* 0, 1 for --help, or -EINVAL. */
static int parse(int argc, char **argv, struct yc_opts *o)
{
	char quick[256];
	const struct bench_opt opts[] = {
	        {BENCH_OPT("workload", BENCH_OPT_FUNC, o->workload, "LIST",
	                   "a,b,c,d,e,f or all (default all); run in YCSB's order:\n"
	                   "load, a, b, c, f, d; fresh load, e"),
	         .parse = parse_workloads},
	        {BENCH_OPT("backend", BENCH_OPT_FUNC, o, "LIST",
	                   "kvd-ipc,kvd-tcp,redis,redis-tcp,engine,rocksdb,\n"
	                   "leveldb,lmdb,engine-dev (default kvd-ipc,redis; with\n"
	                   "--device engine,engine-dev); the first is the\n"
	                   "reference of the ratios"),
	         .set = &o->backends_set, .parse = parse_backends},
	        {BENCH_OPT("records", BENCH_OPT_U64, &o->records, "N", "recordcount (default %D)"),
	         .lo = 10, .hi = YC_RECORDS_MAX, .set = &o->records_set},
	        {BENCH_OPT("operations", BENCH_OPT_U64, &o->operations, "N",
	                   "operationcount per run (default %D)"),
	         .lo = 1, .hi = YC_OPERATIONS_MAX, .set = &o->operations_set},
	        {BENCH_OPT("threads", BENCH_OPT_FUNC, o, "LIST",
	                   "client threads, comma-separated (default 1)"),
	         .set = &o->threads_set, .parse = parse_threads},
	        {BENCH_OPT("load-threads", BENCH_OPT_UINT, &o->load_threads, "N",
	                   "threads of the load phase (default: as the run)"),
	         .lo = 1, .hi = YC_THREADS_MAX},
	        {BENCH_OPT("target", BENCH_OPT_DOUBLE, &o->target, "OPS",
	                   "throttle every phase to OPS ops/s in all (default none)"),
	         .lo = 0, .hi = 1e9},
	        {BENCH_OPT("sync", BENCH_OPT_FUNC, o, "LIST",
	                   "always,interval,none (default interval): kvd tenant\n"
	                   "sync; redis appendfsync always|everysec|no; embedded\n"
	                   "sync writes | a sync every interval | none"),
	         .set = &o->sync_set, .parse = parse_syncs},
	        {BENCH_OPT("sync-interval-ms", BENCH_OPT_UINT, &o->sync_interval_ms, "MS",
	                   "sync=interval's period (default %D, Redis's everysec)"),
	         .lo = 1, .hi = 3600000},
	        {BENCH_OPT("warmup", BENCH_OPT_DOUBLE, &o->warmup, "S",
	                   "seconds of each run not recorded (default %D)"),
	         .lo = 0, .hi = 3600, .set = &o->warmup_set},
	        {BENCH_OPT("max-seconds", BENCH_OPT_DOUBLE, &o->max_seconds, "S",
	                   "end a run after S measured seconds (default: none)"),
	         .lo = 0, .hi = 86400},
	        {BENCH_OPT("seed", BENCH_OPT_U64, &o->seed, "S", "random streams (default %D)"),
	         .lo = 0, .hi = (double)UINT64_MAX},
	        {BENCH_OPT("kvd", BENCH_OPT_STRING, &o->kvd, "PATH",
	                   "kvd binary (default ../daemon/kvd next to kvbench)")},
	        {BENCH_OPT("endpoint", BENCH_OPT_STRING, &o->endpoint, "URL",
	                   "use this running kvd instead of starting one")},
	        {BENCH_OPT("transport", BENCH_OPT_FUNC, &o->stream, "T",
	                   "the kvd started here listens on kv+ipc:// and kv+tcp://\n"
	                   "(stream, the default) or on nng's ipc:// and tcp://\n"
	                   "(nng)"),
	         .parse = parse_transport},
	        {BENCH_OPT("redis-server", BENCH_OPT_STRING, &o->redis_server, "PATH",
	                   "redis-server binary (default: from PATH)")},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &o->dir, "DIR",
	                   "make the run's directory in DIR (default /tmp)")},
	        {BENCH_OPT("device", BENCH_OPT_STRING, &o->device, "PATH",
	                   "engine-dev's block device (or regular file), FORMATTED\n"
	                   "for every database it opens")},
	        {BENCH_OPT("yes-format", BENCH_OPT_FLAG, &o->yes_format, NULL,
	                   "agree that everything on --device is lost")},
	        {BENCH_OPT("force", BENCH_OPT_FLAG, &o->force, NULL,
	                   "format --device even over a known signature (a file\n"
	                   "system, a partition table, LVM, another kvd)")},
	        {BENCH_OPT("quick", BENCH_OPT_FLAG, &o->quick, NULL, quick)},
	        BENCH_OPTS_REPORT(&o->markdown, &o->json),
	};
	const struct bench_cmd cmd = {
	        "ycsb",
	        "YCSB core workloads A-F (YCSB's generators, key names and sequence) against\n"
	        "kvd, Redis and the embedded engines.\n",
	        "Exits 0 only when every backend that could run completed every phase with\n"
	        "zero errors and every server it started exited 0.\n",
	        opts,
	        sizeof opts / sizeof opts[0],
	};
	int rv;

	bench_fmt(quick, sizeof quick,
	          "smoke run: every workload on every backend found,\n"
	          "sync always,interval,none, %llu records, %llu\n"
	          "operations, %u threads (explicit options win)",
	          YC_QUICK_RECORDS, YC_QUICK_OPERATIONS, YC_QUICK_THREADS);
	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv;
	if (o->json && o->markdown) {
		fprintf(stderr, "kvbench ycsb: --json and --markdown exclude each other\n");
		return -EINVAL;
	}
	if (o->device != NULL && !o->yes_format) {
		fprintf(stderr,
		        "kvbench ycsb: --device %s is formatted for every database engine-dev "
		        "opens, and everything on it is lost: give --yes-format to go on\n",
		        o->device);
		return -EINVAL;
	}
	if (o->device != NULL && !o->backends_set && !o->quick) {
		o->backends[0] = yb_find("engine");
		o->backends[1] = yb_find("engine-dev");
		o->nbackends = 2;
	}

	if (o->quick) {
		if (!o->records_set)
			o->records = YC_QUICK_RECORDS;
		if (!o->operations_set)
			o->operations = YC_QUICK_OPERATIONS;
		if (!o->threads_set) {
			o->threads[0] = YC_QUICK_THREADS;
			o->nthreads = 1;
		}
		if (!o->warmup_set)
			o->warmup = YC_QUICK_WARMUP;
		if (!o->sync_set) {
			o->syncs[0] = YB_SYNC_ALWAYS;
			o->syncs[1] = YB_SYNC_INTERVAL;
			o->syncs[2] = YB_SYNC_NONE;
			o->nsyncs = 3;
		}
		if (!o->backends_set) {
			o->nbackends = 0;
			for (size_t i = 0; i < yb_backend_count && i < YC_BACKENDS_MAX; i++)
				o->backends[o->nbackends++] = yb_backends[i];
			if (o->device != NULL && o->nbackends < YC_BACKENDS_MAX)
				o->backends[o->nbackends++] = yb_find("engine-dev");
		}
	}
	/* E's zipfian draws over records + operations/10 keys and draws again
	 * while the key is not inserted yet (as YCSB does): refuse a mix where
	 * that would take for ever */
	if (o->workload['e' - 'a'] && o->operations / 10 > 100 * o->records) {
		fprintf(stderr,
		        "kvbench ycsb: workload e with operations/10 > 100 x records would draw "
		        "mostly keys not inserted yet; raise --records or lower --operations\n");
		return -EINVAL;
	}
	return 0;
}

/* ---- entry point
 * --------------------------------------------------------------------------------- */

static bool yc_all_ok(const struct yc_bench *b)
{
	size_t ran = 0;

	if (b->run.kvd_failed)
		return false;
	for (size_t i = 0; i < b->nres; i++) {
		const struct yc_result *r = &b->res[i];
		if (!r->ran || r->failed || r->errors > 0)
			return false;
		ran++;
	}
	return ran > 0;
}

int bench_ycsb(int argc, char **argv)
{
	struct yc_bench *b = calloc(1, sizeof(*b));
	struct report rep = {0};
	struct yc_opts *o;
	bool need_kvd = false, ok;
	int rv, code = 1;

	if (b == NULL || report_init(&rep) != 0) {
		fprintf(stderr, "kvbench ycsb: out of memory\n");
		free(b);
		report_fini(&rep);
		return 1;
	}
	o = &b->o;
	o->records = YC_RECORDS_DEFAULT;
	o->operations = YC_OPERATIONS_DEFAULT;
	o->stream = true; /* libkvclient's default transport */
	o->threads[0] = 1;
	o->nthreads = 1;
	o->syncs[0] = YB_SYNC_INTERVAL;
	o->nsyncs = 1;
	o->sync_interval_ms = YC_SYNC_INTERVAL_MS;
	o->warmup = YC_WARMUP_DEFAULT;
	o->seed = 1;
	for (int i = 0; i < YC_WORKLOADS; i++)
		o->workload[yc_workloads[i].id - 'a'] = true;
	o->backends[0] = yb_find("kvd-ipc");
	o->backends[1] = yb_find("redis");
	o->nbackends = 2;
	if ((rv = parse(argc, argv, o)) != 0) {
		free(b);
		report_fini(&rep);
		return rv > 0 ? 0 : 2;
	}
	b->record_size = yc_record_layout(NULL);
	b->progress = o->json || o->markdown ? stderr : stdout;
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < o->nbackends; i++)
		need_kvd |= strcmp(o->backends[i]->kind, "kvd") == 0;
	if (runenv_init(&b->run, "ycsb", argc, argv, o->dir, o->kvd, o->endpoint, o->redis_server,
	                need_kvd) != 0)
		goto out;
	b->run.env.stream = o->stream;
	b->run.env.device = o->device;
	b->run.env.device_force = o->force;
	if ((b->pool = malloc(YC_POOL_BYTES + YC_FIELD_LEN)) == NULL ||
	    (b->res = calloc(YC_RESULTS_MAX, sizeof(*b->res))) == NULL) {
		fprintf(stderr, "kvbench ycsb: out of memory\n");
		goto out;
	}
	/* RandomByteIterator's alphabet: printable ASCII ' '…'_' */
	runenv_fill_pool(b->pool, YC_POOL_BYTES + YC_FIELD_LEN, o->seed ^ 0x5eed);

	fprintf(b->progress, "kvbench ycsb: %s\n", b->run.command);
	for (size_t i = 0; i < o->nbackends; i++) {
		const struct yb_backend *be = o->backends[i];
		const char *why = be->unavailable(be, &b->run.env);
		if (why == NULL)
			continue;
		b->skip[b->nskip].be = be;
		snprintf(b->skip[b->nskip].reason, sizeof b->skip[b->nskip].reason, "%s", why);
		b->nskip++;
		fprintf(b->progress, "%s: %s, skipped\n", be->name, why);
	}
	yc_progress_head(b->progress);
	for (size_t si = 0; si < o->nsyncs; si++)
		for (size_t ti = 0; ti < o->nthreads; ti++)
			for (size_t bi = 0; bi < o->nbackends; bi++) {
				const struct yb_backend *be = o->backends[bi];
				if (be->unavailable(be, &b->run.env) != NULL)
					continue;
				yc_group(b, be, si, o->threads[ti], yc_group1, 'a');
				yc_group(b, be, si, o->threads[ti], yc_group2, 'e');
			}
	(void)runenv_fini(&b->run, false);
	ok = yc_all_ok(b);
	yc_header(b, &rep);
	if (o->json) {
		yc_report_json(b, &rep, ok);
	} else if (o->markdown) {
		yc_report_markdown(b, &rep);
	} else {
		putchar('\n');
		report_lines_text(&rep, stdout, 10);
		yc_report_text(b);
	}
	code = runenv_finish(&b->run, ok, "a phase failed or had errors");
out:
	if (b->run.env.kvd_started)
		(void)runenv_fini(&b->run, false);
	free(b->res);
	free(b->pool);
	free(b);
	report_fini(&rep);
	return code;
}
