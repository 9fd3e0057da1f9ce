/*
 * bench/rpc.c — kvbench rpc: throughput and latency of Get and Put through a
 * real kvd, with the transport's own cost measured beside it in the same run.
 *
 *   kvbench rpc [--kvd PATH] [--seconds S] [--warmup S] [--threads LIST]
 *               [--transports LIST] [--keys N] [--window W] [--handles MODE]
 *               [--kvd-workers N] [--dir DIR] [--only LIST] [--kvd-rows LIST]
 *               [--repeat R] [--quick] [--json | --markdown]
 *
 * A run (--repeat R: R times, kvd restarted each time; rows report the
 * median run by ops/s and the spread):
 *   1. starts kvd (fork/exec; --kvd, default ../daemon/kvd next to this
 *      executable) on a fresh data directory, listening on ipc:// and
 *      tcp://127.0.0.1 (nng) and on kv+ipc:// and kv+tcp://127.0.0.1 (its
 *      stream framing), with a config file whose only setting is
 *      [tenant-defaults] sync = none; creates the tenant "durable" with
 *      sync=always (TenantCreate) and preloads N keys into both tenants
 *      (Batch);
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
 * Each cell: a warm-up (not recorded), then --seconds of measurement. Every
 * call is timed with CLOCK_MONOTONIC (blocking: around the call; pipelined:
 * from the issue to the callback) into a log-linear histogram; a percentile
 * is the upper bound of its bucket (at most 1/128 above the true value).
 * ops/s is the calls completed inside the measurement window divided by it.
 * Gets check the value length; every failed call is an error. The exit code
 * is 0 only when every cell completed with zero errors and kvd exited 0.
 *
 * Starting and stopping kvd live in bench/proc.c, clocks and the facts a
 * report records in bench/sys.c.
 */
#include "bench.h"
#include "hist.h"
#include "opt.h"
#include "report.h"
#include "rng.h"

#include "kvclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

#define RB_SECONDS_DEFAULT  5.0
#define RB_WARMUP_DEFAULT   1.0
#define RB_QUICK_SECONDS    0.3
#define RB_QUICK_WARMUP     0.1
#define RB_KEYS_DEFAULT     100000ull
#define RB_QUICK_KEYS       2000ull
#define RB_KEYS_MAX         100000000ull
#define RB_KEY_SIZE         16                   /* bytes, zero-padded decimal */
#define RB_VALUE_SIZE       100                  /* bytes of random data */
#define RB_MSG_SIZE         150                  /* bytes of a baseline message */
#define RB_WINDOW_DEFAULT   64                   /* pipelined: calls in flight */
#define RB_WINDOW_MAX       4096                 /* libkvclient's contexts at most */
#define RB_THREADS_MAX      256                  /* client threads of a cell */
#define RB_TLIST_MAX        16                   /* entries of --threads */
#define RB_CELLS_MAX        1024                 /* cells of a run, all repetitions */
#define RB_SUM_MAX          256                  /* distinct cells */
#define RB_REPEAT_MAX       15                   /* --repeat */
#define RB_ERRORS_MAX       1000                 /* a thread stops after this many errors */
#define RB_PRELOAD_BATCH    1000                 /* ops per Batch while preloading */
#define RB_CALL_TIMEOUT_MS  10000                /* every call's deadline */
#define RB_START_TIMEOUT_MS 15000                /* kvd answers Health within this */
#define RB_STOP_TIMEOUT_MS  60000                /* kvd exits within this after SIGTERM */
#define RB_ECHO_CONTEXTS    (RB_THREADS_MAX + 8) /* nng echo server contexts */
#define RB_POOL_BYTES       (1u << 20)           /* random bytes values are cut from */
#define RB_PATH_MAX         4096
#define RB_ERR_MAX          256
#define RB_SOCKPERF_OUT_MAX (64 * 1024) /* bytes of sockperf output kept */

/* ---- the run ------------------------------------------------------------- */

enum { PH_WARMUP, PH_MEASURE, PH_STOP };

enum rb_state { CELL_OK, CELL_FAILED, CELL_SKIPPED };

/* The sections of a run (--only). */
enum rb_section { S_KVD, S_NNG, S_NNG_PROC, S_SOCKET, S_DISK, S_SOCKPERF, S_COUNT };
static const char *const section_names[S_COUNT] = {"kvd",    "nng",  "nng-proc",
                                                   "socket", "disk", "sockperf"};

/* The kvd row groups (--kvd-rows). */
enum rb_rows { R_HEALTH, R_GET, R_PUT, R_PIPELINED, R_ALWAYS, R_COUNT };
static const char *const row_names[R_COUNT] = {"health", "get", "put", "pipelined", "always"};

/* One row of the report. */
struct rb_cell {
	char section[16];  /* a section_names[] entry */
	char transport[8]; /* "ipc", "tcp", "" */
	char op[16];       /* "get", "put", "echo", "fdatasync", "ping-pong" */
	char sync[8];      /* "none", "always", "" */
	char mode[24];     /* "blocking", "pipelined" */
	unsigned threads;
	unsigned window; /* calls in flight per thread */
	enum rb_state state;
	uint64_t ops; /* inside the measurement window */
	double seconds;
	uint64_t p50, p99, p999, max, mean; /* ns */
	uint64_t errors, wrong;
	char err[RB_ERR_MAX];
	char note[RB_ERR_MAX];
	unsigned rep; /* the repetition it ran in (0-based) */
	/* summaries (--repeat): the median run's figures, and the spread */
	unsigned runs;
	double rate_lo, rate_hi;
	uint64_t p50_lo, p50_hi, p99_lo, p99_hi;
};

struct rb_opts {
	const char *kvd;
	double seconds, warmup;
	unsigned threads[RB_TLIST_MAX];
	size_t nthreads;
	bool ipc, tcp, kvipc, kvtcp; /* --transports */
	uint64_t keys;
	unsigned window;
	bool per_thread_handles;
	unsigned kvd_workers; /* 0: kvd's default */
	const char *dir;
	bool run[S_COUNT];  /* sections to run (--only) */
	bool rows[R_COUNT]; /* kvd row groups to run (--kvd-rows) */
	bool only_set;
	unsigned repeat;        /* runs of everything; each row reports its median run */
	const char *serve_echo; /* internal: be the echo server process */
	bool quick, json, markdown;
	bool seconds_set, warmup_set, keys_set;
};

struct rb_bench {
	struct rb_opts o;
	char command[4096];
	char kvd_path[RB_PATH_MAX];     /* the kvd binary given or found */
	char kvd_bin[RB_PATH_MAX + 16]; /* its copy in base, which every run starts */
	char kvd_mtime[64];
	char base[RB_PATH_MAX]; /* the run's directory, removed at the end */
	char fs[64];
	char config_text[256];
	char ipc_url[RB_PATH_MAX + 16], tcp_url[64];
	char kvipc_url[RB_PATH_MAX + 16], kvtcp_url[64];
	struct bench_proc kvd;
	bool kvd_started;
	int kvd_stop_rv; /* the first failure to exit 0 */
	char kvd_stop_err[RB_ERR_MAX];
	unsigned kvd_stops;    /* kvd processes stopped */
	double kvd_stop_s_max; /* slowest SIGTERM to exit */
	uint64_t kvd_workers, kvd_requests;
	char kvd_version[32];
	char tenant_sync[2][16]; /* as TenantInfo reports: default, durable */
	double preload_s;
	char sockperf_cmd[512];
	char sockperf_summary[512];
	char *pool;                         /* RB_POOL_BYTES + RB_VALUE_SIZE random bytes */
	struct rb_cell cells[RB_CELLS_MAX]; /* every cell of every repetition */
	size_t ncells;
	struct rb_cell sum[RB_SUM_MAX]; /* per distinct cell, its median repetition */
	size_t nsum;
	unsigned rep; /* the repetition running */
	FILE *progress;
	bool failed; /* something outside the cells failed */
};

/* id as RB_KEY_SIZE zero-padded decimal digits (no NUL). */
static void make_key(char *buf, uint64_t id)
{
	for (size_t i = RB_KEY_SIZE; i > 0; i--) {
		buf[i - 1] = (char)('0' + id % 10);
		id /= 10;
	}
}

static struct rb_cell *cell_new(struct rb_bench *b, const char *section, const char *transport,
                                const char *op, const char *sync, const char *mode,
                                unsigned threads, unsigned window)
{
	struct rb_cell *c;

	if (b->ncells == RB_CELLS_MAX)
		return NULL;
	c = &b->cells[b->ncells++];
	memset(c, 0, sizeof(*c));
	snprintf(c->section, sizeof c->section, "%s", section);
	snprintf(c->transport, sizeof c->transport, "%s", transport);
	snprintf(c->op, sizeof c->op, "%s", op);
	snprintf(c->sync, sizeof c->sync, "%s", sync);
	snprintf(c->mode, sizeof c->mode, "%s", mode);
	c->threads = threads;
	c->window = window;
	c->state = CELL_FAILED;
	c->rep = b->rep;
	return c;
}

static void cell_fill(struct rb_cell *c, const struct hist *h, uint64_t ops, double seconds)
{
	c->ops = ops;
	c->seconds = seconds;
	c->p50 = hist_pct(h, 0.50);
	c->p99 = hist_pct(h, 0.99);
	c->p999 = hist_pct(h, 0.999);
	c->max = h->max;
	c->mean = h->n ? h->sum / h->n : 0;
}

static double cell_rate(const struct rb_cell *c)
{
	return c->seconds > 0 ? (double)c->ops / c->seconds : 0;
}

/* Whether a and b are the same cell (of two repetitions). */
static bool same_cell(const struct rb_cell *a, const struct rb_cell *b)
{
	return strcmp(a->section, b->section) == 0 && strcmp(a->transport, b->transport) == 0 &&
	       strcmp(a->op, b->op) == 0 && strcmp(a->sync, b->sync) == 0 &&
	       strcmp(a->mode, b->mode) == 0 && a->threads == b->threads && a->window == b->window;
}

static bool cell_clean(const struct rb_cell *c)
{
	return c->state == CELL_OK && c->errors == 0 && c->wrong == 0;
}

/* ---- rows ------------------------------------------------------------------ */

static const char *state_name(enum rb_state s)
{
	return s == CELL_OK ? "ok" : s == CELL_SKIPPED ? "skipped" : "FAILED";
}

static void row_head(FILE *f)
{
	fprintf(f, "%-8s %-6s %-9s %-6s %-9s %4s %4s %10s %8s %8s %8s %8s %6s\n", "section", "tr",
	        "op", "sync", "mode", "thr", "win", "ops/s", "p50 us", "p99 us", "p999 us",
	        "max us", "errors");
}

static void row_text(FILE *f, const struct rb_cell *c)
{
	fprintf(f, "%-8s %-6s %-9s %-6s %-9s %4u %4u ", c->section,
	        c->transport[0] ? c->transport : "-", c->op, c->sync[0] ? c->sync : "-", c->mode,
	        c->threads, c->window);
	if (c->state != CELL_OK) {
		fprintf(f, "%10s  %s\n", state_name(c->state), c->err);
		fflush(f);
		return;
	}
	fprintf(f, "%10.0f %8.1f %8.1f %8.1f %8.1f %6" PRIu64, cell_rate(c), c->p50 / 1e3,
	        c->p99 / 1e3, c->p999 / 1e3, c->max / 1e3, c->errors + c->wrong);
	if (c->runs > 1)
		fprintf(f, "  [%.0f-%.0f; %.1f-%.1f]", c->rate_lo, c->rate_hi, c->p50_lo / 1e3,
		        c->p50_hi / 1e3);
	fprintf(f, "%s%s%s%s\n", c->err[0] ? "  " : "", c->err, c->note[0] ? "  " : "", c->note);
	fflush(f);
}

/* ---- cells of client threads ------------------------------------------------ */

struct rb_run;

struct rb_thread {
	struct rb_run *run;
	unsigned idx;
	pthread_t tid;
	uint64_t rng;
	size_t vpos;
	kvc *c;          /* kvd */
	nng_socket sock; /* nng echo, per-thread socket */
	bool sock_open;
	nng_ctx ctx;
	bool ctx_open;
	nng_aio *aio;
	int fd; /* plain socket or file */
	struct hist h;
	uint64_t ops, errors, wrong;
	char err[RB_ERR_MAX];
	bool setup_failed;
};

/* What a cell's threads do. op: 0 done, 1 done with a wrong result, -1
 * failed (t->err says why). */
struct rb_kind {
	int (*setup)(struct rb_thread *t);
	int (*op)(struct rb_thread *t);
	void (*teardown)(struct rb_thread *t);
	void *(*thread_main)(void *arg); /* NULL: rb_thread_main */
};

struct rb_run {
	struct rb_bench *b;
	const struct rb_kind *k;
	unsigned nthreads;
	/* kvd */
	const char *url;
	const char *tenant;
	kvc *shared;
	/* nng echo */
	nng_socket echo;
	bool echo_shared;
	/* plain sockets and files */
	int family;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char path[RB_PATH_MAX];
	/* pipelined */
	unsigned window;
	bool put;
	/* the start gate and the phase */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned ready;
	int go; /* 0 wait, 1 run, -1 cancelled */
	atomic_int phase;
};

static void *rb_thread_main(void *arg)
{
	struct rb_thread *t = arg;
	struct rb_run *r = t->run;
	int go;

	if (r->k->setup != NULL && r->k->setup(t) != 0)
		t->setup_failed = true;
	pthread_mutex_lock(&r->mu);
	r->ready++;
	pthread_cond_broadcast(&r->cv);
	while (r->go == 0)
		pthread_cond_wait(&r->cv, &r->mu);
	go = r->go;
	pthread_mutex_unlock(&r->mu);
	if (!t->setup_failed && go > 0) {
		for (;;) {
			int ph = atomic_load(&r->phase), rv;
			uint64_t t0, t1;
			if (ph == PH_STOP)
				break;
			t0 = bench_now_ns();
			rv = r->k->op(t);
			t1 = bench_now_ns();
			if (rv < 0) {
				if (++t->errors >= RB_ERRORS_MAX)
					break;
				continue;
			}
			if (rv > 0)
				t->wrong++;
			if (ph == PH_MEASURE && atomic_load(&r->phase) == PH_MEASURE) {
				hist_add(&t->h, t1 - t0);
				t->ops++;
			}
		}
	}
	if (r->k->teardown != NULL)
		r->k->teardown(t);
	return NULL;
}

/* Runs one cell: nthreads threads of kind r->k through warm-up and
 * measurement; fills c. */
static void rb_run_cell(struct rb_bench *b, struct rb_run *r, struct rb_cell *c)
{
	struct rb_thread *th = calloc(r->nthreads, sizeof(*th));
	struct hist *h = calloc(1, sizeof(*h));
	unsigned started = 0;
	uint64_t ops = 0;
	double t0, t1;

	r->b = b;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->ready = 0;
	r->go = 0;
	atomic_init(&r->phase, PH_WARMUP);
	if (th == NULL || h == NULL) {
		bench_fmt(c->err, sizeof c->err, "out of memory");
		goto out;
	}
	for (started = 0; started < r->nthreads; started++) {
		struct rb_thread *t = &th[started];
		t->run = r;
		t->idx = started;
		t->fd = -1;
		t->rng = 0x9e3779b97f4a7c15ull * (started + 1) ^ ((uint64_t)b->ncells << 32);
		t->vpos = ((size_t)started * 4099u * 64u) % RB_POOL_BYTES;
		if (pthread_create(&t->tid, NULL,
		                   r->k->thread_main ? r->k->thread_main : rb_thread_main, t) != 0)
			break;
	}
	pthread_mutex_lock(&r->mu);
	while (r->ready < started)
		pthread_cond_wait(&r->cv, &r->mu);
	r->go = started == r->nthreads ? 1 : -1;
	for (unsigned i = 0; i < started; i++)
		if (th[i].setup_failed)
			r->go = -1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->go > 0) {
		bench_sleep(b->o.warmup);
		atomic_store(&r->phase, PH_MEASURE);
		t0 = bench_now();
		bench_sleep(b->o.seconds);
		atomic_store(&r->phase, PH_STOP);
		t1 = bench_now();
	} else {
		atomic_store(&r->phase, PH_STOP);
		t0 = t1 = 0;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i].tid, NULL);
	if (started < r->nthreads) {
		bench_fmt(c->err, sizeof c->err, "pthread_create failed after %u threads", started);
		goto out;
	}
	for (unsigned i = 0; i < r->nthreads; i++) {
		hist_merge(h, &th[i].h);
		ops += th[i].ops;
		c->errors += th[i].errors;
		c->wrong += th[i].wrong;
		if (c->err[0] == '\0' && th[i].err[0] != '\0')
			bench_fmt(c->err, sizeof c->err, "%s", th[i].err);
		if (th[i].setup_failed && c->err[0] == '\0')
			bench_fmt(c->err, sizeof c->err, "thread setup failed");
	}
	if (r->go > 0) {
		c->state = CELL_OK;
		cell_fill(c, h, ops, t1 - t0);
		if (c->errors + c->wrong > 0 && c->err[0] == '\0')
			bench_fmt(c->err, sizeof c->err, "%" PRIu64 " wrong results", c->wrong);
	}
out:
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(th);
	free(h);
	row_text(b->progress, c);
}

/* ---- kvd cells ------------------------------------------------------------ */

static int kvc_handle(const char *url, uint32_t contexts, kvc **ret, char *err, size_t errlen)
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
	return kvc_handle(r->url, 2, &t->c, t->err, sizeof t->err) == 0 ? 0 : -1;
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

	make_key(key, bench_rng_below(&t->rng, r->b->o.keys));
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

	make_key(key, bench_rng_below(&t->rng, r->b->o.keys));
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
	pthread_mutex_lock(&r->mu);
	r->ready++;
	pthread_cond_broadcast(&r->cv);
	while (r->go == 0)
		pthread_cond_wait(&r->cv, &r->mu);
	go = r->go;
	pthread_mutex_unlock(&r->mu);
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
		make_key(key, bench_rng_below(&t->rng, r->b->o.keys));
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
	struct rb_cell *c = cell_new(b, "kvd", tr, op, sync, window ? "pipelined" : "blocking",
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
		if (kvc_handle(url, contexts, &r.shared, c->err, sizeof c->err) != 0) {
			row_text(b->progress, c);
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
	if ((rv = kvc_handle(b->ipc_url, 2, &c, err, errlen)) != 0)
		goto out;
	for (uint64_t i = 0; i < b->o.keys;) {
		size_t n = 0;
		for (; n < RB_PRELOAD_BATCH && i < b->o.keys; n++, i++) {
			make_key(keys[n], i);
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
	char conf[RB_PATH_MAX + 16], data[RB_PATH_MAX + 16], log[RB_PATH_MAX + 16];
	char listen_ipc[RB_PATH_MAX + 32], workers[16], err[1024];
	const char *args[16];
	size_t n = 0;
	struct kvc_tenant_opts to = {.sync = KVC_SYNC_ALWAYS};
	struct kvc_tenant_info ti;
	struct kvc_daemon_stats ds;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	kvc *c = NULL;
	int port, rv;
	FILE *f;

	snprintf(conf, sizeof conf, "%s/kvd.conf", b->base);
	snprintf(data, sizeof data, "%s/data-%u", b->base, b->rep + 1);
	snprintf(log, sizeof log, "%s/kvd-%u.log", b->base, b->rep + 1);
	snprintf(b->config_text, sizeof b->config_text, "[tenant-defaults]\nsync = none\n");
	if ((f = fopen(conf, "w")) == NULL || fputs(b->config_text, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "kvbench rpc: writing %s: %s\n", conf, strerror(errno));
		return -1;
	}
	if ((port = bench_free_tcp_port()) < 0) {
		fprintf(stderr, "kvbench rpc: no free TCP port: %s\n", strerror(-port));
		return -1;
	}
	bench_fmt(b->ipc_url, sizeof b->ipc_url, "ipc://%s/kvd-%u.sock", b->base, b->rep + 1);
	snprintf(b->tcp_url, sizeof b->tcp_url, "tcp://127.0.0.1:%d", port);
	snprintf(listen_ipc, sizeof listen_ipc, "%s", b->ipc_url);
	bench_fmt(b->kvipc_url, sizeof b->kvipc_url, "kv+ipc://%s/kv-%u.sock", b->base, b->rep + 1);
	if ((port = bench_free_tcp_port()) < 0) {
		fprintf(stderr, "kvbench rpc: no free TCP port: %s\n", strerror(-port));
		return -1;
	}
	snprintf(b->kvtcp_url, sizeof b->kvtcp_url, "kv+tcp://127.0.0.1:%d", port);
	args[n++] = "--data-dir";
	args[n++] = data;
	args[n++] = "--listen";
	args[n++] = listen_ipc;
	args[n++] = "--listen";
	args[n++] = b->tcp_url;
	args[n++] = "--listen";
	args[n++] = b->kvipc_url;
	args[n++] = "--listen";
	args[n++] = b->kvtcp_url;
	args[n++] = "--config";
	args[n++] = conf;
	if (b->o.kvd_workers) {
		snprintf(workers, sizeof workers, "%u", b->o.kvd_workers);
		args[n++] = "--workers";
		args[n++] = workers;
	}
	args[n] = NULL;
	if (bench_proc_start(&b->kvd, b->kvd_bin, args, log, err, sizeof err) != 0) {
		fprintf(stderr, "kvbench rpc: starting %s: %s\n", b->kvd_path, err);
		return -1;
	}
	b->kvd_started = true;
	if (bench_kvd_wait_ready(&b->kvd, b->ipc_url, err, sizeof err) != 0) {
		fprintf(stderr, "kvbench rpc: %s\n", err);
		return -1;
	}
	if (kvc_handle(b->ipc_url, 2, &c, err, sizeof err) != 0) {
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

	for (int tr = 0; tr < 4; tr++) {
		static const char *const names[4] = {"ipc", "tcp", "kv+ipc", "kv+tcp"};
		const char *name = names[tr];
		const char *url = tr == 0   ? b->ipc_url
		                  : tr == 1 ? b->tcp_url
		                  : tr == 2 ? b->kvipc_url
		                            : b->kvtcp_url;
		bool on = tr == 0 ? o->ipc : tr == 1 ? o->tcp : tr == 2 ? o->kvipc : o->kvtcp;
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
	if (b->kvd.pid > 0 && kvc_handle(b->ipc_url, 2, &c, err, sizeof err) == 0) {
		if (kvc_stats_daemon(c, NULL, &ds) == 0)
			b->kvd_requests += ds.requests;
		kvc_close(c);
	}
	{
		char err2[RB_ERR_MAX];
		int rv = bench_proc_stop(&b->kvd, err2, sizeof err2);
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

/* ---- baseline: nng REQ/REP echo ---------------------------------------------- */

struct echo_ctx {
	nng_ctx ctx;
	nng_aio *aio;
	bool sending;
};

struct echo_srv {
	nng_socket sock;
	struct echo_ctx c[RB_ECHO_CONTEXTS];
	unsigned n;
	char ipc_url[RB_PATH_MAX + 16];
	char tcp_url[64];
};

static void echo_cb(void *arg)
{
	struct echo_ctx *e = arg;
	int rv = nng_aio_result(e->aio);

	if (e->sending) {
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(e->aio));
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		e->sending = false;
		nng_ctx_recv(e->ctx, e->aio);
		return;
	}
	if (rv != 0) {
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		nng_ctx_recv(e->ctx, e->aio);
		return;
	}
	/* the request message goes back as the reply */
	nng_aio_set_msg(e->aio, nng_aio_get_msg(e->aio));
	e->sending = true;
	nng_ctx_send(e->ctx, e->aio);
}

static void echo_stop(struct echo_srv *s)
{
	for (unsigned i = 0; i < s->n; i++)
		nng_aio_stop(s->c[i].aio);
	nng_close(s->sock);
	for (unsigned i = 0; i < s->n; i++)
		nng_aio_free(s->c[i].aio);
	s->n = 0;
}

/* Listens on ipc://base/name and tcp://127.0.0.1 (a free port). */
static int echo_start(struct echo_srv *s, const char *base, const char *name, char *err,
                      size_t errlen)
{
	nng_listener l;
	int rv, port = 0;

	memset(s, 0, sizeof(*s));
	bench_fmt(s->ipc_url, sizeof s->ipc_url, "ipc://%s/%s", base, name);
	if ((rv = nng_rep0_open(&s->sock)) != 0) {
		bench_fmt(err, errlen, "nng_rep0_open: %s", nng_strerror(rv));
		return -1;
	}
	if ((rv = nng_listen(s->sock, s->ipc_url, NULL, 0)) != 0 ||
	    (rv = nng_listen(s->sock, "tcp://127.0.0.1:0", &l, 0)) != 0 ||
	    (rv = nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port)) != 0) {
		bench_fmt(err, errlen, "echo server listen: %s", nng_strerror(rv));
		nng_close(s->sock);
		return -1;
	}
	snprintf(s->tcp_url, sizeof s->tcp_url, "tcp://127.0.0.1:%d", port);
	for (s->n = 0; s->n < RB_ECHO_CONTEXTS; s->n++) {
		struct echo_ctx *e = &s->c[s->n];
		if ((rv = nng_ctx_open(&e->ctx, s->sock)) != 0 ||
		    (rv = nng_aio_alloc(&e->aio, echo_cb, e)) != 0) {
			bench_fmt(err, errlen, "echo server context: %s", nng_strerror(rv));
			echo_stop(s);
			return -1;
		}
		nng_ctx_recv(e->ctx, e->aio);
	}
	return 0;
}

static int echo_socket(const char *url, nng_socket *ret, char *err, size_t errlen)
{
	nng_socket s;
	int rv;

	if ((rv = nng_req0_open(&s)) != 0) {
		bench_fmt(err, errlen, "nng_req0_open: %s", nng_strerror(rv));
		return -1;
	}
	/* as libkvclient: no resend; connected before the clock starts */
	if ((rv = nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
	    (rv = nng_dial(s, url, NULL, 0)) != 0) {
		bench_fmt(err, errlen, "dial %s: %s", url, nng_strerror(rv));
		nng_close(s);
		return -1;
	}
	*ret = s;
	return 0;
}

static int echo_setup(struct rb_thread *t)
{
	struct rb_run *r = t->run;
	nng_socket s = r->echo;
	int rv;

	if (!r->echo_shared) {
		if (echo_socket(r->url, &t->sock, t->err, sizeof t->err) != 0)
			return -1;
		t->sock_open = true;
		s = t->sock;
	}
	if ((rv = nng_ctx_open(&t->ctx, s)) != 0 ||
	    (rv = nng_aio_alloc(&t->aio, NULL, NULL)) != 0) {
		bench_fmt(t->err, sizeof t->err, "echo client context: %s", nng_strerror(rv));
		return -1;
	}
	t->ctx_open = true;
	nng_aio_set_timeout(t->aio, RB_CALL_TIMEOUT_MS);
	return 0;
}

static void echo_teardown(struct rb_thread *t)
{
	if (t->aio != NULL)
		nng_aio_free(t->aio);
	t->aio = NULL;
	if (t->ctx_open)
		nng_ctx_close(t->ctx);
	t->ctx_open = false;
	if (t->sock_open)
		nng_close(t->sock);
	t->sock_open = false;
}

static int echo_op(struct rb_thread *t)
{
	nng_msg *m;
	int rv;

	if ((rv = nng_msg_alloc(&m, 0)) != 0 ||
	    (rv = nng_msg_append(m, t->run->b->pool + t->vpos, RB_MSG_SIZE)) != 0)
		goto fail;
	if ((t->vpos += RB_MSG_SIZE) >= RB_POOL_BYTES)
		t->vpos -= RB_POOL_BYTES;
	nng_aio_set_msg(t->aio, m);
	nng_ctx_send(t->ctx, t->aio);
	nng_aio_wait(t->aio);
	if ((rv = nng_aio_result(t->aio)) != 0) {
		nng_msg_free(m);
		goto fail;
	}
	nng_ctx_recv(t->ctx, t->aio);
	nng_aio_wait(t->aio);
	if ((rv = nng_aio_result(t->aio)) != 0)
		goto fail;
	m = nng_aio_get_msg(t->aio);
	rv = nng_msg_len(m) == RB_MSG_SIZE ? 0 : 1;
	nng_msg_free(m);
	return rv;
fail:
	if (t->err[0] == '\0')
		bench_fmt(t->err, sizeof t->err, "echo: %s", nng_strerror(rv));
	return -1;
}

static const struct rb_kind kind_echo = {echo_setup, echo_op, echo_teardown, NULL};

/* kvbench rpc --serve-echo DIR (internal): the echo server in a process of
 * its own, as kvd is. Listens on ipc://DIR/echo-proc.sock and a free TCP
 * port, prints "tcp-port N", serves until SIGTERM, exits 0. */
static int serve_echo(const char *dir)
{
	struct echo_srv *s = calloc(1, sizeof(*s));
	char err[RB_ERR_MAX];
	sigset_t set;
	int sig;

	/* blocked before nng starts its threads, so sigwait gets them */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (s == NULL || echo_start(s, dir, "echo-proc.sock", err, sizeof err) != 0) {
		fprintf(stderr, "kvbench rpc --serve-echo: %s\n", s ? err : "out of memory");
		free(s);
		return 1;
	}
	printf("tcp-port %s\n", strrchr(s->tcp_url, ':') + 1);
	fflush(stdout);
	while (sigwait(&set, &sig) != 0)
		;
	echo_stop(s);
	free(s);
	return 0;
}

/* Starts kvbench rpc --serve-echo; fills the URLs. */
static int echo_proc_start(struct rb_bench *b, struct bench_proc *p, char *ipc_url, size_t ipc_len,
                           char *tcp_url, size_t tcp_len, char *err, size_t errlen)
{
	const char *args[] = {"rpc", "--serve-echo", b->base, NULL};
	char log[RB_PATH_MAX + 32], line[128];
	double t0 = bench_now();

	bench_fmt(log, sizeof log, "%s/echo-server.log", b->base);
	/* this very binary, even when a rebuild has replaced the file since */
	if (bench_proc_start(p, "/proc/self/exe", args, log, err, errlen) != 0)
		return -1;
	for (;;) {
		FILE *f = fopen(log, "r");
		int port = 0;
		while (f != NULL && fgets(line, sizeof line, f) != NULL)
			if (sscanf(line, "tcp-port %d", &port) == 1)
				break;
		if (f != NULL)
			fclose(f);
		if (port > 0) {
			bench_fmt(ipc_url, ipc_len, "ipc://%s/echo-proc.sock", b->base);
			bench_fmt(tcp_url, tcp_len, "tcp://127.0.0.1:%d", port);
			return 0;
		}
		if (bench_proc_reaped(p) || bench_now() - t0 > 10) {
			char e2[RB_ERR_MAX];
			bench_proc_stop(p, e2, sizeof e2);
			bench_fmt(err, errlen, "echo server process did not start: %s", e2);
			return -1;
		}
		bench_sleep(0.01);
	}
}

/* The nng echo cells: the server on this process's nng threads, or (own)
 * in a process of its own. */
static void echo_cells(struct rb_bench *b, bool own)
{
	const char *section = own ? "nng-proc" : "nng";
	struct echo_srv *s = own ? NULL : calloc(1, sizeof(*s));
	struct bench_proc proc;
	char err[RB_ERR_MAX], ipc_url[RB_PATH_MAX + 32], tcp_url[64];
	int rv;

	if (own)
		rv = echo_proc_start(b, &proc, ipc_url, sizeof ipc_url, tcp_url, sizeof tcp_url,
		                     err, sizeof err);
	else if ((rv = s == NULL ? -1 : echo_start(s, b->base, "echo.sock", err, sizeof err)) ==
	         0) {
		snprintf(ipc_url, sizeof ipc_url, "%s", s->ipc_url);
		snprintf(tcp_url, sizeof tcp_url, "%s", s->tcp_url);
	}
	if (rv != 0) {
		struct rb_cell *c = cell_new(b, section, "", "echo", "", "blocking", 0, 1);
		if (c != NULL) {
			bench_fmt(c->err, sizeof c->err, "%s", own || s ? err : "out of memory");
			row_text(b->progress, c);
		}
		free(s);
		return;
	}
	for (int tr = 0; tr < 2; tr++) {
		const char *url = tr == 0 ? ipc_url : tcp_url;
		if ((tr == 0 && !b->o.ipc && !b->o.kvipc) || (tr == 1 && !b->o.tcp && !b->o.kvtcp))
			continue;
		for (size_t i = 0; i < b->o.nthreads; i++) {
			struct rb_cell *c = cell_new(b, section, tr == 0 ? "ipc" : "tcp", "echo",
			                             "", "blocking", b->o.threads[i], 1);
			struct rb_run r;
			if (c == NULL)
				break;
			memset(&r, 0, sizeof r);
			r.k = &kind_echo;
			r.url = url;
			r.nthreads = b->o.threads[i];
			r.echo_shared = !b->o.per_thread_handles;
			if (r.echo_shared &&
			    echo_socket(url, &r.echo, c->err, sizeof c->err) != 0) {
				row_text(b->progress, c);
				continue;
			}
			rb_run_cell(b, &r, c);
			if (r.echo_shared)
				nng_close(r.echo);
		}
	}
	if (own && bench_proc_stop(&proc, err, sizeof err) != 0) {
		fprintf(stderr, "kvbench rpc: echo server process: %s\n", err);
		b->failed = true;
	}
	if (s != NULL)
		echo_stop(s);
	free(s);
}

/* ---- baseline: plain sockets --------------------------------------------------- */

struct raw_srv {
	int lfd, stopfd;
	pthread_t acceptor;
	pthread_mutex_t mu;
	pthread_t conns[RB_THREADS_MAX + 8];
	unsigned nconns;
	int family;
};

static int read_full(int fd, char *buf, size_t n)
{
	while (n > 0) {
		ssize_t r = read(fd, buf, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? -EPIPE : -errno;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static void *raw_conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[RB_MSG_SIZE];

	while (read_full(fd, buf, sizeof buf) == 0 && bench_write_full(fd, buf, sizeof buf) == 0)
		;
	close(fd);
	return NULL;
}

static void *raw_accept_main(void *arg)
{
	struct raw_srv *s = arg;
	struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
	                      {.fd = s->stopfd, .events = POLLIN}};

	for (;;) {
		int fd, one = 1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents != 0)
			break;
		if ((fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			continue;
		if (s->family == AF_INET)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		pthread_mutex_lock(&s->mu);
		if (s->nconns < sizeof s->conns / sizeof s->conns[0] &&
		    pthread_create(&s->conns[s->nconns], NULL, raw_conn_main,
		                   (void *)(intptr_t)fd) == 0)
			s->nconns++;
		else
			close(fd);
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

static int raw_start(struct raw_srv *s, struct rb_run *r, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->family = r->family;
	s->lfd = socket(r->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	s->stopfd = eventfd(0, EFD_CLOEXEC);
	if (s->lfd < 0 || s->stopfd < 0) {
		bench_fmt(err, errlen, "socket: %s", strerror(errno));
		goto fail;
	}
	if (r->family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&r->addr;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = 0;
		r->addrlen = sizeof(*a);
	} else {
		struct sockaddr_un *a = (struct sockaddr_un *)&r->addr;
		a->sun_family = AF_UNIX;
		if (strlen(r->path) >= sizeof a->sun_path) {
			bench_fmt(err, errlen, "socket path too long: %s", r->path);
			goto fail;
		}
		strcpy(a->sun_path, r->path);
		unlink(r->path);
		r->addrlen = sizeof(*a);
	}
	if (bind(s->lfd, (struct sockaddr *)&r->addr, r->addrlen) != 0 ||
	    listen(s->lfd, 512) != 0 ||
	    getsockname(s->lfd, (struct sockaddr *)&r->addr, &r->addrlen) != 0) {
		bench_fmt(err, errlen, "bind/listen: %s", strerror(errno));
		goto fail;
	}
	pthread_mutex_init(&s->mu, NULL);
	if (pthread_create(&s->acceptor, NULL, raw_accept_main, s) != 0) {
		bench_fmt(err, errlen, "pthread_create failed");
		pthread_mutex_destroy(&s->mu);
		goto fail;
	}
	return 0;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->stopfd >= 0)
		close(s->stopfd);
	return -1;
}

/* After every client closed its connection. */
static void raw_stop(struct raw_srv *s)
{
	uint64_t one = 1;

	if (write(s->stopfd, &one, sizeof one) < 0)
		perror("kvbench rpc: eventfd");
	pthread_join(s->acceptor, NULL);
	for (unsigned i = 0; i < s->nconns; i++)
		pthread_join(s->conns[i], NULL);
	close(s->lfd);
	close(s->stopfd);
	pthread_mutex_destroy(&s->mu);
}

static int raw_setup(struct rb_thread *t)
{
	struct rb_run *r = t->run;
	int one = 1;

	if ((t->fd = socket(r->family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(t->fd, (struct sockaddr *)&r->addr, r->addrlen) != 0) {
		bench_fmt(t->err, sizeof t->err, "connect: %s", strerror(errno));
		return -1;
	}
	if (r->family == AF_INET)
		setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return 0;
}

static void raw_teardown(struct rb_thread *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

static int raw_op(struct rb_thread *t)
{
	char buf[RB_MSG_SIZE];
	int rv;

	if ((rv = bench_write_full(t->fd, t->run->b->pool + t->vpos, RB_MSG_SIZE)) != 0 ||
	    (rv = read_full(t->fd, buf, sizeof buf)) != 0) {
		if (t->err[0] == '\0')
			bench_fmt(t->err, sizeof t->err, "socket echo: %s", strerror(-rv));
		return -1;
	}
	rv = memcmp(buf, t->run->b->pool + t->vpos, RB_MSG_SIZE) == 0 ? 0 : 1;
	if ((t->vpos += RB_MSG_SIZE) >= RB_POOL_BYTES)
		t->vpos -= RB_POOL_BYTES;
	return rv;
}

static const struct rb_kind kind_raw = {raw_setup, raw_op, raw_teardown, NULL};

static void raw_cells(struct rb_bench *b)
{
	for (int tr = 0; tr < 2; tr++) {
		struct raw_srv *s = calloc(1, sizeof(*s));
		struct rb_run proto;
		char err[RB_ERR_MAX];
		if ((tr == 0 && !b->o.ipc && !b->o.kvipc) ||
		    (tr == 1 && !b->o.tcp && !b->o.kvtcp)) {
			free(s);
			continue;
		}
		memset(&proto, 0, sizeof proto);
		proto.k = &kind_raw;
		proto.family = tr == 0 ? AF_UNIX : AF_INET;
		bench_fmt(proto.path, sizeof proto.path, "%s/raw.sock", b->base);
		if (s == NULL || raw_start(s, &proto, err, sizeof err) != 0) {
			struct rb_cell *c = cell_new(b, "socket", tr == 0 ? "ipc" : "tcp", "echo",
			                             "", "blocking", 0, 1);
			if (c != NULL) {
				bench_fmt(c->err, sizeof c->err, "%s", s ? err : "out of memory");
				row_text(b->progress, c);
			}
			free(s);
			continue;
		}
		for (size_t i = 0; i < b->o.nthreads; i++) {
			struct rb_cell *c = cell_new(b, "socket", tr == 0 ? "ipc" : "tcp", "echo",
			                             "", "blocking", b->o.threads[i], 1);
			struct rb_run r = proto;
			if (c == NULL)
				break;
			r.nthreads = b->o.threads[i];
			rb_run_cell(b, &r, c);
		}
		raw_stop(s);
		free(s);
	}
}

/* ---- baseline: fdatasync --------------------------------------------------------- */

static int fsync_setup(struct rb_thread *t)
{
	char path[RB_PATH_MAX + 32];

	bench_fmt(path, sizeof path, "%s/fdatasync.%u", t->run->b->base, t->idx);
	if ((t->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		bench_fmt(t->err, sizeof t->err, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void fsync_teardown(struct rb_thread *t)
{
	char path[RB_PATH_MAX + 32];

	bench_fmt(path, sizeof path, "%s/fdatasync.%u", t->run->b->base, t->idx);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	unlink(path);
}

static int fsync_op(struct rb_thread *t)
{
	int rv;

	if ((rv = bench_write_full(t->fd, t->run->b->pool, RB_MSG_SIZE)) != 0 ||
	    (fdatasync(t->fd) != 0 && (rv = -errno) != 0)) {
		if (t->err[0] == '\0')
			bench_fmt(t->err, sizeof t->err, "append+fdatasync: %s", strerror(-rv));
		return -1;
	}
	return 0;
}

static const struct rb_kind kind_fsync = {fsync_setup, fsync_op, fsync_teardown, NULL};

static void fsync_cell(struct rb_bench *b)
{
	struct rb_cell *c = cell_new(b, "disk", "", "fdatasync", "", "blocking", 1, 1);
	struct rb_run r;

	if (c == NULL)
		return;
	memset(&r, 0, sizeof r);
	r.k = &kind_fsync;
	r.nthreads = 1;
	bench_fmt(c->note, sizeof c->note, "150-byte append + fdatasync on %s", b->fs);
	rb_run_cell(b, &r, c);
}

/* ---- baseline: sockperf ------------------------------------------------------------- */

/* Runs argv with stdout and stderr into out (NUL-terminated); returns its
 * wait status, or -1. */
static int run_capture(const char *const *argv, char *out, size_t cap)
{
	int p[2], st = 0;
	size_t used = 0;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(p[1], STDOUT_FILENO);
		dup2(p[1], STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		char tmp[4096];
		ssize_t n = read(p[0], tmp, sizeof tmp);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (used + 1 < cap) {
			size_t k = (size_t)n < cap - 1 - used ? (size_t)n : cap - 1 - used;
			memcpy(out + used, tmp, k);
			used += k;
		}
	}
	out[used] = '\0';
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

/* Removes ANSI colour escapes in place. */
static void strip_ansi(char *s)
{
	char *w = s;

	for (char *r = s; *r;) {
		if (*r == '\x1b' && r[1] == '[') {
			r += 2;
			while (*r && !(*r >= '@' && *r <= '~'))
				r++;
			if (*r)
				r++;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
}

/* The number after "label" in out, or -1. */
static double sp_value(const char *out, const char *label)
{
	const char *p = strstr(out, label);

	if (p == NULL)
		return -1;
	p += strlen(label);
	p += strspn(p, " =");
	return strtod(p, NULL);
}

static void sockperf_cell(struct rb_bench *b)
{
	struct rb_cell *c = cell_new(b, "sockperf", "tcp", "ping-pong", "", "blocking", 1, 1);
	char sp[RB_PATH_MAX], port_s[16], secs[16], *out = NULL;
	const char *srv_argv[12], *cli_argv[16];
	struct bench_proc srv;
	char err[RB_ERR_MAX], log[RB_PATH_MAX + 32];
	int port, st, n = 0;

	if (c == NULL)
		return;
	if (!bench_find_in_path("sockperf", sp, sizeof sp)) {
		c->state = CELL_SKIPPED;
		bench_fmt(c->err, sizeof c->err,
		          "sockperf not installed (apt-get install sockperf)");
		row_text(b->progress, c);
		return;
	}
	if ((port = bench_free_tcp_port()) < 0 || (out = malloc(RB_SOCKPERF_OUT_MAX)) == NULL) {
		bench_fmt(c->err, sizeof c->err, "no free port or out of memory");
		goto done;
	}
	snprintf(port_s, sizeof port_s, "%d", port);
	snprintf(secs, sizeof secs, "%d",
	         (int)(b->o.seconds + 0.5) < 1 ? 1 : (int)(b->o.seconds + 0.5));
	srv_argv[n++] = "server";
	srv_argv[n++] = "-i";
	srv_argv[n++] = "127.0.0.1";
	srv_argv[n++] = "-p";
	srv_argv[n++] = port_s;
	srv_argv[n++] = "--tcp";
	srv_argv[n] = NULL;
	snprintf(log, sizeof log, "%s/sockperf-server.log", b->base);
	if (bench_proc_start(&srv, sp, srv_argv, log, err, sizeof err) != 0) {
		bench_fmt(c->err, sizeof c->err, "sockperf server: %s", err);
		goto done;
	}
	/* wait until it accepts */
	for (int i = 0; i < 200; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			break;
		bench_sleep(0.01);
	}
	n = 0;
	cli_argv[n++] = sp;
	cli_argv[n++] = "ping-pong";
	cli_argv[n++] = "-i";
	cli_argv[n++] = "127.0.0.1";
	cli_argv[n++] = "-p";
	cli_argv[n++] = port_s;
	cli_argv[n++] = "--tcp";
	cli_argv[n++] = "-m";
	cli_argv[n++] = "150";
	cli_argv[n++] = "-t";
	cli_argv[n++] = secs;
	cli_argv[n++] = "--full-rtt";
	cli_argv[n] = NULL;
	bench_fmt(b->sockperf_cmd, sizeof b->sockperf_cmd,
	          "sockperf server -i 127.0.0.1 -p %s --tcp & "
	          "sockperf ping-pong -i 127.0.0.1 -p %s --tcp -m 150 -t %s --full-rtt",
	          port_s, port_s, secs);
	st = run_capture(cli_argv, out, RB_SOCKPERF_OUT_MAX);
	kill(srv.pid, SIGTERM);
	waitpid(srv.pid, NULL, 0);
	strip_ansi(out);
	if (st != 0 || sp_value(out, "percentile 50.000") < 0) {
		char *last = strrchr(out, '\n');
		bench_fmt(c->err, sizeof c->err, "sockperf ping-pong failed (status 0x%x): %s", st,
		          last ? last + 1 : out);
		goto done;
	}
	c->state = CELL_OK;
	c->threads = 1;
	c->p50 = (uint64_t)(sp_value(out, "percentile 50.000") * 1e3);
	c->p99 = (uint64_t)(sp_value(out, "percentile 99.000") * 1e3);
	c->p999 = (uint64_t)(sp_value(out, "percentile 99.900") * 1e3);
	c->max = (uint64_t)(sp_value(out, "<MAX> observation") * 1e3);
	c->mean = (uint64_t)(sp_value(out, "avg-rtt") * 1e3);
	{
		/* "[Valid Duration] RunTime=1.544 sec; SentMessages=64644; ReceivedMessages=64644"
		 */
		const char *v = strstr(out, "[Valid Duration]");
		double rt = v ? sp_value(v, "RunTime") : -1,
		       rx = v ? sp_value(v, "ReceivedMessages") : -1;
		if (rt > 0 && rx > 0) {
			c->seconds = rt;
			c->ops = (uint64_t)rx;
		}
	}
	bench_fmt(b->sockperf_summary, sizeof b->sockperf_summary,
	          "avg-rtt %.3f us, p50 %.3f, p99 %.3f, p99.9 %.3f, max %.3f us (sockperf's own "
	          "percentiles, full round trip)",
	          c->mean / 1e3, c->p50 / 1e3, c->p99 / 1e3, c->p999 / 1e3, c->max / 1e3);
	bench_fmt(c->note, sizeof c->note, "sockperf's own figures, --full-rtt");
done:
	free(out);
	row_text(b->progress, c);
}

/* ---- report -------------------------------------------------------------------- */

static void header(const struct rb_bench *b, struct report *rep)
{
	const struct rb_opts *o = &b->o;
	char tmp[512], threads[128] = "";

#define LINE(lab, ...) report_line(rep, lab, __VA_ARGS__)

	for (size_t i = 0; i < o->nthreads; i++)
		snprintf(threads + strlen(threads), sizeof threads - strlen(threads), "%s%u",
		         i ? "," : "", o->threads[i]);
	bench_date(tmp, sizeof tmp);
	LINE("date", "%s", tmp);
	bench_machine(tmp, sizeof tmp);
	LINE("machine", "%s; client and kvd share these CPUs", tmp);
	LINE("build", "%s", bench_build());
	if (o->run[S_KVD]) {
		LINE("kvd",
		     "binary %s (built %s), run from a copy made at the start so that every "
		     "run uses the same build",
		     b->kvd_path, b->kvd_mtime);
		LINE("kvd", "%s", b->kvd.command);
		LINE("kvd", "version %s, %" PRIu64 " workers (one per CPU unless --kvd-workers)",
		     b->kvd_version[0] ? b->kvd_version : "?", b->kvd_workers);
		LINE("config", "%s", "[tenant-defaults] sync = none (the whole config file)");
		LINE("tenants",
		     "default: sync=%s (TenantInfo) for the get/put grid; durable: sync=%s "
		     "(TenantCreate), for the sync=always put rows",
		     b->tenant_sync[0], b->tenant_sync[1]);
	}
	LINE("directory", "%s (%s, removed afterwards unless the run failed)", b->base, b->fs);
	if (o->run[S_KVD])
		LINE("data",
		     "%" PRIu64
		     " keys preloaded in each tenant (Batch of %d, %.1f s); keys %d bytes "
		     "zero-padded decimal, chosen uniformly at random; values %d random bytes",
		     o->keys, RB_PRELOAD_BATCH, b->preload_s, RB_KEY_SIZE, RB_VALUE_SIZE);
	if (o->run[S_KVD])
		LINE("client",
		     "libkvclient, %s; blocking cells: each thread one call outstanding "
		     "(kvc_get/kvc_put); "
		     "pipelined: one thread, kvc_get_async/kvc_put_async, %u in flight; Gets free "
		     "the "
		     "value (kvc_value_free)",
		     o->per_thread_handles
		             ? "one handle (socket, connection) per thread"
		             : "one handle (one nng socket, one connection) shared by the "
		               "threads of a cell, contexts = threads + 2",
		     o->window);
	LINE("timing",
	     "per cell %.1f s warm-up (not recorded), %.1f s measured; threads %s; latency of "
	     "every call (CLOCK_MONOTONIC) in a log-linear histogram, percentiles are bucket upper "
	     "bounds (<= 0.8%% high); ops/s = calls completed in the window / window",
	     o->warmup, o->seconds, threads);
	if (o->run[S_NNG])
		LINE("baselines",
		     "nng: REQ/REP echo of %d bytes, REP server in this process on nng's threads "
		     "(%d "
		     "contexts), a REQ context per client thread on %s",
		     RB_MSG_SIZE, RB_ECHO_CONTEXTS,
		     o->per_thread_handles ? "a socket per thread" : "one shared socket");
	if (o->run[S_NNG_PROC])
		LINE("baselines",
		     "nng-proc: the same echo server in a process of its own (kvbench rpc "
		     "--serve-echo), as kvd is: client and server no longer share nng's threads");
	if (o->run[S_SOCKET])
		LINE("baselines",
		     "socket: plain stream sockets (Unix for ipc, TCP loopback with TCP_NODELAY), "
		     "%d-byte write + read, a server thread per connection",
		     RB_MSG_SIZE);
	if (o->run[S_DISK])
		LINE("baselines", "disk: %d-byte O_APPEND write + fdatasync on %s (%s), one thread",
		     RB_MSG_SIZE, b->base, b->fs);
	if (b->sockperf_cmd[0])
		LINE("baselines", "sockperf: %s", b->sockperf_cmd);
#undef LINE
}

static const struct rb_cell *find_cell(const struct rb_bench *b, const char *section,
                                       const char *tr, const char *op, const char *sync,
                                       const char *mode, unsigned threads)
{
	for (size_t i = 0; i < b->nsum; i++) {
		const struct rb_cell *c = &b->sum[i];
		if (strcmp(c->section, section) == 0 && strcmp(c->transport, tr) == 0 &&
		    strcmp(c->op, op) == 0 && strcmp(c->sync, sync) == 0 &&
		    strcmp(c->mode, mode) == 0 && c->threads == threads && c->state == CELL_OK)
			return c;
	}
	return NULL;
}

/* "What kvd adds" lines: p50 at 1 thread, step by step from a plain socket
 * to a Put, and throughput at the largest thread count. */
static size_t overhead(const struct rb_bench *b, char lines[][512], size_t max)
{
	size_t n = 0;
	unsigned top = 0;

	for (size_t i = 0; i < b->o.nthreads; i++)
		if (b->o.threads[i] > top)
			top = b->o.threads[i];
	for (int tr = 0; tr < 4 && n + 1 < max; tr++) {
		/* kvd's rows over nng (ipc, tcp) and over its stream framing
		 * (kv+ipc, kv+tcp), each against the plain socket of its kind */
		static const char *const kvd_tr[4] = {"ipc", "tcp", "kv+ipc", "kv+tcp"};
		const char *t = kvd_tr[tr], *base = tr % 2 == 0 ? "ipc" : "tcp";
		static const struct {
			const char *section, *op, *sync, *label;
		} steps[] = {
		        {"socket", "echo", "", "socket echo"},
		        {"nng", "echo", "", "nng echo (1 process)"},
		        {"nng-proc", "echo", "", "nng echo (2 processes)"},
		        {"kvd", "health", "", "kvd Health (no worker hop)"},
		        {"kvd", "get", "none", "kvd Get"},
		        {"kvd", "put", "none", "kvd Put"},
		};
		const struct rb_cell *prev = NULL;
		char *l = lines[n];
		size_t used = 0;
		bool any = false;

		used += (size_t)snprintf(l, 512, "%s, p50 at 1 thread:", t);
		for (size_t i = 0; i < sizeof steps / sizeof steps[0] && used < 512; i++) {
			bool kvd = strcmp(steps[i].section, "kvd") == 0;
			const struct rb_cell *c;
			if (tr >= 2 && strncmp(steps[i].section, "nng", 3) == 0)
				continue;
			c = find_cell(b, steps[i].section, kvd ? t : base, steps[i].op,
			              steps[i].sync, "blocking", 1);
			if (c == NULL)
				continue;
			if (strcmp(steps[i].op, "put") == 0 && prev != NULL &&
			    strcmp(prev->op, "get") == 0)
				prev = find_cell(b, "kvd", t, "health", "", "blocking", 1);
			if (prev != NULL)
				used += (size_t)snprintf(
				        l + used, 512 - used, "%s %s %.1f us (%+.1f)",
				        any ? ";" : "", steps[i].label, c->p50 / 1e3,
				        ((double)c->p50 - (double)prev->p50) / 1e3);
			else
				used += (size_t)snprintf(l + used, 512 - used, "%s %s %.1f us",
				                         any ? ";" : "", steps[i].label,
				                         c->p50 / 1e3);
			prev = c;
			any = true;
		}
		if (!any)
			continue;
		n++;
		l = lines[n];
		used = (size_t)snprintf(l, 512, "%s, ops/s at %u threads:", t, top);
		any = false;
		for (size_t i = 0; i < sizeof steps / sizeof steps[0] && used < 512; i++) {
			bool kvd = strcmp(steps[i].section, "kvd") == 0;
			const struct rb_cell *c;
			if (tr >= 2 && strncmp(steps[i].section, "nng", 3) == 0)
				continue;
			c = find_cell(b, steps[i].section, kvd ? t : base, steps[i].op,
			              steps[i].sync, "blocking", top);
			if (c == NULL)
				continue;
			used += (size_t)snprintf(l + used, 512 - used, "%s %s %.0f", any ? ";" : "",
			                         steps[i].label, cell_rate(c));
			any = true;
		}
		if (any)
			n++;
	}
	return n;
}

static void rb_report_text(const struct rb_bench *b)
{
	char lines[8][512];
	size_t n = overhead(b, lines, 8);

	if (b->o.repeat > 1) {
		printf("\nmedian of %u runs by ops/s, [slowest-fastest ops/s; p50 range us]:\n",
		       b->o.repeat);
		row_head(stdout);
		for (size_t i = 0; i < b->nsum; i++)
			row_text(stdout, &b->sum[i]);
	}

	if (b->sockperf_summary[0])
		printf("\nsockperf: %s\n  %s\n", b->sockperf_cmd, b->sockperf_summary);
	if (n > 0)
		printf("\nstep by step (each step's increase over the one before in brackets; Put "
		       "is\ncompared with Health):\n");
	for (size_t i = 0; i < n; i++)
		printf("  %s\n", lines[i]);
	if (b->o.run[S_KVD])
		printf("\nkvd: %" PRIu64 " requests served by %u processes; each stopped with "
		       "SIGTERM: %s (slowest %.2f s)\n",
		       b->kvd_requests, b->kvd_stops,
		       b->kvd_stop_rv == 0 ? "exit 0" : b->kvd_stop_err, b->kvd_stop_s_max);
}

static void rb_report_markdown(const struct rb_bench *b, const struct report *h)
{
	char lines[8][512];
	size_t no = overhead(b, lines, 8);

	printf("```\n%s\n```\n\n", b->command);
	report_lines_markdown(h, stdout);
	bool rep = b->o.repeat > 1;

	if (rep)
		printf("\nEvery row is the median of its %u runs (by ops/s); the ranges are the "
		       "fastest and slowest run.\n",
		       b->o.repeat);
	printf("\n| what | transport | op | sync | mode | threads | in flight | ops/s | p50 µs | "
	       "p99 µs | p99.9 µs | max µs | errors |%s\n",
	       rep ? " ops/s range | p50 range µs | p99 range µs |" : "");
	printf("|---|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|%s\n",
	       rep ? "--:|--:|--:|" : "");
	for (size_t i = 0; i < b->nsum; i++) {
		const struct rb_cell *c = &b->sum[i];
		char ops[32], lo[32], hi[32];
		printf("| %s | %s | %s | %s | %s | %u | %u | ", c->section,
		       c->transport[0] ? c->transport : "-", c->op, c->sync[0] ? c->sync : "-",
		       c->mode, c->threads, c->window * c->threads);
		if (c->state != CELL_OK) {
			printf("%s: %s | | | | | |%s\n", state_name(c->state), c->err,
			       rep ? " | | |" : "");
			continue;
		}
		bench_grouped(ops, sizeof ops, cell_rate(c));
		printf("%s | %.1f | %.1f | %.1f | %.1f | %" PRIu64 " |", c->ops ? ops : "-",
		       c->p50 / 1e3, c->p99 / 1e3, c->p999 / 1e3, c->max / 1e3,
		       c->errors + c->wrong);
		if (rep && c->runs > 1) {
			bench_grouped(lo, sizeof lo, c->rate_lo);
			bench_grouped(hi, sizeof hi, c->rate_hi);
			printf(" %s–%s | %.1f–%.1f | %.1f–%.1f |", lo, hi, c->p50_lo / 1e3,
			       c->p50_hi / 1e3, c->p99_lo / 1e3, c->p99_hi / 1e3);
		} else if (rep) {
			printf(" | | |");
		}
		putchar('\n');
	}
	if (no > 0)
		printf("\nStep by step (each step's increase over the one before in brackets; Put "
		       "is compared with Health):\n\n");
	for (size_t i = 0; i < no; i++)
		printf("- %s\n", lines[i]);
	if (b->o.run[S_KVD])
		printf("\nkvd (%u processes, one per run) served %" PRIu64
		       " requests; each stopped "
		       "on SIGTERM with %s (slowest %.2f s).\n",
		       b->kvd_stops, b->kvd_requests,
		       b->kvd_stop_rv == 0 ? "exit 0" : b->kvd_stop_err, b->kvd_stop_s_max);
}

/* Cell c's runs (the cells of each repetition that are c) as a JSON array. */
static json_t *rb_json_runs(const struct rb_bench *b, const struct rb_cell *c)
{
	json_t *runs = json_array();

	for (size_t j = 0; j < b->ncells; j++) {
		const struct rb_cell *d = &b->cells[j];
		if (!same_cell(c, d))
			continue;
		json_array_append_new(runs, json_pack("{s:i,s:s,s:o,s:o,s:o,s:o,s:o}", "run",
		                                      (int)d->rep + 1, "state",
		                                      d->state == CELL_OK ? "ok" : "failed",
		                                      "ops_per_s", report_real(cell_rate(d), 1),
		                                      "p50_us", report_real(d->p50 / 1e3, 2),
		                                      "p99_us", report_real(d->p99 / 1e3, 2),
		                                      "p999_us", report_real(d->p999 / 1e3, 2),
		                                      "errors", report_u64(d->errors + d->wrong)));
	}
	return runs;
}

static void rb_report_json(const struct rb_bench *b, struct report *rep, bool ok)
{
	const struct rb_opts *o = &b->o;
	json_t *threads = json_array(), *cells = json_array();

	for (size_t i = 0; i < o->nthreads; i++)
		json_array_append_new(threads, json_integer(o->threads[i]));
	for (size_t i = 0; i < b->nsum; i++) {
		const struct rb_cell *c = &b->sum[i];
		json_t *cell = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:s}", "section", c->section,
		                         "transport", c->transport, "op", c->op, "sync", c->sync,
		                         "mode", c->mode, "threads", (int)c->threads, "window",
		                         (int)c->window, "state",
		                         c->state == CELL_OK        ? "ok"
		                         : c->state == CELL_SKIPPED ? "skipped"
		                                                    : "failed");
		if (c->state == CELL_OK) {
			report_set(cell, "ops", report_u64(c->ops));
			report_set(cell, "seconds", report_real(c->seconds, 4));
			report_set(cell, "ops_per_s", report_real(cell_rate(c), 1));
			report_set(cell, "p50_us", report_real(c->p50 / 1e3, 2));
			report_set(cell, "p99_us", report_real(c->p99 / 1e3, 2));
			report_set(cell, "p999_us", report_real(c->p999 / 1e3, 2));
			report_set(cell, "max_us", report_real(c->max / 1e3, 2));
			report_set(cell, "mean_us", report_real(c->mean / 1e3, 2));
		}
		report_set(cell, "runs", rb_json_runs(b, c));
		report_set(cell, "errors", report_u64(c->errors));
		report_set(cell, "wrong", report_u64(c->wrong));
		report_set(cell, "error", report_str(c->err));
		report_set(cell, "note", report_str(c->note));
		json_array_append_new(cells, cell);
	}
	report_set(rep->doc, "bench", json_string("rpc"));
	report_set(rep->doc, "ok", json_boolean(ok));
	report_set(rep->doc, "command", report_str(b->command));
	report_set(rep->doc, "config",
	           json_pack("{s:o,s:o,s:o,s:i,s:i,s:i,s:i,s:s,s:o,s:o}", "seconds",
	                     report_real(o->seconds, 3), "warmup", report_real(o->warmup, 3),
	                     "keys", report_u64(o->keys), "key_size", RB_KEY_SIZE, "value_size",
	                     RB_VALUE_SIZE, "window", (int)o->window, "repeat", (int)o->repeat,
	                     "handles", o->per_thread_handles ? "thread" : "shared", "threads",
	                     threads, "kvd_config", report_str(b->config_text)));
	report_set(rep->doc, "kvd",
	           json_pack("{s:o,s:o,s:o,s:o,s:i,s:b,s:o}", "command", report_str(b->kvd.command),
	                     "version", report_str(b->kvd_version), "workers",
	                     report_u64(b->kvd_workers), "requests", report_u64(b->kvd_requests),
	                     "processes", (int)b->kvd_stops, "exit_ok", b->kvd_stop_rv == 0,
	                     "stop_s_max", report_real(b->kvd_stop_s_max, 3)));
	report_set(rep->doc, "header", json_incref(rep->lines));
	report_set(rep->doc, "cells", cells);
	report_set(rep->doc, "sockperf_command", report_str(b->sockperf_cmd));
	(void)report_json(rep, stdout);
}

/* ---- options -------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: kvbench rpc [options]\n"
	        "Get/Put throughput and latency through a kvd this command starts, over nng's\n"
	        "ipc:// and tcp://127.0.0.1 and its own kv+ipc:// and kv+tcp://, with nng,\n"
	        "plain-socket, disk and sockperf baselines.\n"
	        "  --kvd PATH          kvd binary (default ../daemon/kvd next to kvbench)\n"
	        "  --seconds S         measured seconds per cell (default %.0f)\n"
	        "  --warmup S          warm-up seconds per cell, not recorded (default %.0f)\n"
	        "  --threads LIST      client threads per cell, comma-separated (default 1,4,16)\n"
	        "  --transports LIST   ipc,tcp,kv+ipc,kv+tcp (default all)\n"
	        "  --keys N            keys preloaded per tenant (default %llu)\n"
	        "  --window W          pipelined cells: async calls in flight (default %d)\n"
	        "  --handles MODE      shared: one kvc handle for a cell's threads (default);\n"
	        "                      thread: a handle (socket, connection) per thread\n"
	        "  --kvd-workers N     pass --workers N to kvd (default: kvd's, one per CPU)\n"
	        "  --dir DIR           make the run's directory in DIR (default /tmp)\n"
	        "  --repeat R          run everything R times (kvd restarted each time); every\n"
	        "                      row reports its median run and the spread (default 1)\n"
	        "  --only LIST         sections to run, comma-separated: kvd,nng,nng-proc,\n"
	        "                      socket,disk,sockperf (default all)\n"
	        "  --kvd-rows LIST     kvd rows, comma-separated: health (answered without the\n"
	        "                      worker hop), get, put (blocking, sync=none), pipelined,\n"
	        "                      always (put, sync=always) (default all)\n"
	        "  --quick             smoke run: %.1f s per cell, %.1f s warm-up, %llu keys, no\n"
	        "                      sockperf (explicit options win)\n"
	        "  --markdown          print the header and a markdown table at the end\n"
	        "  --json              print one JSON object at the end\n"
	        "Exits 0 only when every cell completed with zero errors and kvd exited 0.\n",
	        RB_SECONDS_DEFAULT, RB_WARMUP_DEFAULT, RB_KEYS_DEFAULT, RB_WINDOW_DEFAULT,
	        RB_QUICK_SECONDS, RB_QUICK_WARMUP, RB_QUICK_KEYS);
}

static int parse_seconds(const char *name, const char *s, double lo, double *ret)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= lo) || v > 86400) {
		fprintf(stderr, "kvbench rpc: %s takes seconds >= %g, not '%s'\n", name, lo, s);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

/* 0, 1 for --help, or -EINVAL. */
static int parse(int argc, char **argv, struct rb_opts *o)
{
	enum {
		O_KVD = 256,
		O_SECONDS,
		O_WARMUP,
		O_THREADS,
		O_TRANSPORTS,
		O_KEYS,
		O_WINDOW,
		O_HANDLES,
		O_WORKERS,
		O_DIR,
		O_ONLY,
		O_ROWS,
		O_REPEAT,
		O_SERVE,
		O_QUICK,
		O_JSON,
		O_MD,
		O_HELP,
	};
	static const struct option lo[] = {
	        {"kvd", required_argument, NULL, O_KVD},
	        {"seconds", required_argument, NULL, O_SECONDS},
	        {"warmup", required_argument, NULL, O_WARMUP},
	        {"threads", required_argument, NULL, O_THREADS},
	        {"transports", required_argument, NULL, O_TRANSPORTS},
	        {"keys", required_argument, NULL, O_KEYS},
	        {"window", required_argument, NULL, O_WINDOW},
	        {"handles", required_argument, NULL, O_HANDLES},
	        {"kvd-workers", required_argument, NULL, O_WORKERS},
	        {"dir", required_argument, NULL, O_DIR},
	        {"only", required_argument, NULL, O_ONLY},
	        {"kvd-rows", required_argument, NULL, O_ROWS},
	        {"repeat", required_argument, NULL, O_REPEAT},
	        {"serve-echo", required_argument, NULL, O_SERVE}, /* internal */
	        {"quick", no_argument, NULL, O_QUICK},
	        {"json", no_argument, NULL, O_JSON},
	        {"markdown", no_argument, NULL, O_MD},
	        {"help", no_argument, NULL, O_HELP},
	        {NULL, 0, NULL, 0},
	};
	char buf[256], *save = NULL;
	uint64_t v;
	int ch;

	optind = 1;
	opterr = 1;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case O_KVD:
			o->kvd = optarg;
			break;
		case O_SECONDS:
			if (parse_seconds("--seconds", optarg, 0.01, &o->seconds) != 0)
				return -EINVAL;
			o->seconds_set = true;
			break;
		case O_WARMUP:
			if (parse_seconds("--warmup", optarg, 0, &o->warmup) != 0)
				return -EINVAL;
			o->warmup_set = true;
			break;
		case O_THREADS:
			snprintf(buf, sizeof buf, "%s", optarg);
			o->nthreads = 0;
			for (char *t = strtok_r(buf, ",", &save); t != NULL;
			     t = strtok_r(NULL, ",", &save)) {
				if (o->nthreads == RB_TLIST_MAX) {
					fprintf(stderr, "kvbench rpc: at most %d thread counts\n",
					        RB_TLIST_MAX);
					return -EINVAL;
				}
				if (bench_parse_u64("rpc", "--threads", t, 1, RB_THREADS_MAX, &v) !=
				    0)
					return -EINVAL;
				o->threads[o->nthreads++] = (unsigned)v;
			}
			if (o->nthreads == 0) {
				fprintf(stderr, "kvbench rpc: --threads is empty\n");
				return -EINVAL;
			}
			break;
		case O_TRANSPORTS:
			snprintf(buf, sizeof buf, "%s", optarg);
			o->ipc = o->tcp = o->kvipc = o->kvtcp = false;
			for (char *t = strtok_r(buf, ",", &save); t != NULL;
			     t = strtok_r(NULL, ",", &save)) {
				if (strcmp(t, "ipc") == 0) {
					o->ipc = true;
				} else if (strcmp(t, "tcp") == 0) {
					o->tcp = true;
				} else if (strcmp(t, "kv+ipc") == 0) {
					o->kvipc = true;
				} else if (strcmp(t, "kv+tcp") == 0) {
					o->kvtcp = true;
				} else {
					fprintf(stderr,
					        "kvbench rpc: unknown transport '%s' (ipc, tcp, "
					        "kv+ipc, "
					        "kv+tcp)\n",
					        t);
					return -EINVAL;
				}
			}
			if (!o->ipc && !o->tcp && !o->kvipc && !o->kvtcp) {
				fprintf(stderr, "kvbench rpc: --transports is empty\n");
				return -EINVAL;
			}
			break;
		case O_KEYS:
			if (bench_parse_u64("rpc", "--keys", optarg, 1, RB_KEYS_MAX, &o->keys) != 0)
				return -EINVAL;
			o->keys_set = true;
			break;
		case O_WINDOW:
			if (bench_parse_u64("rpc", "--window", optarg, 1, RB_WINDOW_MAX, &v) != 0)
				return -EINVAL;
			o->window = (unsigned)v;
			break;
		case O_HANDLES:
			if (strcmp(optarg, "shared") == 0) {
				o->per_thread_handles = false;
			} else if (strcmp(optarg, "thread") == 0) {
				o->per_thread_handles = true;
			} else {
				fprintf(stderr, "kvbench rpc: --handles is shared or thread\n");
				return -EINVAL;
			}
			break;
		case O_WORKERS:
			if (bench_parse_u64("rpc", "--kvd-workers", optarg, 1, 1024, &v) != 0)
				return -EINVAL;
			o->kvd_workers = (unsigned)v;
			break;
		case O_DIR:
			o->dir = optarg;
			break;
		case O_ONLY:
			snprintf(buf, sizeof buf, "%s", optarg);
			memset(o->run, 0, sizeof o->run);
			for (char *t = strtok_r(buf, ",", &save); t != NULL;
			     t = strtok_r(NULL, ",", &save)) {
				int i;
				for (i = 0; i < S_COUNT && strcmp(t, section_names[i]) != 0; i++)
					;
				if (i == S_COUNT) {
					fprintf(stderr,
					        "kvbench rpc: unknown section '%s' (kvd, nng, "
					        "nng-proc, "
					        "socket, disk, sockperf)\n",
					        t);
					return -EINVAL;
				}
				o->run[i] = true;
			}
			o->only_set = true;
			break;
		case O_SERVE:
			o->serve_echo = optarg;
			break;
		case O_REPEAT:
			if (bench_parse_u64("rpc", "--repeat", optarg, 1, RB_REPEAT_MAX, &v) != 0)
				return -EINVAL;
			o->repeat = (unsigned)v;
			break;
		case O_ROWS:
			snprintf(buf, sizeof buf, "%s", optarg);
			memset(o->rows, 0, sizeof o->rows);
			for (char *t = strtok_r(buf, ",", &save); t != NULL;
			     t = strtok_r(NULL, ",", &save)) {
				int i;
				for (i = 0; i < R_COUNT && strcmp(t, row_names[i]) != 0; i++)
					;
				if (i == R_COUNT) {
					fprintf(stderr,
					        "kvbench rpc: unknown kvd row '%s' (health, get, "
					        "put, "
					        "pipelined, always)\n",
					        t);
					return -EINVAL;
				}
				o->rows[i] = true;
			}
			break;
		case O_QUICK:
			o->quick = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_MD:
			o->markdown = true;
			break;
		case O_HELP:
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kvbench rpc: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (o->json && o->markdown) {
		fprintf(stderr, "kvbench rpc: --json and --markdown exclude each other\n");
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
			seen = same_cell(&b->sum[j], c);
		if (seen)
			continue;
		for (j = i; j < b->ncells; j++) {
			const struct rb_cell *d = &b->cells[j];
			size_t k;
			if (!same_cell(c, d) || d->state == CELL_SKIPPED)
				continue;
			if (!cell_clean(d)) {
				if (bad == NULL)
					bad = d;
				continue;
			}
			if (n == RB_REPEAT_MAX)
				continue;
			for (k = n++; k > 0 && cell_rate(&b->cells[idx[k - 1]]) > cell_rate(d); k--)
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
		out->rate_lo = cell_rate(&b->cells[idx[0]]);
		out->rate_hi = cell_rate(&b->cells[idx[n - 1]]);
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
		if (b->cells[i].state != CELL_SKIPPED && !cell_clean(&b->cells[i]))
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
		rv = serve_echo(o->serve_echo);
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
			header(b, &rep);
			report_lines_text(&rep, stdout, 10);
			putchar('\n');
		}
		row_head(b->progress);
		if (o->run[S_KVD]) {
			kvd_grid(b);
			kvd_down(b);
		}
		if (o->run[S_NNG])
			echo_cells(b, false);
		if (o->run[S_NNG_PROC])
			echo_cells(b, true);
		if (o->run[S_SOCKET])
			raw_cells(b);
		if (o->run[S_DISK])
			fsync_cell(b);
		if (o->run[S_SOCKPERF])
			sockperf_cell(b);
	}
	summarize(b);
	ok = all_ok(b);
	if (o->json || o->markdown)
		header(b, &rep);
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
