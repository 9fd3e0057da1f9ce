/*
 * bench/rpc_bench.h — what the files of kvbench rpc share: its limits, the
 * cells of its report, the bench's state and options, and the harness that
 * runs a cell's client threads through warm-up and measurement.
 *
 *   rpc.c           the harness, kvd's cells, options and the entry point
 *   rpc_baseline.c  the baselines: nng echo, plain sockets, fdatasync, sockperf
 *   rpc_report.c    progress rows and the text, markdown and JSON reports
 *
 * Everything here runs on the benchmark's main thread, except an rb_kind's
 * functions, which run on the cell's client threads.
 */
#ifndef KV_BENCH_RPC_BENCH_H
#define KV_BENCH_RPC_BENCH_H

#include "hist.h"
#include "kvdrun.h"
#include "proc.h"
#include "report.h"

#include "kvclient.h"

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

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
#define RB_CELL_MAX_S       30.0                 /* a window waits this long for its first call */
#define RB_ECHO_CONTEXTS    (RB_THREADS_MAX + 8) /* nng echo server contexts */
#define RB_POOL_BYTES       (1u << 20)           /* random bytes values are cut from */
#define RB_PATH_MAX         4096
#define RB_ERR_MAX          256
#define RB_SOCKPERF_OUT_MAX (64 * 1024) /* bytes of sockperf output kept */

enum { PH_WARMUP, PH_MEASURE, PH_STOP };

enum rb_state { CELL_OK, CELL_FAILED, CELL_SKIPPED };

/* The sections of a run (--only). */
enum rb_section { S_KVD, S_NNG, S_NNG_PROC, S_SOCKET, S_DISK, S_SOCKPERF, S_COUNT };

/* The kvd row groups (--kvd-rows). */
enum rb_rows { R_HEALTH, R_GET, R_PUT, R_PIPELINED, R_ALWAYS, R_COUNT };

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

#define RB_KVD_ARGS_MAX KVD_RUN_EXTRA_MAX /* --kvd-arg given at most */

struct rb_opts {
	const char *kvd;
	double seconds, warmup;
	unsigned threads[RB_TLIST_MAX];
	size_t nthreads;
	bool ipc, tcp, kvipc, kvtcp; /* --transports */
	bool tls, kvtls;             /* … tls+tcp, kv+tls (they need --tls-cert) */
	bool transports_set;
	const char *tls_cert, *tls_key; /* kvd's certificate and key for its TLS listeners */
	const char *tls_ca;             /* the CA the clients verify kvd with */
	const char *tls_name;           /* the name its certificate is checked for */
	uint64_t keys;
	unsigned window;
	bool per_thread_handles;
	unsigned kvd_workers; /* 0: kvd's default */
	const char *kvd_args[RB_KVD_ARGS_MAX]; /* --kvd-arg, passed to kvd in order */
	size_t nkvd_args;
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
	const char *config_text; /* kvd's whole settings file; NULL until it starts */
	struct kvd_run kvd;      /* this run's kvd and its four URLs */
	char tls_url[64];        /* with --tls-cert: its tls+tcp:// listener */
	char kvtls_url[64];      /* … and its kv+tls:// one */
	char config_buf[3 * RB_PATH_MAX];
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
static inline void rb_make_key(char *buf, uint64_t id)
{
	for (size_t i = RB_KEY_SIZE; i > 0; i--) {
		buf[i - 1] = (char)('0' + id % 10);
		id /= 10;
	}
}

static inline struct rb_cell *rb_cell_new(struct rb_bench *b, const char *section,
                                          const char *transport, const char *op, const char *sync,
                                          const char *mode, unsigned threads, unsigned window)
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

static inline void rb_cell_fill(struct rb_cell *c, const struct hist *h, uint64_t ops,
                                double seconds)
{
	c->ops = ops;
	c->seconds = seconds;
	c->p50 = hist_pct(h, 0.50);
	c->p99 = hist_pct(h, 0.99);
	c->p999 = hist_pct(h, 0.999);
	c->max = h->max;
	c->mean = h->n ? h->sum / h->n : 0;
}

static inline double rb_cell_rate(const struct rb_cell *c)
{
	return c->seconds > 0 ? (double)c->ops / c->seconds : 0;
}

/* Whether a and b are the same cell (of two repetitions). */
static inline bool rb_same_cell(const struct rb_cell *a, const struct rb_cell *b)
{
	return strcmp(a->section, b->section) == 0 && strcmp(a->transport, b->transport) == 0 &&
	       strcmp(a->op, b->op) == 0 && strcmp(a->sync, b->sync) == 0 &&
	       strcmp(a->mode, b->mode) == 0 && a->threads == b->threads && a->window == b->window;
}

static inline bool rb_cell_clean(const struct rb_cell *c)
{
	return c->state == CELL_OK && c->errors == 0 && c->wrong == 0;
}

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
	atomic_uint_fast64_t measured; /* calls counted so far (all threads) */
};

/* A cell thread's start: counts it ready, then waits for the runner's word
 * (1 run, -1 cancelled), which it returns. */
int rb_gate(struct rb_run *r);
/* Runs one cell: r->nthreads threads of kind r->k through warm-up and
 * measurement; fills c. */
void rb_run_cell(struct rb_bench *b, struct rb_run *r, struct rb_cell *c);

/* rpc_baseline.c: the baseline sections, each adding its cells to b. */
void rb_echo_cells(struct rb_bench *b, bool own); /* own: the server in a process of its own */
void rb_raw_cells(struct rb_bench *b);
void rb_fsync_cell(struct rb_bench *b);
void rb_sockperf_cell(struct rb_bench *b);
/* kvbench rpc --serve-echo DIR: the echo server process. Its exit code. */
int rb_serve_echo(const char *dir);

/* rpc_report.c */
void rb_row_head(FILE *f);
/* Cell c as a progress row. */
void rb_row_text(FILE *f, const struct rb_cell *c);
const char *rb_state_name(enum rb_state s);
/* The report's header lines. */
void rb_header(const struct rb_bench *b, struct report *rep);
void rb_report_text(const struct rb_bench *b);
void rb_report_markdown(const struct rb_bench *b, const struct report *h);
void rb_report_json(const struct rb_bench *b, struct report *rep, bool ok);

#endif
