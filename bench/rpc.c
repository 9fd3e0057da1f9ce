/*
 * bench/rpc.c — kvbench rpc: throughput and latency of Get and Put through a
 * real kvd, with the transport's own cost measured beside it in the same run.
 *
 *   kvbench rpc [--kvd PATH] [--seconds S] [--warmup S] [--threads LIST]
 *               [--transports LIST] [--keys N] [--window W] [--handles MODE]
 *               [--kvd-workers N] [--dir DIR] [--only LIST] [--kvd-rows LIST]
 *               [--tls-cert FILE --tls-key FILE --tls-ca FILE]
 *               [--repeat R] [--quick] [--json | --markdown]
 *
 * A run (--repeat R: R times, kvd restarted each time; rows report the
 * median run by ops/s and the spread):
 *   1. starts kvd (harness/kvdrun.h; --kvd, default ../daemon/kvd next to
 *      this executable) on a fresh data directory, listening on ipc:// and
 *      tcp://127.0.0.1 (nng) and on kv+ipc:// and kv+tcp://127.0.0.1 (its
 *      stream framing) — with --tls-cert also on tls+tcp://127.0.0.1 (nng's
 *      TLS) and kv+tls://127.0.0.1 (its stream framing over OpenSSL), the
 *      clients verifying it with --tls-ca, so that TLS and plain cells come
 *      from one kvd in one run — with a config file whose only setting
 *      (besides tls_cert and tls_key) is [tenant-defaults] sync = none;
 *      creates the tenant "durable" with sync=always (TenantCreate) and
 *      preloads N keys into both tenants (Batch);
 *   2. for each transport: Health (answered on kvd's nng thread, without the
 *      worker hop: the floor of a kvd call), Get and Put on "default"
 *      (sync=none) with T client threads, each with one request outstanding
 *      (blocking kvc_* calls), for each T of --threads; Get and Put from one
 *      thread with W async calls in flight (pipelined); Put on "durable"
 *      (sync=always: group commit) with each T;
 *   3. stops kvd with SIGTERM and checks that it exits 0;
 *   4. baselines on the same machine: nng REQ/REP echo of 150-byte messages
 *      (a REP server on this process's nng threads, and the same server in a
 *      process of its own — kvbench rpc --serve-echo — as kvd is; a REQ
 *      context per client thread), a plain-socket echo (TCP with TCP_NODELAY, and Unix stream
 *      sockets, a server thread per connection), fdatasync of a 150-byte
 *      append on the data directory's file system, and `sockperf ping-pong`
 *      when sockperf is installed.
 *
 * Each cell: a warm-up (not recorded), then --seconds of measurement (longer
 * when no call has completed in it yet, up to RB_CELL_MAX_S). Every
 * call is timed with CLOCK_MONOTONIC (blocking: around the call; pipelined:
 * from the issue to the callback) into a log-linear histogram; a percentile
 * is the upper bound of its bucket (at most 1/128 above the true value).
 * ops/s is the calls completed inside the measurement window divided by it.
 * Gets check the value length; every failed call is an error. The exit code
 * is 0 only when every cell completed with zero errors and kvd exited 0.
 *
 * This file holds kvd's cells, the options and the entry point; the cell
 * runner (threads, warm-up, window) is in bench/rpc_cell.c, the baselines in
 * bench/rpc_baseline.c, the report in bench/rpc_report.c (bench/rpc_bench.h).
 * kvd is started through harness/kvdrun.h; clocks and the facts a report
 * records are in bench/sys.c.
 */
#include "rpc_bench.h"

#include "bench.h"
#include "hist.h"
#include "opt.h"
#include "report.h"
#include "rng.h"

#include "kvclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The sections of a run (--only) and the kvd row groups (--kvd-rows) by name. */
static const char *const section_names[S_COUNT] = {"kvd",    "nng",  "nng-proc",
                                                   "socket", "disk", "sockperf"};
static const char *const row_names[R_COUNT] = {"health", "get", "put", "pipelined", "always"};

/* ---- kvd cells ------------------------------------------------------------ */

/* The CA and name a TLS url's server is verified with (NULL: none given). */
struct rb_tls {
	const char *ca, *name;
};

static int kvc_handle(const char *url, const struct rb_tls *tls, uint32_t contexts, kvc **ret,
                      char *err, size_t errlen)
{
	struct kvc_options o;
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = RB_CALL_TIMEOUT_MS, .status = &st};
	struct kvc_health h;
	kvc *c;
	int rv;

	kvc_options_init(&o);
	o.endpoint = url;
	o.timeout_ms = RB_CALL_TIMEOUT_MS;
	o.contexts = contexts;
	if (tls != NULL) {
		o.tls_ca_file = tls->ca;
		o.tls_server_name = tls->name;
	}
	if ((rv = kvc_open(&o, &c)) != 0) {
		bench_fmt(err, errlen, "kvc_open %s: %s", url, kvc_code_name(rv));
		return rv;
	}
	/* connected before the clock starts */
	if ((rv = kvc_health(c, &call, &h)) != 0) {
		bench_fmt(err, errlen, "Health on %s: %s: %s", url, kvc_code_name(rv), st.message);
		kvc_close(c);
		return rv;
	}
	*ret = c;
	return 0;
}

static int kvd_setup(struct rb_thread *t)
{
	struct rb_run *r = t->run;

	if (r->shared != NULL) {
		t->c = r->shared;
		return 0;
	}
	struct rb_tls tls = {r->b->o.tls_ca, r->b->o.tls_name};

	return kvc_handle(r->url, &tls, 2, &t->c, t->err, sizeof t->err) == 0 ? 0 : -1;
}

static void kvd_teardown(struct rb_thread *t)
{
	if (t->c != t->run->shared)
		kvc_close(t->c);
	t->c = NULL;
}

static int kvd_get_op(struct rb_thread *t)
{
	struct rb_run *r = t->run;
	struct kvc_status st;
	struct kvc_call call = {.tenant = r->tenant, .status = &st};
	struct kvc_value v;
	char key[RB_KEY_SIZE];
	int rv;

	rb_make_key(key, bench_rng_below(&t->rng, r->b->o.keys));
	if ((rv = kvc_get(t->c, &call, key, sizeof key, 0, 0, &v)) != 0) {
		if (t->err[0] == '\0')
			bench_fmt(t->err, sizeof t->err, "Get: %s: %s", kvc_code_name(rv),
			          st.message);
		return -1;
	}
	rv = v.len == RB_VALUE_SIZE ? 0 : 1;
	kvc_value_free(&v);
	return rv;
}

static int kvd_put_op(struct rb_thread *t)
{
	struct rb_run *r = t->run;
	struct kvc_status st;
	struct kvc_call call = {.tenant = r->tenant, .status = &st};
	char key[RB_KEY_SIZE];
	int rv;

	rb_make_key(key, bench_rng_below(&t->rng, r->b->o.keys));
	rv = kvc_put(t->c, &call, key, sizeof key, r->b->pool + t->vpos, RB_VALUE_SIZE, NULL, NULL);
	if ((t->vpos += RB_VALUE_SIZE) >= RB_POOL_BYTES)
		t->vpos -= RB_POOL_BYTES;
	if (rv != 0) {
		if (t->err[0] == '\0')
			bench_fmt(t->err, sizeof t->err, "Put: %s: %s", kvc_code_name(rv),
			          st.message);
		return -1;
	}
	return 0;
}

/* Health is answered on kvd's nng thread, without the worker hop a Get takes:
 * the difference is what the worker queue and the engine cost. */
static int kvd_health_op(struct rb_thread *t)
{
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_health h;
	int rv;

	if ((rv = kvc_health(t->c, &call, &h)) != 0) {
		if (t->err[0] == '\0')
			bench_fmt(t->err, sizeof t->err, "Health: %s: %s", kvc_code_name(rv),
			          st.message);
		return -1;
	}
	return strcmp(h.status, "serving") == 0 ? 0 : 1;
}

static const struct rb_kind kind_kvd_health = {kvd_setup, kvd_health_op, kvd_teardown, NULL};
static const struct rb_kind kind_kvd_get = {kvd_setup, kvd_get_op, kvd_teardown, NULL};
static const struct rb_kind kind_kvd_put = {kvd_setup, kvd_put_op, kvd_teardown, NULL};

/* Pipelined: one thread keeps r->window async calls in flight; the
 * callbacks (on libkvclient's threads) record the latency. */

struct pl;

struct pl_slot {
	struct pl *pl;
	uint64_t t0;
	int phase0;
	struct pl_slot *next;
};

struct pl {
	struct rb_thread *t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pl_slot *slots, *free;
	unsigned busy;
};

static void pl_done(void *arg, const struct kvc_async_result *res)
{
	struct pl_slot *s = arg;
	struct pl *p = s->pl;
	struct rb_thread *t = p->t;
	uint64_t t1 = bench_now_ns();
	int ph = atomic_load(&t->run->phase);

	pthread_mutex_lock(&p->mu);
	if (res->rv != 0) {
		if (t->errors++ == 0)
			bench_fmt(t->err, sizeof t->err, "%s: %s: %s", t->run->put ? "Put" : "Get",
			          kvc_code_name(res->rv), res->status ? res->status->message : "");
	} else {
		if (!t->run->put && res->value_len != RB_VALUE_SIZE)
			t->wrong++;
		if (s->phase0 == PH_MEASURE && ph == PH_MEASURE) {
			hist_add(&t->h, t1 - s->t0);
			t->ops++;
			atomic_fetch_add_explicit(&t->run->measured, 1, memory_order_relaxed);
		}
	}
	s->next = p->free;
	p->free = s;
	p->busy--;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static void *pl_thread_main(void *arg)
{
	struct rb_thread *t = arg;
	struct rb_run *r = t->run;
	struct pl p = {.t = t};
	struct kvc_call call = {.tenant = r->tenant};
	char key[RB_KEY_SIZE];
	int go;

	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	if ((p.slots = calloc(r->window, sizeof(*p.slots))) == NULL) {
		bench_fmt(t->err, sizeof t->err, "out of memory");
		t->setup_failed = true;
	}
	for (unsigned i = 0; p.slots != NULL && i < r->window; i++) {
		p.slots[i].pl = &p;
		p.slots[i].next = p.free;
		p.free = &p.slots[i];
	}
	t->c = r->shared;
	go = rb_gate(r);
	while (!t->setup_failed && go > 0 && t->errors < RB_ERRORS_MAX) {
		struct pl_slot *s;
		struct kvc_status st;
		int rv, ph = atomic_load(&r->phase);
		if (ph == PH_STOP)
			break;
		pthread_mutex_lock(&p.mu);
		while (p.free == NULL)
			pthread_cond_wait(&p.cv, &p.mu);
		s = p.free;
		p.free = s->next;
		p.busy++;
		pthread_mutex_unlock(&p.mu);
		rb_make_key(key, bench_rng_below(&t->rng, r->b->o.keys));
		s->phase0 = atomic_load(&r->phase);
		call.status = &st;
		s->t0 = bench_now_ns();
		if (r->put) {
			rv = kvc_put_async(t->c, &call, key, sizeof key, r->b->pool + t->vpos,
			                   RB_VALUE_SIZE, NULL, pl_done, s);
			if ((t->vpos += RB_VALUE_SIZE) >= RB_POOL_BYTES)
				t->vpos -= RB_POOL_BYTES;
		} else {
			rv = kvc_get_async(t->c, &call, key, sizeof key, pl_done, s);
		}
		if (rv != 0) {
			pthread_mutex_lock(&p.mu);
			if (t->errors++ == 0)
				bench_fmt(t->err, sizeof t->err, "%s (async send): %s: %s",
				          r->put ? "Put" : "Get", kvc_code_name(rv), st.message);
			s->next = p.free;
			p.free = s;
			p.busy--;
			pthread_mutex_unlock(&p.mu);
		}
	}
	/* every callback has run before the slots go */
	pthread_mutex_lock(&p.mu);
	while (p.busy > 0)
		pthread_cond_wait(&p.cv, &p.mu);
	pthread_mutex_unlock(&p.mu);
	kvc_drain(t->c);
	free(p.slots);
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
	return NULL;
}

static const struct rb_kind kind_kvd_pipelined = {NULL, NULL, NULL, pl_thread_main};

/* One kvd cell on url: op "get", "put" or "health". */
static void kvd_cell(struct rb_bench *b, const char *tr, const char *url, const char *op,
                     const char *tenant, const char *sync, unsigned threads, unsigned window)
{
	bool put = strcmp(op, "put") == 0, health = strcmp(op, "health") == 0;
	struct rb_cell *c = rb_cell_new(b, "kvd", tr, op, sync, window ? "pipelined" : "blocking",
	                                threads, window ? window : 1);
	struct rb_run r;
	uint32_t contexts = window ? window : threads + 2;

	if (c == NULL)
		return;
	memset(&r, 0, sizeof r);
	r.url = url;
	r.tenant = tenant;
	r.nthreads = threads;
	r.window = window;
	r.put = put;
	r.k = window   ? &kind_kvd_pipelined
	      : health ? &kind_kvd_health
	      : put    ? &kind_kvd_put
	               : &kind_kvd_get;
	if (window || !b->o.per_thread_handles) {
		struct rb_tls tls = {b->o.tls_ca, b->o.tls_name};
		if (kvc_handle(url, &tls, contexts, &r.shared, c->err, sizeof c->err) != 0) {
			rb_row_text(b->progress, c);
			return;
		}
	}
	rb_run_cell(b, &r, c);
	kvc_close(r.shared);
}

/* ---- kvd: start, preload, grid, stop ----------------------------------------- */

static int preload(struct rb_bench *b, const char *tenant, char *err, size_t errlen)
{
	struct kvc_op *ops = calloc(RB_PRELOAD_BATCH, sizeof(*ops));
	char(*keys)[RB_KEY_SIZE] = calloc(RB_PRELOAD_BATCH, RB_KEY_SIZE);
	struct kvc_status st;
	struct kvc_call call = {.tenant = tenant, .timeout_ms = 60000, .status = &st};
	size_t vpos = 0;
	kvc *c = NULL;
	int rv = -ENOMEM;

	if (ops == NULL || keys == NULL) {
		bench_fmt(err, errlen, "out of memory");
		goto out;
	}
	if ((rv = kvc_handle(b->kvd.url[KVD_RUN_IPC], NULL, 2, &c, err, errlen)) != 0)
		goto out;
	for (uint64_t i = 0; i < b->o.keys;) {
		size_t n = 0;
		for (; n < RB_PRELOAD_BATCH && i < b->o.keys; n++, i++) {
			rb_make_key(keys[n], i);
			ops[n] = (struct kvc_op){.type = KVC_OP_PUT,
			                         .key = keys[n],
			                         .key_len = RB_KEY_SIZE,
			                         .value = b->pool + vpos,
			                         .value_len = RB_VALUE_SIZE,
			                         .if_version = KVC_ANY_VERSION};
			if ((vpos += RB_VALUE_SIZE) >= RB_POOL_BYTES)
				vpos -= RB_POOL_BYTES;
		}
		if ((rv = kvc_batch(c, &call, ops, n, NULL)) != 0) {
			bench_fmt(err, errlen, "preload of %s: Batch: %s: %s", tenant,
			          kvc_code_name(rv), st.message);
			goto out;
		}
	}
	rv = 0;
out:
	kvc_close(c);
	free(keys);
	free(ops);
	return rv;
}

static const char *sync_name(enum kvc_sync s)
{
	return s == KVC_SYNC_ALWAYS ? "always" : s == KVC_SYNC_INTERVAL ? "interval" : "none";
}

/* Starts kvd, creates "durable", preloads both tenants. */
static int kvd_up(struct rb_bench *b)
{
	struct kvd_run *k = &b->kvd;
	char err[1024];
	struct kvc_tenant_opts to = {.sync = KVC_SYNC_ALWAYS};
	struct kvc_tenant_info ti;
	struct kvc_daemon_stats ds;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	kvc *c = NULL;
	int rv;

	memset(k, 0, sizeof(*k));
	k->bin = b->kvd_bin;
	k->dir = b->base;
	k->config_text = b->config_text = "[tenant-defaults]\nsync = none\n";
	k->listen = KVD_RUN_LISTEN(KVD_RUN_IPC) | KVD_RUN_LISTEN(KVD_RUN_TCP) |
	            KVD_RUN_LISTEN(KVD_RUN_KVIPC) | KVD_RUN_LISTEN(KVD_RUN_KVTCP);
	k->workers = b->o.kvd_workers;
	{
		size_t n = 0;
		if (b->o.tls_cert != NULL) {
			/* the TLS listeners (kvdrun knows the plain kinds only) */
			int p1 = kvd_run_free_port(), p2 = kvd_run_free_port();
			if (p1 < 0 || p2 < 0) {
				fprintf(stderr, "kvbench rpc: no free TCP port\n");
				return -1;
			}
			bench_fmt(b->tls_url, sizeof b->tls_url, "tls+tcp://127.0.0.1:%d", p1);
			bench_fmt(b->kvtls_url, sizeof b->kvtls_url, "kv+tls://127.0.0.1:%d", p2);
			bench_fmt(b->config_buf, sizeof b->config_buf,
			          "[kvd]\ntls_cert = %s\ntls_key = %s\n[tenant-defaults]\nsync = "
			          "none\n",
			          b->o.tls_cert, b->o.tls_key);
			k->config_text = b->config_text = b->config_buf;
			k->extra[n++] = "--listen";
			k->extra[n++] = b->tls_url;
			k->extra[n++] = "--listen";
			k->extra[n++] = b->kvtls_url;
		}
		for (size_t i = 0; i < b->o.nkvd_args; i++) /* --kvd-arg, after kvd_run's own */
			k->extra[n++] = b->o.kvd_args[i];
	}
	k->die_with_parent = true;
	/* every run (--repeat) has its own data, log and sockets */
	bench_fmt(k->data, sizeof k->data, "%s/data-%u", b->base, b->rep + 1);
	bench_fmt(k->log, sizeof k->log, "%s/kvd-%u.log", b->base, b->rep + 1);
	bench_fmt(k->url[KVD_RUN_IPC], sizeof k->url[0], "ipc://%s/kvd-%u.sock", b->base,
	          b->rep + 1);
	bench_fmt(k->url[KVD_RUN_KVIPC], sizeof k->url[0], "kv+ipc://%s/kv-%u.sock", b->base,
	          b->rep + 1);
	if ((rv = kvd_run_spawn(k, err, sizeof err)) != 0) {
		fprintf(stderr, "kvbench rpc: starting %s: %s\n", b->kvd_path, err);
		return -1;
	}
	b->kvd_started = true;
	if (kvd_run_wait(k, err, sizeof err) != 0) {
		fprintf(stderr, "kvbench rpc: %s\n", err);
		return -1;
	}
	if (kvc_handle(b->kvd.url[KVD_RUN_IPC], NULL, 2, &c, err, sizeof err) != 0) {
		fprintf(stderr, "kvbench rpc: %s\n", err);
		return -1;
	}
	rv = kvc_tenant_create(c, &call, "durable", &to);
	if (rv != 0) {
		fprintf(stderr, "kvbench rpc: TenantCreate durable: %s: %s\n", kvc_code_name(rv),
		        st.message);
		goto out;
	}
	if ((rv = kvc_tenant_info(c, &call, "default", &ti)) != 0)
		goto info_failed;
	snprintf(b->tenant_sync[0], sizeof b->tenant_sync[0], "%s", sync_name(ti.sync));
	if ((rv = kvc_tenant_info(c, &call, "durable", &ti)) != 0)
		goto info_failed;
	snprintf(b->tenant_sync[1], sizeof b->tenant_sync[1], "%s", sync_name(ti.sync));
	if (strcmp(b->tenant_sync[0], "none") != 0 || strcmp(b->tenant_sync[1], "always") != 0) {
		fprintf(stderr,
		        "kvbench rpc: tenants have sync=%s and sync=%s, not none and always\n",
		        b->tenant_sync[0], b->tenant_sync[1]);
		rv = -1;
		goto out;
	}
	if ((rv = kvc_stats_daemon(c, &call, &ds)) == 0) {
		b->kvd_workers = ds.workers;
		snprintf(b->kvd_version, sizeof b->kvd_version, "%s", ds.version);
	}
	{
		double t0 = bench_now();
		if ((rv = preload(b, "default", err, sizeof err)) != 0 ||
		    (rv = preload(b, "durable", err, sizeof err)) != 0) {
			fprintf(stderr, "kvbench rpc: %s\n", err);
			goto out;
		}
		b->preload_s = bench_now() - t0;
	}
	rv = 0;
	goto out;
info_failed:
	fprintf(stderr, "kvbench rpc: TenantInfo: %s: %s\n", kvc_code_name(rv), st.message);
out:
	kvc_close(c);
	return rv;
}

static void kvd_grid(struct rb_bench *b)
{
	const struct rb_opts *o = &b->o;

	for (int tr = 0; tr < 6; tr++) {
		static const char *const names[6] = {"ipc",    "tcp",     "kv+ipc",
		                                     "kv+tcp", "tls+tcp", "kv+tls"};
		const char *name = names[tr];
		static const enum kvd_run_kind kinds[4] = {KVD_RUN_IPC, KVD_RUN_TCP, KVD_RUN_KVIPC,
		                                           KVD_RUN_KVTCP};
		const char *url = tr < 4    ? b->kvd.url[kinds[tr]]
		                  : tr == 4 ? b->tls_url
		                            : b->kvtls_url;
		bool on = tr == 0   ? o->ipc
		          : tr == 1 ? o->tcp
		          : tr == 2 ? o->kvipc
		          : tr == 3 ? o->kvtcp
		          : tr == 4 ? o->tls
		                    : o->kvtls;
		if (!on)
			continue;
		for (size_t i = 0; o->rows[R_HEALTH] && i < o->nthreads; i++)
			kvd_cell(b, name, url, "health", "", "", o->threads[i], 0);
		for (int put = 0; put < 2; put++)
			for (size_t i = 0; o->rows[put ? R_PUT : R_GET] && i < o->nthreads; i++)
				kvd_cell(b, name, url, put ? "put" : "get", "default", "none",
				         o->threads[i], 0);
		for (int put = 0; o->rows[R_PIPELINED] && put < 2; put++)
			kvd_cell(b, name, url, put ? "put" : "get", "default", "none", 1,
			         o->window);
		for (size_t i = 0; o->rows[R_ALWAYS] && i < o->nthreads; i++)
			kvd_cell(b, name, url, "put", "durable", "always", o->threads[i], 0);
	}
}

static void kvd_down(struct rb_bench *b)
{
	struct kvc_daemon_stats ds;
	kvc *c = NULL;
	char err[RB_ERR_MAX];

	if (!b->kvd_started)
		return;
	if (b->kvd.pid > 0 &&
	    kvc_handle(b->kvd.url[KVD_RUN_IPC], NULL, 2, &c, err, sizeof err) == 0) {
		if (kvc_stats_daemon(c, NULL, &ds) == 0)
			b->kvd_requests += ds.requests;
		kvc_close(c);
	}
	{
		char err2[RB_ERR_MAX];
		int rv = kvd_run_stop(&b->kvd, err2, sizeof err2);
		if (rv != 0) {
			fprintf(stderr, "kvbench rpc: kvd: %s\n", err2);
			if (b->kvd_stop_rv == 0) {
				b->kvd_stop_rv = rv;
				bench_fmt(b->kvd_stop_err, sizeof b->kvd_stop_err, "run %u: %s",
				          b->rep + 1, err2);
			}
			b->failed = true;
		}
		b->kvd_stops++;
		b->kvd_stop_s_max = b->kvd.stop_seconds > b->kvd_stop_s_max ? b->kvd.stop_seconds
		                                                            : b->kvd_stop_s_max;
	}
	b->kvd_started = false;
}

/* ---- options -------------------------------------------------------------------- */

static int parse_threads(const char *cmd, const char *name, const char *arg, void *val)
{
	struct rb_opts *o = val;
	uint64_t v[RB_TLIST_MAX];

	if (bench_parse_u64_list(cmd, name, arg, 1, RB_THREADS_MAX, v, RB_TLIST_MAX,
	                         &o->nthreads) != 0)
		return -EINVAL;
	for (size_t i = 0; i < o->nthreads; i++)
		o->threads[i] = (unsigned)v[i];
	return 0;
}

static int parse_transports(const char *cmd, const char *name, const char *arg, void *val)
{
	static const char *const names[] = {"ipc", "tcp", "kv+ipc", "kv+tcp", "tls+tcp", "kv+tls"};
	struct rb_opts *o = val;
	bool on[6];

	if (bench_parse_names(cmd, name, arg, names, 6, on) != 0)
		return -EINVAL;
	o->ipc = on[0];
	o->tcp = on[1];
	o->kvipc = on[2];
	o->kvtcp = on[3];
	o->tls = on[4];
	o->kvtls = on[5];
	o->transports_set = true;
	return 0;
}

static int parse_handles(const char *cmd, const char *name, const char *arg, void *val)
{
	if (strcmp(arg, "shared") != 0 && strcmp(arg, "thread") != 0) {
		fprintf(stderr, "kvbench %s: %s is shared or thread\n", cmd, name);
		return -EINVAL;
	}
	*(bool *)val = strcmp(arg, "thread") == 0;
	return 0;
}

static int parse_kvd_arg(const char *cmd, const char *name, const char *arg, void *val)
{
	struct rb_opts *o = val;

	if (o->nkvd_args == RB_KVD_ARGS_MAX) {
		fprintf(stderr, "kvbench %s: %s given more than %d times\n", cmd, name,
		        RB_KVD_ARGS_MAX);
		return -EINVAL;
	}
	o->kvd_args[o->nkvd_args++] = arg;
	return 0;
}

static int parse_sections(const char *cmd, const char *name, const char *arg, void *val)
{
	return bench_parse_names(cmd, name, arg, section_names, S_COUNT, val);
}

static int parse_rows(const char *cmd, const char *name, const char *arg, void *val)
{
	return bench_parse_names(cmd, name, arg, row_names, R_COUNT, val);
}

/* 0, 1 for --help, or -EINVAL. */
static int parse(int argc, char **argv, struct rb_opts *o)
{
	char quick[256];
	const struct bench_opt opts[] = {
	        {BENCH_OPT("kvd", BENCH_OPT_STRING, &o->kvd, "PATH",
	                   "kvd binary (default ../daemon/kvd next to kvbench)")},
	        {BENCH_OPT("seconds", BENCH_OPT_DOUBLE, &o->seconds, "S",
	                   "measured seconds per cell (default %D)"),
	         .lo = 0.01, .hi = 86400, .set = &o->seconds_set},
	        {BENCH_OPT("warmup", BENCH_OPT_DOUBLE, &o->warmup, "S",
	                   "warm-up seconds per cell, not recorded (default %D)"),
	         .lo = 0, .hi = 86400, .set = &o->warmup_set},
	        {BENCH_OPT("threads", BENCH_OPT_FUNC, o, "LIST",
	                   "client threads per cell, comma-separated (default 1,4,16)"),
	         .parse = parse_threads},
	        {BENCH_OPT("transports", BENCH_OPT_FUNC, o, "LIST",
	                   "ipc,tcp,kv+ipc,kv+tcp,tls+tcp,kv+tls (default all; the\n"
	                   "last two with --tls-cert only)"),
	         .parse = parse_transports},
	        {BENCH_OPT("tls-cert", BENCH_OPT_STRING, &o->tls_cert, "FILE",
	                   "kvd's certificate (PEM) for tls+tcp:// and kv+tls://\n"
	                   "listeners on 127.0.0.1: their cells run beside the plain\n"
	                   "ones (needs --tls-key and --tls-ca)")},
	        {BENCH_OPT("tls-key", BENCH_OPT_STRING, &o->tls_key, "FILE",
	                   "its private key (PEM)")},
	        {BENCH_OPT("tls-ca", BENCH_OPT_STRING, &o->tls_ca, "FILE",
	                   "the CA the clients verify kvd's certificate with")},
	        {BENCH_OPT("tls-server-name", BENCH_OPT_STRING, &o->tls_name, "NAME",
	                   "the name kvd's certificate is checked for (default\n"
	                   "127.0.0.1; nng's TLS, mbedtls, matches DNS names only:\n"
	                   "for tls+tcp give a certificate for a name, e.g.\n"
	                   "localhost, and that name here)")},
	        {BENCH_OPT("keys", BENCH_OPT_U64, &o->keys, "N",
	                   "keys preloaded per tenant (default %D)"),
	         .lo = 1, .hi = RB_KEYS_MAX, .set = &o->keys_set},
	        {BENCH_OPT("window", BENCH_OPT_UINT, &o->window, "W",
	                   "pipelined cells: async calls in flight (default %D)"),
	         .lo = 1, .hi = RB_WINDOW_MAX},
	        {BENCH_OPT("handles", BENCH_OPT_FUNC, &o->per_thread_handles, "MODE",
	                   "shared: one kvc handle for a cell's threads (default);\n"
	                   "thread: a handle (socket, connection) per thread"),
	         .parse = parse_handles},
	        {BENCH_OPT("kvd-workers", BENCH_OPT_UINT, &o->kvd_workers, "N",
	                   "pass --workers N to kvd (default: kvd's, one per CPU)"),
	         .lo = 1, .hi = 1024},
	        {BENCH_OPT("kvd-arg", BENCH_OPT_FUNC, o, "ARG",
	                   "pass ARG to kvd after kvbench's own flags (repeatable;\n"
	                   "e.g. --kvd-arg --metrics-listen=127.0.0.1:0)"),
	         .parse = parse_kvd_arg},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &o->dir, "DIR",
	                   "make the run's directory in DIR (default /tmp)")},
	        {BENCH_OPT("repeat", BENCH_OPT_UINT, &o->repeat, "R",
	                   "run everything R times (kvd restarted each time); every\n"
	                   "row reports its median run and the spread (default %D)"),
	         .lo = 1, .hi = RB_REPEAT_MAX},
	        {BENCH_OPT("only", BENCH_OPT_FUNC, o->run, "LIST",
	                   "sections to run, comma-separated: kvd,nng,nng-proc,\n"
	                   "socket,disk,sockperf (default all)"),
	         .set = &o->only_set, .parse = parse_sections},
	        {BENCH_OPT("kvd-rows", BENCH_OPT_FUNC, o->rows, "LIST",
	                   "kvd rows, comma-separated: health (answered without the\n"
	                   "worker hop), get, put (blocking, sync=none), pipelined,\n"
	                   "always (put, sync=always) (default all)"),
	         .parse = parse_rows},
	        {BENCH_OPT("serve-echo", BENCH_OPT_STRING, &o->serve_echo, "DIR",
	                   "be the echo server process of the nng-proc baseline\n"
	                   "(kvbench rpc starts it itself)")},
	        {BENCH_OPT("quick", BENCH_OPT_FLAG, &o->quick, NULL, quick)},
	        BENCH_OPTS_REPORT(&o->markdown, &o->json),
	};
	const struct bench_cmd cmd = {
	        "rpc",
	        "Get/Put throughput and latency through a kvd this command starts, over nng's\n"
	        "ipc:// and tcp://127.0.0.1 and its own kv+ipc:// and kv+tcp://, with nng,\n"
	        "plain-socket, disk and sockperf baselines.\n",
	        "Exits 0 only when every cell completed with zero errors and kvd exited 0.\n",
	        opts,
	        sizeof opts / sizeof opts[0],
	};
	int rv;

	bench_fmt(quick, sizeof quick,
	          "smoke run: %.1f s per cell, %.1f s warm-up, %llu keys, no\n"
	          "sockperf (explicit options win)",
	          RB_QUICK_SECONDS, RB_QUICK_WARMUP, RB_QUICK_KEYS);
	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv;
	if (o->json && o->markdown) {
		fprintf(stderr, "kvbench rpc: --json and --markdown exclude each other\n");
		return -EINVAL;
	}
	if ((o->tls_cert != NULL) != (o->tls_key != NULL) ||
	    (o->tls_cert != NULL) != (o->tls_ca != NULL)) {
		fprintf(stderr, "kvbench rpc: --tls-cert, --tls-key and --tls-ca go together\n");
		return -EINVAL;
	}
	if (o->tls_cert == NULL && (o->tls || o->kvtls)) {
		fprintf(stderr, "kvbench rpc: tls+tcp and kv+tls need --tls-cert, --tls-key and "
		                "--tls-ca\n");
		return -EINVAL;
	}
	if (o->tls_cert != NULL && !o->transports_set)
		o->tls = o->kvtls = true;
	if (o->nkvd_args + (o->tls_cert != NULL ? 4 : 0) > RB_KVD_ARGS_MAX) {
		fprintf(stderr, "kvbench rpc: at most %d --kvd-arg with TLS listeners\n",
		        RB_KVD_ARGS_MAX - 4);
		return -EINVAL;
	}
	if (o->quick) {
		if (!o->seconds_set)
			o->seconds = RB_QUICK_SECONDS;
		if (!o->warmup_set)
			o->warmup = RB_QUICK_WARMUP;
		if (!o->keys_set)
			o->keys = RB_QUICK_KEYS;
		if (!o->only_set)
			o->run[S_SOCKPERF] = false;
	}
	return 0;
}

/* ---- entry point --------------------------------------------------------------- */

static int make_base(struct rb_bench *b)
{
	const char *parent = b->o.dir ? b->o.dir : "/tmp";

	if (b->o.dir != NULL && mkdir(parent, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "kvbench rpc: mkdir %s: %s\n", parent, strerror(errno));
		return -errno;
	}
	/* ipc socket paths live here: keep it short (sun_path is 108 bytes) */
	if ((size_t)snprintf(b->base, sizeof b->base, "%s/kvbench-rpc-XXXXXX", parent) >= 80) {
		fprintf(stderr, "kvbench rpc: --dir path too long for ipc socket paths\n");
		b->base[0] = '\0';
		return -ENAMETOOLONG;
	}
	if (mkdtemp(b->base) == NULL) {
		fprintf(stderr, "kvbench rpc: mkdtemp %s: %s\n", b->base, strerror(errno));
		b->base[0] = '\0';
		return -errno;
	}
	bench_fs_name(b->base, b->fs, sizeof b->fs);
	return 0;
}

/* Fills b->sum: per distinct cell, its median repetition by ops/s (the upper
 * of the two middle ones for an even count) with the spread of all; a cell
 * that failed or had errors in any repetition is reported as that run. */
static void summarize(struct rb_bench *b)
{
	b->nsum = 0;
	for (size_t i = 0; i < b->ncells && b->nsum < RB_SUM_MAX; i++) {
		const struct rb_cell *c = &b->cells[i], *bad = NULL;
		size_t idx[RB_REPEAT_MAX], n = 0, j;
		struct rb_cell *out;
		bool seen = false;

		for (j = 0; j < b->nsum && !seen; j++)
			seen = rb_same_cell(&b->sum[j], c);
		if (seen)
			continue;
		for (j = i; j < b->ncells; j++) {
			const struct rb_cell *d = &b->cells[j];
			size_t k;
			if (!rb_same_cell(c, d) || d->state == CELL_SKIPPED)
				continue;
			if (!rb_cell_clean(d)) {
				if (bad == NULL)
					bad = d;
				continue;
			}
			if (n == RB_REPEAT_MAX)
				continue;
			for (k = n++;
			     k > 0 && rb_cell_rate(&b->cells[idx[k - 1]]) > rb_cell_rate(d); k--)
				idx[k] = idx[k - 1];
			idx[k] = j;
		}
		out = &b->sum[b->nsum++];
		if (bad != NULL || n == 0) {
			*out = bad != NULL ? *bad : *c;
			continue;
		}
		*out = b->cells[idx[n / 2]];
		out->runs = (unsigned)n;
		out->rate_lo = rb_cell_rate(&b->cells[idx[0]]);
		out->rate_hi = rb_cell_rate(&b->cells[idx[n - 1]]);
		out->p50_lo = out->p50_hi = out->p50;
		out->p99_lo = out->p99_hi = out->p99;
		for (j = 0; j < n; j++) {
			const struct rb_cell *d = &b->cells[idx[j]];
			if (d->p50 < out->p50_lo)
				out->p50_lo = d->p50;
			if (d->p50 > out->p50_hi)
				out->p50_hi = d->p50;
			if (d->p99 < out->p99_lo)
				out->p99_lo = d->p99;
			if (d->p99 > out->p99_hi)
				out->p99_hi = d->p99;
		}
	}
}

static bool all_ok(const struct rb_bench *b)
{
	if (b->failed || b->ncells == 0)
		return false;
	for (size_t i = 0; i < b->ncells; i++)
		if (b->cells[i].state != CELL_SKIPPED && !rb_cell_clean(&b->cells[i]))
			return false;
	return true;
}

int bench_rpc(int argc, char **argv)
{
	struct rb_bench *b = calloc(1, sizeof(*b));
	struct report rep = {0};
	struct rb_opts *o;
	int rv, code = 1;
	bool ok;

	if (b == NULL) {
		fprintf(stderr, "kvbench rpc: out of memory\n");
		return 1;
	}
	o = &b->o;
	o->seconds = RB_SECONDS_DEFAULT;
	o->warmup = RB_WARMUP_DEFAULT;
	o->threads[0] = 1;
	o->threads[1] = 4;
	o->threads[2] = 16;
	o->nthreads = 3;
	o->ipc = o->tcp = o->kvipc = o->kvtcp = true;
	o->keys = RB_KEYS_DEFAULT;
	o->window = RB_WINDOW_DEFAULT;
	o->repeat = 1;
	for (int i = 0; i < S_COUNT; i++)
		o->run[i] = true;
	for (int i = 0; i < R_COUNT; i++)
		o->rows[i] = true;
	if ((rv = parse(argc, argv, o)) != 0) {
		free(b);
		return rv > 0 ? 0 : 2;
	}
	if (o->serve_echo != NULL) {
		rv = rb_serve_echo(o->serve_echo);
		free(b);
		return rv;
	}
	bench_command_line(b->command, sizeof b->command, argc, argv);
	if ((rv = bench_kvd_path(o->kvd, b->kvd_path, sizeof b->kvd_path)) != 0) {
		fprintf(stderr, "kvbench rpc: kvd binary %s: %s (give it with --kvd PATH)\n",
		        b->kvd_path[0] ? b->kvd_path : "?", strerror(-rv));
		free(b);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (report_init(&rep) != 0 ||
	    (b->pool = malloc(RB_POOL_BYTES + RB_VALUE_SIZE + RB_MSG_SIZE)) == NULL) {
		fprintf(stderr, "kvbench rpc: out of memory\n");
		goto out;
	}
	bench_rng_bytes(b->pool, RB_POOL_BYTES + RB_VALUE_SIZE + RB_MSG_SIZE, 0x5eed);
	if (make_base(b) != 0)
		goto out;
	if (o->run[S_KVD]) {
		char err[RB_ERR_MAX];
		struct stat st;
		struct tm tm;
		if (bench_kvd_pin(b->kvd_path, b->base, b->kvd_bin, sizeof b->kvd_bin, err,
		                  sizeof err) != 0) {
			fprintf(stderr, "kvbench rpc: %s\n", err);
			goto out;
		}
		if (stat(b->kvd_path, &st) == 0 && gmtime_r(&st.st_mtime, &tm) != NULL)
			strftime(b->kvd_mtime, sizeof b->kvd_mtime, "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	b->progress = o->json || o->markdown ? stderr : stdout;
	fprintf(b->progress, "kvbench rpc: %s\n", b->command);

	for (b->rep = 0; b->rep < o->repeat; b->rep++) {
		if (o->repeat > 1)
			fprintf(b->progress, "%s# run %u of %u\n", b->rep ? "\n" : "", b->rep + 1,
			        o->repeat);
		if (o->run[S_KVD] && kvd_up(b) != 0) {
			b->failed = true;
			kvd_down(b);
			break;
		}
		if (b->rep == 0 && !o->json && !o->markdown) {
			rb_header(b, &rep);
			report_lines_text(&rep, stdout, 10);
			putchar('\n');
		}
		rb_row_head(b->progress);
		if (o->run[S_KVD]) {
			kvd_grid(b);
			kvd_down(b);
		}
		if (o->run[S_NNG])
			rb_echo_cells(b, false);
		if (o->run[S_NNG_PROC])
			rb_echo_cells(b, true);
		if (o->run[S_SOCKET])
			rb_raw_cells(b);
		if (o->run[S_DISK])
			rb_fsync_cell(b);
		if (o->run[S_SOCKPERF])
			rb_sockperf_cell(b);
	}
	summarize(b);
	ok = all_ok(b);
	if (o->json || o->markdown)
		rb_header(b, &rep);
	if (o->json)
		rb_report_json(b, &rep, ok);
	else if (o->markdown)
		rb_report_markdown(b, &rep);
	else
		rb_report_text(b);
	if (!ok)
		fprintf(stderr,
		        "kvbench rpc: FAILED: a cell failed or had errors, or kvd did not "
		        "exit 0 (its log: %s)\n",
		        b->kvd.log);
	else if (b->base[0] != '\0' && (rv = bench_rmtree(b->base)) != 0)
		fprintf(stderr, "kvbench rpc: removing %s: %s\n", b->base, strerror(-rv));
	code = ok ? 0 : 1;
out:
	free(b->pool);
	free(b);
	report_fini(&rep);
	return code;
}
