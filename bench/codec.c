/*
 * bench/codec.c — kvbench codec: put and get throughput of the engine and
 * the space values take, per value codec (engine/codec.h), on compressible
 * and incompressible values.
 *
 *   kvbench codec [--compression LIST] [--value-kind LIST] [--value-size LIST]
 *                 [--bytes B] [--level L] [--dir DIR] [--seed S] [--quick]
 *                 [--json]
 *
 * For every codec of --compression (none, lz4, zstd), value kind of
 * --value-kind and size of --value-size, one cell: a fresh database
 * (sync=none, no background thread) with that codec; B / size puts of
 * distinct keys in increasing order (the put phase), then as many gets of
 * keys chosen uniformly at random (the get phase), each value checked byte
 * for byte against what was put (outside the timed span); close; remove.
 *
 *   text    English-like words from a list of 64, in a random order, cut
 *           from a pool of 4 MiB generated once: compresses about 2-4x.
 *   random  bytes of a xorshift stream: does not compress (stored raw).
 *
 * Reported per cell: put and get operations/s and MB/s of logical (as
 * given) value bytes, and stored/logical: the value bytes as stored over the
 * bytes as given (kv_stats value_stored_bytes / value_logical_bytes; 1.000
 * for values stored raw). Exits 0 only when every value read back as
 * written.
 */
#include "bench.h"
#include "opt.h"

#include "kvengine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CB_POOL_BYTES    (4u << 20)
#define CB_BYTES_DEFAULT (256ull << 20) /* logical bytes put per cell */
#define CB_QUICK_BYTES   (1ull << 20)
#define CB_SIZES_MAX     8
#define CB_VALUE_MAX     (1ull << 20)

enum { CB_TEXT, CB_RANDOM, CB_KINDS };

static const char *const cb_codec_names[] = {"none", "lz4", "zstd"};
static const char *const cb_kind_names[] = {"text", "random"};

struct cb_opts {
	bool codecs[3];
	bool kinds[CB_KINDS];
	uint64_t sizes[CB_SIZES_MAX];
	size_t nsizes;
	uint64_t bytes;
	uint64_t level;
	uint64_t seed;
	const char *dir;
	bool quick, bytes_set, json, markdown;
};

struct cb_cell {
	const char *codec, *kind;
	uint64_t size, n;
	double put_s, get_s;
	uint64_t logical, stored, compressed, disk;
	uint64_t bad; /* values that did not read back as written */
	int err;
};

static uint64_t cb_rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double cb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void cb_fill(uint8_t *pool, int kind, uint64_t seed)
{
	static const char *words[64] = {
	        "the",    "of",      "and",    "a",       "to",      "in",     "is",     "you",
	        "that",   "it",      "he",     "was",     "for",     "on",     "are",    "as",
	        "with",   "his",     "they",   "at",      "be",      "this",   "have",   "from",
	        "or",     "one",     "had",    "by",      "word",    "but",    "not",    "what",
	        "all",    "were",    "we",     "when",    "your",    "can",    "said",   "there",
	        "use",    "an",      "each",   "which",   "she",     "do",     "how",    "their",
	        "if",     "will",    "up",     "other",   "about",   "out",    "many",   "then",
	        "tenant", "version", "record", "segment", "storage", "engine", "daemon", "value"};
	uint64_t s = seed | 1;
	size_t at = 0;

	if (kind == CB_RANDOM) {
		for (at = 0; at < CB_POOL_BYTES; at++)
			pool[at] = (uint8_t)(cb_rng(&s) >> 24);
		return;
	}
	while (at < CB_POOL_BYTES) {
		uint64_t r = cb_rng(&s);
		const char *w = words[r % 64];
		size_t n = strlen(w);
		if (at + n + 2 > CB_POOL_BYTES)
			break;
		memcpy(pool + at, w, n);
		at += n;
		pool[at++] = (r >> 8) % 12 == 0 ? '.' : ' ';
		if ((r >> 16) % 80 == 0)
			pool[at++] = '\n';
	}
	memset(pool + at, ' ', CB_POOL_BYTES - at);
}

/* The value of key i: size bytes of the pool. */
static const uint8_t *cb_value(const uint8_t *pool, uint64_t i, uint64_t size)
{
	return pool + (i * 7919u) % (CB_POOL_BYTES - size);
}

static void cb_run_cell(const struct cb_opts *o, const uint8_t *pool, enum kv_codec codec,
                        struct cb_cell *c)
{
	char path[4096], key[32];
	struct kv_options ko;
	struct kv_stats st;
	uint64_t s = o->seed | 1;
	kv_db *db = NULL;
	double t0, spent = 0;
	int rv;

	snprintf(path, sizeof(path), "%s/codec-%s-%s-%" PRIu64, o->dir, c->codec, c->kind, c->size);
	kv_options_init(&ko);
	ko.sync = KV_SYNC_NONE;
	ko.background = false;
	ko.max_value_size = (uint32_t)CB_VALUE_MAX;
	ko.compression = codec;
	ko.compression_level = codec == KV_CODEC_ZSTD ? (int)o->level : 0;
	if ((rv = kv_open(path, &ko, &db)) != 0) {
		c->err = rv;
		return;
	}
	t0 = cb_now();
	for (uint64_t i = 0; i < c->n; i++) {
		int kl = snprintf(key, sizeof(key), "key%016" PRIu64, i);
		if ((rv = kv_put(db, key, (size_t)kl, cb_value(pool, i, c->size), c->size, NULL,
		                 NULL)) != 0) {
			c->err = rv;
			goto out;
		}
	}
	c->put_s = cb_now() - t0;
	kv_stats(db, &st);
	c->logical = st.value_logical_bytes;
	c->stored = st.value_stored_bytes;
	c->compressed = st.values_compressed;
	c->disk = st.disk_bytes;
	for (uint64_t j = 0; j < c->n; j++) {
		uint64_t i = cb_rng(&s) % c->n;
		int kl = snprintf(key, sizeof(key), "key%016" PRIu64, i);
		struct kv_value v;
		t0 = cb_now();
		rv = kv_get(db, key, (size_t)kl, NULL, &v);
		spent += cb_now() - t0;
		if (rv != 0) {
			c->err = rv;
			goto out;
		}
		if (v.len != c->size || memcmp(v.data, cb_value(pool, i, c->size), c->size) != 0)
			c->bad++;
		kv_value_release(&v);
	}
	c->get_s = spent;
out:
	kv_close(db);
	bench_rmtree(path);
}

static double cb_mbs(uint64_t n, uint64_t size, double s)
{
	return s > 0 ? (double)n * (double)size / s / 1e6 : 0;
}

static void cb_print(const struct cb_cell *c, size_t n, bool json)
{
	if (json) {
		printf("{\"cells\": [");
		for (size_t i = 0; i < n; i++)
			printf("%s\n {\"compression\": \"%s\", \"kind\": \"%s\", \"value_size\": "
			       "%" PRIu64 ", \"n\": %" PRIu64
			       ", \"put_ops\": %.0f, \"put_mbs\": %.1f"
			       ", \"get_ops\": %.0f, \"get_mbs\": %.1f, \"logical_bytes\": %" PRIu64
			       ", \"stored_bytes\": %" PRIu64 ", \"compressed\": %" PRIu64
			       ", \"disk_bytes\": %" PRIu64 ", \"bad\": %" PRIu64
			       ", \"error\": \"%s\"}",
			       i ? "," : "", c[i].codec, c[i].kind, c[i].size, c[i].n,
			       c[i].put_s > 0 ? (double)c[i].n / c[i].put_s : 0,
			       cb_mbs(c[i].n, c[i].size, c[i].put_s),
			       c[i].get_s > 0 ? (double)c[i].n / c[i].get_s : 0,
			       cb_mbs(c[i].n, c[i].size, c[i].get_s), c[i].logical, c[i].stored,
			       c[i].compressed, c[i].disk, c[i].bad,
			       c[i].err ? kv_strerror(c[i].err) : "");
		printf("\n]}\n");
		return;
	}
	printf("%-5s %-6s %6s %8s %10s %9s %10s %9s %14s %10s\n", "codec", "kind", "size", "n",
	       "put op/s", "put MB/s", "get op/s", "get MB/s", "stored/logical", "compressed");
	for (size_t i = 0; i < n; i++) {
		if (c[i].err) {
			printf("%-5s %-6s %6" PRIu64 " error: %s\n", c[i].codec, c[i].kind,
			       c[i].size, kv_strerror(c[i].err));
			continue;
		}
		printf("%-5s %-6s %6" PRIu64 " %8" PRIu64
		       " %10.0f %9.1f %10.0f %9.1f %14.3f %10" PRIu64 "%s\n",
		       c[i].codec, c[i].kind, c[i].size, c[i].n, (double)c[i].n / c[i].put_s,
		       cb_mbs(c[i].n, c[i].size, c[i].put_s), (double)c[i].n / c[i].get_s,
		       cb_mbs(c[i].n, c[i].size, c[i].get_s),
		       c[i].logical ? (double)c[i].stored / (double)c[i].logical : 0,
		       c[i].compressed, c[i].bad ? "  MISMATCH" : "");
	}
}

static int parse_codecs(const char *cmd, const char *name, const char *arg, void *val)
{
	return bench_parse_names(cmd, name, arg, cb_codec_names, 3, val);
}

static int parse_kinds(const char *cmd, const char *name, const char *arg, void *val)
{
	return bench_parse_names(cmd, name, arg, cb_kind_names, CB_KINDS, val);
}

static int parse_sizes(const char *cmd, const char *name, const char *arg, void *val)
{
	struct cb_opts *o = val;

	return bench_parse_u64_list(cmd, name, arg, 1, CB_VALUE_MAX, o->sizes, CB_SIZES_MAX,
	                            &o->nsizes);
}

int bench_codec(int argc, char **argv)
{
	struct cb_opts o = {.codecs = {true, true, true},
	                    .kinds = {true, true},
	                    .sizes = {1024, 65536},
	                    .nsizes = 2,
	                    .bytes = CB_BYTES_DEFAULT,
	                    .level = 3,
	                    .seed = 42,
	                    .dir = "."};
	struct bench_opt opts[] = {
	        {BENCH_OPT("compression", BENCH_OPT_FUNC, o.codecs, "LIST",
	                   "codecs: none,lz4,zstd (default all)"),
	         .parse = parse_codecs},
	        {BENCH_OPT("value-kind", BENCH_OPT_FUNC, o.kinds, "LIST",
	                   "values: text (compressible), random (not) (default both)"),
	         .parse = parse_kinds},
	        {BENCH_OPT("value-size", BENCH_OPT_FUNC, &o, "LIST",
	                   "bytes per value, 1..1048576 (default 1024,65536)"),
	         .parse = parse_sizes},
	        {BENCH_OPT("bytes", BENCH_OPT_U64, &o.bytes, "B",
	                   "logical value bytes put per cell (default %D)"),
	         .lo = 1, .hi = 1ull << 40, .set = &o.bytes_set},
	        {BENCH_OPT("level", BENCH_OPT_U64, &o.level, "L", "zstd level, 1..22 (default %D)"),
	         .lo = 1, .hi = 22},
	        {BENCH_OPT("dir", BENCH_OPT_STRING, &o.dir, "DIR",
	                   "where the databases go (default the current directory)")},
	        {BENCH_OPT("seed", BENCH_OPT_U64, &o.seed, "S", "random stream (default %D)"),
	         .lo = 0, .hi = (double)UINT64_MAX},
	        {BENCH_OPT("quick", BENCH_OPT_FLAG, &o.quick, NULL,
	                   "smoke run: 1 MiB per cell (explicit --bytes wins)")},
	        BENCH_OPTS_REPORT(&o.markdown, &o.json),
	};
	struct bench_cmd cmd = {
	        "codec",
	        "Put and get throughput of the engine and the space values take, per value\n"
	        "codec, on compressible (text) and incompressible (random) values.\n",
	        "Exits 0 only when every value read back as written.\n",
	        opts,
	        sizeof(opts) / sizeof(opts[0]),
	};
	struct cb_cell cells[3 * CB_KINDS * CB_SIZES_MAX];
	uint8_t *pools[CB_KINDS] = {NULL, NULL};
	size_t n = 0;
	int rv, status = 0;

	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv > 0 ? 0 : 2;
	if (o.quick && !o.bytes_set)
		o.bytes = CB_QUICK_BYTES;
	for (int k = 0; k < CB_KINDS; k++) {
		if (!o.kinds[k])
			continue;
		if ((pools[k] = malloc(CB_POOL_BYTES)) == NULL) {
			fprintf(stderr, "kvbench codec: out of memory\n");
			status = 1;
			goto out;
		}
		cb_fill(pools[k], k, o.seed + (uint64_t)k);
	}
	printf("# kvbench codec: engine %s, %" PRIu64 " logical bytes per cell, sync=none, "
	       "zstd level %" PRIu64 ", one thread\n",
	       KV_ENGINE_VERSION, o.bytes, o.level);
	for (size_t si = 0; si < o.nsizes; si++)
		for (int k = 0; k < CB_KINDS; k++)
			for (int ci = 0; ci < 3; ci++) {
				struct cb_cell *c = &cells[n];
				if (!o.kinds[k] || !o.codecs[ci])
					continue;
				memset(c, 0, sizeof(*c));
				c->codec = cb_codec_names[ci];
				c->kind = cb_kind_names[k];
				c->size = o.sizes[si];
				c->n = o.bytes / c->size ? o.bytes / c->size : 1;
				cb_run_cell(&o, pools[k], (enum kv_codec)ci, c);
				if (c->err || c->bad)
					status = 1;
				if (!o.json)
					fprintf(stderr, "kvbench codec: %s %s %" PRIu64 " done\n",
					        c->codec, c->kind, c->size);
				n++;
			}
	cb_print(cells, n, o.json);
out:
	free(pools[0]);
	free(pools[1]);
	return status;
}
