/*
 * bench/durable.c — kvbench durable: puts that are durable before they are
 * acknowledged, at 1 to 64 concurrent clients: kvd's group commit
 * (sync=always) against Redis with appendfsync always.
 *
 *   kvbench durable [--backend LIST] [--clients LIST] [--value-size B]
 *                   [--keys N] [--seconds S] [--warmup S] [--seed S]
 *                   [--kvd PATH] [--endpoint URL] [--transport nng|stream]
 *                   [--redis-server PATH]
 *                   [--dir DIR] [--quick] [--json | --markdown]
 *
 * For every client count of --clients and every backend of --backend (the
 * order alternates with the client count), a fresh database with the
 * backends of bench/ycsb_backend.h at sync=always: a kvd tenant created
 * with sync=always (a reply only after its batch was fdatasync'ed), a
 * redis-server of its own with appendonly yes and appendfsync always, or an
 * embedded engine syncing every write (the engine, RocksDB, LevelDB and
 * LMDB, as `kvbench ycsb --sync always` has them). Then that many client
 * threads put as fast as they can: client i's j-th put writes key
 * "dkey" + (i + clients x j) mod --keys, a --value-size value cut from
 * random bytes (kvd: kvc_put on one libkvclient handle with a context per
 * client; redis: SET on a hiredis connection per client; embedded: the
 * library's put). --warmup seconds are not recorded, then --seconds are:
 * every put started in that window is timed end to end into a log-linear
 * histogram; ops/s = recorded puts / (last put's end - warm-up end).
 *
 * Where the database keeps write-path counters (kvd's Stats of the tenant:
 * batches, batched_writes, syncs; the engine's kv_stats) they are read at
 * the start and at the end of the recorded window: writes per fdatasync
 * and per batch are their differences' ratios. Redis and the other peers
 * do not count their fsyncs: "-".
 *
 * Each kvd row is compared with the redis row of the same transport (ipc
 * with Redis's Unix socket, tcp with Redis over TCP; the other one when
 * that did not run): kvd/redis ops/s and redis p99 / kvd p99.
 *
 * Exits 0 only when every backend that could run completed every cell with
 * no failed put and every server started exited 0; a backend that cannot
 * run here (no redis-server, a peer not built) is skipped.
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
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DU_KEYS_DEFAULT    100000ull
#define DU_VALUE_DEFAULT   100ull
#define DU_SECONDS_DEFAULT 5.0
#define DU_WARMUP_DEFAULT  1.0
#define DU_QUICK_SECONDS   0.3
#define DU_QUICK_WARMUP    0.1
#define DU_KEYS_MAX        100000000ull
#define DU_VALUE_MAX       65536ull
#define DU_CLIENTS_MAX     256ull
#define DU_BACKENDS_MAX    8
#define DU_POOL_BYTES      (1u << 20)
#define DU_KEY_MAX         32
#define DU_ERRORS_MAX      100 /* a client stops after this many failed puts */
#define DU_ERR_MAX         512
#define DU_INFO_MAX        1024

static const uint64_t du_clients_default[] = {1, 4, 16, 64};
static const uint64_t du_clients_quick[] = {1, 4};
static const char *const du_allowed[] = {"kvd-ipc", "kvd-tcp", "redis", "redis-tcp", "engine",
                                         "rocksdb", "leveldb", "lmdb",  NULL};
static const char *const du_quick_backends[] = {"kvd-ipc",   "kvd-tcp", "redis",
                                                "redis-tcp", "engine",  NULL};

struct du_opts {
	const struct yb_backend *backends[DU_BACKENDS_MAX];
	size_t nbackends;
	uint64_t clients[RUNENV_LIST_MAX];
	size_t nclients;
	uint64_t value_size, keys;
	struct runenv_opts c; /* the options every experiment takes */
	bool backends_set, clients_set;
};

struct du_result {
	const struct yb_backend *be;
	uint64_t clients;
	bool ran, failed;
	uint64_t ops, errors;
	double seconds, loadavg;
	uint64_t p50, p90, p99, p999, max, mean; /* ns */
	bool counted;                            /* the counters below were read */
	struct yb_counters delta;
	char err[DU_ERR_MAX];
};

struct du_info {
	const struct yb_backend *be;
	char text[DU_INFO_MAX];
};

struct du_bench {
	struct du_opts o;
	struct runenv run;
	char *pool;
	struct du_result *res;
	size_t nres, cap;
	struct du_info info[DU_BACKENDS_MAX];
	size_t ninfo;
	char skip[DU_BACKENDS_MAX][DU_ERR_MAX];
	FILE *progress;
};

static bool is_kvd(const struct yb_backend *be)
{
	return strcmp(be->kind, "kvd") == 0;
}

/* ---- clients ---------------------------------------------------------------------- */

struct du_cell {
	struct du_bench *b;
	const struct yb_backend *be;
	struct yb_db *db;
	unsigned nclients;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned ready;
	int go; /* 0 wait, 1 run, -1 cancelled */
	uint64_t t_warm, t_stop;
};

struct du_client {
	struct du_cell *c;
	unsigned idx;
	pthread_t tid;
	struct yb_worker w;
	bool worker_ok;
	struct hist *h;
	uint64_t ops, errors, t_last;
	char err[DU_ERR_MAX];
};

#define du_error(t, ...) bench_thread_error(&(t)->errors, (t)->err, sizeof((t)->err), __VA_ARGS__)

static void *du_client_main(void *arg)
{
	struct du_client *t = arg;
	struct du_cell *c = t->c;
	const struct du_opts *o = &c->b->o;
	size_t vpos = ((size_t)t->idx * 65537u) % (DU_POOL_BYTES - o->value_size);
	uint64_t j = 0;
	int go;

	t->w.db = c->db;
	t->worker_ok = c->be->worker_init(&t->w) == 0;
	if (!t->worker_ok)
		bench_fmt(t->err, sizeof t->err, "worker setup: %s", t->w.err);
	pthread_mutex_lock(&c->mu);
	c->ready++;
	pthread_cond_broadcast(&c->cv);
	while (c->go == 0)
		pthread_cond_wait(&c->cv, &c->mu);
	go = c->go;
	pthread_mutex_unlock(&c->mu);
	if (!t->worker_ok || go < 0)
		goto out;
	while (t->errors < DU_ERRORS_MAX) {
		char key[DU_KEY_MAX];
		uint64_t k = (t->idx + (uint64_t)c->nclients * j++) % o->keys;
		int kl = snprintf(key, sizeof key, "dkey%012" PRIu64, k);
		uint64_t t0 = bench_now_ns(), t1;
		if (t0 >= c->t_stop)
			break;
		if (c->be->update(&t->w, key, (size_t)kl, c->b->pool + vpos, o->value_size) != 0) {
			du_error(t, "put %s: %s", key, t->w.err);
			continue;
		}
		t1 = bench_now_ns();
		t->t_last = t1;
		vpos = (vpos + 4099) % (DU_POOL_BYTES - o->value_size);
		if (t0 >= c->t_warm) {
			hist_add(t->h, t1 - t0);
			t->ops++;
		}
	}
out:
	if (t->worker_ok)
		c->be->worker_fini(&t->w);
	return NULL;
}

/* Runs one cell on an open database; fills r. */
static void du_cell_run(struct du_cell *c, struct du_result *r)
{
	const struct du_opts *o = &c->b->o;
	struct du_client *th = calloc(c->nclients, sizeof(*th));
	struct hist *all = calloc((size_t)c->nclients + 1, sizeof(struct hist));
	struct yb_counters c0 = {0}, c1 = {0};
	uint64_t t_last = 0;
	unsigned started = 0;
	char e[DU_ERR_MAX] = "";
	int k0 = 1, k1 = 1;

	r->ran = true;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	if (th == NULL || all == NULL) {
		bench_fmt(r->err, sizeof r->err, "out of memory for %u clients", c->nclients);
		r->failed = true;
		goto out;
	}
	for (started = 0; started < c->nclients; started++) {
		struct du_client *t = &th[started];
		t->c = c;
		t->idx = started;
		t->h = &all[started + 1];
		if (pthread_create(&t->tid, NULL, du_client_main, t) != 0)
			break;
	}
	pthread_mutex_lock(&c->mu);
	while (c->ready < started)
		pthread_cond_wait(&c->cv, &c->mu);
	c->go = started == c->nclients ? 1 : -1;
	for (unsigned i = 0; i < started; i++)
		if (!th[i].worker_ok)
			c->go = -1;
	c->t_warm = bench_now_ns() + (uint64_t)(o->c.warmup * 1e9);
	c->t_stop = c->t_warm + (uint64_t)(o->c.seconds * 1e9);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (c->go > 0 && c->be->counters != NULL) {
		bench_sleep_until_ns(c->t_warm);
		if ((k0 = c->be->counters(c->db, &c0, e, sizeof e)) == 0) {
			bench_sleep_until_ns(c->t_stop);
			k1 = c->be->counters(c->db, &c1, e, sizeof e);
		}
		if (k0 < 0 || k1 < 0) {
			r->failed = true;
			bench_fmt(r->err, sizeof r->err, "%s", e);
		}
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i].tid, NULL);
	if (started < c->nclients) {
		bench_fmt(r->err, sizeof r->err, "could not start client %u of %u", started + 1,
		          c->nclients);
		r->failed = true;
	}
	for (unsigned i = 0; i < started; i++) {
		struct du_client *t = &th[i];
		hist_merge(&all[0], t->h);
		r->ops += t->ops;
		r->errors += t->errors;
		if (t->t_last > t_last)
			t_last = t->t_last;
		if (r->err[0] == '\0' && t->err[0] != '\0')
			bench_fmt(r->err, sizeof r->err, "%s", t->err);
		if (!t->worker_ok)
			r->failed = true;
	}
	if (k0 == 0 && k1 == 0) {
		r->counted = true;
		r->delta.batches = c1.batches - c0.batches;
		r->delta.writes = c1.writes - c0.writes;
		r->delta.syncs = c1.syncs - c0.syncs;
	}
	r->seconds = t_last > c->t_warm ? (double)(t_last - c->t_warm) / 1e9 : 0;
	r->p50 = hist_pct(&all[0], 0.50);
	r->p90 = hist_pct(&all[0], 0.90);
	r->p99 = hist_pct(&all[0], 0.99);
	r->p999 = hist_pct(&all[0], 0.999);
	r->max = all[0].max;
	r->mean = hist_mean(&all[0]);
	r->loadavg = runenv_loadavg();
	if (r->errors > 0)
		r->failed = true;
	if (!r->failed && r->ops == 0) {
		r->failed = true;
		bench_fmt(r->err, sizeof r->err, "no put completed");
	}
out:
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(th);
	free(all);
}

/* ---- the run ---------------------------------------------------------------------- */

static double du_rate(const struct du_result *r)
{
	return r->seconds > 0 ? (double)r->ops / r->seconds : 0;
}

static double du_per_sync(const struct du_result *r)
{
	return r->counted && r->delta.syncs > 0 ? (double)r->delta.writes / (double)r->delta.syncs
	                                        : 0;
}

static double du_per_batch(const struct du_result *r)
{
	return r->counted && r->delta.batches > 0
	               ? (double)r->delta.writes / (double)r->delta.batches
	               : 0;
}

/* The redis row a kvd row is compared with. */
static const struct du_result *du_ref(const struct du_bench *b, const struct du_result *r)
{
	const char *want = strcmp(r->be->name, "kvd-tcp") == 0 ? "redis-tcp" : "redis";
	const struct du_result *other = NULL;

	if (!is_kvd(r->be))
		return NULL;
	for (size_t i = 0; i < b->nres; i++) {
		const struct du_result *q = &b->res[i];
		if (strcmp(q->be->kind, "redis") != 0 || q->clients != r->clients || !q->ran ||
		    q->failed)
			continue;
		if (strcmp(q->be->name, want) == 0)
			return q;
		if (other == NULL)
			other = q;
	}
	return other;
}

static void du_progress_head(FILE *f)
{
	fprintf(f, "%-9s %7s %9s %9s %9s %9s %10s %10s %6s %5s  %s\n", "backend", "clients",
	        "puts/s", "p50 us", "p99 us", "p999 us", "puts/sync", "puts/batch", "errors",
	        "load", "kvd/redis puts/s, redis/kvd p99");
}

static void du_progress(const struct du_bench *b, FILE *f, const struct du_result *r, bool ratios)
{
	const struct du_result *ref = ratios ? du_ref(b, r) : NULL;
	char ps[16] = "-", pb[16] = "-";

	if (!r->ran || r->failed) {
		fprintf(f, "%-9s %7" PRIu64 " %s: %s\n", r->be->name, r->clients,
		        r->ran ? "FAILED" : "skipped", r->err);
		return;
	}
	if (du_per_sync(r) > 0)
		snprintf(ps, sizeof ps, "%.2f", du_per_sync(r));
	if (du_per_batch(r) > 0)
		snprintf(pb, sizeof pb, "%.2f", du_per_batch(r));
	fprintf(f, "%-9s %7" PRIu64 " %9.0f %9.1f %9.1f %9.1f %10s %10s %6" PRIu64 " %5.1f",
	        r->be->name, r->clients, du_rate(r), r->p50 / 1e3, r->p99 / 1e3, r->p999 / 1e3, ps,
	        pb, r->errors, r->loadavg);
	if (ref != NULL && du_rate(ref) > 0 && r->p99 > 0)
		fprintf(f, "  %.2fx, %.2fx (%s)", du_rate(r) / du_rate(ref),
		        (double)ref->p99 / (double)r->p99, ref->be->name);
	fputc('\n', f);
	fflush(f);
}

static void du_keep_info(struct du_bench *b, const struct yb_backend *be, struct yb_db *db)
{
	for (size_t i = 0; i < b->ninfo; i++)
		if (b->info[i].be == be)
			return;
	if (b->ninfo == DU_BACKENDS_MAX)
		return;
	b->info[b->ninfo].be = be;
	be->describe(db, b->info[b->ninfo].text, sizeof b->info[b->ninfo].text);
	b->ninfo++;
}

static void du_clients(struct du_bench *b, size_t ci)
{
	const struct du_opts *o = &b->o;

	for (size_t j = 0; j < o->nbackends; j++) {
		size_t i = ci % 2 ? o->nbackends - 1 - j : j;
		const struct yb_backend *be = o->backends[i];
		struct yb_config cfg = {
		        .sync = YB_SYNC_ALWAYS,
		        .threads = (unsigned)o->clients[ci],
		        .records = o->keys,
		        .key_size = 16,
		        .value_size = o->value_size,
		        .name = "durable",
		};
		struct du_cell c = {.b = b, .be = be, .nclients = (unsigned)o->clients[ci]};
		struct du_result *r;
		char err[DU_ERR_MAX];

		if (b->skip[i][0] != '\0' || b->nres == b->cap)
			continue;
		r = &b->res[b->nres++];
		memset(r, 0, sizeof(*r));
		r->be = be;
		r->clients = o->clients[ci];
		if (be->open(be, &b->run.env, &cfg, &c.db, err, sizeof err) != 0) {
			r->ran = r->failed = true;
			bench_fmt(r->err, sizeof r->err, "open: %s", err);
			du_progress(b, b->progress, r, false);
			continue;
		}
		du_keep_info(b, be, c.db);
		du_cell_run(&c, r);
		if (be->close(c.db, err, sizeof err) != 0) {
			if (!r->failed)
				bench_fmt(r->err, sizeof r->err, "close: %s", err);
			r->failed = true;
		}
		du_progress(b, b->progress, r, false);
	}
}

/* ---- report ----------------------------------------------------------------------- */

static void du_header(const struct du_bench *b, struct report *h)
{
	const struct du_opts *o = &b->o;
	char cl[128] = "", be[256] = "";

	for (size_t i = 0; i < o->nclients; i++)
		snprintf(cl + strlen(cl), sizeof cl - strlen(cl), "%s%" PRIu64, i ? "," : "",
		         o->clients[i]);
	for (size_t i = 0; i < o->nbackends; i++)
		snprintf(be + strlen(be), sizeof be - strlen(be), "%s%s", i ? "," : "",
		         o->backends[i]->name);
	runenv_lines_common(h, &b->run);
	report_line(h, "config",
	            "backends %s; clients %s; sync=always everywhere (kvd tenant sync=always, "
	            "redis appendfsync always, embedded: every write synced); %" PRIu64
	            "-byte values, keys dkey + (client + clients x n) mod %" PRIu64
	            " (overwrites once the key space is used); per cell a fresh database, %.2f s "
	            "warm-up (not recorded), then %.2f s recorded; seed %" PRIu64,
	            be, cl, o->value_size, o->keys, o->c.warmup, o->c.seconds, o->c.seed);
	report_line(h, "clients",
	            "one thread per client, one blocking put at a time; kvd: one libkvclient "
	            "handle with clients + 2 contexts (one connection); redis: a hiredis "
	            "connection per client");
	report_line(h, "timing",
	            "every put started in the recorded window, timed with CLOCK_MONOTONIC into a "
	            "log-linear histogram (percentiles are bucket upper bounds, <= 0.8%% high); "
	            "puts/s = recorded puts / (last put's end - warm-up end)");
	report_line(h, "counters",
	            "puts/sync and puts/batch: the database's own write counters over the "
	            "recorded window (kvd: Stats of the tenant, batched_writes / syncs and / "
	            "batches; engine: kv_stats); '-' where a database keeps none");
	report_line(h, "ratios",
	            "kvd/redis puts/s and redis p99 / kvd p99 against the redis row of the same "
	            "transport and client count; above 1 kvd is better");
	runenv_lines_kvd(h, &b->run);
	for (size_t i = 0; i < b->ninfo; i++)
		report_line(h, "backend", "%s: %s", b->info[i].be->name, b->info[i].text);
	for (size_t i = 0; i < o->nbackends; i++)
		if (b->skip[i][0] != '\0')
			report_line(h, "skipped", "%s: %s", o->backends[i]->name, b->skip[i]);
}

static void du_report_markdown(const struct du_bench *b, struct report *h)
{
	printf("```\n%s\n```\n\n", b->run.command);
	report_lines_markdown(h, stdout);
	printf("\n| clients | backend | puts/s | p50 µs | p99 µs | p999 µs | puts/fdatasync | "
	       "puts/batch | kvd/redis puts/s | redis/kvd p99 | errors |\n");
	printf("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
	for (size_t i = 0; i < b->nres; i++) {
		const struct du_result *r = &b->res[i], *ref = du_ref(b, r);
		char ops[32];
		printf("| %" PRIu64 " | %s | ", r->clients, r->be->name);
		if (!r->ran || r->failed) {
			printf("%s: %s | | | | | | | | |\n", r->ran ? "FAILED" : "skipped", r->err);
			continue;
		}
		bench_grouped(ops, sizeof ops, du_rate(r));
		printf("%s | %.1f | %.1f | %.1f | ", ops, r->p50 / 1e3, r->p99 / 1e3,
		       r->p999 / 1e3);
		if (du_per_sync(r) > 0)
			printf("%.2f | ", du_per_sync(r));
		else
			printf("- | ");
		if (du_per_batch(r) > 0)
			printf("%.2f | ", du_per_batch(r));
		else
			printf("- | ");
		if (ref != NULL && du_rate(ref) > 0 && r->p99 > 0)
			printf("**%.2fx** | %.2fx | ", du_rate(r) / du_rate(ref),
			       (double)ref->p99 / (double)r->p99);
		else
			printf("- | - | ");
		printf("%" PRIu64 " |\n", r->errors);
	}
}

static void du_report_json(const struct du_bench *b, struct report *rep, bool ok)
{
	const struct du_opts *o = &b->o;
	json_t *clients = json_array(), *results = json_array();

	for (size_t i = 0; i < o->nclients; i++)
		json_array_append_new(clients, report_u64(o->clients[i]));
	for (size_t i = 0; i < b->nres; i++) {
		const struct du_result *r = &b->res[i], *ref = du_ref(b, r);
		json_t *row = json_pack(
		        "{s:s,s:s,s:o,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "backend",
		        r->be->name, "kind", r->be->kind, "clients", report_u64(r->clients),
		        "state",
		        !r->ran     ? "skipped"
		        : r->failed ? "failed"
		                    : "ok",
		        "operations", report_u64(r->ops), "seconds", report_real(r->seconds, 4),
		        "ops_per_s", report_real(du_rate(r), 1), "p50_us",
		        report_real(r->p50 / 1e3, 2), "p90_us", report_real(r->p90 / 1e3, 2),
		        "p99_us", report_real(r->p99 / 1e3, 2), "p999_us",
		        report_real(r->p999 / 1e3, 2), "max_us", report_real(r->max / 1e3, 2),
		        "mean_us", report_real(r->mean / 1e3, 2), "errors", report_u64(r->errors),
		        "loadavg_1min", report_real(r->loadavg, 2));
		if (r->counted) {
			report_set(row, "batches", report_u64(r->delta.batches));
			report_set(row, "batched_writes", report_u64(r->delta.writes));
			report_set(row, "syncs", report_u64(r->delta.syncs));
			report_set(row, "writes_per_sync", report_real(du_per_sync(r), 3));
			report_set(row, "writes_per_batch", report_real(du_per_batch(r), 3));
		}
		if (ref != NULL && du_rate(ref) > 0 && r->p99 > 0 && r->ran && !r->failed) {
			report_set(row, "ref", json_string(ref->be->name));
			report_set(row, "ops_ratio", report_real(du_rate(r) / du_rate(ref), 4));
			report_set(
			        row, "p50_ratio",
			        report_real(r->p50 > 0 ? (double)ref->p50 / (double)r->p50 : 0, 4));
			report_set(row, "p99_ratio",
			           report_real((double)ref->p99 / (double)r->p99, 4));
		}
		report_set(row, "error", report_str(r->err));
		json_array_append_new(results, row);
	}
	report_set(rep->doc, "bench", json_string("durable"));
	report_set(rep->doc, "ok", json_boolean(ok));
	report_set(rep->doc, "command", report_str(b->run.command));
	report_set(rep->doc, "config",
	           json_pack("{s:o,s:o,s:o,s:o,s:o,s:s,s:o,s:o}", "value_size",
	                     report_u64(o->value_size), "keys", report_u64(o->keys), "seconds",
	                     report_real(o->c.seconds, 3), "warmup_s", report_real(o->c.warmup, 3),
	                     "seed", report_u64(o->c.seed), "sync", "always", "clients", clients,
	                     "backends", runenv_json_backends(o->backends, o->nbackends)));
	report_set(rep->doc, "header", json_incref(rep->lines));
	report_set(rep->doc, "skipped",
	           runenv_json_skipped(o->backends, o->nbackends, b->skip[0], sizeof b->skip[0]));
	report_set(rep->doc, "results", results);
	report_set(rep->doc, "kvd_exit", report_str(b->run.kvd_failed ? b->run.kvd_err : "ok"));
	(void)report_json(rep, stdout);
}

static void du_report_text(const struct du_bench *b, struct report *h)
{
	putchar('\n');
	report_lines_text(h, stdout, 10);
	printf("\nsummary:\n");
	du_progress_head(stdout);
	for (size_t i = 0; i < b->nres; i++)
		du_progress(b, stdout, &b->res[i], true);
}

/* ---- options ---------------------------------------------------------------------- */

static int parse_backends(const char *cmd, const char *name, const char *arg, void *val)
{
	struct du_opts *o = val;

	(void)name;
	return runenv_parse_backends(cmd, arg, du_allowed, o->backends, DU_BACKENDS_MAX,
	                             &o->nbackends);
}

static int parse_clients(const char *cmd, const char *name, const char *arg, void *val)
{
	struct du_opts *o = val;

	return bench_parse_u64_list(cmd, name, arg, 1, DU_CLIENTS_MAX, o->clients, RUNENV_LIST_MAX,
	                            &o->nclients);
}

/* 0, 1 for --help, or -EINVAL. */
static int parse(int argc, char **argv, struct du_opts *o)
{
	char quick[256];
	struct bench_opt opts[4 + RUNENV_OPTS_N] = {
	        {BENCH_OPT("backend", BENCH_OPT_FUNC, o, "LIST",
	                   "kvd-ipc,kvd-tcp,redis,redis-tcp,engine,rocksdb,leveldb,\n"
	                   "lmdb (default kvd-ipc,redis)"),
	         .set = &o->backends_set, .parse = parse_backends},
	        {BENCH_OPT("clients", BENCH_OPT_FUNC, o, "LIST",
	                   "concurrent clients (default 1,4,16,64)"),
	         .set = &o->clients_set, .parse = parse_clients},
	        {BENCH_OPT("value-size", BENCH_OPT_U64, &o->value_size, "B",
	                   "bytes per value (default %D)"),
	         .lo = 1, .hi = DU_VALUE_MAX},
	        {BENCH_OPT("keys", BENCH_OPT_U64, &o->keys, "N", "key space (default %D)"), .lo = 1,
	         .hi = DU_KEYS_MAX},
	};
	struct bench_cmd cmd = {
	        "durable",
	        "Puts acknowledged only once durable (sync=always) at several client counts:\n"
	        "kvd's group commit against Redis with appendfsync always.\n",
	        "Exits 0 only when every backend that could run completed every cell with no\n"
	        "failed put and every server it started exited 0.\n",
	        opts,
	        4,
	};
	int rv;

	bench_fmt(quick, sizeof quick,
	          "smoke run: kvd-ipc,kvd-tcp,redis,redis-tcp,engine, 1,4\n"
	          "clients, %.1f s per cell (explicit options win)",
	          DU_QUICK_SECONDS);
	cmd.nopts += runenv_opts_table(&o->c, true, "random value bytes (default %D)", quick,
	                               opts + cmd.nopts);
	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv;
	if (runenv_opts_done(cmd.name, &o->c) != 0)
		return -EINVAL;
	if (o->c.quick) {
		if (!o->c.seconds_set)
			o->c.seconds = DU_QUICK_SECONDS;
		if (!o->c.warmup_set)
			o->c.warmup = DU_QUICK_WARMUP;
		if (!o->clients_set) {
			memcpy(o->clients, du_clients_quick, sizeof du_clients_quick);
			o->nclients = sizeof du_clients_quick / sizeof du_clients_quick[0];
		}
		if (!o->backends_set) {
			o->nbackends = 0;
			for (size_t i = 0; du_quick_backends[i] != NULL; i++)
				o->backends[o->nbackends++] = yb_find(du_quick_backends[i]);
		}
	}
	return 0;
}

/* ---- entry point ------------------------------------------------------------------ */

static bool du_all_ok(const struct du_bench *b)
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

int bench_durable(int argc, char **argv)
{
	struct du_bench *b = calloc(1, sizeof(*b));
	struct report rep = {0}, *h = &rep;
	struct du_opts *o;
	bool need_kvd = false, ok = false;
	int rv, code = 1;

	if (b == NULL || report_init(h) != 0) {
		fprintf(stderr, "kvbench durable: out of memory\n");
		free(b);
		report_fini(h);
		return 1;
	}
	o = &b->o;
	runenv_opts_init(&o->c);
	o->backends[0] = yb_find("kvd-ipc");
	o->backends[1] = yb_find("redis");
	o->nbackends = 2;
	memcpy(o->clients, du_clients_default, sizeof du_clients_default);
	o->nclients = sizeof du_clients_default / sizeof du_clients_default[0];
	o->value_size = DU_VALUE_DEFAULT;
	o->keys = DU_KEYS_DEFAULT;
	o->c.seconds = DU_SECONDS_DEFAULT;
	o->c.warmup = DU_WARMUP_DEFAULT;
	if ((rv = parse(argc, argv, o)) != 0) {
		free(b);
		report_fini(h);
		return rv > 0 ? 0 : 2;
	}
	for (size_t i = 0; i < o->nbackends; i++)
		need_kvd |= is_kvd(o->backends[i]);
	b->progress = o->c.json || o->c.markdown ? stderr : stdout;
	signal(SIGPIPE, SIG_IGN);
	if (runenv_init(&b->run, "durable", argc, argv, o->c.dir, o->c.kvd, o->c.endpoint,
	                o->c.redis_server, need_kvd) != 0)
		goto out;
	b->run.env.stream = o->c.stream;
	b->cap = o->nbackends * o->nclients;
	if ((b->pool = malloc(DU_POOL_BYTES)) == NULL ||
	    (b->res = calloc(b->cap, sizeof(*b->res))) == NULL) {
		fprintf(stderr, "kvbench durable: out of memory\n");
		goto out;
	}
	runenv_fill_pool(b->pool, DU_POOL_BYTES, o->c.seed ^ 0xd0ab1e);
	fprintf(b->progress, "kvbench durable: %s\n", b->run.command);
	(void)runenv_skip_unavailable(&b->run, o->backends, o->nbackends, b->skip[0],
	                              sizeof b->skip[0], b->progress);
	du_progress_head(b->progress);
	for (size_t ci = 0; ci < o->nclients; ci++)
		du_clients(b, ci);
	(void)runenv_fini(&b->run, false);
	ok = du_all_ok(b);
	du_header(b, h);
	if (o->c.json)
		du_report_json(b, h, ok);
	else if (o->c.markdown)
		du_report_markdown(b, h);
	else
		du_report_text(b, h);
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
