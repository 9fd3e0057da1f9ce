/*
 * bench/handover.c — kvbench handover: how long a tenant takes to move
 * between two nodes of a shared device (docs/SCALEOUT.md), in process,
 * against the same tenant passivated and activated again on one node.
 *
 *   kvbench handover [--keys N] [--value-size B] [--repeat R]
 *                    [--device DEV --yes-format] [--extent-size B] [--quick]
 *                    [--json | --markdown]
 *
 *   1. A device formatted for 2 nodes: DEV (erased: --yes-format says so),
 *      or a sparse image file in a temporary directory. Stores of node 1 and
 *      node 2 open on it at once (kv_store_open with device_node).
 *   2. Node 1 claims tenant "bench" (epoch 1), creates it (sync=none) and
 *      loads N distinct keys in batches of 1000, then passivates it (its
 *      hints written).
 *   3. R times, alternating the direction: a handover — the owner
 *      passivates and disowns the tenant, the other node claims it under the
 *      next epoch (which reads both catalogs, takes the entry over and
 *      activates the tenant from its hints) — timed from the passivation to
 *      the claim's return, then 100 random Gets on the new owner checked;
 *      and, on the new owner, the same tenant passivated and activated
 *      again (the one-node lower bound), timed the same way.
 * Reports the median, fastest and slowest of each, and their ratio. Exits 0
 * only when every step worked and every Get found its value.
 */
#include "bench.h"
#include "opt.h"
#include "rng.h"

#include "kvengine.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HO_KEYS_DEFAULT   1000000ull
#define HO_QUICK_KEYS     20000ull
#define HO_KEYS_MAX       50000000ull
#define HO_REPEAT_DEFAULT 5ull
#define HO_QUICK_REPEAT   3ull
#define HO_REPEAT_MAX     51ull
#define HO_VALUE_DEFAULT  100ull
#define HO_VALUE_MAX      65536ull
#define HO_KEY_SIZE       16
#define HO_BATCH          1000

struct ho_opts {
	uint64_t keys, value_size, repeat, extent_size;
	const char *device;
	bool yes_format, quick, md, js;
	bool keys_set, repeat_set;
};

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static void key_of(uint64_t i, char *k)
{
	/* keys below HO_KEYS_MAX: 16 digits */
	snprintf(k, HO_KEY_SIZE + 1, "%016" PRIu64, (uint64_t)(i % 10000000000000000ull));
}

static int open_node(const char *dev, uint32_t node, kv_store **ret)
{
	struct kv_store_options o;

	kv_store_options_init(&o);
	o.device = dev;
	o.device_node = node;
	o.busy_wait_ms = 10000;
	o.defaults.sync = KV_SYNC_NONE;
	return kv_store_open(NULL, &o, ret);
}

static int load(kv_store *s, const struct ho_opts *o)
{
	struct kv_op ops[HO_BATCH];
	char (*keys)[HO_KEY_SIZE + 1] = calloc(HO_BATCH, sizeof(*keys));
	uint8_t *val = malloc(o->value_size);
	uint64_t rng = 42, mul = 1000003;
	kv_tenant *t;
	uint64_t i = 0;
	int rv;

	while (gcd(mul, o->keys) != 1)
		mul += 2;
	if (keys == NULL || val == NULL) {
		free(keys);
		free(val);
		return -ENOMEM;
	}
	if ((rv = kv_store_get(s, "bench", &t)) != 0)
		goto out;
	while (rv == 0 && i < o->keys) {
		size_t n = 0;
		for (; n < HO_BATCH && i < o->keys; n++, i++) {
			/* each key once, in a scrambled order (mul is prime to keys) */
			uint64_t k = (uint64_t)(((unsigned __int128)i * mul) % o->keys);
			key_of(k, keys[n]);
			for (uint64_t b = 0; b < o->value_size; b++)
				val[b] = (uint8_t)bench_rng(&rng);
			ops[n] = (struct kv_op){.type = KV_OP_PUT, .key = keys[n],
			                        .key_len = HO_KEY_SIZE, .value = val,
			                        .value_len = o->value_size,
			                        .if_version = KV_ANY_VERSION};
		}
		rv = kv_batch(kv_tenant_db(t), ops, n);
	}
	kv_store_put(s, t);
out:
	free(keys);
	free(val);
	return rv;
}

/* 100 random Gets of keys the load wrote: 0 when every one is found. */
static int check(kv_store *s, const struct ho_opts *o, uint64_t *rng)
{
	char k[HO_KEY_SIZE + 1];
	struct kv_value v;
	kv_tenant *t;
	int rv;

	if ((rv = kv_store_get(s, "bench", &t)) != 0)
		return rv;
	for (int i = 0; i < 100 && rv == 0; i++) {
		key_of(bench_rng_below(rng, o->keys), k);
		if ((rv = kv_get(kv_tenant_db(t), k, HO_KEY_SIZE, NULL, &v)) == 0) {
			rv = v.len == o->value_size ? 0 : -EPROTO;
			kv_value_release(&v);
		}
	}
	kv_store_put(s, t);
	return rv;
}

static int run(const struct ho_opts *o, const char *dev)
{
	struct kv_dev_format_options fo = {.extent_size = o->extent_size, .force = true, .nodes = 2};
	uint64_t *ho = calloc(o->repeat, sizeof(*ho)), *one = calloc(o->repeat, sizeof(*one));
	kv_store *s[2] = {NULL, NULL};
	uint64_t rng = 7, epoch = 1, t0, load_ns;
	char err[256];
	int rv, owner = 0;

	if (ho == NULL || one == NULL) {
		rv = -ENOMEM;
		goto out;
	}
	if ((rv = kv_dev_format(dev, &fo, err, sizeof(err))) != 0) {
		fprintf(stderr, "kvbench handover: formatting %s: %s\n", dev, err);
		goto out;
	}
	if ((rv = open_node(dev, 1, &s[0])) != 0 || (rv = open_node(dev, 2, &s[1])) != 0) {
		fprintf(stderr, "kvbench handover: opening %s: %s\n", dev, kv_strerror(rv));
		goto out;
	}
	t0 = bench_now_ns();
	if ((rv = kv_store_claim(s[0], "bench", epoch++)) != 0 ||
	    (rv = kv_store_create(s[0], "bench", NULL)) != 0 || (rv = load(s[0], o)) != 0 ||
	    (rv = kv_store_passivate(s[0], "bench")) != 0) {
		fprintf(stderr, "kvbench handover: loading: %s\n", kv_strerror(rv));
		goto out;
	}
	load_ns = bench_now_ns() - t0;
	if (!o->js)
		fprintf(stderr, "kvbench handover: %" PRIu64 " keys of %" PRIu64
		                " bytes loaded in %.1f s\n",
		        o->keys, o->value_size, (double)load_ns / 1e9);
	for (uint64_t r = 0; r < o->repeat && rv == 0; r++) {
		kv_store *from = s[owner], *to = s[owner ^ 1];
		t0 = bench_now_ns();
		if ((rv = kv_store_passivate(from, "bench")) == 0 &&
		    (rv = kv_store_disown(from, "bench")) == 0)
			rv = kv_store_claim(to, "bench", epoch++);
		ho[r] = bench_now_ns() - t0;
		if (rv == 0)
			rv = check(to, o, &rng);
		if (rv != 0) {
			fprintf(stderr, "kvbench handover: handover %" PRIu64 ": %s\n", r + 1,
			        kv_strerror(rv));
			break;
		}
		owner ^= 1;
		t0 = bench_now_ns();
		if ((rv = kv_store_passivate(to, "bench")) == 0)
			rv = kv_store_activate(to, "bench", NULL);
		one[r] = bench_now_ns() - t0;
		if (rv == 0)
			rv = check(to, o, &rng);
		if (rv != 0)
			fprintf(stderr, "kvbench handover: reactivation %" PRIu64 ": %s\n", r + 1,
			        kv_strerror(rv));
	}
	if (rv == 0) {
		uint64_t n = o->repeat;
		qsort(ho, n, sizeof(*ho), u64_cmp);
		qsort(one, n, sizeof(*one), u64_cmp);
		double hm = (double)ho[n / 2] / 1e6, om = (double)one[n / 2] / 1e6;
		if (o->js) {
			printf("{\"keys\":%" PRIu64 ",\"value_size\":%" PRIu64 ",\"repeat\":%" PRIu64
			       ",\"handover_ms\":{\"median\":%.2f,\"min\":%.2f,\"max\":%.2f},"
			       "\"reactivate_ms\":{\"median\":%.2f,\"min\":%.2f,\"max\":%.2f},"
			       "\"ratio\":%.3f}\n",
			       o->keys, o->value_size, n, hm, (double)ho[0] / 1e6,
			       (double)ho[n - 1] / 1e6, om, (double)one[0] / 1e6,
			       (double)one[n - 1] / 1e6, om > 0 ? hm / om : 0);
		} else {
			if (o->md)
				printf("kvbench handover: %" PRIu64 " keys, %" PRIu64
				       "-byte values, %" PRIu64 " repetitions, on %s\n\n",
				       o->keys, o->value_size, n, o->device ? o->device : "an image file");
			printf("| move | median ms | fastest | slowest |\n|---|---|---|---|\n");
			printf("| handover: release on one node, claim + activate on the other | "
			       "%.1f | %.1f | %.1f |\n",
			       hm, (double)ho[0] / 1e6, (double)ho[n - 1] / 1e6);
			printf("| one node: passivate + activate | %.1f | %.1f | %.1f |\n", om,
			       (double)one[0] / 1e6, (double)one[n - 1] / 1e6);
			printf("\nhandover / one node: %.2f\n", om > 0 ? hm / om : 0);
		}
	}
out:
	if (s[0] != NULL)
		kv_store_close(s[0]);
	if (s[1] != NULL)
		kv_store_close(s[1]);
	free(ho);
	free(one);
	return rv;
}

int bench_handover(int argc, char **argv)
{
	struct ho_opts o = {.keys = HO_KEYS_DEFAULT, .value_size = HO_VALUE_DEFAULT,
	                    .repeat = HO_REPEAT_DEFAULT, .extent_size = 64ull << 20};
	struct bench_opt opts[] = {
	        {BENCH_OPT("keys", BENCH_OPT_U64, &o.keys, "N", "keys in the tenant (default %D)"),
	         .lo = 1, .hi = HO_KEYS_MAX, .set = &o.keys_set},
	        {BENCH_OPT("value-size", BENCH_OPT_U64, &o.value_size, "B",
	                   "bytes per value (default %D)"),
	         .lo = 1, .hi = HO_VALUE_MAX},
	        {BENCH_OPT("repeat", BENCH_OPT_U64, &o.repeat, "R",
	                   "handovers, median reported (default %D)"),
	         .lo = 1, .hi = HO_REPEAT_MAX, .set = &o.repeat_set},
	        {BENCH_OPT("extent-size", BENCH_OPT_U64, &o.extent_size, "B",
	                   "the device's extent size (default %D)"),
	         .lo = 1u << 20, .hi = 1u << 30},
	        {BENCH_OPT("device", BENCH_OPT_STRING, &o.device, "DEV",
	                   "format DEV for 2 nodes and run on it (with --yes-format);\n"
	                   "default: a sparse image file in a temporary directory")},
	        {BENCH_OPT("yes-format", BENCH_OPT_FLAG, &o.yes_format, NULL,
	                   "agree that --device is erased")},
	        {BENCH_OPT("quick", BENCH_OPT_FLAG, &o.quick, NULL,
	                   "smoke run: 20000 keys, 3 handovers (explicit options win)")},
	        BENCH_OPTS_REPORT(&o.md, &o.js),
	};
	struct bench_cmd cmd = {
	        "handover",
	        "A tenant moved between two nodes of one shared device (release on one,\n"
	        "claim on the other), against passivating and activating it on one node.\n",
	        "Exits 0 only when every step worked and every Get found its value.\n",
	        opts,
	        sizeof(opts) / sizeof(opts[0]),
	};
	char dir[] = "/tmp/kvbench-handover-XXXXXX", img[64];
	int rv, fd;

	if ((rv = bench_opts_parse(&cmd, argc, argv)) != 0)
		return rv > 0 ? 0 : 2;
	if (o.quick) {
		if (!o.keys_set)
			o.keys = HO_QUICK_KEYS;
		if (!o.repeat_set)
			o.repeat = HO_QUICK_REPEAT;
	}
	if ((o.extent_size & (o.extent_size - 1)) != 0) {
		fprintf(stderr, "kvbench handover: --extent-size takes a power of two\n");
		return 2;
	}
	if (o.device != NULL && !o.yes_format) {
		fprintf(stderr, "kvbench handover: --device %s is erased: add --yes-format\n",
		        o.device);
		return 2;
	}
	if (o.device != NULL)
		return run(&o, o.device) == 0 ? 0 : 1;
	if (mkdtemp(dir) == NULL) {
		fprintf(stderr, "kvbench handover: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	snprintf(img, sizeof(img), "%s/dev.img", dir);
	fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	/* on each node's half: the data twice over (merges, hints) and the
	 * extents kept for merges, with room to spare; the catalogs */
	uint64_t per_node = (o.keys * (o.value_size + 64) * 2 / o.extent_size + 16) * o.extent_size;
	if (fd < 0 || ftruncate(fd, (off_t)(2 * per_node + (256u << 20))) != 0) {
		fprintf(stderr, "kvbench handover: %s: %s\n", img, strerror(errno));
		if (fd >= 0)
			close(fd);
		rmdir(dir);
		return 1;
	}
	close(fd);
	rv = run(&o, img);
	unlink(img);
	rmdir(dir);
	return rv == 0 ? 0 : 1;
}
