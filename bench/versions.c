/*
 * bench/versions.c — kvbench versions: reading the newest m versions of a
 * key, kvd's one Versions call against Redis holding the same history as a
 * chain of keys (the version-scan experiment of the UStore paper).
 *
 *   kvbench versions [--backend LIST] [--m LIST] [--value-size LIST]
 *                    [--keys N] [--versions N] [--threads N] [--seconds S]
 *                    [--warmup S] [--seed S] [--kvd PATH] [--endpoint URL]
 *                    [--transport nng|stream] [--redis-server PATH]
 *                    [--dir DIR] [--quick]
 *                    [--json | --markdown]
 *
 * For every value size of --value-size, every backend gets a fresh database
 * (bench/ycsb_backend.h: a kvd tenant created with history = --versions and
 * sync=none, or a redis-server of its own with appendonly yes, appendfsync
 * no) and the same history: --keys keys, each written --versions times,
 * version-major (every key's version 1, then every key's version 2 …) by
 * VS_LOAD_THREADS threads.
 *
 *   kvd     key "vkey00000042", one Put per version: the engine chains a
 *           key's versions through each record's previous-location field.
 *   redis   the newest version under the key itself ("vkey00000042"), every
 *           older version n under "vkey00000042:v<n>"; each value ends with
 *           the number of the version before it (0: none), so a reader
 *           follows the chain from the key: key -> v(N-1) -> v(N-2) … One
 *           SET per version, as kvd has one Put.
 *
 * A value of S bytes is the same for both: key number (8 bytes, little
 * endian), version number within the key (8), random filler, the previous
 * version's number (8). Then for every m of --m and every backend (the
 * order alternates with m), --threads client threads each repeat, for
 * --warmup s unrecorded and then --seconds s recorded: pick a key uniformly,
 * read its newest m versions (kvd: one kvc_versions call, limit m, values
 * included; redis: m GETs in sequence, each over the same hiredis
 * connection, the next key taken from the value just read), check every
 * value (the right key, versions N, N-1 … N-m+1, S bytes). One read of m
 * versions is one operation, timed end to end into a log-linear histogram.
 *
 * Each kvd row is compared with the redis row of the same transport (ipc
 * with Redis's Unix socket, tcp with Redis over TCP; the other one when
 * that did not run): kvd/redis ops/s, and redis p50 / kvd p50.
 *
 * Exits 0 only when every backend that could run loaded its history and
 * read it back in every cell with no error, and every server started
 * exited 0. A backend that cannot run here (no redis-server) is skipped.
 */
#include "bench.h"
#include "hist.h"
#include "runenv.h"
#include "ycsb_backend.h"
#include "ycsb_gen.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VS_KEYS_DEFAULT    1000ull
#define VS_SECONDS_DEFAULT 3.0
#define VS_WARMUP_DEFAULT  0.5
#define VS_QUICK_KEYS      20ull
#define VS_QUICK_SECONDS   0.2
#define VS_QUICK_WARMUP    0.05
#define VS_KEYS_MAX        10000000ull
#define VS_VERSIONS_MAX    1000ull /* the protocol's Versions limit */
#define VS_VALUE_MIN       24ull   /* key number, version, previous version */
#define VS_VALUE_MAX       65536ull
#define VS_THREADS_MAX     64ull
#define VS_LOAD_THREADS    4u
#define VS_BACKENDS_MAX    4
#define VS_POOL_BYTES      (1u << 20) /* random filler values are cut from */
#define VS_KEY_MAX         48
#define VS_ERRORS_MAX      100 /* a thread stops after this many errors */
#define VS_ERR_MAX         512
#define VS_INFO_MAX        1024

static const uint64_t vs_m_default[] = {1, 2, 4, 8, 16, 32};
static const uint64_t vs_size_default[] = {100, 1024};
static const uint64_t vs_m_quick[] = {1, 4};
static const uint64_t vs_size_quick[] = {100};

static const char *const vs_allowed[] = {"kvd-ipc", "kvd-tcp", "redis", "redis-tcp", NULL};

struct vs_opts {
	const struct yb_backend *backends[VS_BACKENDS_MAX];
	size_t nbackends;
	uint64_t m[RUNENV_LIST_MAX];
	size_t nm;
	uint64_t sizes[RUNENV_LIST_MAX];
	size_t nsizes;
	uint64_t keys, versions, threads;
	struct runenv_opts c; /* the options every experiment takes */
	bool keys_set, versions_set, m_set, sizes_set, backends_set;
};

struct vs_result {
	const struct yb_backend *be;
	uint64_t size, m;
	bool ran, failed;
	uint64_t ops, errors;
	double seconds, loadavg;
	uint64_t p50, p90, p99, p999, max, mean; /* ns */
	char err[VS_ERR_MAX];
};

struct vs_info {
	const struct yb_backend *be;
	uint64_t size;
	double load_s;
	char text[VS_INFO_MAX];
};

struct vs_bench {
	struct vs_opts o;
	struct runenv run;
	char *pool;
	struct vs_result *res;
	size_t nres, cap;
	struct vs_info info[VS_BACKENDS_MAX * RUNENV_LIST_MAX];
	size_t ninfo;
	char skip[VS_BACKENDS_MAX][VS_ERR_MAX];
	FILE *progress;
};

/* ---- keys and values ------------------------------------------------------------ */

static void le64_put(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t le64_get(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The key of key number k; for redis, the key holding its version n when n
 * is not the newest (n > 0). */
static size_t vs_key(char *buf, uint64_t k, uint64_t n)
{
	int w = n == 0 ? snprintf(buf, VS_KEY_MAX, "vkey%08" PRIu64, k)
	               : snprintf(buf, VS_KEY_MAX, "vkey%08" PRIu64 ":v%" PRIu64, k, n);

	return (size_t)w;
}

static void vs_value(const struct vs_bench *b, unsigned char *v, size_t size, uint64_t k,
                     uint64_t n)
{
	size_t off = (size_t)((k * 7919 + n * 104729) % (VS_POOL_BYTES - size));

	memcpy(v, b->pool + off, size);
	le64_put(v, k);
	le64_put(v + 8, n);
	le64_put(v + size - 8, n - 1);
}

/* Whether v is version n of key k. */
static bool vs_value_ok(const unsigned char *v, size_t size, uint64_t k, uint64_t n)
{
	return le64_get(v) == k && le64_get(v + 8) == n && le64_get(v + size - 8) == n - 1;
}

static bool is_kvd(const struct yb_backend *be)
{
	return strcmp(be->kind, "kvd") == 0;
}

/* ---- threads ---------------------------------------------------------------------- */

struct vs_phase {
	struct vs_bench *b;
	const struct yb_backend *be;
	struct yb_db *db;
	uint64_t size, m;
	bool load;
	unsigned nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned ready;
	int go; /* 0 wait, 1 run, -1 cancelled */
	uint64_t t_warm, t_stop;
};

struct vs_thread {
	struct vs_phase *ph;
	unsigned idx;
	pthread_t tid;
	struct yb_worker w;
	bool worker_ok;
	struct yg_rng rng;
	struct hist *h;
	uint64_t ops, errors, t_last;
	unsigned char *buf; /* m values */
	char err[VS_ERR_MAX];
};

#define vs_error(t, ...) bench_thread_error(&(t)->errors, (t)->err, sizeof((t)->err), __VA_ARGS__)

/* Writes this thread's share of the history. */
static void vs_load(struct vs_thread *t)
{
	struct vs_phase *ph = t->ph;
	const struct vs_opts *o = &ph->b->o;
	bool kvd = is_kvd(ph->be);
	char key[VS_KEY_MAX];

	for (uint64_t n = 1; n <= o->versions; n++)
		for (uint64_t k = t->idx; k < o->keys; k += ph->nthreads) {
			size_t kl = vs_key(key, k, kvd || n == o->versions ? 0 : n);
			vs_value(ph->b, t->buf, ph->size, k, n);
			if (ph->be->update(&t->w, key, kl, t->buf, ph->size) != 0) {
				vs_error(t, "writing %s version %" PRIu64 ": %s", key, n, t->w.err);
				return;
			}
		}
}

/* One read of the newest m versions of a random key; 0 when all were right. */
static int vs_read(struct vs_thread *t)
{
	struct vs_phase *ph = t->ph;
	const struct vs_opts *o = &ph->b->o;
	uint64_t k = yg_rng_below(&t->rng, o->keys);
	char key[VS_KEY_MAX];
	size_t kl = vs_key(key, k, 0);

	if (is_kvd(ph->be)) {
		uint32_t count = 0, wrong = 0;
		if (ph->be->versions(&t->w, key, kl, (uint32_t)ph->m, ph->size, t->buf, &count,
		                     &wrong) != 0) {
			vs_error(t, "Versions %s: %s", key, t->w.err);
			return -1;
		}
		if (count != ph->m || wrong != 0) {
			vs_error(t, "Versions %s m=%" PRIu64 ": %u versions, %u of them wrong", key,
			         ph->m, count, wrong);
			return -1;
		}
		for (uint64_t i = 0; i < ph->m; i++)
			if (!vs_value_ok(t->buf + i * ph->size, ph->size, k, o->versions - i)) {
				vs_error(t,
				         "Versions %s: entry %" PRIu64 " is not version %" PRIu64,
				         key, i, o->versions - i);
				return -1;
			}
		return 0;
	}
	for (uint64_t i = 0; i < ph->m; i++) {
		unsigned char *v = t->buf + i * ph->size;
		uint64_t want = o->versions - i;
		size_t len = 0;
		int rv = ph->be->read(&t->w, key, kl, v, ph->size, &len);
		if (rv < 0) {
			vs_error(t, "GET %s: %s", key, t->w.err);
			return -1;
		}
		if (rv == YB_NOTFOUND || len != ph->size || !vs_value_ok(v, ph->size, k, want)) {
			vs_error(t, "GET %s: %s, not version %" PRIu64 " of %" PRIu64 " bytes", key,
			         rv == YB_NOTFOUND ? "not found" : "another value", want, ph->size);
			return -1;
		}
		if (i + 1 < ph->m) {
			uint64_t prev = le64_get(v + ph->size - 8);
			if (prev == 0) {
				vs_error(t, "GET %s: the chain ends after %" PRIu64 " versions",
				         key, i + 1);
				return -1;
			}
			kl = vs_key(key, k, prev);
		}
	}
	return 0;
}

static void *vs_thread_main(void *arg)
{
	struct vs_thread *t = arg;
	struct vs_phase *ph = t->ph;
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
	if (ph->load) {
		vs_load(t);
		t->t_last = bench_now_ns();
		goto out;
	}
	while (t->errors < VS_ERRORS_MAX) {
		uint64_t t0 = bench_now_ns(), t1;
		if (t0 >= ph->t_stop)
			break;
		if (vs_read(t) != 0)
			continue;
		t1 = bench_now_ns();
		t->t_last = t1;
		if (t0 >= ph->t_warm) {
			hist_add(t->h, t1 - t0);
			t->ops++;
		}
	}
out:
	if (t->worker_ok)
		ph->be->worker_fini(&t->w);
	return NULL;
}

/* Runs a load or a measured cell; r may be NULL for a load (err gets the
 * first error). 0 when every thread ran without error. */
static int vs_phase_run(struct vs_phase *ph, struct vs_result *r, char *err, size_t errlen)
{
	struct vs_bench *b = ph->b;
	struct vs_thread *th = calloc(ph->nthreads, sizeof(*th));
	struct hist *all = calloc((size_t)ph->nthreads + 1, sizeof(struct hist));
	uint64_t t_last = 0, errors = 0, ops = 0, t_start;
	unsigned started = 0;
	int rv = 0;

	pthread_mutex_init(&ph->mu, NULL);
	pthread_cond_init(&ph->cv, NULL);
	ph->ready = 0;
	ph->go = 0;
	err[0] = '\0';
	if (th == NULL || all == NULL) {
		bench_fmt(err, errlen, "out of memory for %u threads", ph->nthreads);
		rv = -1;
		goto out;
	}
	for (started = 0; started < ph->nthreads; started++) {
		struct vs_thread *t = &th[started];
		t->ph = ph;
		t->idx = started;
		t->h = &all[started + 1];
		yg_rng_seed(&t->rng, b->o.c.seed ^ (0x9e3779b97f4a7c15ull * (started + 1)) ^
		                             (ph->m << 32) ^ ph->size);
		if ((t->buf = malloc((size_t)(ph->m ? ph->m : 1) * ph->size)) == NULL)
			break;
		if (pthread_create(&t->tid, NULL, vs_thread_main, t) != 0) {
			free(t->buf);
			t->buf = NULL;
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
	t_start = bench_now_ns();
	ph->t_warm = t_start + (uint64_t)(b->o.c.warmup * 1e9);
	ph->t_stop = ph->t_warm + (uint64_t)(b->o.c.seconds * 1e9);
	pthread_cond_broadcast(&ph->cv);
	pthread_mutex_unlock(&ph->mu);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i].tid, NULL);
	if (started < ph->nthreads) {
		bench_fmt(err, errlen, "could not start thread %u of %u", started + 1,
		          ph->nthreads);
		rv = -1;
	}
	for (unsigned i = 0; i < started; i++) {
		struct vs_thread *t = &th[i];
		hist_merge(&all[0], t->h);
		ops += t->ops;
		errors += t->errors;
		if (t->t_last > t_last)
			t_last = t->t_last;
		if (err[0] == '\0' && t->err[0] != '\0')
			bench_fmt(err, errlen, "%s", t->err);
		if (!t->worker_ok)
			rv = -1;
		free(t->buf);
	}
	if (errors > 0)
		rv = -1;
	if (r != NULL) {
		r->ran = true;
		r->ops = ops;
		r->errors = errors;
		r->seconds = t_last > ph->t_warm ? (double)(t_last - ph->t_warm) / 1e9 : 0;
		r->p50 = hist_pct(&all[0], 0.50);
		r->p90 = hist_pct(&all[0], 0.90);
		r->p99 = hist_pct(&all[0], 0.99);
		r->p999 = hist_pct(&all[0], 0.999);
		r->max = all[0].max;
		r->mean = hist_mean(&all[0]);
		r->loadavg = runenv_loadavg();
		if (rv == 0 && ops == 0) {
			bench_fmt(err, errlen, "no read completed");
			rv = -1;
		}
		r->failed = rv != 0;
		bench_fmt(r->err, sizeof r->err, "%s", err);
	} else if (ph->load) {
		ph->t_stop = t_last; /* the load's end, for its duration */
		ph->t_warm = t_start;
	}
out:
	pthread_cond_destroy(&ph->cv);
	pthread_mutex_destroy(&ph->mu);
	free(th);
	free(all);
	return rv;
}

/* ---- the run ---------------------------------------------------------------------- */

static double vs_rate(const struct vs_result *r)
{
	return r->seconds > 0 ? (double)r->ops / r->seconds : 0;
}

/* The redis row r (a kvd row) is compared with. */
static const struct vs_result *vs_ref(const struct vs_bench *b, const struct vs_result *r)
{
	const char *want = strcmp(r->be->name, "kvd-tcp") == 0 ? "redis-tcp" : "redis";
	const struct vs_result *other = NULL;

	if (!is_kvd(r->be))
		return NULL;
	for (size_t i = 0; i < b->nres; i++) {
		const struct vs_result *q = &b->res[i];
		if (is_kvd(q->be) || q->size != r->size || q->m != r->m || !q->ran || q->failed)
			continue;
		if (strcmp(q->be->name, want) == 0)
			return q;
		if (other == NULL)
			other = q;
	}
	return other;
}

static void vs_progress_head(FILE *f)
{
	fprintf(f, "%-9s %6s %4s %9s %10s %9s %9s %9s %6s %5s  %s\n", "backend", "value", "m",
	        "ops/s", "versions/s", "p50 us", "p99 us", "p999 us", "errors", "load",
	        "kvd/redis ops/s, redis/kvd p50");
}

/* ratios: the summary's lines, once every row has run */
static void vs_progress(const struct vs_bench *b, FILE *f, const struct vs_result *r, bool ratios)
{
	const struct vs_result *ref = ratios ? vs_ref(b, r) : NULL;

	if (!r->ran || r->failed) {
		fprintf(f, "%-9s %6" PRIu64 " %4" PRIu64 " %s: %s\n", r->be->name, r->size, r->m,
		        r->ran ? "FAILED" : "skipped", r->err);
		return;
	}
	fprintf(f,
	        "%-9s %6" PRIu64 " %4" PRIu64 " %9.0f %10.0f %9.1f %9.1f %9.1f %6" PRIu64 " %5.1f",
	        r->be->name, r->size, r->m, vs_rate(r), vs_rate(r) * (double)r->m, r->p50 / 1e3,
	        r->p99 / 1e3, r->p999 / 1e3, r->errors, r->loadavg);
	if (ref != NULL && vs_rate(ref) > 0 && r->p50 > 0)
		fprintf(f, "  %.2fx, %.2fx (%s)", vs_rate(r) / vs_rate(ref),
		        (double)ref->p50 / (double)r->p50, ref->be->name);
	fputc('\n', f);
	fflush(f);
}

static struct vs_result *vs_result_new(struct vs_bench *b, const struct yb_backend *be,
                                       uint64_t size, uint64_t m)
{
	struct vs_result *r;

	if (b->nres == b->cap)
		return NULL;
	r = &b->res[b->nres++];
	memset(r, 0, sizeof(*r));
	r->be = be;
	r->size = size;
	r->m = m;
	return r;
}

/* One value size: a database per backend, loaded; every m on every one. */
static void vs_size(struct vs_bench *b, uint64_t size)
{
	const struct vs_opts *o = &b->o;
	struct yb_db *db[VS_BACKENDS_MAX] = {NULL};
	char loaderr[VS_BACKENDS_MAX][VS_ERR_MAX];
	char err[VS_ERR_MAX];
	struct yb_config cfg = {
	        .sync = YB_SYNC_NONE,
	        .threads = (unsigned)(o->threads > VS_LOAD_THREADS ? o->threads : VS_LOAD_THREADS),
	        .records = o->keys * o->versions,
	        .key_size = 16,
	        .value_size = size,
	        .history = (uint32_t)o->versions,
	        .name = "versions",
	};

	for (size_t i = 0; i < o->nbackends; i++) {
		const struct yb_backend *be = o->backends[i];
		struct vs_phase ph = {.b = b, .be = be, .size = size, .load = true};
		loaderr[i][0] = '\0';
		if (b->skip[i][0] != '\0')
			continue;
		if (be->open(be, &b->run.env, &cfg, &db[i], err, sizeof err) != 0) {
			bench_fmt(loaderr[i], sizeof loaderr[i], "open: %s", err);
			db[i] = NULL;
			fprintf(b->progress, "%s, %" PRIu64 " B: %s\n", be->name, size, loaderr[i]);
			continue;
		}
		ph.db = db[i];
		ph.nthreads = VS_LOAD_THREADS;
		if (vs_phase_run(&ph, NULL, err, sizeof err) != 0) {
			bench_fmt(loaderr[i], sizeof loaderr[i], "loading the history: %s", err);
			fprintf(b->progress, "%s, %" PRIu64 " B: %s\n", be->name, size, loaderr[i]);
		}
		if (b->ninfo < sizeof b->info / sizeof b->info[0]) {
			struct vs_info *in = &b->info[b->ninfo++];
			in->be = be;
			in->size = size;
			in->load_s = (double)(ph.t_stop - ph.t_warm) / 1e9;
			be->describe(db[i], in->text, sizeof in->text);
			fprintf(b->progress,
			        "%s, %" PRIu64 " B: %" PRIu64 " keys x %" PRIu64
			        " versions written in %.2f s\n",
			        be->name, size, o->keys, o->versions, in->load_s);
		}
	}
	for (size_t mi = 0; mi < o->nm; mi++)
		for (size_t j = 0; j < o->nbackends; j++) {
			/* the order alternates with m: neither side always runs first */
			size_t i = mi % 2 ? o->nbackends - 1 - j : j;
			const struct yb_backend *be = o->backends[i];
			struct vs_phase ph = {.b = b, .be = be, .db = db[i], .size = size};
			struct vs_result *r;
			if (b->skip[i][0] != '\0')
				continue;
			if ((r = vs_result_new(b, be, size, o->m[mi])) == NULL)
				return;
			if (db[i] == NULL || loaderr[i][0] != '\0') {
				r->ran = r->failed = true;
				bench_fmt(r->err, sizeof r->err, "%s", loaderr[i]);
				vs_progress(b, b->progress, r, false);
				continue;
			}
			ph.m = o->m[mi];
			ph.nthreads = (unsigned)o->threads;
			(void)vs_phase_run(&ph, r, err, sizeof err);
			vs_progress(b, b->progress, r, false);
		}
	for (size_t i = 0; i < o->nbackends; i++) {
		const struct yb_backend *be = o->backends[i];
		if (db[i] == NULL)
			continue;
		if (be->close(db[i], err, sizeof err) != 0) {
			fprintf(b->progress, "%s: close: %s\n", be->name, err);
			for (size_t k = 0; k < b->nres; k++)
				if (b->res[k].be == be && b->res[k].size == size &&
				    !b->res[k].failed) {
					b->res[k].failed = true;
					bench_fmt(b->res[k].err, sizeof b->res[k].err, "close: %s",
					          err);
				}
		}
	}
}

/* ---- report ----------------------------------------------------------------------- */

static void vs_header(const struct vs_bench *b, struct report *h)
{
	const struct vs_opts *o = &b->o;
	char ms[128] = "", sizes[128] = "", be[128] = "";

	for (size_t i = 0; i < o->nm; i++)
		snprintf(ms + strlen(ms), sizeof ms - strlen(ms), "%s%" PRIu64, i ? "," : "",
		         o->m[i]);
	for (size_t i = 0; i < o->nsizes; i++)
		snprintf(sizes + strlen(sizes), sizeof sizes - strlen(sizes), "%s%" PRIu64,
		         i ? "," : "", o->sizes[i]);
	for (size_t i = 0; i < o->nbackends; i++)
		snprintf(be + strlen(be), sizeof be - strlen(be), "%s%s", i ? "," : "",
		         o->backends[i]->name);
	runenv_lines_common(h, &b->run);
	report_line(h, "config",
	            "backends %s; value sizes %s B; m %s; %" PRIu64 " keys x %" PRIu64
	            " versions each, loaded version-major by %u threads; %" PRIu64
	            " client thread(s); per cell %.2f s warm-up (not recorded), then %.2f s "
	            "recorded; seed %" PRIu64,
	            be, sizes, ms, o->keys, o->versions, VS_LOAD_THREADS, o->threads, o->c.warmup,
	            o->c.seconds, o->c.seed);
	report_line(h, "kvd",
	            "one kvc_versions call per read (limit m, values included, newest first); a "
	            "tenant per value size with history=%" PRIu64 " and sync=none",
	            o->versions);
	report_line(h, "redis",
	            "the newest version under the key, version n under key:v<n>, each value "
	            "ending with the previous version's number; a read is m GETs in sequence on "
	            "one connection, each next key taken from the value before; appendfsync no");
	report_line(h, "value",
	            "S bytes for both: key number, version, random filler, previous version; "
	            "every value read is checked");
	report_line(h, "timing",
	            "one read of m versions = one operation, timed with CLOCK_MONOTONIC into a "
	            "log-linear histogram (percentiles are bucket upper bounds, <= 0.8%% high); "
	            "ops/s = recorded reads / (last read's end - warm-up end); versions/s = "
	            "ops/s x m");
	report_line(h, "ratios",
	            "kvd/redis ops/s and redis p50 / kvd p50 against the redis row of the same "
	            "transport (kvd-ipc with redis over its Unix socket, kvd-tcp with "
	            "redis-tcp); above 1 kvd is faster");
	runenv_lines_kvd(h, &b->run);
	for (size_t i = 0; i < b->ninfo; i++)
		report_line(h, "backend", "%s, %" PRIu64 " B values (history loaded in %.2f s): %s",
		            b->info[i].be->name, b->info[i].size, b->info[i].load_s,
		            b->info[i].text);
	for (size_t i = 0; i < o->nbackends; i++)
		if (b->skip[i][0] != '\0')
			report_line(h, "skipped", "%s: %s", o->backends[i]->name, b->skip[i]);
}

static void vs_report_markdown(const struct vs_bench *b, struct report *h)
{
	printf("```\n%s\n```\n\n", b->run.command);
	report_lines_markdown(h, stdout);
	printf("\n| value B | m | backend | reads/s | versions/s | p50 µs | p99 µs | p999 µs | "
	       "kvd/redis reads/s | redis/kvd p50 | errors |\n");
	printf("|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
	for (size_t i = 0; i < b->nres; i++) {
		const struct vs_result *r = &b->res[i], *ref = vs_ref(b, r);
		char ops[32], vps[32];
		printf("| %" PRIu64 " | %" PRIu64 " | %s | ", r->size, r->m, r->be->name);
		if (!r->ran || r->failed) {
			printf("%s: %s | | | | | | | |\n", r->ran ? "FAILED" : "skipped", r->err);
			continue;
		}
		bench_grouped(ops, sizeof ops, vs_rate(r));
		bench_grouped(vps, sizeof vps, vs_rate(r) * (double)r->m);
		printf("%s | %s | %.1f | %.1f | %.1f | ", ops, vps, r->p50 / 1e3, r->p99 / 1e3,
		       r->p999 / 1e3);
		if (ref != NULL && vs_rate(ref) > 0 && r->p50 > 0)
			printf("**%.2fx** | %.2fx | ", vs_rate(r) / vs_rate(ref),
			       (double)ref->p50 / (double)r->p50);
		else
			printf("- | - | ");
		printf("%" PRIu64 " |\n", r->errors);
	}
}

static void vs_report_json(const struct vs_bench *b, struct report *rep, bool ok)
{
	const struct vs_opts *o = &b->o;
	json_t *m = json_array(), *sizes = json_array(), *results = json_array();

	for (size_t i = 0; i < o->nm; i++)
		json_array_append_new(m, report_u64(o->m[i]));
	for (size_t i = 0; i < o->nsizes; i++)
		json_array_append_new(sizes, report_u64(o->sizes[i]));
	for (size_t i = 0; i < b->nres; i++) {
		const struct vs_result *r = &b->res[i], *ref = vs_ref(b, r);
		json_t *row = json_pack(
		        "{s:s,s:s,s:o,s:o,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		        "backend", r->be->name, "kind", r->be->kind, "value_size",
		        report_u64(r->size), "m", report_u64(r->m), "state",
		        !r->ran     ? "skipped"
		        : r->failed ? "failed"
		                    : "ok",
		        "operations", report_u64(r->ops), "seconds", report_real(r->seconds, 4),
		        "ops_per_s", report_real(vs_rate(r), 1), "versions_per_s",
		        report_real(vs_rate(r) * (double)r->m, 1), "p50_us",
		        report_real(r->p50 / 1e3, 2), "p90_us", report_real(r->p90 / 1e3, 2),
		        "p99_us", report_real(r->p99 / 1e3, 2), "p999_us",
		        report_real(r->p999 / 1e3, 2), "max_us", report_real(r->max / 1e3, 2),
		        "mean_us", report_real(r->mean / 1e3, 2), "errors", report_u64(r->errors),
		        "loadavg_1min", report_real(r->loadavg, 2));
		if (ref != NULL && vs_rate(ref) > 0 && r->p50 > 0 && r->ran && !r->failed) {
			report_set(row, "ref", json_string(ref->be->name));
			report_set(row, "ops_ratio", report_real(vs_rate(r) / vs_rate(ref), 4));
			report_set(row, "p50_ratio",
			           report_real((double)ref->p50 / (double)r->p50, 4));
			report_set(
			        row, "p99_ratio",
			        report_real(r->p99 > 0 ? (double)ref->p99 / (double)r->p99 : 0, 4));
		}
		report_set(row, "error", report_str(r->err));
		json_array_append_new(results, row);
	}
	report_set(rep->doc, "bench", json_string("versions"));
	report_set(rep->doc, "ok", json_boolean(ok));
	report_set(rep->doc, "command", report_str(b->run.command));
	report_set(rep->doc, "config",
	           json_pack("{s:o,s:o,s:o,s:i,s:o,s:o,s:o,s:o,s:o,s:o}", "keys",
	                     report_u64(o->keys), "versions", report_u64(o->versions), "threads",
	                     report_u64(o->threads), "load_threads", VS_LOAD_THREADS, "seconds",
	                     report_real(o->c.seconds, 3), "warmup_s", report_real(o->c.warmup, 3),
	                     "seed", report_u64(o->c.seed), "m", m, "value_sizes", sizes,
	                     "backends", runenv_json_backends(o->backends, o->nbackends)));
	report_set(rep->doc, "header", json_incref(rep->lines));
	report_set(rep->doc, "skipped",
	           runenv_json_skipped(o->backends, o->nbackends, b->skip[0], sizeof b->skip[0]));
	report_set(rep->doc, "results", results);
	report_set(rep->doc, "kvd_exit", report_str(b->run.kvd_failed ? b->run.kvd_err : "ok"));
	(void)report_json(rep, stdout);
}

static void vs_report_text(const struct vs_bench *b, struct report *h)
{
	putchar('\n');
	report_lines_text(h, stdout, 10);
	printf("\nsummary:\n");
	vs_progress_head(stdout);
	for (size_t i = 0; i < b->nres; i++)
		vs_progress(b, stdout, &b->res[i], true);
}

/* ---- options ---------------------------------------------------------------------- */

static int parse_backends(const char *cmd, const char *name, const char *arg, void *val)
{
	struct vs_opts *o = val;

	(void)name;
	return runenv_parse_backends(cmd, arg, vs_allowed, o->backends, VS_BACKENDS_MAX,
	                             &o->nbackends);
}

static int parse_m(const char *cmd, const char *name, const char *arg, void *val)
{
	struct vs_opts *o = val;

	return bench_parse_u64_list(cmd, name, arg, 1, VS_VERSIONS_MAX, o->m, RUNENV_LIST_MAX,
	                            &o->nm);
}

static int parse_sizes(const char *cmd, const char *name, const char *arg, void *val)
{
	struct vs_opts *o = val;

	return bench_parse_u64_list(cmd, name, arg, VS_VALUE_MIN, VS_VALUE_MAX, o->sizes,
	                            RUNENV_LIST_MAX, &o->nsizes);
}

/* 0, 1 for --help, or -EINVAL. */
static int parse(int argc, char **argv, struct vs_opts *o)
{
	char sizes[128], quick[256];
	struct bench_opt opts[6 + RUNENV_OPTS_N] = {
	        {BENCH_OPT("backend", BENCH_OPT_FUNC, o, "LIST",
	                   "kvd-ipc,kvd-tcp,redis,redis-tcp (default kvd-ipc,redis)"),
	         .set = &o->backends_set, .parse = parse_backends},
	        {BENCH_OPT("m", BENCH_OPT_FUNC, o, "LIST",
	                   "versions per read (default 1,2,4,8,16,32)"),
	         .set = &o->m_set, .parse = parse_m},
	        {BENCH_OPT("value-size", BENCH_OPT_FUNC, o, "LIST", sizes), .set = &o->sizes_set,
	         .parse = parse_sizes},
	        {BENCH_OPT("keys", BENCH_OPT_U64, &o->keys, "N", "keys (default %D)"), .lo = 1,
	         .hi = VS_KEYS_MAX, .set = &o->keys_set},
	        {BENCH_OPT("versions", BENCH_OPT_U64, &o->versions, "N",
	                   "versions written per key (default: the largest m)"),
	         .lo = 1, .hi = VS_VERSIONS_MAX, .set = &o->versions_set},
	        {BENCH_OPT("threads", BENCH_OPT_U64, &o->threads, "N",
	                   "client threads (default %D)"),
	         .lo = 1, .hi = VS_THREADS_MAX},
	};
	struct bench_cmd cmd = {
	        "versions",
	        "Reading the newest m versions of a key: kvd's Versions call against Redis\n"
	        "holding the same history as a chain of keys read with m GETs.\n",
	        "Exits 0 only when every backend that could run read back every history\n"
	        "without an error and every server it started exited 0.\n",
	        opts,
	        6,
	};
	uint64_t maxm = 0;
	int rv;

	bench_fmt(sizes, sizeof sizes, "bytes per value, %llu..%llu (default 100,1024)",
	          VS_VALUE_MIN, VS_VALUE_MAX);
	bench_fmt(quick, sizeof quick,
	          "smoke run: every backend, %llu keys, m 1,4, 100 B,\n"
	          "%.2f s per cell (explicit options win)",
	          VS_QUICK_KEYS, VS_QUICK_SECONDS);
	cmd.nopts += runenv_opts_table(&o->c, true, "random streams (default %D)", quick,
	                               opts + cmd.nopts);
	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv;
	if (runenv_opts_done(cmd.name, &o->c) != 0)
		return -EINVAL;
	if (o->c.quick) {
		if (!o->keys_set)
			o->keys = VS_QUICK_KEYS;
		if (!o->c.seconds_set)
			o->c.seconds = VS_QUICK_SECONDS;
		if (!o->c.warmup_set)
			o->c.warmup = VS_QUICK_WARMUP;
		if (!o->m_set) {
			memcpy(o->m, vs_m_quick, sizeof vs_m_quick);
			o->nm = sizeof vs_m_quick / sizeof vs_m_quick[0];
		}
		if (!o->sizes_set) {
			memcpy(o->sizes, vs_size_quick, sizeof vs_size_quick);
			o->nsizes = sizeof vs_size_quick / sizeof vs_size_quick[0];
		}
	}
	for (size_t i = 0; i < o->nm; i++)
		if (o->m[i] > maxm)
			maxm = o->m[i];
	if (!o->versions_set)
		o->versions = maxm;
	if (o->versions < maxm) {
		fprintf(stderr,
		        "kvbench versions: --versions %" PRIu64 " is below the largest m (%" PRIu64
		        ")\n",
		        o->versions, maxm);
		return -EINVAL;
	}
	if (o->keys * o->versions > VS_KEYS_MAX * 10) {
		fprintf(stderr, "kvbench versions: --keys x --versions is above %llu writes\n",
		        VS_KEYS_MAX * 10);
		return -EINVAL;
	}
	return 0;
}

/* ---- entry point ------------------------------------------------------------------ */

static bool vs_all_ok(const struct vs_bench *b)
{
	size_t ran = 0;

	if (b->run.kvd_failed)
		return false;
	for (size_t i = 0; i < b->nres; i++) {
		if (!b->res[i].ran || b->res[i].failed || b->res[i].errors > 0)
			return false;
		ran++;
	}
	return ran > 0;
}

int bench_versions(int argc, char **argv)
{
	struct vs_bench *b = calloc(1, sizeof(*b));
	struct report rep = {0}, *h = &rep;
	struct vs_opts *o;
	bool need_kvd = false, ok = false;
	int rv, code = 1;

	if (b == NULL || report_init(h) != 0) {
		fprintf(stderr, "kvbench versions: out of memory\n");
		free(b);
		report_fini(h);
		return 1;
	}
	o = &b->o;
	runenv_opts_init(&o->c);
	o->backends[0] = yb_find("kvd-ipc");
	o->backends[1] = yb_find("redis");
	o->nbackends = 2;
	memcpy(o->m, vs_m_default, sizeof vs_m_default);
	o->nm = sizeof vs_m_default / sizeof vs_m_default[0];
	memcpy(o->sizes, vs_size_default, sizeof vs_size_default);
	o->nsizes = sizeof vs_size_default / sizeof vs_size_default[0];
	o->keys = VS_KEYS_DEFAULT;
	o->threads = 1;
	o->c.seconds = VS_SECONDS_DEFAULT;
	o->c.warmup = VS_WARMUP_DEFAULT;
	if ((rv = parse(argc, argv, o)) != 0) {
		free(b);
		report_fini(h);
		return rv > 0 ? 0 : 2;
	}
	if (o->c.quick && !o->backends_set) {
		/* --quick without --backend: every transport */
		o->backends[2] = yb_find("kvd-tcp");
		o->backends[3] = yb_find("redis-tcp");
		o->nbackends = 4;
	}
	for (size_t i = 0; i < o->nbackends; i++)
		need_kvd |= is_kvd(o->backends[i]);
	b->progress = o->c.json || o->c.markdown ? stderr : stdout;
	signal(SIGPIPE, SIG_IGN);
	if (runenv_init(&b->run, "versions", argc, argv, o->c.dir, o->c.kvd, o->c.endpoint,
	                o->c.redis_server, need_kvd) != 0)
		goto out;
	b->run.env.stream = o->c.stream;
	b->cap = o->nbackends * o->nm * o->nsizes;
	if ((b->pool = malloc(VS_POOL_BYTES)) == NULL ||
	    (b->res = calloc(b->cap, sizeof(*b->res))) == NULL) {
		fprintf(stderr, "kvbench versions: out of memory\n");
		goto out;
	}
	runenv_fill_pool(b->pool, VS_POOL_BYTES, o->c.seed ^ 0x5eed);
	fprintf(b->progress, "kvbench versions: %s\n", b->run.command);
	(void)runenv_skip_unavailable(&b->run, o->backends, o->nbackends, b->skip[0],
	                              sizeof b->skip[0], b->progress);
	vs_progress_head(b->progress);
	for (size_t si = 0; si < o->nsizes; si++)
		vs_size(b, o->sizes[si]);
	(void)runenv_fini(&b->run, false);
	ok = vs_all_ok(b);
	vs_header(b, h);
	if (o->c.json)
		vs_report_json(b, h, ok);
	else if (o->c.markdown)
		vs_report_markdown(b, h);
	else
		vs_report_text(b, h);
	code = runenv_finish(&b->run, ok, "a cell failed or had errors");
out:
	if (b->run.env.kvd_started)
		(void)runenv_fini(&b->run, false);
	free(b->res);
	free(b->pool);
	free(b);
	report_fini(h);
	return code;
}
