/*
 * bench/keydir.c — kvbench keydir: memory per key and operation speed of the
 * key directory.
 *
 *   kvbench keydir [--keys N] [--key-size B] [--seed S] [--json]
 *
 * Inserts N uniformly random keys of B bytes (entries without TTL), then
 * looks every key up once in a random order and walks the whole directory in
 * key order. Prints keys, keydir_memory() bytes, bytes per key, overhead per
 * key beyond the key bytes, and ns per insert, per lookup and per walked key.
 */
#include "keydir.h"
#include "bench.h"
#include "opt.h"
#include "report.h"
#include "rng.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_KEYS_MAX 1000000000ull /* key bytes are held in memory */

struct kdb_opts {
	uint64_t keys;
	uint64_t key_size;
	uint64_t seed;
	bool json;
};

/* 0, 1 for --help, or -EINVAL. */
static int kdb_parse(int argc, char **argv, struct kdb_opts *o)
{
	char key_size[64];
	const struct bench_opt opts[] = {
	        {BENCH_OPT("keys", BENCH_OPT_U64, &o->keys, "N", "keys to insert (default %D)"),
	         .lo = 1, .hi = BENCH_KEYS_MAX},
	        {BENCH_OPT("key-size", BENCH_OPT_U64, &o->key_size, "B", key_size), .lo = 1,
	         .hi = KD_KEY_MAX},
	        {BENCH_OPT("seed", BENCH_OPT_U64, &o->seed, "S", "random seed (default %D)"),
	         .lo = 0, .hi = (double)UINT64_MAX},
	        {BENCH_OPT("json", BENCH_OPT_FLAG, &o->json, NULL,
	                   "print one JSON object instead of text")},
	};
	const struct bench_cmd cmd = {
	        "keydir",
	        "Memory per key and operation speed of the key directory.\n",
	        NULL,
	        opts,
	        sizeof opts / sizeof opts[0],
	};

	bench_fmt(key_size, sizeof key_size, "bytes per key, 1..%u (default %%D)", KD_KEY_MAX);
	return bench_opts_parse(&cmd, argc, argv);
}

struct kdb_walk {
	uint64_t n;
	uint64_t sum; /* keeps the visitor from being optimised away */
};

static int kdb_visit(void *arg, const uint8_t *key, size_t len, const struct kd_entry *e)
{
	struct kdb_walk *w = arg;
	w->n++;
	w->sum += key[len - 1] + e->version;
	return 0;
}

int bench_keydir(int argc, char **argv)
{
	struct kdb_opts o = {.keys = 1000000, .key_size = 16, .seed = 1};
	struct keydir *kd = NULL;
	uint8_t *keys = NULL;
	uint64_t *order = NULL;
	int rv, code = 1;

	if ((rv = kdb_parse(argc, argv, &o)) != 0)
		return rv > 0 ? 0 : 2;
	if (o.keys * o.key_size > 64ull << 30) {
		fprintf(stderr, "kvbench keydir: keys x key-size over 64 GiB\n");
		return 2;
	}

	keys = malloc(o.keys * o.key_size);
	order = malloc(o.keys * sizeof *order);
	if (keys == NULL || order == NULL) {
		fprintf(stderr, "kvbench keydir: out of memory for %" PRIu64 " keys\n", o.keys);
		goto out;
	}
	uint64_t s = o.seed;
	for (uint64_t i = 0; i < o.keys * o.key_size; i += 8) {
		uint64_t r = bench_rng(&s);
		size_t n = o.keys * o.key_size - i < 8 ? o.keys * o.key_size - i : 8;
		memcpy(keys + i, &r, n);
	}
	for (uint64_t i = 0; i < o.keys; i++)
		order[i] = i;
	for (uint64_t i = o.keys; i > 1; i--) {
		uint64_t j = bench_rng(&s) % i;
		uint64_t t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	if ((rv = keydir_new(&kd)) != 0) {
		fprintf(stderr, "kvbench keydir: keydir_new: %s\n", strerror(-rv));
		goto out;
	}

	/* Insert. */
	struct kd_entry e = {0};
	double t0 = (double)bench_now_ns();
	for (uint64_t i = 0; i < o.keys; i++) {
		e.version = i + 1;
		e.seg = (uint32_t)(i >> 16);
		e.off = (uint32_t)i * 64;
		e.size = 100;
		if ((rv = keydir_put(kd, keys + i * o.key_size, o.key_size, &e, NULL, NULL)) != 0) {
			fprintf(stderr, "kvbench keydir: keydir_put: %s\n", strerror(-rv));
			goto out;
		}
	}
	double t_insert = (double)bench_now_ns() - t0;
	size_t count = keydir_count(kd);
	size_t mem = keydir_memory(kd);

	/* Lookups of present keys, in random order. */
	uint64_t misses = 0, sum = 0;
	t0 = (double)bench_now_ns();
	for (uint64_t i = 0; i < o.keys; i++) {
		struct kd_entry got;
		if (keydir_get(kd, keys + order[i] * o.key_size, o.key_size, &got) != 0)
			misses++;
		else
			sum += got.off;
	}
	double t_lookup = (double)bench_now_ns() - t0;
	if (misses != 0) {
		fprintf(stderr, "kvbench keydir: %" PRIu64 " inserted keys not found\n", misses);
		goto out;
	}

	/* Ordered walk of everything. */
	struct kdb_walk w = {0, sum};
	t0 = (double)bench_now_ns();
	if ((rv = keydir_walk(kd, NULL, 0, true, false, kdb_visit, &w)) != 0) {
		fprintf(stderr, "kvbench keydir: keydir_walk: %s\n", strerror(-rv));
		goto out;
	}
	double t_walk = (double)bench_now_ns() - t0;
	if (w.n != count) {
		fprintf(stderr, "kvbench keydir: walk visited %" PRIu64 " of %zu keys\n", w.n,
		        count);
		goto out;
	}

	double per_key = (double)mem / (double)count;
	double overhead = per_key - (double)o.key_size;
	double ins = t_insert / (double)o.keys, look = t_lookup / (double)o.keys;
	double walk = t_walk / (double)count;
	if (o.json) {
		(void)report_print_packed(
		        stdout, "{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "bench", "keydir",
		        "keys", report_u64(count), "key_size", report_u64(o.key_size), "seed",
		        report_u64(o.seed), "memory_bytes", report_u64(mem), "bytes_per_key",
		        report_real(per_key, 2), "overhead_per_key", report_real(overhead, 2),
		        "insert_ns_per_op", report_real(ins, 1), "lookup_ns_per_op",
		        report_real(look, 1), "walk_ns_per_key", report_real(walk, 1));
	} else {
		printf("keydir: %zu keys of %" PRIu64 " random bytes (seed %" PRIu64 ")\n", count,
		       o.key_size, o.seed);
		printf("  memory            %zu bytes\n", mem);
		printf("  bytes/key         %.2f\n", per_key);
		printf("  overhead/key      %.2f bytes beyond the key\n", overhead);
		printf("  insert            %.1f ns/op\n", ins);
		printf("  lookup            %.1f ns/op (random hits)\n", look);
		printf("  ordered walk      %.1f ns/key\n", walk);
	}
	code = 0;
out:
	keydir_free(kd);
	free(order);
	free(keys);
	return code;
}
