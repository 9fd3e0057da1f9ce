/*
 * bench/evict.c — kvbench evict: what evict=oldest costs: the memory of the
 * write order it keeps (engine/evict.h) and the speed of puts that evict.
 *
 *   kvbench evict [--keys N] [--dir DIR]
 *
 * One database (sync=none, no background thread), 16-byte keys and values:
 *   load    N puts of new keys in batches of 1000 into a database of
 *           evict=oldest, max_keys=N: nothing evicted yet;
 *   churn   N more puts of new keys: each evicts the oldest;
 *   reopen  the database closed and opened again, the order rebuilt from
 *           the key directory; then opened once more with evict=refuse (no
 *           order) for the resident-memory difference.
 * Reported: keydir bytes per key, the order's bytes per key after each
 * phase (kv_stats evict_order_bytes / keys), the process's resident memory
 * after each open, and puts/s of both put phases. Exits 1 when a phase
 * leaves other than N keys, or the churn other than N evictions.
 */
#include "bench.h"
#include "opt.h"

#include "kvengine.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EB_BATCH 1000

static double eb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Resident bytes of the process (/proc/self/statm), 0 if unknown. */
static uint64_t eb_rss(void)
{
	unsigned long size, res;
	FILE *f = fopen("/proc/self/statm", "r");
	int n;

	if (f == NULL)
		return 0;
	n = fscanf(f, "%lu %lu", &size, &res);
	fclose(f);
	return n == 2 ? (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* Puts keys [from, to) in batches; puts/s, or a negative error. */
static double eb_put(kv_db *db, uint64_t from, uint64_t to, int *ret_err)
{
	static char keys[EB_BATCH][24];
	struct kv_op ops[EB_BATCH];
	double t0 = eb_now();

	for (uint64_t i = from; i < to;) {
		size_t n = 0;
		for (; n < EB_BATCH && i < to; n++, i++) {
			snprintf(keys[n], sizeof(keys[n]), "key%013" PRIu64, i);
			memset(&ops[n], 0, sizeof(ops[n]));
			ops[n].type = KV_OP_PUT;
			ops[n].key = keys[n];
			ops[n].key_len = 16;
			ops[n].value = "value-0123456789";
			ops[n].value_len = 16;
			ops[n].if_version = KV_ANY_VERSION;
		}
		if ((*ret_err = kv_batch(db, ops, n)) != 0)
			return 0;
	}
	return (double)(to - from) / (eb_now() - t0);
}

static int eb_open(const char *path, uint64_t keys, enum kv_evict evict, kv_db **ret)
{
	struct kv_options o;

	kv_options_init(&o);
	o.sync = KV_SYNC_NONE;
	o.background = false;
	o.max_keys = keys;
	o.evict = evict;
	return kv_open(path, &o, ret);
}

/* Prints the phase's line; false when the database does not hold the keys
 * and evictions it should. */
static bool eb_line(const char *phase, kv_db *db, double rate, uint64_t keys, uint64_t evictions)
{
	struct kv_stats s;

	kv_stats(db, &s);
	printf("%-8s keys %-9" PRIu64 " evictions %-9" PRIu64 " keydir %6.1f B/key  order %5.1f "
	       "B/key (%" PRIu64 " B)  rss %" PRIu64 " MiB",
	       phase, s.keys, s.evictions, s.keys ? (double)s.keydir_bytes / (double)s.keys : 0,
	       s.keys ? (double)s.evict_order_bytes / (double)s.keys : 0, s.evict_order_bytes,
	       eb_rss() >> 20);
	if (rate > 0)
		printf("  %.0f puts/s", rate);
	printf("\n");
	if (s.keys != keys || s.evictions != evictions) {
		fprintf(stderr, "kvbench evict: %s: %" PRIu64 " keys and %" PRIu64
		        " evictions, want %" PRIu64 " and %" PRIu64 "\n",
		        phase, s.keys, s.evictions, keys, evictions);
		return false;
	}
	return true;
}

int bench_evict(int argc, char **argv)
{
	uint64_t keys = 1000000;
	const char *dir = ".";
	struct bench_opt opts[] = {
	        {BENCH_OPT("keys", BENCH_OPT_U64, &keys, "N", "live keys, max_keys (default %D)"),
	         .lo = 1000, .hi = 1e9},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &dir, "DIR",
	                   "where the database goes (default the current directory)")},
	};
	struct bench_cmd cmd = {
	        "evict",
	        "The memory evict=oldest's write order takes per key and the speed of\n"
	        "puts that evict.\n",
	        NULL,
	        opts,
	        sizeof(opts) / sizeof(opts[0]),
	};
	char path[4096];
	kv_db *db = NULL;
	uint64_t rss_oldest, rss_refuse;
	double rate;
	bool ok = true;
	int rv, err = 0;

	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv > 0 ? 0 : 2;
	snprintf(path, sizeof(path), "%s/evict-%d", dir, (int)getpid());
	if ((rv = eb_open(path, keys, KV_EVICT_OLDEST, &db)) != 0)
		goto fail;
	rate = eb_put(db, 0, keys, &err);
	if (err != 0)
		goto fail_err;
	ok &= eb_line("load", db, rate, keys, 0);
	rate = eb_put(db, keys, 2 * keys, &err);
	if (err != 0)
		goto fail_err;
	ok &= eb_line("churn", db, rate, keys, keys);
	kv_close(db);
	if ((rv = eb_open(path, keys, KV_EVICT_OLDEST, &db)) != 0)
		goto fail;
	rss_oldest = eb_rss();
	ok &= eb_line("reopen", db, 0, keys, 0);
	kv_close(db);
	if ((rv = eb_open(path, keys, KV_EVICT_REFUSE, &db)) != 0)
		goto fail;
	rss_refuse = eb_rss();
	ok &= eb_line("refuse", db, 0, keys, 0);
	kv_close(db);
	printf("resident after the evict=oldest open minus after the evict=refuse one: %+.1f "
	       "B/key (allocator noise included)\n",
	       ((double)rss_oldest - (double)rss_refuse) / (double)keys);
	bench_rmtree(path);
	return ok ? 0 : 1;
fail_err:
	rv = err;
	kv_close(db);
fail:
	fprintf(stderr, "kvbench evict: %s\n", kv_strerror(rv));
	bench_rmtree(path);
	return 1;
}
