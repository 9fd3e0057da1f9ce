/* test_engine.c — every engine operation and its edge cases, through the public API. */
#include "testutil.h"

#include <pthread.h>
#include <sys/select.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <cmocka.h>

struct fx {
	char *dir;
	kv_db *db;
	struct tu_clock clk;
	struct kv_options o;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->dir = tu_mkdtemp("engine");
	f->clk.ms = 1700000000000ull;
	tu_options(&f->o, &f->clk);
#ifdef TU_DEVICE
	/* a record fits in a segment, a segment in an extent (1 MiB here) */
	f->o.max_value_size = 256u << 10;
#endif
	assert_int_equal(kv_open(f->dir, &f->o, &f->db), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	assert_int_equal(kv_close(f->db), 0);
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void reopen(struct fx *f)
{
	assert_int_equal(kv_close(f->db), 0);
	f->db = NULL;
	assert_int_equal(kv_open(f->dir, &f->o, &f->db), 0);
}

static uint64_t put(kv_db *db, const char *k, const char *v)
{
	uint64_t ver = 0;
	assert_int_equal(kv_put(db, k, strlen(k), v, strlen(v), NULL, &ver), 0);
	assert_true(ver > 0);
	return ver;
}

static void check_value(kv_db *db, const char *k, const char *v)
{
	struct kv_value val;
	assert_int_equal(kv_get(db, k, strlen(k), NULL, &val), 0);
	assert_int_equal(val.len, strlen(v));
	assert_memory_equal(val.data, v, val.len);
	kv_value_release(&val);
}

static void check_missing(kv_db *db, const char *k)
{
	struct kv_value val;
	assert_int_equal(kv_get(db, k, strlen(k), NULL, &val), KV_ENOTFOUND);
}

static void test_put_get(void **state)
{
	struct fx *f = *state;
	uint64_t v1 = put(f->db, "alpha", "one");
	uint64_t v2 = put(f->db, "beta", "two");
	uint64_t v3 = put(f->db, "alpha", "uno");
	struct kv_value val;

	assert_true(v1 < v2 && v2 < v3);
	check_value(f->db, "alpha", "uno");
	check_value(f->db, "beta", "two");
	check_missing(f->db, "gamma");
	assert_int_equal(kv_get(f->db, "alpha", 5, NULL, &val), 0);
	assert_int_equal(val.version, v3);
	assert_int_equal(val.timestamp_ms, f->clk.ms);
	assert_int_equal(val.expiry_ms, 0);
	kv_value_release(&val);
	reopen(f);
	check_value(f->db, "alpha", "uno");
	check_value(f->db, "beta", "two");
	/* versions continue after reopen */
	assert_true(put(f->db, "gamma", "three") > v3);
}

static void test_empty_value_and_binary_keys(void **state)
{
	struct fx *f = *state;
	const uint8_t k1[] = {0x00}, k2[] = {0x00, 0x00}, k3[] = {0xff, 0x00, 0xff}, k4[] = {0xff};
	struct kv_value val;
	uint64_t ver;

	assert_int_equal(kv_put(f->db, "empty", 5, "", 0, NULL, &ver), 0);
	assert_int_equal(kv_put(f->db, k1, 1, "a", 1, NULL, &ver), 0);
	assert_int_equal(kv_put(f->db, k2, 2, "b", 1, NULL, &ver), 0);
	assert_int_equal(kv_put(f->db, k3, 3, "c", 1, NULL, &ver), 0);
	assert_int_equal(kv_put(f->db, k4, 1, "d", 1, NULL, &ver), 0);
	reopen(f);
	assert_int_equal(kv_get(f->db, "empty", 5, NULL, &val), 0);
	assert_int_equal(val.len, 0);
	kv_value_release(&val);
	assert_int_equal(kv_get(f->db, k2, 2, NULL, &val), 0);
	assert_memory_equal(val.data, "b", 1);
	kv_value_release(&val);
	assert_int_equal(kv_get(f->db, k3, 3, NULL, &val), 0);
	assert_memory_equal(val.data, "c", 1);
	kv_value_release(&val);
	assert_int_equal(kv_get(f->db, k1, 1, NULL, &val), 0);
	assert_memory_equal(val.data, "a", 1);
	kv_value_release(&val);
}

static void test_size_limits(void **state)
{
	struct fx *f = *state;
	size_t kmax = KV_KEY_SIZE_MAX;
	uint8_t *key = malloc(kmax + 1);
	uint8_t *big = malloc(f->o.max_value_size + 1);
	struct kv_value val;
	uint64_t ver;

	memset(key, 0xab, kmax + 1);
	memset(big, 'v', f->o.max_value_size + 1);
	assert_int_equal(kv_put(f->db, key, kmax, "x", 1, NULL, &ver), 0);
	assert_int_equal(kv_put(f->db, key, kmax + 1, "x", 1, NULL, &ver), KV_EKEYSIZE);
	assert_int_equal(kv_put(f->db, key, 0, "x", 1, NULL, &ver), KV_EKEYSIZE);
	assert_int_equal(kv_put(f->db, "big", 3, big, f->o.max_value_size + 1, NULL, &ver),
	                 KV_EVALSIZE);
	assert_int_equal(kv_put(f->db, "big", 3, big, f->o.max_value_size, NULL, &ver), 0);
	assert_int_equal(kv_get(f->db, key, kmax + 1, NULL, &val), KV_EKEYSIZE);
#ifdef TU_DEVICE
	{
		/* a value larger than an extent is refused, whatever the options say */
		struct kv_options o = f->o;
		size_t n = 1u << 20;
		uint8_t *huge = calloc(1, n);
		assert_int_equal(kv_close(f->db), 0);
		o.max_value_size = 4u << 20;
		assert_int_equal(kv_open(f->dir, &o, &f->db), 0);
		assert_int_equal(kv_put(f->db, "huge", 4, huge, n, NULL, &ver), KV_EVALSIZE);
		free(huge);
	}
#endif
	reopen(f);
	assert_int_equal(kv_get(f->db, key, kmax, NULL, &val), 0);
	assert_int_equal(val.len, 1);
	kv_value_release(&val);
	assert_int_equal(kv_get(f->db, "big", 3, NULL, &val), 0);
	assert_int_equal(val.len, f->o.max_value_size);
	assert_memory_equal(val.data, big, val.len);
	kv_value_release(&val);
	assert_string_equal(kv_strerror(KV_EKEYSIZE),
	                    "key is empty or longer than the maximum key size");
	free(key);
	free(big);
}

static void test_delete_and_cas(void **state)
{
	struct fx *f = *state;
	struct kv_write_opts w = KV_WRITE_OPTS_INIT;
	uint64_t v1, v2, vd, ver = 0;

	/* if_version 0: must not exist */
	w.if_version = 0;
	assert_int_equal(kv_put(f->db, "k", 1, "a", 1, &w, &v1), 0);
	assert_int_equal(kv_put(f->db, "k", 1, "b", 1, &w, &ver), KV_ECONFLICT);
	/* a wrong version is a conflict, the right one passes */
	w.if_version = v1 + 100;
	assert_int_equal(kv_put(f->db, "k", 1, "b", 1, &w, &ver), KV_ECONFLICT);
	w.if_version = v1;
	assert_int_equal(kv_put(f->db, "k", 1, "b", 1, &w, &v2), 0);
	assert_true(v2 > v1);
	check_value(f->db, "k", "b");
	/* conditional delete */
	w.if_version = v1;
	assert_int_equal(kv_delete(f->db, "k", 1, &w, &ver), KV_ECONFLICT);
	w.if_version = v2;
	assert_int_equal(kv_delete(f->db, "k", 1, &w, &vd), 0);
	assert_true(vd > v2);
	check_missing(f->db, "k");
	/* deleting again, or a key never written: not found, nothing written */
	assert_int_equal(kv_delete(f->db, "k", 1, NULL, &ver), KV_ENOTFOUND);
	assert_int_equal(kv_delete(f->db, "never", 5, NULL, &ver), KV_ENOTFOUND);
	/* after a delete the key "does not exist" for if_version 0 */
	w.if_version = 0;
	assert_int_equal(kv_put(f->db, "k", 1, "c", 1, &w, &ver), 0);
	assert_true(ver == vd + 1);
	reopen(f);
	check_value(f->db, "k", "c");
}

/* A key that was deleted or has expired does not exist for if_version: its
 * last version (the tombstone's or the expired value's) is a conflict, in
 * kv_put and in a batch, and nothing is written. */
static void test_cas_on_deleted_and_expired(void **state)
{
	struct fx *f = *state;
	struct kv_write_opts w = KV_WRITE_OPTS_INIT;
	uint64_t v1, vd, ve, ver = 0;
	struct kv_op op = {
	        .type = KV_OP_PUT, .key = "d", .key_len = 1, .value = "z", .value_len = 1};

	assert_int_equal(kv_put(f->db, "d", 1, "a", 1, NULL, &v1), 0);
	assert_int_equal(kv_delete(f->db, "d", 1, NULL, &vd), 0);
	w.if_version = vd;
	assert_int_equal(kv_put(f->db, "d", 1, "b", 1, &w, &ver), KV_ECONFLICT);
	w.if_version = v1;
	assert_int_equal(kv_put(f->db, "d", 1, "b", 1, &w, &ver), KV_ECONFLICT);
	op.if_version = vd;
	assert_int_equal(kv_batch(f->db, &op, 1), KV_ECONFLICT);
	assert_int_equal(op.status, KV_ECONFLICT);
	check_missing(f->db, "d");

	w.if_version = KV_ANY_VERSION;
	w.ttl_ms = 1000;
	assert_int_equal(kv_put(f->db, "e", 1, "a", 1, &w, &ve), 0);
	f->clk.ms += 1000;
	check_missing(f->db, "e");
	w.ttl_ms = 0;
	w.if_version = ve;
	assert_int_equal(kv_put(f->db, "e", 1, "b", 1, &w, &ver), KV_ECONFLICT);
	op.key = "e";
	op.if_version = ve;
	op.status = 0;
	assert_int_equal(kv_batch(f->db, &op, 1), KV_ECONFLICT);
	assert_int_equal(op.status, KV_ECONFLICT);
	check_missing(f->db, "e");
	/* if_version 0 is the condition that passes for both */
	w.if_version = 0;
	assert_int_equal(kv_put(f->db, "d", 1, "c", 1, &w, &ver), 0);
	assert_int_equal(kv_put(f->db, "e", 1, "c", 1, &w, &ver), 0);
	check_value(f->db, "d", "c");
	check_value(f->db, "e", "c");
}

static void test_versions_and_as_of(void **state)
{
	struct fx *f = *state;
	uint64_t v1 = put(f->db, "k", "one");
	uint64_t other = put(f->db, "x", "other");
	uint64_t v2 = put(f->db, "k", "two");
	uint64_t vd, v3;
	struct kv_read_opts r = {0};
	struct kv_version *list;
	struct kv_value val;
	size_t n;
	bool cut;

	assert_int_equal(kv_delete(f->db, "k", 1, NULL, &vd), 0);
	v3 = put(f->db, "k", "three");

	for (int round = 0; round < 2; round++) {
		/* exact versions */
		r.version = v1;
		assert_int_equal(kv_get(f->db, "k", 1, &r, &val), 0);
		assert_memory_equal(val.data, "one", 3);
		assert_int_equal(val.version, v1);
		kv_value_release(&val);
		r.version = vd; /* a tombstone */
		assert_int_equal(kv_get(f->db, "k", 1, &r, &val), KV_ENOTFOUND);
		r.version = other; /* a version of another key */
		assert_int_equal(kv_get(f->db, "k", 1, &r, &val), KV_ENOTFOUND);
		r.version = v3;
		assert_int_equal(kv_get(f->db, "k", 1, &r, &val), 0);
		kv_value_release(&val);
		/* as-of reads across the delete */
		r.version = 0;
		r.as_of = other;
		assert_int_equal(kv_get(f->db, "k", 1, &r, &val), 0);
		assert_memory_equal(val.data, "one", 3);
		kv_value_release(&val);
		r.as_of = v2;
		assert_int_equal(kv_get(f->db, "k", 1, &r, &val), 0);
		assert_memory_equal(val.data, "two", 3);
		kv_value_release(&val);
		r.as_of = vd;
		assert_int_equal(kv_get(f->db, "k", 1, &r, &val), KV_ENOTFOUND);
		r.as_of = v1 - 1 > 0 ? v1 - 1 : 0;
		if (r.as_of > 0)
			assert_int_equal(kv_get(f->db, "k", 1, &r, &val), KV_ENOTFOUND);
		r.as_of = v3 + 10;
		assert_int_equal(kv_get(f->db, "k", 1, &r, &val), 0);
		assert_memory_equal(val.data, "three", 5);
		kv_value_release(&val);
		r.as_of = 0;

		/* the chain, newest first */
		assert_int_equal(kv_versions(f->db, "k", 1, 0, 0, true, &list, &n, &cut), 0);
		assert_int_equal(n, 4);
		assert_false(cut);
		assert_int_equal(list[0].version, v3);
		assert_memory_equal(list[0].data, "three", 5);
		assert_int_equal(list[1].version, vd);
		assert_true(list[1].tombstone);
		assert_null(list[1].data);
		assert_int_equal(list[2].version, v2);
		assert_int_equal(list[3].version, v1);
		assert_memory_equal(list[3].data, "one", 3);
		kv_versions_free(list, n);
		/* limit and before */
		assert_int_equal(kv_versions(f->db, "k", 1, 2, vd, false, &list, &n, &cut), 0);
		assert_int_equal(n, 2);
		assert_int_equal(list[0].version, v2);
		assert_int_equal(list[1].version, v1);
		assert_null(list[0].data);
		kv_versions_free(list, n);
		assert_int_equal(kv_versions(f->db, "nope", 4, 0, 0, true, &list, &n, &cut), 0);
		assert_int_equal(n, 0);
		kv_versions_free(list, n);
		reopen(f);
	}
}

/* Versions of very different sizes, in segments small enough that each
 * large one seals the segment before it: an older version is read with the
 * newer one's size as a guess, too large (reaching past the end of its
 * segment) or too small, and must come back byte for byte. */
static void test_versions_of_many_sizes(void **state)
{
	static const size_t sizes[] = {1, 3000, 2, 1500, 0, 900, 3500, 7, 2048, 3};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	struct fx *f = *state;
	struct kv_version *list;
	uint64_t ver[N];
	uint8_t buf[4096];
	size_t n;
	bool cut;

	assert_int_equal(kv_close(f->db), 0);
	f->o.segment_size = 4096;
	f->o.history_versions = 100;
	assert_int_equal(kv_open(f->dir, &f->o, &f->db), 0);
	for (int round = 0; round < 2; round++) {
		if (round == 0) {
			for (size_t i = 0; i < N; i++) {
				memset(buf, (int)('a' + i), sizes[i]);
				assert_int_equal(kv_put(f->db, "k", 1, buf, sizes[i], NULL, &ver[i]), 0);
				put(f->db, "filler", "x"); /* other keys between versions */
			}
		}
		assert_int_equal(kv_versions(f->db, "k", 1, 0, 0, true, &list, &n, &cut), 0);
		assert_int_equal(n, N);
		for (size_t j = 0; j < N; j++) {
			size_t i = N - 1 - j;
			assert_int_equal(list[j].version, ver[i]);
			assert_int_equal(list[j].len, sizes[i]);
			memset(buf, (int)('a' + i), sizes[i]);
			if (sizes[i] > 0)
				assert_memory_equal(list[j].data, buf, sizes[i]);
		}
		kv_versions_free(list, n);
		reopen(f);
	}
}

static void test_ttl(void **state)
{
	struct fx *f = *state;
	struct kv_write_opts w = KV_WRITE_OPTS_INIT;
	struct kv_value val;
	struct kv_version *list;
	struct kv_entry e;
	kv_iter *it;
	uint64_t v1, v2;
	size_t n;
	int count = 0;

	v1 = put(f->db, "t", "old");
	w.ttl_ms = 1000;
	assert_int_equal(kv_put(f->db, "t", 1, "new", 3, &w, &v2), 0);
	assert_int_equal(kv_get(f->db, "t", 1, NULL, &val), 0);
	assert_int_equal(val.expiry_ms, f->clk.ms + 1000);
	kv_value_release(&val);
	f->clk.ms += 999;
	check_value(f->db, "t", "new");
	f->clk.ms += 1;
	/* expired: invisible to get, scan and versions */
	check_missing(f->db, "t");
	assert_int_equal(kv_iter_open(f->db, NULL, &it), 0);
	while (kv_iter_next(it, &e) == 0)
		count++;
	kv_iter_close(it);
	assert_int_equal(count, 0);
	assert_int_equal(kv_versions(f->db, "t", 1, 0, 0, false, &list, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(list[0].version, v1);
	kv_versions_free(list, n);
	/* an expired key does not exist for if_version 0 */
	w.ttl_ms = 0;
	w.if_version = 0;
	assert_int_equal(kv_put(f->db, "t", 1, "again", 5, &w, &v1), 0);
	check_value(f->db, "t", "again");
	reopen(f);
	check_value(f->db, "t", "again");
}

/* A TTL whose expiry would pass the clock's range is capped at
 * KV_EXPIRY_MAX, not wrapped into the past: the write stays visible, through
 * kv_put, kv_batch and a reopen (the keydir rebuilt from the log). */
static void test_ttl_near_max(void **state)
{
	struct fx *f = *state;
	struct kv_write_opts w = KV_WRITE_OPTS_INIT;
	const uint64_t ttls[] = {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - f->clk.ms,
	                         UINT64_MAX - f->clk.ms - 1, 18446744073709550000ull};
	struct kv_op op;
	struct kv_value val;
	char key[8];

	for (size_t i = 0; i < sizeof(ttls) / sizeof(ttls[0]); i++) {
		snprintf(key, sizeof(key), "k%zu", i);
		w.ttl_ms = ttls[i];
		assert_int_equal(kv_put(f->db, key, strlen(key), "v", 1, &w, NULL), 0);
		assert_int_equal(kv_get(f->db, key, strlen(key), NULL, &val), 0);
		assert_int_equal(val.expiry_ms, KV_EXPIRY_MAX);
		kv_value_release(&val);
	}
	/* the largest TTL that fits is kept exactly */
	w.ttl_ms = KV_EXPIRY_MAX - f->clk.ms - 1;
	assert_int_equal(kv_put(f->db, "exact", 5, "v", 1, &w, NULL), 0);
	assert_int_equal(kv_get(f->db, "exact", 5, NULL, &val), 0);
	assert_int_equal(val.expiry_ms, KV_EXPIRY_MAX - 1);
	kv_value_release(&val);
	memset(&op, 0, sizeof(op));
	op = (struct kv_op){.type = KV_OP_PUT, .key = "b", .key_len = 1, .value = "v",
	                    .value_len = 1, .if_version = KV_ANY_VERSION, .ttl_ms = UINT64_MAX};
	assert_int_equal(kv_batch(f->db, &op, 1), 0);
	f->clk.ms += 1000ull * 3600 * 24 * 365 * 1000; /* a thousand years on */
	reopen(f);
	check_value(f->db, "k0", "v");
	check_value(f->db, "k4", "v");
	check_value(f->db, "b", "v");
	assert_int_equal(kv_get(f->db, "b", 1, NULL, &val), 0);
	assert_int_equal(val.expiry_ms, KV_EXPIRY_MAX);
	kv_value_release(&val);
}

static int collect(kv_db *db, const struct kv_scan_opts *o, char out[][16], int max)
{
	kv_iter *it;
	struct kv_entry e;
	int n = 0, rv;

	assert_int_equal(kv_iter_open(db, o, &it), 0);
	while ((rv = kv_iter_next(it, &e)) == 0) {
		assert_true(n < max);
		assert_true(e.key_len < 16);
		memcpy(out[n], e.key, e.key_len);
		out[n][e.key_len] = '\0';
		if (!o || !o->keys_only) {
			assert_non_null(e.value);
			assert_int_equal(e.value_len, e.key_len + 1);
			assert_memory_equal(e.value, e.key, e.key_len);
		} else {
			assert_null(e.value);
		}
		n++;
	}
	assert_int_equal(rv, KV_EEND);
	kv_iter_close(it);
	return n;
}

static void put_self(kv_db *db, const char *k)
{
	char v[32];
	snprintf(v, sizeof(v), "%s!", k);
	put(db, k, v);
}

static void test_scan(void **state)
{
	struct fx *f = *state;
	const char *keys[] = {"a", "ab", "abc", "b", "ba", "c"};
	struct kv_scan_opts o;
	char out[16][16];
	int n;

	for (int round = 0; round < 2; round++) {
		if (round == 0)
			for (size_t i = 0; i < 6; i++)
				put_self(f->db, keys[6 - 1 - i]);
		memset(&o, 0, sizeof(o));
		n = collect(f->db, &o, out, 16);
		assert_int_equal(n, 6);
		for (int i = 0; i < 6; i++)
			assert_string_equal(out[i], keys[i]);
		o.reverse = true;
		n = collect(f->db, &o, out, 16);
		assert_int_equal(n, 6);
		for (int i = 0; i < 6; i++)
			assert_string_equal(out[i], keys[5 - i]);
		/* bounds: [ab, ba) */
		memset(&o, 0, sizeof(o));
		o.start = "ab";
		o.start_len = 2;
		o.end = "ba";
		o.end_len = 2;
		n = collect(f->db, &o, out, 16);
		assert_int_equal(n, 3);
		assert_string_equal(out[0], "ab");
		assert_string_equal(out[2], "b");
		o.reverse = true;
		n = collect(f->db, &o, out, 16);
		assert_int_equal(n, 3);
		assert_string_equal(out[0], "b");
		assert_string_equal(out[2], "ab");
		/* prefix, limit, keys only */
		memset(&o, 0, sizeof(o));
		o.prefix = "a";
		o.prefix_len = 1;
		n = collect(f->db, &o, out, 16);
		assert_int_equal(n, 3);
		o.reverse = true;
		o.limit = 2;
		o.keys_only = true;
		n = collect(f->db, &o, out, 16);
		assert_int_equal(n, 2);
		assert_string_equal(out[0], "abc");
		assert_string_equal(out[1], "ab");
		/* bounds at the ends of the key space */
		memset(&o, 0, sizeof(o));
		o.start = "\x00";
		o.start_len = 1;
		o.end = "\xff\xff";
		o.end_len = 2;
		assert_int_equal(collect(f->db, &o, out, 16), 6);
		o.reverse = true;
		assert_int_equal(collect(f->db, &o, out, 16), 6);
		o.start = "d";
		o.end = NULL;
		assert_int_equal(collect(f->db, &o, out, 16), 0);
		o.reverse = false;
		assert_int_equal(collect(f->db, &o, out, 16), 0);
		reopen(f);
	}
}

static void test_scan_ff_prefix(void **state)
{
	struct fx *f = *state;
	const uint8_t k1[] = {0xff, 0xff}, k2[] = {0xff, 0xff, 0x01}, k3[] = {0xfe, 0xff};
	const uint8_t p[] = {0xff, 0xff};
	struct kv_scan_opts o = {.prefix = p, .prefix_len = 2};
	kv_iter *it;
	struct kv_entry e;
	uint64_t ver;
	int n = 0;

	assert_int_equal(kv_put(f->db, k1, 2, "1", 1, NULL, &ver), 0);
	assert_int_equal(kv_put(f->db, k2, 3, "2", 1, NULL, &ver), 0);
	assert_int_equal(kv_put(f->db, k3, 2, "3", 1, NULL, &ver), 0);
	for (int rev = 0; rev < 2; rev++) {
		o.reverse = rev;
		n = 0;
		assert_int_equal(kv_iter_open(f->db, &o, &it), 0);
		while (kv_iter_next(it, &e) == 0) {
			assert_true(e.key_len >= 2 && memcmp(e.key, p, 2) == 0);
			n++;
		}
		kv_iter_close(it);
		assert_int_equal(n, 2);
	}
}

static void test_scan_snapshot_and_as_of(void **state)
{
	struct fx *f = *state;
	char key[16];
	kv_iter *it;
	struct kv_entry e;
	struct kv_scan_opts o = {0};
	uint64_t mid = 0;
	int n = 0;

	for (int i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "k%04d", i);
		put(f->db, key, "v1");
	}
	{
		struct kv_stats st;
		kv_stats(f->db, &st);
		mid = st.last_version;
	}
	assert_int_equal(kv_iter_open(f->db, NULL, &it), 0);
	/* writes after the iterator opened are not visible to it */
	while (kv_iter_next(it, &e) == 0) {
		assert_int_equal(e.value_len, 2);
		assert_memory_equal(e.value, "v1", 2);
		if (n == 10) {
			for (int i = 0; i < 500; i += 3) {
				snprintf(key, sizeof(key), "k%04d", i);
				put(f->db, key, "v2");
			}
			put(f->db, "k0100x", "new");
			snprintf(key, sizeof(key), "k%04d", 400);
			assert_int_equal(kv_delete(f->db, key, strlen(key), NULL, NULL), 0);
		}
		n++;
	}
	kv_iter_close(it);
	assert_int_equal(n, 500);
	/* as-of: the state before the overwrites */
	o.as_of = mid;
	n = 0;
	assert_int_equal(kv_iter_open(f->db, &o, &it), 0);
	while (kv_iter_next(it, &e) == 0) {
		assert_memory_equal(e.value, "v1", 2);
		n++;
	}
	kv_iter_close(it);
	assert_int_equal(n, 500);
	/* now: the overwrites, the new key, without the deleted one */
	n = 0;
	assert_int_equal(kv_iter_open(f->db, NULL, &it), 0);
	while (kv_iter_next(it, &e) == 0)
		n++;
	kv_iter_close(it);
	assert_int_equal(n, 500);
}

static void test_batch(void **state)
{
	struct fx *f = *state;
	struct kv_op ops[4];
	struct kv_value val;
	uint64_t v0 = put(f->db, "exists", "x");

	memset(ops, 0, sizeof(ops));
	ops[0] = (struct kv_op){.type = KV_OP_PUT, .key = "b1", .key_len = 2, .value = "1",
	                        .value_len = 1, .if_version = KV_ANY_VERSION};
	ops[1] = (struct kv_op){.type = KV_OP_PUT, .key = "b2", .key_len = 2, .value = "2",
	                        .value_len = 1, .if_version = KV_ANY_VERSION};
	ops[2] = (struct kv_op){.type = KV_OP_PUT, .key = "exists", .key_len = 6, .value = "y",
	                        .value_len = 1, .if_version = v0 + 1000};
	/* a failed condition: nothing applied */
	assert_int_equal(kv_batch(f->db, ops, 3), KV_ECONFLICT);
	assert_int_equal(ops[2].status, KV_ECONFLICT);
	assert_int_equal(ops[0].version, 0);
	check_missing(f->db, "b1");
	check_missing(f->db, "b2");
	check_value(f->db, "exists", "x");
	/* the same batch with the right version applies all, in order */
	ops[2].if_version = v0;
	ops[3] = (struct kv_op){.type = KV_OP_DELETE, .key = "b1", .key_len = 2,
	                        .if_version = KV_ANY_VERSION};
	assert_int_equal(kv_batch(f->db, ops, 4), 0);
	assert_true(ops[0].version < ops[1].version && ops[1].version < ops[2].version &&
	            ops[2].version < ops[3].version);
	check_missing(f->db, "b1");
	check_value(f->db, "b2", "2");
	check_value(f->db, "exists", "y");
	/* an op sees the op before it: put then CAS on the new version */
	ops[0] = (struct kv_op){.type = KV_OP_PUT, .key = "c", .key_len = 1, .value = "1",
	                        .value_len = 1, .if_version = 0};
	ops[1] = (struct kv_op){.type = KV_OP_PUT, .key = "c", .key_len = 1, .value = "2",
	                        .value_len = 1, .if_version = KV_ANY_VERSION};
	assert_int_equal(kv_batch(f->db, ops, 2), 0);
	reopen(f);
	check_value(f->db, "c", "2");
	check_value(f->db, "b2", "2");
	assert_int_equal(kv_get(f->db, "b1", 2, NULL, &val), KV_ENOTFOUND);
	/* an empty batch is an error */
	assert_int_equal(kv_batch(f->db, ops, 0), -EINVAL);
}

static void test_stats(void **state)
{
	struct fx *f = *state;
	struct kv_stats st;

	put(f->db, "a", "1");
	put(f->db, "b", "2");
	put(f->db, "a", "3");
	assert_int_equal(kv_delete(f->db, "b", 1, NULL, NULL), 0);
	assert_int_equal(kv_stats(f->db, &st), 0);
	assert_int_equal(st.keys, 1);
	assert_int_equal(st.tombstones, 1);
	assert_int_equal(st.last_version, 4);
	assert_true(st.dead_bytes > 0 && st.live_bytes > 0);
	assert_int_equal(st.disk_bytes, st.dead_bytes + st.live_bytes);
	assert_true(st.keydir_bytes > 0);
	assert_true(st.segments >= 1);
	reopen(f);
	assert_int_equal(kv_stats(f->db, &st), 0);
	assert_int_equal(st.keys, 1);
	assert_int_equal(st.tombstones, 1);
	assert_int_equal(st.last_version, 4);
}

static void test_max_keys(void **state)
{
	struct fx *f = *state;
	uint64_t ver;

	assert_int_equal(kv_close(f->db), 0);
	f->o.max_keys = 2;
	assert_int_equal(kv_open(f->dir, &f->o, &f->db), 0);
	put(f->db, "a", "1");
	put(f->db, "b", "1");
	assert_int_equal(kv_put(f->db, "c", 1, "1", 1, NULL, &ver), KV_EMAXKEYS);
	put(f->db, "a", "2"); /* overwriting is fine */
	assert_int_equal(kv_delete(f->db, "a", 1, NULL, NULL), 0);
	put(f->db, "c", "1");
}

static void test_lock(void **state)
{
	struct fx *f = *state;
	kv_db *second;
	char *lock = tu_path(f->dir, "LOCK");

	assert_int_equal(kv_open(f->dir, &f->o, &second), KV_ELOCKED);
	assert_int_equal(kv_close(f->db), 0);
#ifndef TU_DEVICE
	/* a LOCK file left by a crashed process does not block */
	assert_true(tu_file_size(lock) >= 0);
#endif
	assert_int_equal(kv_open(f->dir, &f->o, &f->db), 0);
	free(lock);
}

static void test_bad_options(void **state)
{
	struct fx *f = *state;
	struct kv_options o;
	kv_db *db;
	char *d = tu_mkdtemp("opts");

	(void)f;
	kv_options_init(&o);
	o.history_versions = 0;
	assert_int_equal(kv_open(d, &o, &db), -EINVAL);
	kv_options_init(&o);
	o.max_key_size = KV_KEY_SIZE_MAX + 1;
	assert_int_equal(kv_open(d, &o, &db), -EINVAL);
	kv_options_init(&o);
	o.create_if_missing = false;
	{
		char *missing = tu_path(d, "missing");
		assert_int_equal(kv_open(missing, &o, &db), -ENOENT);
		free(missing);
	}
	tu_rmtree(d);
	free(d);
}

/* ---- the non-blocking form ---------------------------------------------- */

struct done_rec {
	int calls;
	int status;
};

static void on_done(struct kv_req *req, int status)
{
	struct done_rec *d = req->arg;
	d->calls++;
	d->status = status;
}

static void test_submit_process(void **state)
{
	struct fx *f = *state;
	struct kv_op ops[64];
	struct kv_req reqs[64];
	struct done_rec done[64];
	char keys[64][8];
	struct kv_stats st;
	int i, spins = 0;

	assert_int_equal(kv_close(f->db), 0);
	f->o.external_loop = true;
	assert_int_equal(kv_open(f->dir, &f->o, &f->db), 0);
	memset(done, 0, sizeof(done));
	for (i = 0; i < 64; i++) {
		snprintf(keys[i], sizeof(keys[i]), "q%02d", i);
		ops[i] = (struct kv_op){.type = KV_OP_PUT, .key = keys[i], .key_len = 3,
		                        .value = keys[i], .value_len = 3,
		                        .if_version = KV_ANY_VERSION};
		reqs[i] = (struct kv_req){.ops = &ops[i], .n = 1, .done = on_done, .arg = &done[i]};
		assert_int_equal(kv_submit(f->db, &reqs[i]), 0);
	}
	/* nothing completes until the loop runs */
	for (i = 0; i < 64; i++)
		assert_int_equal(done[i].calls, 0);
	assert_true(kv_event_fd(f->db) >= 0);
	for (;;) {
		int all = 1;
		assert_int_equal(kv_process(f->db), 0);
		for (i = 0; i < 64; i++)
			all &= done[i].calls == 1;
		if (all)
			break;
		/* wait for the ring's completion on the event fd */
		{
			struct timeval tv = {5, 0};
			fd_set rf;
			FD_ZERO(&rf);
			FD_SET(kv_event_fd(f->db), &rf);
			assert_true(select(kv_event_fd(f->db) + 1, &rf, NULL, NULL, &tv) >= 0);
		}
		assert_true(++spins < 1000);
	}
	for (i = 0; i < 64; i++) {
		assert_int_equal(done[i].status, 0);
		assert_true(ops[i].version > 0);
	}
	check_value(f->db, "q00", "q00");
	check_value(f->db, "q63", "q63");
	assert_int_equal(kv_stats(f->db, &st), 0);
	/* 64 requests queued together went out in far fewer batches */
	assert_true(st.batches < 64);
	assert_int_equal(st.batched_writes, 64);
	/* ... and the batch-size histogram shows one of more than one write */
	{
		uint64_t nb = 0, multi = 0;
		for (i = 0; i < KV_BATCH_BUCKETS; i++) {
			nb += st.batch_hist[i];
			if (i > 0)
				multi += st.batch_hist[i];
		}
		assert_int_equal(nb, st.batches);
		assert_true(multi > 0);
	}
}

/* The fdatasync histogram counts every sync: a batch's under sync=always,
 * and kv_sync's under sync=none; its buckets add up to syncs. */
static uint64_t sync_hist_total(const struct kv_stats *st)
{
	uint64_t n = 0;

	for (int i = 0; i < KV_SYNC_BUCKETS; i++)
		n += st->sync_hist[i];
	return n;
}

static void test_sync_histogram(void **state)
{
	struct fx *f = *state;
	struct kv_stats st;

	/* sync=always (the fixture's): one sync per batch, timed */
	for (int i = 0; i < 20; i++) {
		char k[16];
		snprintf(k, sizeof(k), "s%02d", i);
		assert_int_equal(kv_put(f->db, k, strlen(k), "v", 1, NULL, NULL), 0);
	}
	assert_int_equal(kv_stats(f->db, &st), 0);
	assert_int_equal(st.syncs, st.batches);
	assert_int_equal(sync_hist_total(&st), st.syncs);
	assert_true(st.syncs >= 1);
	assert_true(st.sync_us_sum > 0);
	/* sync=none: nothing synced until kv_sync, which is one timed sync */
	assert_int_equal(kv_close(f->db), 0);
	f->o.sync = KV_SYNC_NONE;
	assert_int_equal(kv_open(f->dir, &f->o, &f->db), 0);
	assert_int_equal(kv_put(f->db, "n", 1, "v", 1, NULL, NULL), 0);
	assert_int_equal(kv_stats(f->db, &st), 0);
	assert_int_equal(st.syncs, 0);
	assert_int_equal(sync_hist_total(&st), 0);
	assert_int_equal(kv_sync(f->db), 0);
	assert_int_equal(kv_stats(f->db, &st), 0);
	assert_int_equal(st.syncs, 1);
	assert_int_equal(sync_hist_total(&st), 1);
}

/* ---- group commit across threads ---------------------------------------- */

struct writer_arg {
	kv_db *db;
	int id;
	int n;
};

static void *writer_main(void *p)
{
	struct writer_arg *a = p;
	char k[32], v[32];

	for (int i = 0; i < a->n; i++) {
		uint64_t ver;
		snprintf(k, sizeof(k), "w%d-%d", a->id, i);
		snprintf(v, sizeof(v), "v%d", i);
		if (kv_put(a->db, k, strlen(k), v, strlen(v), NULL, &ver) != 0)
			return (void *)1;
	}
	return NULL;
}

static void test_group_commit(void **state)
{
	struct fx *f = *state;
	enum { T = 8, N = 200 };
	pthread_t th[T];
	struct writer_arg args[T];
	struct kv_stats st;

	for (int i = 0; i < T; i++) {
		args[i] = (struct writer_arg){f->db, i, N};
		assert_int_equal(pthread_create(&th[i], NULL, writer_main, &args[i]), 0);
	}
	for (int i = 0; i < T; i++) {
		void *r;
		pthread_join(th[i], &r);
		assert_null(r);
	}
	assert_int_equal(kv_stats(f->db, &st), 0);
	assert_int_equal(st.keys, T * N);
	assert_int_equal(st.batched_writes, T * N);
	/* sync=always: every batch synced once, and writers shared batches */
	assert_int_equal(st.syncs, st.batches);
	assert_true(st.batches < T * N);
	reopen(f);
	check_value(f->db, "w7-199", "v199");
	check_value(f->db, "w0-0", "v0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_put_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_histogram, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_value_and_binary_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_size_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete_and_cas, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cas_on_deleted_and_expired, setup, teardown),
		cmocka_unit_test_setup_teardown(test_versions_and_as_of, setup, teardown),
		cmocka_unit_test_setup_teardown(test_versions_of_many_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ttl, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ttl_near_max, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_ff_prefix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_snapshot_and_as_of, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_submit_process, setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
