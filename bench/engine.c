/*
 * bench/engine.c — kvbench engine: db_bench-style workloads on kvd's engine
 * and its peers (RocksDB, LevelDB, optionally LMDB), measured in one run so
 * that the ratios between them hold on a noisy machine.
 *
 *   kvbench engine [--num N] [--num-sync N] [--key-size B] [--value-size B]
 *                  [--threads T] [--sync none|always|both] [--seed S]
 *                  [--backends LIST] [--benchmarks LIST] [--dir DIR]
 *                  [--repeat R] [--read-keys existing|any] [--quick]
 *                  [--json | --markdown]
 *
 * A run, for each sync mode (none, then always), for each backend in turn
 * (the engine first: it is the reference of the ratios; with --repeat R
 * everything runs R times, repetition r starting r backends further along
 * the list, and each cell reports its median repetition):
 *   1. fillseq     fresh database; N puts of keys 0..N-1 in increasing order;
 *                  close; remove.
 *   2. fillrandom  fresh database; N puts of uniformly random keys in [0, N);
 *      overwrite   N more such puts (another random stream);
 *      readrandom  N gets of keys chosen uniformly among those that exist
 *                  (--read-keys existing, the default), or uniformly in
 *                  [0, N) as db_bench's readrandom chooses them (--read-keys
 *                  any: about 37% are absent after fillrandom, and an absent
 *                  key that was never written is not a miss);
 *      readseq     one forward scan of every key with the iterator API;
 *                  close; remove.
 * Reads run under sync=none only: the write sync policy does not touch them.
 * With T threads the T workers share one open database and each does its
 * share of the N operations: its own slice of keys (fillseq, readseq) or its
 * own random stream (the others). Keys are the number zero-padded to the key
 * size, as db_bench's "%016d". Open and close are not timed.
 *
 * Each database is opened and driven through bench/ycsb_backend.h (its
 * embedded backends, which sit on bench/peers.h's library adapters), as
 * ycsb, versions and durable drive theirs; the header's version and
 * settings lines come from peers.h.
 *
 * Every read checks the value length; a key that should exist and is not
 * found is a miss. The exit code is 0 only when every built backend
 * completed every workload with no miss and no wrong length; a backend
 * whose library was not found at build time is reported "not built" and
 * does not fail the run.
 */
#include "bench.h"
#include "opt.h"
#include "peers.h"
#include "report.h"
#include "rng.h"
#include "ycsb_backend.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EB_NUM_DEFAULT      1000000ull    /* --num */
#define EB_NUM_SYNC_DEFAULT 20000ull      /* --num-sync: each write waits for fdatasync */
#define EB_QUICK_NUM        2000ull       /* --quick */
#define EB_QUICK_NUM_SYNC   200ull        /* --quick */
#define EB_NUM_MAX          1000000000ull /* the key list of readrandom is in memory */
#define EB_KEY_MAX          1024ull       /* --key-size */
#define EB_VALUE_MAX        (16ull << 20) /* --value-size: the engine's default limit */
#define EB_THREADS_MAX      256ull        /* --threads */
#define EB_BACKENDS_MAX     8             /* backends in one run */
#define EB_POOL_BYTES       (1u << 20)    /* random bytes values are cut from */
#define EB_PATH_MAX         4096          /* bytes of a database path */
#define EB_INFO_MAX         256           /* bytes of a backend's version/describe line */
#define EB_REPEAT_MAX       99ull         /* --repeat */

enum eb_workload {
	W_FILLSEQ,
	W_FILLRANDOM,
	W_OVERWRITE,
	W_READRANDOM,
	W_READSEQ,
	W_COUNT,
};

static const char *const eb_workload_names[W_COUNT] = {
        "fillseq", "fillrandom", "overwrite", "readrandom", "readseq",
};

static bool eb_is_read(enum eb_workload w)
{
	return w == W_READRANDOM || w == W_READSEQ;
}

enum { SYNC_NONE, SYNC_ALWAYS, SYNC_COUNT };
static const char *const eb_sync_names[SYNC_COUNT] = {"none", "always"};

struct eb_opts {
	uint64_t num;      /* operations per workload, sync=none */
	uint64_t num_sync; /* operations per workload, sync=always */
	uint64_t key_size;
	uint64_t value_size;
	uint64_t threads;
	uint64_t seed;
	uint64_t repeat;        /* runs of everything; each cell reports its median run */
	bool sync[SYNC_COUNT];  /* modes to run */
	bool workload[W_COUNT]; /* workloads to report */
	const struct yb_backend *backends[EB_BACKENDS_MAX]; /* embedded ones */
	size_t nbackends;
	const char *dir; /* parent of the run's directory; NULL: /tmp */
	bool quick;
	bool json;
	bool markdown;
	bool num_set, num_sync_set; /* given explicitly: --quick leaves them */
	bool read_any;              /* --read-keys any: readrandom as db_bench's */
};

enum eb_state {
	RES_NONE = 0,  /* not selected or not applicable: no row */
	RES_OK,        /* completed */
	RES_NOT_BUILT, /* backend not built */
	RES_FAILED,    /* an operation failed */
	RES_SKIPPED,   /* an earlier workload on this database failed */
};

struct eb_result {
	enum eb_state state;
	uint64_t ops;
	double seconds;        /* wall time */
	double thread_seconds; /* summed over the threads */
	uint64_t misses;       /* keys that should exist and were not found */
	uint64_t absent;       /* --read-keys any: reads of keys never written */
	uint64_t wrong;        /* wrong key or value lengths, surplus scan entries */
	bool have_counters;
	struct yb_counters counters; /* delta over the workload */
	char err[YB_ERR_MAX];
};

/* Results by sync mode, workload and backend (the index in eb_opts.backends). */
typedef struct eb_result eb_table[SYNC_COUNT][W_COUNT][EB_BACKENDS_MAX];

/* Per-backend facts for the header. */
struct eb_info {
	char version[EB_INFO_MAX];
	char describe[EB_INFO_MAX]; /* from the first open; "" until then */
};

struct eb_bench {
	struct eb_opts o;
	char command[4096];
	char base[EB_PATH_MAX]; /* the run's directory, removed at the end */
	char fs[64];            /* file system type of base */
	char *pool;             /* EB_POOL_BYTES + value_size random bytes */
	uint64_t *exist;        /* key ids present after fillrandom (+ overwrite) */
	uint64_t nexist;
	uint8_t *exist_bits; /* the same as a bitmap of [0, N) */
	struct eb_info info[EB_BACKENDS_MAX];
	struct yb_env env; /* base: the run's directory (yb_open's) */
	eb_table *runs;    /* one table per repetition */
	uint64_t rep;      /* the repetition running */
	eb_table res;      /* the summary: per cell, its median repetition */
	FILE *progress;    /* rows as they complete: stdout; stderr with --json, --markdown */
};

/* ---- small helpers ------------------------------------------------------ */

/* The random stream of thread idx in workload w: fixed by --seed. */
static uint64_t eb_stream(uint64_t seed, enum eb_workload w, uint64_t idx)
{
	uint64_t s = seed ^ ((uint64_t)(w + 1) << 56) ^ (idx * 0xd1b54a32d192ed03ull);
	(void)bench_rng(&s);
	return s;
}

/* Thread idx's share [lo, hi) of n operations or key ids. */
static void eb_share(uint64_t n, uint64_t threads, uint64_t idx, uint64_t *lo, uint64_t *hi)
{
	*lo = (uint64_t)((unsigned __int128)n * idx / threads);
	*hi = (uint64_t)((unsigned __int128)n * (idx + 1) / threads);
}

/* Writes id as size zero-padded decimal digits (no NUL), like "%016llu". */
static void eb_key(char *buf, size_t size, uint64_t id)
{
	for (size_t i = size; i > 0; i--) {
		buf[i - 1] = (char)('0' + id % 10);
		id /= 10;
	}
}

static unsigned eb_digits(uint64_t v)
{
	unsigned d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* ---- the run of one workload on one backend ---------------------------- */

struct eb_run {
	struct eb_bench *b;
	const struct yb_backend *yb;
	struct yb_db *db;
	enum eb_workload w;
	uint64_t num;
	/* start gate: workers wait, ready, until go is 1 (run) or -1 (cancelled) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t ready;
	int go;
};

struct eb_thread {
	struct eb_run *run;
	uint64_t idx;
	pthread_t tid;
	struct yb_worker w;
	uint64_t ops, misses, absent, wrong;
	double start, end; /* CLOCK_MONOTONIC around the workload loop */
	bool failed;
};

static void *eb_thread_main(void *arg)
{
	struct eb_thread *t = arg;
	struct eb_run *r = t->run;
	const struct eb_opts *o = &r->b->o;
	const struct yb_backend *yb = r->yb;
	const size_t ks = o->key_size, vs = o->value_size;
	char key[EB_KEY_MAX], end[EB_KEY_MAX];
	uint64_t lo, hi, rng, vpos, i;
	int rv = 0;

	t->w.db = r->db;
	if (yb->worker_init(&t->w) != 0)
		t->failed = true;
	vpos = (t->idx * 4099 * 64) % EB_POOL_BYTES;
	pthread_mutex_lock(&r->mu);
	r->ready++;
	pthread_cond_broadcast(&r->cv);
	while (r->go == 0)
		pthread_cond_wait(&r->cv, &r->mu);
	int go = r->go;
	pthread_mutex_unlock(&r->mu);
	if (t->failed || go < 0) {
		if (!t->failed)
			yb->worker_fini(&t->w);
		return NULL;
	}

	t->start = bench_now();
	switch (r->w) {
	case W_FILLSEQ:
		eb_share(r->num, o->threads, t->idx, &lo, &hi);
		for (i = lo; i < hi; i++) {
			eb_key(key, ks, i);
			if ((rv = yb->update(&t->w, key, ks, r->b->pool + vpos, vs)) != 0)
				break;
			if ((vpos += vs) >= EB_POOL_BYTES)
				vpos -= EB_POOL_BYTES;
			t->ops++;
		}
		break;
	case W_FILLRANDOM:
	case W_OVERWRITE:
		eb_share(r->num, o->threads, t->idx, &lo, &hi);
		rng = eb_stream(o->seed, r->w, t->idx);
		for (i = lo; i < hi; i++) {
			eb_key(key, ks, bench_rng_below(&rng, r->num));
			if ((rv = yb->update(&t->w, key, ks, r->b->pool + vpos, vs)) != 0)
				break;
			if ((vpos += vs) >= EB_POOL_BYTES)
				vpos -= EB_POOL_BYTES;
			t->ops++;
		}
		break;
	case W_READRANDOM:
		eb_share(r->num, o->threads, t->idx, &lo, &hi);
		rng = eb_stream(o->seed, r->w, t->idx);
		for (i = lo; i < hi; i++) {
			size_t len = 0;
			uint64_t id = o->read_any
			                      ? bench_rng_below(&rng, r->num)
			                      : r->b->exist[bench_rng_below(&rng, r->b->nexist)];
			bool there = !o->read_any || ((r->b->exist_bits[id >> 3] >> (id & 7)) & 1);
			eb_key(key, ks, id);
			if ((rv = yb->read(&t->w, key, ks, NULL, 0, &len)) < 0)
				break;
			if (rv == YB_NOTFOUND && there)
				t->misses++;
			else if (rv == YB_NOTFOUND)
				t->absent++;
			else if (!there || len != vs)
				t->wrong++;
			t->ops++;
		}
		break;
	case W_READSEQ:
		eb_share(r->num, o->threads, t->idx, &lo, &hi);
		eb_key(key, ks, lo);
		eb_key(end, ks, hi);
		rv = yb->scan_range(&t->w, t->idx > 0 ? key : NULL,
		                    t->idx + 1 < o->threads ? end : NULL, ks, vs, &t->ops,
		                    &t->wrong);
		break;
	case W_COUNT:
		break;
	}
	t->end = bench_now();
	if (rv < 0)
		t->failed = true;
	yb->worker_fini(&t->w);
	return NULL;
}

/* Runs workload w on the open database db with o->threads workers. */
static void eb_run_workload(struct eb_bench *b, const struct yb_backend *yb, struct yb_db *db,
                            enum eb_workload w, uint64_t num, struct eb_result *res)
{
	const uint64_t nt = b->o.threads;
	struct eb_run run = {
	        .b = b,
	        .yb = yb,
	        .db = db,
	        .w = w,
	        .num = num,
	        .mu = PTHREAD_MUTEX_INITIALIZER,
	        .cv = PTHREAD_COND_INITIALIZER,
	};
	struct yb_counters c0, c1;
	char cerr[YB_ERR_MAX];
	struct eb_thread *th;
	uint64_t started = 0;
	double t0 = 0, t1 = 0;

	memset(res, 0, sizeof(*res));
	res->state = RES_FAILED;
	if ((th = calloc(nt, sizeof(*th))) == NULL) {
		peer_errf(res->err, sizeof res->err, "out of memory for %" PRIu64 " threads", nt);
		return;
	}
	bool have_c0 = yb->counters != NULL && yb->counters(db, &c0, cerr, sizeof cerr) == 0;
	for (started = 0; started < nt; started++) {
		th[started].run = &run;
		th[started].idx = started;
		if (pthread_create(&th[started].tid, NULL, eb_thread_main, &th[started]) != 0)
			break;
	}
	pthread_mutex_lock(&run.mu);
	while (run.ready < started)
		pthread_cond_wait(&run.cv, &run.mu);
	run.go = started == nt ? 1 : -1;
	pthread_cond_broadcast(&run.cv);
	pthread_mutex_unlock(&run.mu);
	for (uint64_t i = 0; i < started; i++)
		pthread_join(th[i].tid, NULL);
	pthread_cond_destroy(&run.cv);
	pthread_mutex_destroy(&run.mu);
	if (started < nt) {
		peer_errf(res->err, sizeof res->err,
		          "pthread_create failed after %" PRIu64 " threads", started);
		free(th);
		return;
	}

	/* wall time: from the first worker's start to the last one's end */
	res->state = RES_OK;
	for (uint64_t i = 0; i < nt; i++) {
		if (th[i].start == 0)
			continue; /* failed before it started */
		if (t0 == 0 || th[i].start < t0)
			t0 = th[i].start;
		if (th[i].end > t1)
			t1 = th[i].end;
	}
	res->seconds = t1 - t0;
	for (uint64_t i = 0; i < nt; i++) {
		res->ops += th[i].ops;
		res->misses += th[i].misses;
		res->absent += th[i].absent;
		res->wrong += th[i].wrong;
		res->thread_seconds += th[i].end - th[i].start;
		if (th[i].failed && res->state == RES_OK) {
			res->state = RES_FAILED;
			memcpy(res->err, th[i].w.err, sizeof res->err);
			if (res->err[0] == '\0')
				peer_errf(res->err, sizeof res->err, "worker setup failed");
		}
	}
	if (w == W_READSEQ && res->state == RES_OK) {
		if (res->ops < b->nexist)
			res->misses += b->nexist - res->ops;
		else
			res->wrong += res->ops - b->nexist;
	}
	if (have_c0 && yb->counters(db, &c1, cerr, sizeof cerr) == 0) {
		res->have_counters = true;
		res->counters.batches = c1.batches - c0.batches;
		res->counters.writes = c1.writes - c0.writes;
		res->counters.syncs = c1.syncs - c0.syncs;
		res->counters.merges = c1.merges - c0.merges;
	}
	free(th);
}

/* Marks the key ids workload w writes (fillrandom, overwrite) in bits. */
static void eb_mark(const struct eb_opts *o, enum eb_workload w, uint64_t num, uint8_t *bits)
{
	for (uint64_t t = 0; t < o->threads; t++) {
		uint64_t lo, hi, rng = eb_stream(o->seed, w, t);
		eb_share(num, o->threads, t, &lo, &hi);
		for (uint64_t i = lo; i < hi; i++) {
			uint64_t id = bench_rng_below(&rng, num);
			bits[id >> 3] |= (uint8_t)(1u << (id & 7));
		}
	}
}

/* Computes b->exist: the keys present after fillrandom and (when run)
 * overwrite, replaying their random streams. */
static int eb_existing(struct eb_bench *b, uint64_t num, bool overwrite)
{
	uint8_t *bits = calloc((num + 7) / 8, 1);
	uint64_t n = 0;

	free(b->exist);
	free(b->exist_bits);
	b->exist = NULL;
	b->exist_bits = NULL;
	b->nexist = 0;
	if (bits == NULL)
		return -ENOMEM;
	eb_mark(&b->o, W_FILLRANDOM, num, bits);
	if (overwrite)
		eb_mark(&b->o, W_OVERWRITE, num, bits);
	for (uint64_t id = 0; id < num; id++)
		n += (bits[id >> 3] >> (id & 7)) & 1;
	if ((b->exist = malloc((n ? n : 1) * sizeof(*b->exist))) == NULL) {
		free(bits);
		return -ENOMEM;
	}
	n = 0;
	for (uint64_t id = 0; id < num; id++)
		if ((bits[id >> 3] >> (id & 7)) & 1)
			b->exist[n++] = id;
	b->nexist = n;
	b->exist_bits = bits;
	return 0;
}

/* ---- output -------------------------------------------------------------- */

/* The fairness statements of the header, one per line. */
static const char *const eb_fairness[] = {
        "no compression on any backend",
        "same sync policy: sync=always is engine KV_SYNC_ALWAYS, RocksDB/LevelDB "
        "WriteOptions.sync=true, LMDB fdatasync at commit; sync=none is engine KV_SYNC_NONE, "
        "RocksDB/LevelDB sync=false (the WAL/log is still written), LMDB MDB_NOSYNC | "
        "MDB_WRITEMAP",
        "RocksDB WAL on; write buffer 64 MiB on RocksDB (its default) and LevelDB (raised from "
        "4 MiB); block caches at their defaults",
        "bloom filters 10 bits/key on RocksDB and LevelDB reads (typical production "
        "configuration); the engine's key directory is in memory and needs none",
        "the engine runs with kv_options_init() defaults (background=true) except sync",
        "gets return a malloc'd copy released every read (kv_get/kv_value_release, "
        "rocksdb_get/rocksdb_free, leveldb_get/leveldb_free); LMDB returns a pointer into its map",
        "readrandom reads keys that exist (uniformly among those fillrandom and overwrite "
        "wrote), readseq iterates every key with each library's iterator; every read checks "
        "the value length",
        "reads run under sync=none only: the write sync policy does not apply to them",
        "timing: CLOCK_MONOTONIC, open/close excluded; ops/s = total ops / wall time (first "
        "worker's start to last worker's end); "
        "micros/op = summed thread time / ops (db_bench); ratio = engine ops/s / backend ops/s "
        "(above 1: engine faster)",
};

/* The report's header lines. */
static void eb_header(const struct eb_bench *b, struct report *rep)
{
	const struct eb_opts *o = &b->o;
	char date[32], machine[512];

#define EB_LINE(lab, ...) report_line(rep, lab, __VA_ARGS__)

	bench_date(date, sizeof date);
	bench_machine(machine, sizeof machine);
	EB_LINE("date", "%s", date);
	EB_LINE("machine", "%s", machine);
	EB_LINE("directory", "%s (%s, removed afterwards)", b->base, b->fs);
	EB_LINE("keys", "%" PRIu64 " bytes, zero-padded decimal (db_bench %%0%" PRIu64 "d)",
	        o->key_size, o->key_size);
	EB_LINE("values", "%" PRIu64 " bytes of random data", o->value_size);
	EB_LINE("operations",
	        "%" PRIu64 " per workload under sync=none, %" PRIu64 " under sync=always", o->num,
	        o->num_sync);
	EB_LINE("threads", "%" PRIu64 " (sharing one database)", o->threads);
	EB_LINE("seed", "%" PRIu64, o->seed);
	if (o->read_any)
		EB_LINE("reads",
		        "--read-keys any: readrandom reads keys uniformly in [0, %" PRIu64
		        ") as db_bench's readrandom does; keys fillrandom never wrote are "
		        "absent, not misses (the fairness line on readrandom does not apply)",
		        o->num);
	if (o->repeat > 1)
		EB_LINE("repeat",
		        "%" PRIu64 " runs, backend order rotated each run; every cell is its "
		        "median run",
		        o->repeat);
	EB_LINE("kvd build", "%s", bench_build());
	for (size_t i = 0; i < o->nbackends; i++) {
		const struct peer_backend *lib = peer_find(o->backends[i]->peer);
		if (!peer_built(lib)) {
			EB_LINE(lib->name, "not built (library not found at configure time)");
			continue;
		}
		EB_LINE(lib->name, "%s%s%s; %s", b->info[i].version,
		        b->info[i].describe[0] ? "; " : "", b->info[i].describe, lib->settings);
	}
	for (size_t i = 0; i < sizeof eb_fairness / sizeof eb_fairness[0]; i++)
		EB_LINE("fairness", "%s", eb_fairness[i]);
#undef EB_LINE
}

static double eb_ops_per_sec(const struct eb_result *r)
{
	return r->seconds > 0 ? (double)r->ops / r->seconds : 0;
}

static double eb_micros(const struct eb_result *r)
{
	return r->ops ? r->thread_seconds * 1e6 / (double)r->ops : 0;
}

/* The engine's result for the same cell, when it ran and this is a peer. */
static const struct eb_result *eb_reference(const struct eb_bench *b, const eb_table *t, int s,
                                            enum eb_workload w, size_t bi)
{
	const struct eb_result *ref;

	if (strcmp(b->o.backends[bi]->name, "engine") == 0)
		return NULL;
	for (size_t i = 0; i < b->o.nbackends; i++) {
		if (strcmp(b->o.backends[i]->name, "engine") != 0)
			continue;
		ref = &(*t)[s][w][i];
		return ref->state == RES_OK && ref->ops > 0 ? ref : NULL;
	}
	return NULL;
}

static const char *eb_state_name(enum eb_state st)
{
	switch (st) {
	case RES_OK:
		return "ok";
	case RES_NOT_BUILT:
		return "not built";
	case RES_FAILED:
		return "failed";
	case RES_SKIPPED:
		return "skipped";
	case RES_NONE:
		break;
	}
	return "none";
}

static void eb_text_row_head(FILE *f)
{
	fprintf(f, "%-6s  %-10s  %-8s  %12s  %10s  %11s  %6s  %s\n", "sync", "workload", "backend",
	        "ops/s", "micros/op", "engine/this", "misses", "notes");
}

/* Prints cell (s, w, bi) of table t; run > 0 names the repetition it comes from. */
static void eb_text_row(const struct eb_bench *b, FILE *f, const eb_table *t, int s,
                        enum eb_workload w, size_t bi, uint64_t run)
{
	const struct eb_result *r = &(*t)[s][w][bi], *ref = eb_reference(b, t, s, w, bi);
	const char *name = b->o.backends[bi]->name;

	if (r->state != RES_OK) {
		fprintf(f, "%-6s  %-10s  %-8s  %12s  %s\n", eb_sync_names[s], eb_workload_names[w],
		        name, eb_state_name(r->state), r->err);
		return;
	}
	char ratio[32] = "-", notes[256] = "";
	if (ref != NULL && r->ops > 0)
		snprintf(ratio, sizeof ratio, "%.2fx", eb_ops_per_sec(ref) / eb_ops_per_sec(r));
	if (r->have_counters && !eb_is_read(w))
		snprintf(notes, sizeof notes,
		         "%" PRIu64 " writes in %" PRIu64 " batches, %" PRIu64 " fdatasync",
		         r->counters.writes, r->counters.batches, r->counters.syncs);
	if (r->have_counters && r->counters.merges > 0)
		snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
		         "%s%" PRIu64 " merge%s", notes[0] ? ", " : "", r->counters.merges,
		         r->counters.merges == 1 ? "" : "s");
	if (b->o.read_any && w == W_READRANDOM)
		snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
		         "%s%" PRIu64 " of %" PRIu64 " found", notes[0] ? "; " : "",
		         r->ops - r->absent - r->misses, r->ops);
	if (r->wrong)
		snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
		         "%sWRONG LENGTH/COUNT %" PRIu64, notes[0] ? "; " : "", r->wrong);
	if (run > 0)
		snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
		         "%srun %" PRIu64 "/%" PRIu64, notes[0] ? "; " : "", run, b->o.repeat);
	fprintf(f, "%-6s  %-10s  %-8s  %12.0f  %10.3f  %11s  %6" PRIu64 "%s%s\n", eb_sync_names[s],
	        eb_workload_names[w], name, eb_ops_per_sec(r), eb_micros(r), ratio, r->misses,
	        notes[0] ? "  " : "", notes);
	fflush(f);
}

static void eb_markdown(const struct eb_bench *b, const struct report *rep)
{
	printf("```\n%s\n```\n\n", b->command);
	report_lines_markdown(rep, stdout);
	printf("\n| sync | workload | backend | ops/s | micros/op | engine/this | misses |\n");
	printf("|---|---|---|--:|--:|--:|--:|\n");
	for (int s = 0; s < SYNC_COUNT; s++) {
		for (int w = 0; w < W_COUNT; w++) {
			for (size_t bi = 0; bi < b->o.nbackends; bi++) {
				const struct eb_result *r = &b->res[s][w][bi];
				const struct eb_result *ref = eb_reference(b, &b->res, s, w, bi);
				char ops[32], ratio[32] = "-";
				if (r->state == RES_NONE)
					continue;
				printf("| %s | %s | %s | ", eb_sync_names[s], eb_workload_names[w],
				       b->o.backends[bi]->name);
				if (r->state != RES_OK) {
					printf("%s | | | |\n", eb_state_name(r->state));
					continue;
				}
				bench_grouped(ops, sizeof ops, eb_ops_per_sec(r));
				if (ref != NULL && r->ops > 0)
					snprintf(ratio, sizeof ratio, "%.2fx",
					         eb_ops_per_sec(ref) / eb_ops_per_sec(r));
				printf("%s | %.3f | %s | %" PRIu64 " |\n", ops, eb_micros(r), ratio,
				       r->misses + r->wrong);
			}
		}
	}
}

/* The figures of cell (s, w, bi), which ran, into its JSON row. */
static void eb_json_ok(const struct eb_bench *b, json_t *row, int s, enum eb_workload w, size_t bi,
                       const struct eb_result *ref)
{
	const struct eb_result *r = &b->res[s][w][bi];

	report_set(row, "ops", report_u64(r->ops));
	report_set(row, "seconds", report_real(r->seconds, 6));
	report_set(row, "ops_per_sec", report_real(eb_ops_per_sec(r), 1));
	report_set(row, "micros_per_op", report_real(eb_micros(r), 4));
	report_set(row, "misses", report_u64(r->misses));
	report_set(row, "wrong", report_u64(r->wrong));
	if (b->o.read_any && w == W_READRANDOM)
		report_set(row, "found", report_u64(r->ops - r->absent - r->misses));
	if (ref != NULL && r->ops > 0)
		report_set(row, "engine_over_this",
		           report_real(eb_ops_per_sec(ref) / eb_ops_per_sec(r), 4));
	if (b->o.repeat > 1) {
		json_t *runs = json_array();
		for (uint64_t k = 0; k < b->o.repeat; k++)
			json_array_append_new(
			        runs, report_real(eb_ops_per_sec(&b->runs[k][s][w][bi]), 1));
		report_set(row, "runs_ops_per_sec", runs);
	}
	if (r->have_counters) {
		report_set(row, "batches", report_u64(r->counters.batches));
		report_set(row, "batched_writes", report_u64(r->counters.writes));
		report_set(row, "syncs", report_u64(r->counters.syncs));
		report_set(row, "merges", report_u64(r->counters.merges));
	}
}

static void eb_json(const struct eb_bench *b, struct report *rep, bool ok)
{
	const struct eb_opts *o = &b->o;
	json_t *results = json_array();

	for (int s = 0; s < SYNC_COUNT; s++) {
		for (int w = 0; w < W_COUNT; w++) {
			for (size_t bi = 0; bi < o->nbackends; bi++) {
				const struct eb_result *r = &b->res[s][w][bi];
				const struct eb_result *ref = eb_reference(b, &b->res, s, w, bi);
				json_t *row;
				if (r->state == RES_NONE)
					continue;
				row = json_pack("{s:s,s:s,s:s,s:s}", "sync", eb_sync_names[s],
				                "workload", eb_workload_names[w], "backend",
				                o->backends[bi]->name, "status",
				                eb_state_name(r->state));
				if (r->state == RES_OK)
					eb_json_ok(b, row, s, w, bi, ref);
				else if (r->err[0] != '\0')
					report_set(row, "error", report_str(r->err));
				json_array_append_new(results, row);
			}
		}
	}
	report_set(rep->doc, "bench", json_string("engine"));
	report_set(rep->doc, "command", report_str(b->command));
	report_set(rep->doc, "config",
	           json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:O}", "num", report_u64(o->num),
	                     "num_sync", report_u64(o->num_sync), "key_size",
	                     report_u64(o->key_size), "value_size", report_u64(o->value_size),
	                     "threads", report_u64(o->threads), "seed", report_u64(o->seed),
	                     "repeat", report_u64(o->repeat), "dir", report_str(b->base), "header",
	                     rep->lines));
	report_set(rep->doc, "results", results);
	report_set(rep->doc, "ok", json_boolean(ok));
	(void)report_json(rep, stdout);
}

/* ---- the run ------------------------------------------------------------- */

static void eb_report(struct eb_bench *b, int s, enum eb_workload w, size_t bi)
{
	if (b->o.workload[w] && b->runs[b->rep][s][w][bi].state != RES_NONE)
		eb_text_row(b, b->progress, &b->runs[b->rep], s, w, bi,
		            b->o.repeat > 1 ? b->rep + 1 : 0);
}

/* Marks every reported workload of a group on backend bi as st. */
static void eb_group_state(struct eb_bench *b, int s, const enum eb_workload *ws, size_t nw,
                           size_t bi, enum eb_state st, const char *err)
{
	for (size_t i = 0; i < nw; i++) {
		struct eb_result *r = &b->runs[b->rep][s][ws[i]][bi];
		if (!b->o.workload[ws[i]] || r->state != RES_NONE)
			continue;
		r->state = st;
		snprintf(r->err, sizeof r->err, "%s", err);
		eb_report(b, s, ws[i], bi);
	}
}

/* Runs the workloads ws (in order, on one fresh database) on backend bi.
 * A workload in ws that is not selected still runs when a later one needs
 * its data (fillrandom before the reads), unreported. */
static void eb_group(struct eb_bench *b, int s, const enum eb_workload *ws, size_t nw, size_t bi)
{
	const struct yb_backend *yb = b->o.backends[bi];
	uint64_t num = s == SYNC_ALWAYS ? b->o.num_sync : b->o.num;
	struct yb_config cfg = {
	        .sync = s == SYNC_ALWAYS ? YB_SYNC_ALWAYS : YB_SYNC_NONE,
	        .threads = (unsigned)b->o.threads,
	        .records = num * 2,
	        .key_size = b->o.key_size,
	        .value_size = b->o.value_size,
	};
	char path[EB_PATH_MAX], err[YB_ERR_MAX] = "";
	struct yb_db *db = NULL;
	int rv;

	if (!peer_built(peer_find(yb->peer))) {
		eb_group_state(b, s, ws, nw, bi, RES_NOT_BUILT, "");
		return;
	}
	rv = snprintf(path, sizeof path, "%s/%s-%s-%s", b->base, yb->name, eb_sync_names[s],
	              eb_workload_names[ws[0]]);
	if (rv < 0 || (size_t)rv >= sizeof path) {
		eb_group_state(b, s, ws, nw, bi, RES_FAILED, "database path too long");
		return;
	}
	cfg.path = path;
	if ((rv = bench_rmtree(path)) != 0) {
		peer_errf(err, sizeof err, "removing %s: %s", path, strerror(-rv));
		eb_group_state(b, s, ws, nw, bi, RES_FAILED, err);
		return;
	}
	if (yb->open(yb, &b->env, &cfg, &db, err, sizeof err) != 0) {
		eb_group_state(b, s, ws, nw, bi, RES_FAILED, err);
		return;
	}
	if (b->info[bi].describe[0] == '\0') {
		yb->describe_io(db, b->info[bi].describe, sizeof b->info[bi].describe);
		if (b->info[bi].describe[0] != '\0' && b->progress == stdout && !b->o.json &&
		    !b->o.markdown)
			fprintf(b->progress, "# %s: %s\n", yb->name, b->info[bi].describe);
	}
	for (size_t i = 0; i < nw; i++) {
		struct eb_result *r = &b->runs[b->rep][s][ws[i]][bi];
		eb_run_workload(b, yb, db, ws[i], num, r);
		if (!b->o.workload[ws[i]] && r->state == RES_OK) {
			r->state = RES_NONE; /* ran only to load the data */
			continue;
		}
		eb_report(b, s, ws[i], bi);
		if (r->state != RES_OK) {
			snprintf(err, sizeof err, "after %s failed", eb_workload_names[ws[i]]);
			eb_group_state(b, s, ws + i + 1, nw - i - 1, bi, RES_SKIPPED, err);
			break;
		}
	}
	if (yb->close(db, err, sizeof err) != 0)
		fprintf(stderr, "kvbench engine: closing %s: %s\n", path, err);
	if ((rv = bench_rmtree(path)) != 0)
		fprintf(stderr, "kvbench engine: removing %s: %s\n", path, strerror(-rv));
}

static void eb_run_all(struct eb_bench *b)
{
	const struct eb_opts *o = &b->o;

	for (int s = 0; s < SYNC_COUNT; s++) {
		enum eb_workload ws[W_COUNT];
		size_t nw = 0;
		uint64_t num = s == SYNC_ALWAYS ? o->num_sync : o->num;
		bool reads =
		        s == SYNC_NONE && (o->workload[W_READRANDOM] || o->workload[W_READSEQ]);

		if (!o->sync[s])
			continue;
		/* group 2: fillrandom (also when only reads need it), overwrite, reads */
		if (o->workload[W_FILLRANDOM] || o->workload[W_OVERWRITE] || reads)
			ws[nw++] = W_FILLRANDOM;
		if (o->workload[W_OVERWRITE])
			ws[nw++] = W_OVERWRITE;
		if (reads) {
			if (eb_existing(b, num, o->workload[W_OVERWRITE]) != 0) {
				fprintf(stderr, "kvbench engine: out of memory for the key list\n");
				reads = false;
			}
		}
		if (reads && o->workload[W_READRANDOM])
			ws[nw++] = W_READRANDOM;
		if (reads && o->workload[W_READSEQ])
			ws[nw++] = W_READSEQ;

		/* repetition r starts its backend order r places further */
		for (b->rep = 0; b->rep < o->repeat; b->rep++) {
			for (size_t i = 0; i < o->nbackends; i++) {
				size_t bi = (i + b->rep) % o->nbackends;
				if (o->workload[W_FILLSEQ]) {
					const enum eb_workload fs[] = {W_FILLSEQ};
					eb_group(b, s, fs, 1, bi);
				}
				if (nw > 0)
					eb_group(b, s, ws, nw, bi);
			}
		}
	}
}

/* Fills b->res: per cell, the repetition with the median ops/s (the upper
 * of the two middle ones for an even count), misses and wrong summed over
 * all of them; a failure in any repetition is the cell's result. */
static void eb_summarize(struct eb_bench *b)
{
	const uint64_t nr = b->o.repeat;
	uint64_t idx[EB_REPEAT_MAX];

	for (int s = 0; s < SYNC_COUNT; s++) {
		for (int w = 0; w < W_COUNT; w++) {
			for (size_t bi = 0; bi < b->o.nbackends; bi++) {
				struct eb_result *out = &b->res[s][w][bi];
				uint64_t nok = 0, misses = 0, wrong = 0;
				bool bad = false;

				memset(out, 0, sizeof(*out));
				for (uint64_t r = 0; r < nr; r++) {
					const struct eb_result *c = &b->runs[r][s][w][bi];
					if (c->state == RES_NONE)
						continue;
					if (c->state != RES_OK) {
						if (!bad || out->state == RES_NOT_BUILT)
							*out = *c;
						bad = true;
						continue;
					}
					misses += c->misses;
					wrong += c->wrong;
					/* insertion sort by ops/s */
					uint64_t j = nok++;
					for (; j > 0 &&
					       eb_ops_per_sec(&b->runs[idx[j - 1]][s][w][bi]) >
					               eb_ops_per_sec(c);
					     j--)
						idx[j] = idx[j - 1];
					idx[j] = r;
				}
				if (bad || nok == 0)
					continue;
				*out = b->runs[idx[nok / 2]][s][w][bi];
				out->misses = misses;
				out->wrong = wrong;
			}
		}
	}
}

/* Whether every built backend completed every reported workload cleanly. */
static bool eb_all_ok(const struct eb_bench *b)
{
	for (int s = 0; s < SYNC_COUNT; s++)
		for (int w = 0; w < W_COUNT; w++)
			for (size_t bi = 0; bi < b->o.nbackends; bi++) {
				const struct eb_result *r = &b->res[s][w][bi];
				if (r->state == RES_FAILED || r->state == RES_SKIPPED)
					return false;
				if (r->state == RES_OK && (r->misses != 0 || r->wrong != 0))
					return false;
			}
	return true;
}

/* ---- options ------------------------------------------------------------- */

static int eb_backend_list(struct eb_opts *o, const char *list)
{
	char buf[256];
	char *save = NULL;

	if (strlen(list) >= sizeof buf) {
		fprintf(stderr, "kvbench engine: --backends list too long\n");
		return -EINVAL;
	}
	strcpy(buf, list);
	o->nbackends = 0;
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		const struct yb_backend *pb = yb_find(t);
		bool dup = false;
		if (pb == NULL || strcmp(pb->kind, "embedded") != 0) {
			fprintf(stderr, "kvbench engine: unknown backend '%s'\n", t);
			return -EINVAL;
		}
		for (size_t i = 0; i < o->nbackends; i++)
			dup |= o->backends[i] == pb;
		if (!dup && o->nbackends < EB_BACKENDS_MAX)
			o->backends[o->nbackends++] = pb;
	}
	if (o->nbackends == 0) {
		fprintf(stderr, "kvbench engine: --backends is empty\n");
		return -EINVAL;
	}
	/* the engine first: it is the reference of every ratio */
	for (size_t i = 1; i < o->nbackends; i++) {
		if (strcmp(o->backends[i]->name, "engine") == 0) {
			const struct yb_backend *e = o->backends[i];
			memmove(&o->backends[1], &o->backends[0], i * sizeof(o->backends[0]));
			o->backends[0] = e;
		}
	}
	return 0;
}

static int eb_workload_list(struct eb_opts *o, const char *list)
{
	char buf[256];
	char *save = NULL;
	bool any = false;

	if (strlen(list) >= sizeof buf) {
		fprintf(stderr, "kvbench engine: --benchmarks list too long\n");
		return -EINVAL;
	}
	strcpy(buf, list);
	memset(o->workload, 0, sizeof o->workload);
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		int w;
		for (w = 0; w < W_COUNT; w++)
			if (strcmp(t, eb_workload_names[w]) == 0)
				break;
		if (w == W_COUNT) {
			fprintf(stderr, "kvbench engine: unknown benchmark '%s'\n", t);
			return -EINVAL;
		}
		o->workload[w] = true;
		any = true;
	}
	if (!any) {
		fprintf(stderr, "kvbench engine: --benchmarks is empty\n");
		return -EINVAL;
	}
	return 0;
}

static int eb_parse_sync(const char *cmd, const char *name, const char *arg, void *val)
{
	bool *sync = val; /* by enum eb_sync */

	if (strcmp(arg, "none") != 0 && strcmp(arg, "always") != 0 && strcmp(arg, "both") != 0) {
		fprintf(stderr, "kvbench %s: %s is none, always or both, not '%s'\n", cmd, name,
		        arg);
		return -EINVAL;
	}
	sync[SYNC_NONE] = strcmp(arg, "always") != 0;
	sync[SYNC_ALWAYS] = strcmp(arg, "none") != 0;
	return 0;
}

static int eb_parse_read_keys(const char *cmd, const char *name, const char *arg, void *val)
{
	bool *any = val;

	if (strcmp(arg, "existing") != 0 && strcmp(arg, "any") != 0) {
		fprintf(stderr, "kvbench %s: %s is existing or any, not '%s'\n", cmd, name, arg);
		return -EINVAL;
	}
	*any = strcmp(arg, "any") == 0;
	return 0;
}

static int eb_parse_backends(const char *cmd, const char *name, const char *arg, void *val)
{
	(void)cmd;
	(void)name;
	return eb_backend_list(val, arg);
}

static int eb_parse_workloads(const char *cmd, const char *name, const char *arg, void *val)
{
	(void)cmd;
	(void)name;
	return eb_workload_list(val, arg);
}

/* 0, 1 for --help, or -EINVAL. */
static int eb_parse(int argc, char **argv, struct eb_opts *o)
{
	char value_help[64], threads_help[64], quick[128];
	const struct bench_opt opts[] = {
	        {BENCH_OPT("num", BENCH_OPT_U64, &o->num, "N",
	                   "operations per workload under sync=none (default %D)"),
	         .lo = 1, .hi = EB_NUM_MAX, .set = &o->num_set},
	        {BENCH_OPT("num-sync", BENCH_OPT_U64, &o->num_sync, "N",
	                   "operations per workload under sync=always (default %D)"),
	         .lo = 1, .hi = EB_NUM_MAX, .set = &o->num_sync_set},
	        {BENCH_OPT("key-size", BENCH_OPT_U64, &o->key_size, "B",
	                   "bytes per key, at least the digits of N (default %D)"),
	         .lo = 1, .hi = EB_KEY_MAX},
	        {BENCH_OPT("value-size", BENCH_OPT_U64, &o->value_size, "B", value_help), .lo = 0,
	         .hi = EB_VALUE_MAX},
	        {BENCH_OPT("threads", BENCH_OPT_U64, &o->threads, "T", threads_help), .lo = 1,
	         .hi = EB_THREADS_MAX},
	        {BENCH_OPT("sync", BENCH_OPT_FUNC, o->sync, "MODE",
	                   "none, always or both (default both)"),
	         .parse = eb_parse_sync},
	        {BENCH_OPT("seed", BENCH_OPT_U64, &o->seed, "S", "random seed (default %D)"),
	         .lo = 0, .hi = (double)UINT64_MAX},
	        {BENCH_OPT("repeat", BENCH_OPT_U64, &o->repeat, "R",
	                   "run everything R times, rotating the backend order; each\n"
	                   "cell reports its median run (default %D; odd R is best)"),
	         .lo = 1, .hi = EB_REPEAT_MAX},
	        {BENCH_OPT("backends", BENCH_OPT_FUNC, o, "LIST",
	                   "comma-separated: engine,rocksdb,leveldb,lmdb (default all)"),
	         .parse = eb_parse_backends},
	        {BENCH_OPT("benchmarks", BENCH_OPT_FUNC, o, "LIST",
	                   "comma-separated: fillseq,fillrandom,overwrite,readrandom,\n"
	                   "readseq (default all; reads run under sync=none only)"),
	         .parse = eb_parse_workloads},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &o->dir, "DIR",
	                   "make the run's directory in DIR (default /tmp); removed\n"
	                   "afterwards")},
	        {BENCH_OPT("read-keys", BENCH_OPT_FUNC, &o->read_any, "WHICH",
	                   "readrandom's keys: existing (uniform among the keys\n"
	                   "written; default) or any (uniform in [0, N), db_bench's:\n"
	                   "about 37% absent after fillrandom)"),
	         .parse = eb_parse_read_keys},
	        {BENCH_OPT("quick", BENCH_OPT_FLAG, &o->quick, NULL, quick)},
	        BENCH_OPTS_REPORT(&o->markdown, &o->json),
	};
	const struct bench_cmd cmd = {
	        "engine",
	        "db_bench-style workloads on kvd's engine and its peers, in one run.\n",
	        "Exits 0 only when every built backend completed every workload with no miss.\n",
	        opts,
	        sizeof opts / sizeof opts[0],
	};
	int rv;

	bench_fmt(value_help, sizeof value_help, "bytes per value, 0..%llu (default %%D)",
	          EB_VALUE_MAX);
	bench_fmt(threads_help, sizeof threads_help,
	          "workers sharing one database, 1..%llu (default %%D)", EB_THREADS_MAX);
	bench_fmt(quick, sizeof quick, "smoke run: --num %llu --num-sync %llu unless given",
	          EB_QUICK_NUM, EB_QUICK_NUM_SYNC);
	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv;
	if (!o->sync[SYNC_NONE] && (o->workload[W_READRANDOM] || o->workload[W_READSEQ]))
		fprintf(stderr, "kvbench engine: note: reads run under sync=none only; "
		                "--sync always skips them\n");
	if (o->json && o->markdown) {
		fprintf(stderr, "kvbench engine: --json and --markdown exclude each other\n");
		return -EINVAL;
	}
	if (o->quick) {
		if (!o->num_set)
			o->num = EB_QUICK_NUM;
		if (!o->num_sync_set)
			o->num_sync = EB_QUICK_NUM_SYNC;
	}
	/* every key id (and readseq's exclusive end, N itself) must fit the key */
	uint64_t top = o->num > o->num_sync ? o->num : o->num_sync;
	if (o->key_size < eb_digits(top)) {
		fprintf(stderr,
		        "kvbench engine: --key-size %" PRIu64 " cannot hold %u-digit keys\n",
		        o->key_size, eb_digits(top));
		return -EINVAL;
	}
	return 0;
}

/* ---- entry point --------------------------------------------------------- */

static int eb_make_base(struct eb_bench *b)
{
	const char *parent = b->o.dir ? b->o.dir : "/tmp";
	int rv;

	if (b->o.dir != NULL && mkdir(parent, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "kvbench engine: mkdir %s: %s\n", parent, strerror(errno));
		return -errno;
	}
	if ((size_t)snprintf(b->base, sizeof b->base, "%s/kvbench-XXXXXX", parent) >=
	    sizeof b->base - 64) {
		fprintf(stderr, "kvbench engine: --dir path too long\n");
		b->base[0] = '\0';
		return -ENAMETOOLONG;
	}
	if (mkdtemp(b->base) == NULL) {
		rv = -errno;
		fprintf(stderr, "kvbench engine: mkdtemp %s: %s\n", b->base, strerror(-rv));
		b->base[0] = '\0'; /* not ours: never removed */
		return rv;
	}
	bench_fs_name(b->base, b->fs, sizeof b->fs);
	return 0;
}

int bench_engine(int argc, char **argv)
{
	struct eb_bench *b = calloc(1, sizeof(*b));
	struct report rep = {0};
	struct eb_opts *o;
	int rv, code = 1;
	bool ok;

	if (b == NULL || report_init(&rep) != 0) {
		fprintf(stderr, "kvbench engine: out of memory\n");
		free(b);
		report_fini(&rep);
		return 1;
	}
	o = &b->o;
	o->num = EB_NUM_DEFAULT;
	o->num_sync = EB_NUM_SYNC_DEFAULT;
	o->key_size = 16;
	o->value_size = 100;
	o->threads = 1;
	o->seed = 1;
	o->repeat = 1;
	o->sync[SYNC_NONE] = o->sync[SYNC_ALWAYS] = true;
	for (int w = 0; w < W_COUNT; w++)
		o->workload[w] = true;
	for (size_t i = 0; i < yb_backend_count && o->nbackends < EB_BACKENDS_MAX; i++)
		if (strcmp(yb_backends[i]->kind, "embedded") == 0)
			o->backends[o->nbackends++] = yb_backends[i];
	if ((rv = eb_parse(argc, argv, o)) != 0) {
		free(b);
		report_fini(&rep);
		return rv > 0 ? 0 : 2;
	}
	bench_command_line(b->command, sizeof b->command, argc, argv);
	for (size_t i = 0; i < o->nbackends; i++) {
		const struct peer_backend *lib = peer_find(o->backends[i]->peer);
		if (peer_built(lib))
			lib->version(b->info[i].version, sizeof b->info[i].version);
	}

	if ((b->runs = calloc(o->repeat, sizeof(*b->runs))) == NULL ||
	    (b->pool = malloc(EB_POOL_BYTES + o->value_size)) == NULL) {
		fprintf(stderr, "kvbench engine: out of memory\n");
		goto out;
	}
	bench_rng_bytes(b->pool, EB_POOL_BYTES + o->value_size, o->seed ^ 0x5eed);
	if (eb_make_base(b) != 0)
		goto out;
	b->env.base = b->base;

	b->progress = o->json || o->markdown ? stderr : stdout;
	if (!o->json && !o->markdown) {
		printf("kvbench engine: %s\n", b->command);
		eb_header(b, &rep);
		report_lines_text(&rep, stdout, 11);
		putchar('\n');
	}
	eb_text_row_head(b->progress);
	eb_run_all(b);
	eb_summarize(b);

	if (o->repeat > 1 && !o->json && !o->markdown) {
		printf("\nmedian of %" PRIu64 " runs:\n", o->repeat);
		eb_text_row_head(stdout);
		for (int s = 0; s < SYNC_COUNT; s++)
			for (int w = 0; w < W_COUNT; w++)
				for (size_t bi = 0; bi < o->nbackends; bi++)
					if (b->res[s][w][bi].state != RES_NONE)
						eb_text_row(b, stdout, &b->res, s, w, bi, 0);
	}
	ok = eb_all_ok(b);
	if (o->json || o->markdown)
		eb_header(b, &rep);
	if (o->json)
		eb_json(b, &rep, ok);
	else if (o->markdown)
		eb_markdown(b, &rep);
	if (!ok)
		fprintf(stderr, "kvbench engine: FAILED: a workload failed or reads missed keys\n");
	code = ok ? 0 : 1;
out:
	if (b->base[0] != '\0' && (rv = bench_rmtree(b->base)) != 0)
		fprintf(stderr, "kvbench engine: removing %s: %s\n", b->base, strerror(-rv));
	free(b->exist);
	free(b->exist_bits);
	free(b->pool);
	free(b->runs);
	free(b);
	report_fini(&rep);
	return code;
}
