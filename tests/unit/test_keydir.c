/* test_keydir: matches a sorted-array model on binary, prefix and 64 KiB keys; reuses memory */
/*
 * Edge cases (empty, one key, keys that are prefixes of each other, NUL and
 * 0xFF bytes, 64 KiB keys, a 6000-level chain), replace and remove, walks
 * from every kind of start point, TTL and field maxima, a randomized model
 * test, memory given back and reused, and -ENOMEM leaving the directory as
 * it was. Seeds are fixed: every run does the same operations, unless
 * $KVTEST_SEED (printed) is set, which is xored into each of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keydir.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define KD_TEST_OOM 0 /* ASan owns malloc; the OOM test cannot replace it */
#else
#define KD_TEST_OOM 1
/* Allocation failure injection: the test binary's malloc family fails the
 * fail_countdown-th call from when it is armed (0: never). */
extern void *__libc_malloc(size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_calloc(size_t n, size_t m);
static int fail_countdown;

static bool fail_now(void)
{
	if (fail_countdown > 0 && --fail_countdown == 0) {
		errno = ENOMEM;
		return true;
	}
	return false;
}

void *malloc(size_t n)
{
	return fail_now() ? NULL : __libc_malloc(n);
}

void *realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __libc_realloc(p, n);
}

void *calloc(size_t n, size_t m)
{
	return fail_now() ? NULL : __libc_calloc(n, m);
}
#endif

/* ---- helpers ----------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rng_base; /* $KVTEST_SEED, xored into every seed below; 0 by default */

static void rng_seed(uint64_t s)
{
	rng_state = s ^ rng_base;
}

static uint64_t rng(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rnd(uint32_t n)
{
	return (uint32_t)(rng() % n);
}

static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	size_t m = alen < blen ? alen : blen;
	int c = m ? memcmp(a, b, m) : 0;
	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen;
}

static struct kd_entry entry(uint64_t v)
{
	struct kd_entry e = {
	        .version = v,
	        .seg = (uint32_t)(v * 7 + 1),
	        .off = (uint32_t)(v * 13 + 5),
	        .size = (uint32_t)(v % (1u << 28)),
	        .flags = 0,
	        .expiry_ms = 0,
	};
	return e;
}

static struct kd_entry random_entry(void)
{
	struct kd_entry e;
	e.version = rng();
	e.seg = (uint32_t)rng();
	e.off = (uint32_t)rng();
	e.size = (uint32_t)(rng() & ((1u << 28) - 1));
	e.flags = rnd(4);
	e.expiry_ms = (e.flags & KD_F_TTL) ? rng() : 0;
	return e;
}

static void assert_entry_equal(const struct kd_entry *a, const struct kd_entry *b)
{
	assert_int_equal(a->version, b->version);
	assert_int_equal(a->seg, b->seg);
	assert_int_equal(a->off, b->off);
	assert_int_equal(a->size, b->size);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->expiry_ms, b->expiry_ms);
}

static void put_ok(struct keydir *kd, const void *k, size_t len, const struct kd_entry *e,
                   bool expect_replaced)
{
	bool replaced = !expect_replaced;
	assert_int_equal(keydir_put(kd, k, len, e, NULL, &replaced), 0);
	assert_true(replaced == expect_replaced);
}

static void get_ok(struct keydir *kd, const void *k, size_t len, const struct kd_entry *want)
{
	struct kd_entry got;
	assert_int_equal(keydir_get(kd, k, len, &got), 0);
	assert_entry_equal(&got, want);
}

/* A walk's visits, copied. */
struct visit {
	uint8_t *key;
	size_t len;
	struct kd_entry e;
};

struct visits {
	struct visit *v;
	size_t n, cap;
	size_t stop_after; /* 0: never stop */
	int stop_rv;
};

static int collect(void *arg, const uint8_t *key, size_t len, const struct kd_entry *e)
{
	struct visits *vs = arg;
	if (vs->n == vs->cap) {
		vs->cap = vs->cap ? vs->cap * 2 : 64;
		vs->v = realloc(vs->v, vs->cap * sizeof *vs->v);
		assert_non_null(vs->v);
	}
	struct visit *v = &vs->v[vs->n++];
	v->key = malloc(len ? len : 1);
	assert_non_null(v->key);
	memcpy(v->key, key, len);
	v->len = len;
	v->e = *e;
	if (vs->stop_after && vs->n == vs->stop_after)
		return vs->stop_rv;
	return 0;
}

static void visits_clear(struct visits *vs)
{
	for (size_t i = 0; i < vs->n; i++)
		free(vs->v[i].key);
	vs->n = 0;
}

static void visits_free(struct visits *vs)
{
	visits_clear(vs);
	free(vs->v);
	memset(vs, 0, sizeof *vs);
}

/* ---- the sorted-array model -------------------------------------------- */

struct rkey {
	size_t len;
	struct kd_entry e;
	uint8_t k[];
};

struct model {
	struct rkey **a;
	size_t n, cap;
};

/* First index whose key is >= k. */
static size_t model_lower(const struct model *m, const uint8_t *k, size_t len)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (key_cmp(m->a[mid]->k, m->a[mid]->len, k, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct rkey *model_find(const struct model *m, const uint8_t *k, size_t len)
{
	size_t i = model_lower(m, k, len);
	if (i < m->n && key_cmp(m->a[i]->k, m->a[i]->len, k, len) == 0)
		return m->a[i];
	return NULL;
}

/* Returns true when the key existed (old entry in *old). */
static bool model_put(struct model *m, const uint8_t *k, size_t len, const struct kd_entry *e,
                      struct kd_entry *old)
{
	size_t i = model_lower(m, k, len);
	if (i < m->n && key_cmp(m->a[i]->k, m->a[i]->len, k, len) == 0) {
		*old = m->a[i]->e;
		m->a[i]->e = *e;
		return true;
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 256;
		m->a = realloc(m->a, m->cap * sizeof *m->a);
		assert_non_null(m->a);
	}
	struct rkey *r = malloc(sizeof *r + len);
	assert_non_null(r);
	r->len = len;
	r->e = *e;
	memcpy(r->k, k, len);
	memmove(m->a + i + 1, m->a + i, (m->n - i) * sizeof *m->a);
	m->a[i] = r;
	m->n++;
	return false;
}

static bool model_remove(struct model *m, const uint8_t *k, size_t len, struct kd_entry *old)
{
	size_t i = model_lower(m, k, len);
	if (i == m->n || key_cmp(m->a[i]->k, m->a[i]->len, k, len) != 0)
		return false;
	*old = m->a[i]->e;
	free(m->a[i]);
	memmove(m->a + i, m->a + i + 1, (m->n - i - 1) * sizeof *m->a);
	m->n--;
	return true;
}

static void model_free(struct model *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->a[i]);
	free(m->a);
	memset(m, 0, sizeof *m);
}

/* Walks kd from `from` and checks the visits against the model, stopping
 * after `limit` visits (0: all). */
static void check_walk(struct keydir *kd, const struct model *m, const uint8_t *from, size_t flen,
                       bool incl, bool rev, size_t limit)
{
	struct visits vs = {.stop_after = limit, .stop_rv = 42};
	int rv = keydir_walk(kd, from, flen, incl, rev, collect, &vs);

	/* The expected range in the model: [first, end) forward, or going
	 * down from first - 1 in reverse. */
	size_t i;
	if (from == NULL) {
		i = rev ? m->n : 0;
	} else {
		i = model_lower(m, from, flen);
		bool eq = i < m->n && key_cmp(m->a[i]->k, m->a[i]->len, from, flen) == 0;
		if (!rev && eq && !incl)
			i++;
		if (rev && eq && incl)
			i++;
	}
	size_t avail = rev ? i : m->n - i;
	size_t want = (limit && limit < avail) ? limit : avail;
	assert_int_equal(vs.n, want);
	assert_int_equal(rv, (limit && limit <= avail) ? 42 : 0);
	for (size_t j = 0; j < vs.n; j++) {
		const struct rkey *r = rev ? m->a[i - 1 - j] : m->a[i + j];
		assert_int_equal(vs.v[j].len, r->len);
		assert_memory_equal(vs.v[j].key, r->k, r->len);
		assert_entry_equal(&vs.v[j].e, &r->e);
	}
	visits_free(&vs);
}

static void check_full(struct keydir *kd, const struct model *m)
{
	assert_int_equal(keydir_count(kd), m->n);
	check_walk(kd, m, NULL, 0, true, false, 0);
	check_walk(kd, m, NULL, 0, true, true, 0);
}

/* From-keys around key k: k itself, its prefixes, its extensions with 0x00
 * and 0xFF, and its neighbours with the last byte +-1. */
static void check_walks_around(struct keydir *kd, const struct model *m, const uint8_t *k,
                               size_t len, size_t limit)
{
	uint8_t buf[80];
	if (len + 1 > sizeof buf)
		len = sizeof buf - 1;
	for (int rev = 0; rev < 2; rev++) {
		for (int incl = 0; incl < 2; incl++) {
			check_walk(kd, m, k, len, incl, rev, limit);
			check_walk(kd, m, k, len - 1, incl, rev, limit);
			memcpy(buf, k, len);
			buf[len] = 0x00;
			check_walk(kd, m, buf, len + 1, incl, rev, limit);
			buf[len] = 0xff;
			check_walk(kd, m, buf, len + 1, incl, rev, limit);
			if (len > 0) {
				buf[len - 1] = (uint8_t)(k[len - 1] + 1);
				check_walk(kd, m, buf, len, incl, rev, limit);
				buf[len - 1] = (uint8_t)(k[len - 1] - 1);
				check_walk(kd, m, buf, len, incl, rev, limit);
			}
		}
	}
}

/* ---- edge cases -------------------------------------------------------- */

static void test_empty(void **state)
{
	(void)state;
	struct keydir *kd;
	struct kd_entry e;
	struct visits vs = {0};

	assert_int_equal(keydir_new(&kd), 0);
	assert_int_equal(keydir_count(kd), 0);
	assert_true(keydir_memory(kd) > 0);
	assert_true(keydir_memory(kd) < 4096);
	assert_int_equal(keydir_get(kd, "a", 1, &e), -ENOENT);
	assert_int_equal(keydir_get(kd, "", 0, &e), -ENOENT);
	assert_int_equal(keydir_remove(kd, "a", 1, &e), -ENOENT);
	for (int rev = 0; rev < 2; rev++) {
		for (int incl = 0; incl < 2; incl++) {
			assert_int_equal(keydir_walk(kd, NULL, 0, incl, rev, collect, &vs), 0);
			assert_int_equal(keydir_walk(kd, "a", 1, incl, rev, collect, &vs), 0);
			assert_int_equal(keydir_walk(kd, "", 0, incl, rev, collect, &vs), 0);
		}
	}
	assert_int_equal(vs.n, 0);
	/* Invalid keys. */
	e = entry(1);
	assert_int_equal(keydir_put(kd, "", 0, &e, NULL, NULL), -EINVAL);
	static uint8_t big[KD_KEY_MAX + 1];
	assert_int_equal(keydir_put(kd, big, sizeof big, &e, NULL, NULL), -EINVAL);
	assert_int_equal(keydir_count(kd), 0);
	keydir_free(kd);
	keydir_free(NULL);
	visits_free(&vs);
}

static void test_single_key(void **state)
{
	(void)state;
	struct keydir *kd;
	struct model m = {0};
	struct kd_entry e = entry(7), old;

	assert_int_equal(keydir_new(&kd), 0);
	size_t empty = keydir_memory(kd);
	put_ok(kd, "key", 3, &e, false);
	model_put(&m, (const uint8_t *)"key", 3, &e, &old);
	assert_int_equal(keydir_count(kd), 1);
	get_ok(kd, "key", 3, &e);
	assert_int_equal(keydir_get(kd, "ke", 2, &old), -ENOENT);
	assert_int_equal(keydir_get(kd, "keyy", 4, &old), -ENOENT);
	assert_int_equal(keydir_get(kd, "kez", 3, &old), -ENOENT);
	/* A keydir with one key costs a few KiB, not MiBs. */
	assert_true(keydir_memory(kd) < empty + 4096);

	check_full(kd, &m);
	check_walks_around(kd, &m, (const uint8_t *)"key", 3, 0);
	check_walks_around(kd, &m, (const uint8_t *)"a", 1, 0);
	check_walks_around(kd, &m, (const uint8_t *)"z", 1, 0);
	check_walk(kd, &m, (const uint8_t *)"", 0, true, false, 0);
	check_walk(kd, &m, (const uint8_t *)"", 0, true, true, 0);

	assert_int_equal(keydir_remove(kd, "key", 3, &old), 0);
	assert_entry_equal(&old, &e);
	assert_int_equal(keydir_count(kd), 0);
	assert_int_equal(keydir_get(kd, "key", 3, &old), -ENOENT);
	assert_int_equal(keydir_memory(kd), empty);
	model_free(&m);
	keydir_free(kd);
}

/* Inserts keys (given as strings with explicit lengths) in the given order,
 * checks every get, every walk around every key, then removes them in
 * `rm_order` checking again after each removal. */
struct kv {
	const char *k;
	size_t len;
};

static void check_set(const struct kv *keys, size_t n, const size_t *rm_order)
{
	struct keydir *kd;
	struct model m = {0};
	struct kd_entry old;

	assert_int_equal(keydir_new(&kd), 0);
	for (size_t i = 0; i < n; i++) {
		struct kd_entry e = entry(i + 1);
		put_ok(kd, keys[i].k, keys[i].len, &e, false);
		model_put(&m, (const uint8_t *)keys[i].k, keys[i].len, &e, &old);
		check_full(kd, &m);
	}
	for (size_t i = 0; i < n; i++)
		get_ok(kd, keys[i].k, keys[i].len,
		       &model_find(&m, (const uint8_t *)keys[i].k, keys[i].len)->e);
	for (size_t i = 0; i < n; i++) {
		check_walks_around(kd, &m, (const uint8_t *)keys[i].k, keys[i].len, 0);
		check_walks_around(kd, &m, (const uint8_t *)keys[i].k, keys[i].len, 1);
		check_walks_around(kd, &m, (const uint8_t *)keys[i].k, keys[i].len, 2);
	}
	for (size_t j = 0; j < n; j++) {
		const struct kv *r = &keys[rm_order[j]];
		struct kd_entry want, got;
		assert_true(model_remove(&m, (const uint8_t *)r->k, r->len, &want));
		assert_int_equal(keydir_remove(kd, r->k, r->len, &got), 0);
		assert_entry_equal(&got, &want);
		assert_int_equal(keydir_remove(kd, r->k, r->len, &got), -ENOENT);
		check_full(kd, &m);
		for (size_t i = 0; i < n; i++) {
			struct rkey *mk = model_find(&m, (const uint8_t *)keys[i].k, keys[i].len);
			if (mk)
				get_ok(kd, keys[i].k, keys[i].len, &mk->e);
			else
				assert_int_equal(keydir_get(kd, keys[i].k, keys[i].len, &got),
				                 -ENOENT);
			check_walks_around(kd, &m, (const uint8_t *)keys[i].k, keys[i].len, 0);
		}
	}
	model_free(&m);
	keydir_free(kd);
}

static void test_prefix_keys(void **state)
{
	(void)state;
	static const struct kv keys[] = {
	        {"abc", 3},  {"a", 1},        {"ab", 2},     {"\0", 1},   {"\0\0", 2},
	        {"a\0", 2},  {"abd", 3},      {"abcd", 4},   {"b", 1},    {"\0\0\0", 3},
	        {"\xff", 1}, {"\xff\xff", 2}, {"\xff\0", 2}, {"ab\0", 3}, {"abc\xff", 4},
	};
	size_t n = sizeof keys / sizeof keys[0];
	size_t fwd[sizeof keys / sizeof keys[0]], bwd[sizeof keys / sizeof keys[0]],
	        mixed[sizeof keys / sizeof keys[0]];
	for (size_t i = 0; i < n; i++) {
		fwd[i] = i;
		bwd[i] = n - 1 - i;
		mixed[i] = (i * 7) % n; /* 7 is prime to 15 */
	}
	check_set(keys, n, fwd);
	check_set(keys, n, bwd);
	check_set(keys, n, mixed);
}

static void test_order(void **state)
{
	(void)state;
	struct keydir *kd;
	struct visits vs = {0};
	struct kd_entry e = entry(1);
	static const struct kv sorted[] = {
	        {"\0", 1},  {"\0\0", 2},  {"\0\xff", 2}, {"a", 1},
	        {"a\0", 2}, {"a\0\0", 3}, {"ab", 2},     {"ab\xff", 3},
	        {"b", 1},   {"\xff", 1},  {"\xff\0", 2}, {"\xff\xff", 2},
	};
	size_t n = sizeof sorted / sizeof sorted[0];

	assert_int_equal(keydir_new(&kd), 0);
	for (size_t i = n; i-- > 0;)
		put_ok(kd, sorted[i].k, sorted[i].len, &e, false);
	assert_int_equal(keydir_walk(kd, NULL, 0, true, false, collect, &vs), 0);
	assert_int_equal(vs.n, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(vs.v[i].len, sorted[i].len);
		assert_memory_equal(vs.v[i].key, sorted[i].k, sorted[i].len);
	}
	visits_clear(&vs);
	assert_int_equal(keydir_walk(kd, NULL, 0, true, true, collect, &vs), 0);
	assert_int_equal(vs.n, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(vs.v[i].len, sorted[n - 1 - i].len);
		assert_memory_equal(vs.v[i].key, sorted[n - 1 - i].k, sorted[n - 1 - i].len);
	}
	visits_free(&vs);
	keydir_free(kd);
}

static void test_replace_and_absent(void **state)
{
	(void)state;
	struct keydir *kd;
	struct kd_entry e1 = entry(1), e2 = entry(2), old;
	bool replaced;

	assert_int_equal(keydir_new(&kd), 0);
	put_ok(kd, "ab", 2, &e1, false);
	put_ok(kd, "a", 1, &e1, false);
	put_ok(kd, "abcdef", 6, &e1, false);

	/* Replace returns the old entry; count does not change. */
	memset(&old, 0xaa, sizeof old);
	replaced = false;
	assert_int_equal(keydir_put(kd, "ab", 2, &e2, &old, &replaced), 0);
	assert_true(replaced);
	assert_entry_equal(&old, &e1);
	get_ok(kd, "ab", 2, &e2);
	assert_int_equal(keydir_count(kd), 3);
	/* A leaf (not an end leaf) and an end leaf, both. */
	assert_int_equal(keydir_put(kd, "abcdef", 6, &e2, &old, &replaced), 0);
	assert_true(replaced);
	assert_entry_equal(&old, &e1);
	assert_int_equal(keydir_put(kd, "a", 1, &e2, NULL, NULL), 0);
	get_ok(kd, "a", 1, &e2);

	/* Absent keys: prefixes, extensions, diverging, inside a prefix. */
	static const struct kv absent[] = {
	        {"abc", 3}, {"abcdefg", 7}, {"abcdeg", 6}, {"b", 1},
	        {"\0", 1},  {"abd", 3},     {"abcde", 5},  {"a\0", 2},
	};
	for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
		memset(&old, 0x55, sizeof old);
		struct kd_entry copy = old;
		assert_int_equal(keydir_remove(kd, absent[i].k, absent[i].len, &old), -ENOENT);
		assert_memory_equal(&old, &copy, sizeof old); /* untouched */
		assert_int_equal(keydir_get(kd, absent[i].k, absent[i].len, &old), -ENOENT);
	}
	assert_int_equal(keydir_remove(kd, "", 0, &old), -ENOENT);
	assert_int_equal(keydir_count(kd), 3);

	/* Remove without wanting the old entry. */
	assert_int_equal(keydir_remove(kd, "ab", 2, NULL), 0);
	assert_int_equal(keydir_get(kd, "ab", 2, &old), -ENOENT);
	get_ok(kd, "a", 1, &e2);
	get_ok(kd, "abcdef", 6, &e2);
	assert_int_equal(keydir_count(kd), 2);
	keydir_free(kd);
}

static void test_ttl_and_maxima(void **state)
{
	(void)state;
	struct keydir *kd;
	struct kd_entry old, got;
	struct kd_entry ttl = {.version = 5,
	                       .seg = 6,
	                       .off = 7,
	                       .size = 8,
	                       .flags = KD_F_TTL,
	                       .expiry_ms = 1700000000123ull};
	struct kd_entry max = {.version = UINT64_MAX,
	                       .seg = UINT32_MAX,
	                       .off = UINT32_MAX,
	                       .size = (1u << 28) - 1,
	                       .flags = KD_F_TTL | KD_F_TOMBSTONE,
	                       .expiry_ms = UINT64_MAX};
	struct kd_entry plain = {.version = UINT64_MAX,
	                         .seg = UINT32_MAX,
	                         .off = UINT32_MAX,
	                         .size = (1u << 28) - 1,
	                         .flags = KD_F_TOMBSTONE,
	                         .expiry_ms = 0};

	assert_int_equal(keydir_new(&kd), 0);
	put_ok(kd, "t", 1, &ttl, false);
	get_ok(kd, "t", 1, &ttl);
	put_ok(kd, "tt", 2, &max, false);
	get_ok(kd, "tt", 2, &max);
	put_ok(kd, "u", 1, &plain, false);
	get_ok(kd, "u", 1, &plain);

	/* Without KD_F_TTL the expiry is not kept. */
	struct kd_entry noflag = plain;
	noflag.expiry_ms = 99;
	put_ok(kd, "v", 1, &noflag, false);
	assert_int_equal(keydir_get(kd, "v", 1, &got), 0);
	assert_int_equal(got.expiry_ms, 0);

	/* Replacing switches the TTL on and off (the leaf changes size), for
	 * a leaf and for an end leaf ("t" is one since "tt" exists). */
	for (int round = 0; round < 3; round++) {
		assert_int_equal(keydir_put(kd, "t", 1, &plain, &old, NULL), 0);
		assert_entry_equal(&old, round == 0 ? &ttl : &max);
		assert_int_equal(keydir_put(kd, "t", 1, &max, &old, NULL), 0);
		assert_entry_equal(&old, &plain);
		assert_int_equal(keydir_put(kd, "tt", 2, &plain, &old, NULL), 0);
		assert_entry_equal(&old, &max);
		assert_int_equal(keydir_put(kd, "tt", 2, &max, &old, NULL), 0);
		assert_entry_equal(&old, &plain);
	}
	get_ok(kd, "t", 1, &max);
	get_ok(kd, "tt", 2, &max);
	assert_int_equal(keydir_count(kd), 4);

	/* Out of range fields. */
	struct kd_entry bad = plain;
	bad.size = 1u << 28;
	assert_int_equal(keydir_put(kd, "w", 1, &bad, NULL, NULL), -EINVAL);
	bad = plain;
	bad.flags = 1u << 5;
	assert_int_equal(keydir_put(kd, "w", 1, &bad, NULL, NULL), -EINVAL);
	assert_int_equal(keydir_get(kd, "w", 1, &got), -ENOENT);
	assert_int_equal(keydir_count(kd), 4);

	/* Walks hand out the same entries. */
	struct visits vs = {0};
	assert_int_equal(keydir_walk(kd, NULL, 0, true, false, collect, &vs), 0);
	assert_int_equal(vs.n, 4);
	assert_entry_equal(&vs.v[0].e, &max);
	assert_entry_equal(&vs.v[1].e, &max);
	assert_entry_equal(&vs.v[2].e, &plain);
	visits_free(&vs);
	keydir_free(kd);
}

/* A version under 2^32 takes 4 bytes of its leaf, one above it 8; a leaf
 * switches width in place of the old one, with or without a TTL and with
 * a suffix long enough for a two-byte length. */
static void test_version_widths(void **state)
{
	(void)state;
	struct keydir *kd;
	struct kd_entry old;
	const uint64_t versions[] = {1, UINT32_MAX, (uint64_t)UINT32_MAX + 1, 5, UINT64_MAX, 7};
	const size_t slens[] = {0, 3, 63, 64, 200};
	char key[256];
	size_t n = 0;

	assert_int_equal(keydir_new(&kd), 0);
	for (size_t s = 0; s < sizeof(slens) / sizeof(slens[0]); s++) {
		for (int ttl = 0; ttl < 2; ttl++) {
			size_t len = 2 + slens[s];
			struct kd_entry prev = {0};
			memset(key, 'a' + (int)s, sizeof(key));
			key[0] = (char)('0' + ttl);
			for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
				struct kd_entry e = entry(versions[v]);
				bool replaced;
				if (ttl) {
					e.flags = KD_F_TTL;
					e.expiry_ms = versions[v] ^ 0x5a5a5a5a5a5aull;
				}
				assert_int_equal(keydir_put(kd, key, len, &e, &old, &replaced), 0);
				assert_int_equal(replaced, v > 0);
				if (v > 0)
					assert_entry_equal(&old, &prev);
				get_ok(kd, key, len, &e);
				prev = e;
			}
			n++;
		}
	}
	assert_int_equal(keydir_count(kd), n);
	keydir_free(kd);

	/* 4096 keys under one node, each leaf with a 2-byte suffix: narrow
	 * versions take 4 bytes less per key than wide ones */
	size_t mem[2];
	for (int wide = 0; wide < 2; wide++) {
		assert_int_equal(keydir_new(&kd), 0);
		for (uint32_t i = 0; i < 4096; i++) {
			uint8_t k[4] = {(uint8_t)(i >> 8), (uint8_t)i, 'x', 'y'};
			struct kd_entry e = entry(wide ? (uint64_t)UINT32_MAX + 1 + i : 1 + i);
			put_ok(kd, k, sizeof(k), &e, false);
		}
		mem[wide] = keydir_memory(kd);
		keydir_free(kd);
	}
	assert_true(mem[1] - mem[0] >= 4 * 4096);
}

static void test_long_keys(void **state)
{
	(void)state;
	struct keydir *kd;
	struct model m = {0};
	struct kd_entry old;
	size_t L = KD_KEY_MAX;
	uint8_t *k[6];

	for (int i = 0; i < 6; i++) {
		k[i] = malloc(L);
		assert_non_null(k[i]);
		memset(k[i], 0xab, L);
	}
	k[1][L - 1] = 0xac; /* differs from k[0] at the last byte */
	k[2][0] = 0x00;     /* differs at the first */
	k[3][L / 2] = 0xff; /* in the middle */
	k[4][L / 3] = 0x01; /* and is one byte shorter */
	k[5][1000] = 0x00;
	const size_t lens[] = {L, L, L, L, L - 1, 1001};

	assert_int_equal(keydir_new(&kd), 0);
	for (int i = 0; i < 6; i++) {
		struct kd_entry e = entry((uint64_t)i + 100);
		put_ok(kd, k[i], lens[i], &e, false);
		model_put(&m, k[i], lens[i], &e, &old);
		check_full(kd, &m);
	}
	/* Prefixes of a 64 KiB key: L-1 bytes of 0xab, and 1 byte. */
	struct kd_entry e = entry(200);
	put_ok(kd, k[0], L - 1, &e, false);
	model_put(&m, k[0], L - 1, &e, &old);
	put_ok(kd, k[0], 1, &e, false);
	model_put(&m, k[0], 1, &e, &old);
	check_full(kd, &m);
	for (size_t i = 0; i < m.n; i++)
		get_ok(kd, m.a[i]->k, m.a[i]->len, &m.a[i]->e);
	assert_int_equal(keydir_get(kd, k[0], L - 2, &old), -ENOENT);
	for (int rev = 0; rev < 2; rev++)
		for (int incl = 0; incl < 2; incl++)
			for (int i = 0; i < 6; i++) {
				check_walk(kd, &m, k[i], lens[i], incl, rev, 0);
				check_walk(kd, &m, k[i], lens[i] - 1, incl, rev, 0);
				check_walk(kd, &m, k[i], lens[i] / 2, incl, rev, 0);
			}
	for (int i = 5; i >= 0; i--) {
		struct kd_entry want;
		assert_true(model_remove(&m, k[i], lens[i], &want));
		assert_int_equal(keydir_remove(kd, k[i], lens[i], &old), 0);
		assert_entry_equal(&old, &want);
		check_full(kd, &m);
	}
	model_free(&m);
	keydir_free(kd);
	for (int i = 0; i < 6; i++)
		free(k[i]);
}

/* A chain of nested keys: "a", "aa", ... and "a..ab": one node per level,
 * far deeper than any C stack could recurse, walked and dismantled. */
static void test_deep_chain(void **state)
{
	(void)state;
	enum { DEPTH = 6000 };
	struct keydir *kd;
	struct model m = {0};
	struct kd_entry old;
	uint8_t *k = malloc(DEPTH + 2);

	assert_non_null(k);
	memset(k, 'a', DEPTH + 2);
	assert_int_equal(keydir_new(&kd), 0);
	for (size_t len = DEPTH; len >= 1; len--) {
		struct kd_entry e = entry(len);
		put_ok(kd, k, len, &e, false);
		model_put(&m, k, len, &e, &old);
		if (len % 3 == 0) {
			k[len] = 'b';
			e = entry(len + 1000000);
			put_ok(kd, k, len + 1, &e, false);
			model_put(&m, k, len + 1, &e, &old);
			k[len] = 'a';
		}
	}
	check_full(kd, &m);
	check_walk(kd, &m, k, DEPTH / 2, true, false, 0);
	check_walk(kd, &m, k, DEPTH / 2, false, true, 0);
	check_walk(kd, &m, k, DEPTH + 1, false, true, 5);
	/* Remove in a scattered order. */
	rng_seed(3);
	for (size_t i = 0; i < DEPTH; i++) {
		size_t len = 1 + (i * 2477) % DEPTH; /* 2477 is prime to 6000 */
		struct kd_entry want;
		assert_true(model_remove(&m, k, len, &want));
		assert_int_equal(keydir_remove(kd, k, len, &old), 0);
		assert_entry_equal(&old, &want);
		if (i % 1000 == 0)
			check_full(kd, &m);
	}
	check_full(kd, &m);
	for (size_t i = 0; i < m.n; i++)
		get_ok(kd, m.a[i]->k, m.a[i]->len, &m.a[i]->e);
	model_free(&m);
	keydir_free(kd);
	free(k);
}

/* ---- randomized model test ---------------------------------------------- */

struct gen {
	const uint8_t *alpha; /* NULL: any byte */
	size_t nalpha;
	size_t maxlen;
};

static size_t gen_key(const struct gen *g, const struct model *m, uint8_t *buf)
{
	uint32_t r = rnd(100);
	size_t len;
	if (r < 2 && m->n > 0) {
		/* A long key extending an existing one. */
		const struct rkey *base = m->a[rnd((uint32_t)m->n)];
		len = base->len + 1 + rnd(r == 0 ? 3000 : 40);
		memcpy(buf, base->k, base->len);
		for (size_t i = base->len; i < len; i++)
			buf[i] = g->alpha ? g->alpha[rnd((uint32_t)g->nalpha)] : (uint8_t)rng();
		return len;
	}
	len = 1 + rnd((uint32_t)g->maxlen);
	for (size_t i = 0; i < len; i++)
		buf[i] = g->alpha ? g->alpha[rnd((uint32_t)g->nalpha)] : (uint8_t)rng();
	return len;
}

static void run_model(uint64_t seed, const struct gen *g, size_t ops, size_t check_every)
{
	struct keydir *kd;
	struct model m = {0};
	uint8_t *buf = malloc(8192);
	size_t peak_keys = 0;

	assert_non_null(buf);
	rng_seed(seed);
	assert_int_equal(keydir_new(&kd), 0);
	for (size_t op = 0; op < ops; op++) {
		/* Phases that grow and shrink the set, so nodes grow and shrink. */
		bool growing = (op / 10000) % 2 == 0;
		uint32_t r = rnd(100);
		size_t len;
		struct kd_entry got, want;

		if (r < (growing ? 45u : 20u)) {
			len = gen_key(g, &m, buf);
			struct kd_entry e = random_entry();
			bool replaced = false;
			memset(&got, 0, sizeof got);
			assert_int_equal(keydir_put(kd, buf, len, &e, &got, &replaced), 0);
			bool existed = model_put(&m, buf, len, &e, &want);
			assert_true(replaced == existed);
			if (existed)
				assert_entry_equal(&got, &want);
		} else if (r < 70) {
			if (m.n > 0 && rnd(4) != 0) {
				const struct rkey *victim = m.a[rnd((uint32_t)m.n)];
				len = victim->len;
				memcpy(buf, victim->k, len);
			} else {
				len = gen_key(g, &m, buf);
			}
			bool existed = model_remove(&m, buf, len, &want);
			int rv = keydir_remove(kd, buf, len, &got);
			assert_int_equal(rv, existed ? 0 : -ENOENT);
			if (existed)
				assert_entry_equal(&got, &want);
		} else if (r < 90) {
			len = gen_key(g, &m, buf);
			const struct rkey *mk = model_find(&m, buf, len);
			int rv = keydir_get(kd, buf, len, &got);
			assert_int_equal(rv, mk ? 0 : -ENOENT);
			if (mk)
				assert_entry_equal(&got, &mk->e);
		} else {
			len = gen_key(g, &m, buf);
			check_walk(kd, &m, buf, len, rnd(2), rnd(2), 1 + rnd(20));
		}
		if (m.n > peak_keys)
			peak_keys = m.n;
		if (op % check_every == 0) {
			check_full(kd, &m);
			for (size_t i = 0; i < m.n; i += 1 + m.n / 64)
				get_ok(kd, m.a[i]->k, m.a[i]->len, &m.a[i]->e);
		}
	}
	check_full(kd, &m);
	for (size_t i = 0; i < m.n; i++)
		get_ok(kd, m.a[i]->k, m.a[i]->len, &m.a[i]->e);
	/* Empty it; the memory goes back to the empty size. */
	while (m.n > 0) {
		struct kd_entry got, want = m.a[m.n - 1]->e;
		assert_int_equal(keydir_remove(kd, m.a[m.n - 1]->k, m.a[m.n - 1]->len, &got), 0);
		assert_entry_equal(&got, &want);
		free(m.a[--m.n]);
		if (m.n % 997 == 0)
			check_full(kd, &m);
	}
	check_full(kd, &m);
	struct keydir *fresh;
	assert_int_equal(keydir_new(&fresh), 0);
	assert_int_equal(keydir_memory(kd), keydir_memory(fresh));
	keydir_free(fresh);
	assert_true(peak_keys > 500);
	model_free(&m);
	keydir_free(kd);
	free(buf);
}

static void test_model_small_alphabet(void **state)
{
	(void)state;
	static const uint8_t alpha[] = {0x00, 0x01, 0x61, 0xfe, 0xff};
	struct gen g = {alpha, sizeof alpha, 8};
	run_model(0x5eed0001, &g, 160000, 211);
}

static void test_model_wide_fanout(void **state)
{
	(void)state;
	/* Any byte, short keys: nodes up to 256 children, and back. */
	struct gen g = {NULL, 0, 3};
	run_model(0x5eed0002, &g, 60000, 1009);
}

/* ---- memory ------------------------------------------------------------ */

static void random_key16(uint8_t *k, uint64_t i, uint64_t salt)
{
	uint64_t save = rng_state;
	rng_state = i * 0x9e3779b97f4a7c15ull + salt;
	uint64_t a = rng(), b = rng();
	memcpy(k, &a, 8);
	memcpy(k + 8, &b, 8);
	rng_state = save;
}

static void test_memory_reuse(void **state)
{
	(void)state;
	enum { N = 100000 };
	struct keydir *kd;
	uint8_t k[16];
	struct kd_entry e = entry(1);

	assert_int_equal(keydir_new(&kd), 0);
	size_t empty = keydir_memory(kd);
	for (uint64_t i = 0; i < N; i++) {
		random_key16(k, i, 1);
		put_ok(kd, k, sizeof k, &e, false);
	}
	size_t full = keydir_memory(kd);
	assert_int_equal(keydir_count(kd), N);
	/* Overhead per key beyond the key bytes stays within the target. */
	double over = (double)full / N - 16;
	assert_true(over <= 32.0);

	/* All removed: back to the empty size. */
	for (uint64_t i = 0; i < N; i++) {
		random_key16(k, i, 1);
		assert_int_equal(keydir_remove(kd, k, sizeof k, NULL), 0);
	}
	assert_int_equal(keydir_count(kd), 0);
	assert_int_equal(keydir_memory(kd), empty);

	/* Reinserted: the same memory as the first time. */
	for (uint64_t i = 0; i < N; i++) {
		random_key16(k, i, 1);
		put_ok(kd, k, sizeof k, &e, false);
	}
	assert_int_equal(keydir_memory(kd), full);

	/* Half removed, then as many other keys inserted: the freed blocks are
	 * reused, memory hardly grows. */
	for (uint64_t i = 0; i < N; i += 2) {
		random_key16(k, i, 1);
		assert_int_equal(keydir_remove(kd, k, sizeof k, NULL), 0);
	}
	assert_int_equal(keydir_memory(kd), full);
	for (uint64_t i = 0; i < N / 2; i++) {
		random_key16(k, i, 2);
		put_ok(kd, k, sizeof k, &e, false);
	}
	assert_int_equal(keydir_count(kd), N);
	size_t after = keydir_memory(kd);
	/* Not exactly `full`: nodes that shrank and grew again left blocks
	 * the next inserts would split; not yet used is not leaked. */
	assert_true(after <= full + full / 10);

	keydir_free(kd);
}

/* Key `id` of the churn test: 16..63 random bytes. */
static size_t churn_key(uint8_t *k, uint64_t id)
{
	random_key16(k, id, 5);
	random_key16(k + 16, id, 6);
	random_key16(k + 32, id, 7);
	random_key16(k + 48, id, 8);
	return 16 + (size_t)(id % 48);
}

static void test_memory_churn(void **state)
{
	(void)state;
	enum { N = 50000, ROUNDS = 8 };
	struct keydir *kd;
	uint8_t k[64];
	struct kd_entry e = entry(3), ttl = entry(4);
	ttl.flags = KD_F_TTL;
	ttl.expiry_ms = 12345;

	/* A steady N keys of varied lengths (and so varied leaf sizes) while
	 * half of them are replaced each round: memory must level off. */
	assert_int_equal(keydir_new(&kd), 0);
	for (uint64_t id = 0; id < N; id++)
		put_ok(kd, k, churn_key(k, id), id % 5 ? &e : &ttl, false);
	size_t first = 0;
	for (uint64_t r = 0; r < ROUNDS; r++) {
		for (uint64_t i = 0; i < N / 2; i++) {
			uint64_t old_id = r * (N / 2) + i, new_id = N + old_id;
			assert_int_equal(keydir_remove(kd, k, churn_key(k, old_id), NULL), 0);
			put_ok(kd, k, churn_key(k, new_id), new_id % 5 ? &e : &ttl, false);
		}
		assert_int_equal(keydir_count(kd), N);
		size_t now = keydir_memory(kd);
		if (r == 1)
			first = now;
		if (r > 1)
			assert_true(now <= first + first / 10);
	}
	for (uint64_t id = ROUNDS * (N / 2); id < ROUNDS * (N / 2) + N; id++) {
		struct kd_entry got;
		assert_int_equal(keydir_get(kd, k, churn_key(k, id), &got), 0);
		assert_int_equal(got.flags, id % 5 ? 0u : KD_F_TTL);
	}
	keydir_free(kd);
}

#if KD_TEST_OOM
static int count_visits(void *arg, const uint8_t *key, size_t len, const struct kd_entry *e)
{
	(void)key;
	(void)len;
	(void)e;
	++*(size_t *)arg;
	return 0;
}

/* Every write that runs out of memory returns -ENOMEM and leaves the
 * directory exactly as it was; the same write then succeeds. */
static void test_out_of_memory(void **state)
{
	(void)state;
	struct keydir *kd;
	struct model m = {0};
	uint8_t buf[3000];
	size_t enomem = 0;

	fail_countdown = 1;
	assert_int_equal(keydir_new(&kd), -ENOMEM);
	assert_int_equal(keydir_new(&kd), 0);
	rng_seed(0x00e0e0e0);
	for (int op = 0; op < 30000; op++) {
		bool growing = (op / 3000) % 2 == 0;
		bool put = rnd(100) < (growing ? 75u : 25u);
		size_t len;
		if (!put && m.n > 0 && rnd(4) != 0) {
			const struct rkey *v = m.a[rnd((uint32_t)m.n)];
			len = v->len;
			memcpy(buf, v->k, len);
		} else {
			len = 1 + (rnd(50) == 0 ? rnd(sizeof buf - 1) : rnd(4));
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)(rnd(3) == 0 ? rng() : rnd(3));
			if (rnd(3) == 0) {
				/* Long shared prefixes, split at random points. */
				size_t p = 1 + rnd(40);
				if (len + p > sizeof buf)
					len = sizeof buf - p;
				memmove(buf + p, buf, len);
				memset(buf, 'P', p);
				len += p;
			}
		}
		struct kd_entry e = random_entry(), got, want;
		for (int attempt = 0;; attempt++) {
			size_t mem = keydir_memory(kd);
			fail_countdown = attempt == 0 ? 1 + (int)rnd(2) : 0;
			int rv = put ? keydir_put(kd, buf, len, &e, &got, NULL)
			             : keydir_remove(kd, buf, len, &got);
			fail_countdown = 0;
			if (rv == -ENOMEM) {
				assert_int_equal(attempt, 0);
				enomem++;
				assert_true(keydir_memory(kd) >= mem);
				check_full(kd, &m);
				continue;
			}
			if (put) {
				assert_int_equal(rv, 0);
				model_put(&m, buf, len, &e, &want);
			} else {
				bool existed = model_remove(&m, buf, len, &want);
				assert_int_equal(rv, existed ? 0 : -ENOENT);
			}
			break;
		}
		if (op % 500 == 0)
			check_full(kd, &m);
		if (op % 6000 == 5999) {
			/* Empty it (failing too), so the arena starts over
			 * and grows, and so fails, again. */
			while (m.n > 0) {
				struct rkey *v = m.a[rnd((uint32_t)m.n)];
				fail_countdown = 1;
				int rv = keydir_remove(kd, v->k, v->len, &got);
				fail_countdown = 0;
				if (rv == -ENOMEM) {
					enomem++;
					check_full(kd, &m);
					continue;
				}
				assert_int_equal(rv, 0);
				assert_true(model_remove(&m, v->k, v->len, &want));
			}
			check_full(kd, &m);
		}
	}
	check_full(kd, &m);
	assert_true(enomem > 80);
	model_free(&m);
	keydir_free(kd);

	/* A walk that needs more than its on-stack buffers: a deep chain. */
	assert_int_equal(keydir_new(&kd), 0);
	memset(buf, 'x', sizeof buf);
	struct kd_entry e = entry(9);
	for (size_t len = 1; len <= 1000; len++)
		put_ok(kd, buf, len, &e, false);
	size_t seen = 0;
	fail_countdown = 1;
	assert_int_equal(keydir_walk(kd, NULL, 0, true, false, count_visits, &seen), -ENOMEM);
	fail_countdown = 0;
	seen = 0;
	assert_int_equal(keydir_walk(kd, NULL, 0, true, false, count_visits, &seen), 0);
	assert_int_equal(seen, 1000);
	keydir_free(kd);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_single_key),
		cmocka_unit_test(test_prefix_keys),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_replace_and_absent),
		cmocka_unit_test(test_ttl_and_maxima),
		cmocka_unit_test(test_version_widths),
		cmocka_unit_test(test_long_keys),
		cmocka_unit_test(test_deep_chain),
		cmocka_unit_test(test_model_small_alphabet),
		cmocka_unit_test(test_model_wide_fanout),
		cmocka_unit_test(test_memory_reuse),
		cmocka_unit_test(test_memory_churn),
#if KD_TEST_OOM
		cmocka_unit_test(test_out_of_memory),
#endif
	};
#if !KD_TEST_OOM
	fprintf(stderr, "test_keydir: test_out_of_memory not built: AddressSanitizer "
	                "replaces malloc, which that test needs to fail on purpose\n");
#endif
	rng_base = tu_seed("keydir", 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
