/* test_model.c — 100k random operations checked against a simple in-memory reference, across close/reopen, merges, TTL expiry and changes of value codec (compressible and random values). */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <cmocka.h>

#define NKEYS 1500
#define HISTORY 3

struct mver {
	uint64_t version;
	uint64_t expiry;
	bool tomb;
	uint8_t *val;
	size_t len;
};

struct mkey {
	uint8_t k[24];
	size_t klen;
	struct mver *v; /* oldest first */
	size_t n, cap;
	bool cut; /* merge dropped older versions */
};

static struct mkey keys[NKEYS];
static size_t order[NKEYS]; /* indexes sorted by key */
static uint64_t rng = 88172645463325252ull;
static struct tu_clock clk = {1700000000000ull};
static uint64_t last_version;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int keycmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al < bl ? -1 : al > bl);
}

static int order_cmp(const void *x, const void *y)
{
	const struct mkey *a = &keys[*(const size_t *)x], *b = &keys[*(const size_t *)y];
	return keycmp(a->k, a->klen, b->k, b->klen);
}

static void make_keys(void)
{
	for (size_t i = 0; i < NKEYS; i++) {
		struct mkey *m = &keys[i];
		/* short keys over a small alphabet with 0x00 and 0xff: many prefixes */
		do {
			static const uint8_t alpha[] = {0x00, 'a', 'b', 0x7f, 0xff};
			m->klen = 1 + rnd() % 6;
			for (size_t j = 0; j < m->klen; j++)
				m->k[j] = alpha[rnd() % 5];
			if (i % 3 == 0) {
				m->klen = 10 + rnd() % 12;
				for (size_t j = 0; j < m->klen; j++)
					m->k[j] = (uint8_t)rnd();
			}
			bool dup = false;
			for (size_t j = 0; j < i && !dup; j++)
				dup = keycmp(keys[j].k, keys[j].klen, m->k, m->klen) == 0;
			if (!dup)
				break;
		} while (1);
		order[i] = i;
	}
	qsort(order, NKEYS, sizeof(order[0]), order_cmp);
}

static struct mver *head(struct mkey *m)
{
	return m->n ? &m->v[m->n - 1] : NULL;
}

static bool expired(const struct mver *v)
{
	return v->expiry && v->expiry <= clk.ms;
}

static bool live(struct mkey *m)
{
	struct mver *h = head(m);
	return h && !h->tomb && !expired(h);
}

static void push(struct mkey *m, uint64_t version, bool tomb, const uint8_t *val, size_t len,
                 uint64_t expiry)
{
	struct mver *v;
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 4;
		m->v = realloc(m->v, m->cap * sizeof(*m->v));
	}
	v = &m->v[m->n++];
	v->version = version;
	v->tomb = tomb;
	v->expiry = expiry;
	v->len = len;
	v->val = malloc(len ? len : 1);
	if (len > 0)
		memcpy(v->val, val, len);
}

/* What merge keeps, as merge.c decides it with history 3 and no snapshots. */
static void model_merge(void)
{
	for (size_t i = 0; i < NKEYS; i++) {
		struct mkey *m = &keys[i];
		bool keep[4096], older_kept = false;
		size_t n = m->n, w = 0;
		if (n == 0)
			continue;
		assert_true(n < 4096);
		for (size_t c = 0; c < n; c++) { /* c: index from the newest */
			struct mver *v = &m->v[n - 1 - c];
			bool k = c < HISTORY;
			if (c > 0 && expired(v))
				k = false;
			keep[c] = k;
			if (c > 0 && k)
				older_kept = true;
		}
		{
			struct mver *h = &m->v[n - 1];
			bool dead = h->tomb || expired(h);
			if (dead && !older_kept)
				keep[0] = h->tomb && HISTORY > 1;
		}
		/* the history is cut when something older than the oldest kept
		 * version goes (a dropped version in the middle is skipped) */
		for (size_t c = n; c-- > 0;) {
			if (keep[c])
				break;
			m->cut = true;
		}
		for (size_t idx = 0; idx < n; idx++) {
			size_t c = n - 1 - idx;
			if (keep[c])
				m->v[w++] = m->v[idx];
			else
				free(m->v[idx].val);
		}
		m->n = w;
		if (w == 0)
			m->cut = false; /* the key is gone altogether */
	}
}

static void check_get(kv_db *db, struct mkey *m)
{
	struct kv_value val;
	int rv = kv_get(db, m->k, m->klen, NULL, &val);

	if (!live(m)) {
		assert_int_equal(rv, KV_ENOTFOUND);
		return;
	}
	assert_int_equal(rv, 0);
	assert_int_equal(val.version, head(m)->version);
	assert_int_equal(val.len, head(m)->len);
	assert_memory_equal(val.data, head(m)->val, val.len);
	kv_value_release(&val);
}

static void check_as_of(kv_db *db, struct mkey *m, uint64_t at, bool exact)
{
	struct kv_read_opts r = {0};
	struct kv_value val;
	struct mver *found = NULL;
	int rv, want;

	if (exact)
		r.version = at;
	else
		r.as_of = at;
	for (size_t i = m->n; i-- > 0;)
		if (m->v[i].version <= at) {
			found = &m->v[i];
			break;
		}
	if (found == NULL)
		want = m->cut ? KV_ECOMPACTED : KV_ENOTFOUND;
	else if ((exact && found->version != at) || found->tomb || expired(found))
		want = KV_ENOTFOUND;
	else
		want = 0;
	rv = kv_get(db, m->k, m->klen, &r, &val);
	assert_int_equal(rv, want);
	if (rv == 0) {
		assert_int_equal(val.version, found->version);
		assert_int_equal(val.len, found->len);
		assert_memory_equal(val.data, found->val, val.len);
		kv_value_release(&val);
	}
}

static void check_versions(kv_db *db, struct mkey *m)
{
	struct kv_version *list;
	size_t n, j = 0;
	uint32_t limit = (uint32_t)(rnd() % 5);

	assert_int_equal(kv_versions(db, m->k, m->klen, limit, 0, true, &list, &n, NULL), 0);
	for (size_t i = m->n; i-- > 0 && (limit == 0 || j < limit);) {
		struct mver *v = &m->v[i];
		if (expired(v))
			continue;
		assert_true(j < n);
		assert_int_equal(list[j].version, v->version);
		assert_int_equal(list[j].tombstone, v->tomb);
		if (!v->tomb) {
			assert_int_equal(list[j].len, v->len);
			assert_memory_equal(list[j].data, v->val, v->len);
		}
		j++;
	}
	assert_int_equal(n, j);
	kv_versions_free(list, n);
}

static void check_scan(kv_db *db)
{
	struct kv_scan_opts o = {0};
	struct mkey *lo = &keys[rnd() % NKEYS], *hi = &keys[rnd() % NKEYS];
	kv_iter *it;
	struct kv_entry e;
	size_t expect[NKEYS], ne = 0, got = 0;
	int rv;

	if (rnd() % 2) {
		o.start = lo->k;
		o.start_len = lo->klen;
	}
	if (rnd() % 2) {
		o.end = hi->k;
		o.end_len = hi->klen;
	}
	if (rnd() % 4 == 0) {
		o.prefix = lo->k;
		o.prefix_len = 1 + rnd() % lo->klen;
		o.start = NULL;
	}
	o.reverse = rnd() % 2;
	o.keys_only = rnd() % 3 == 0;
	o.limit = rnd() % 3 == 0 ? rnd() % 50 : 0;
	for (size_t i = 0; i < NKEYS; i++) {
		struct mkey *m = &keys[order[o.reverse ? NKEYS - 1 - i : i]];
		if (o.start && keycmp(m->k, m->klen, o.start, o.start_len) < 0)
			continue;
		if (o.end && keycmp(m->k, m->klen, o.end, o.end_len) >= 0)
			continue;
		if (o.prefix && (m->klen < o.prefix_len || memcmp(m->k, o.prefix, o.prefix_len)))
			continue;
		if (!live(m))
			continue;
		expect[ne++] = (size_t)(m - keys);
	}
	if (o.limit && ne > o.limit)
		ne = o.limit;
	assert_int_equal(kv_iter_open(db, &o, &it), 0);
	while ((rv = kv_iter_next(it, &e)) == 0) {
		struct mkey *m;
		assert_true(got < ne);
		m = &keys[expect[got]];
		assert_int_equal(e.key_len, m->klen);
		assert_memory_equal(e.key, m->k, m->klen);
		assert_int_equal(e.version, head(m)->version);
		if (!o.keys_only) {
			assert_int_equal(e.value_len, head(m)->len);
			assert_memory_equal(e.value, head(m)->val, e.value_len);
		}
		got++;
	}
	assert_int_equal(rv, KV_EEND);
	assert_int_equal(got, ne);
	kv_iter_close(it);
}

static void test_model(void **state)
{
	char *dir = tu_mkdtemp("model");
	struct kv_options o;
	kv_db *db;
	uint8_t val[400];
	const char *env = getenv("KV_MODEL_OPS");
	long ops = env != NULL ? atol(env) : 100000;

	(void)state;
	if (ops <= 0)
		fail_msg("KV_MODEL_OPS=%s: want a positive number of operations", env);
	print_message("%ld operations (KV_MODEL_OPS)\n", ops);
	rng = tu_seed("test_model", rng);
	make_keys();
	tu_options(&o, &clk);
	o.segment_size = 64 * 1024;
	o.history_versions = HISTORY;
	o.sync = KV_SYNC_NONE;
	o.merge_ratio_pct = 0;
	o.compression = KV_CODEC_LZ4;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (long op = 0; op < ops; op++) {
		struct mkey *m = &keys[rnd() % NKEYS];
		unsigned r = (unsigned)(rnd() % 100);

		if (r < 35) {
			/* put, sometimes conditional, sometimes with a TTL */
			struct kv_write_opts w = KV_WRITE_OPTS_INIT;
			size_t len = rnd() % (rnd() % 8 == 0 ? 400 : 40);
			uint64_t ver = 0;
			int rv, want = 0;
			bool text = rnd() % 2; /* compressible: the codecs store it shorter */
			for (size_t i = 0; i < len; i++)
				val[i] = text ? (uint8_t)('a' + (i / 3 + len) % 5) : (uint8_t)rnd();
			if (rnd() % 10 == 0)
				w.ttl_ms = 1 + rnd() % 3000;
			if (rnd() % 5 == 0) {
				bool right = rnd() % 2;
				w.if_version = live(m) ? head(m)->version : 0;
				if (!right)
					w.if_version += 1 + rnd() % 3;
				want = right ? 0 : KV_ECONFLICT;
			}
			rv = kv_put(db, m->k, m->klen, val, len, &w, &ver);
			assert_int_equal(rv, want);
			if (rv == 0) {
				assert_int_equal(ver, last_version + 1);
				last_version = ver;
				push(m, ver, false, val, len, w.ttl_ms ? clk.ms + w.ttl_ms : 0);
			}
		} else if (r < 45) {
			uint64_t ver = 0;
			int rv = kv_delete(db, m->k, m->klen, NULL, &ver);
			if (!live(m)) {
				assert_int_equal(rv, KV_ENOTFOUND);
			} else {
				assert_int_equal(rv, 0);
				assert_int_equal(ver, last_version + 1);
				last_version = ver;
				push(m, ver, true, NULL, 0, 0);
			}
		} else if (r < 50) {
			/* a batch of puts and deletes over distinct keys */
			struct kv_op ops_[4];
			struct mkey *bk[4];
			size_t n = 1 + rnd() % 4, i, j;
			for (i = 0; i < n; i++) {
				do {
					bk[i] = &keys[rnd() % NKEYS];
					for (j = 0; j < i && bk[j] != bk[i]; j++)
						;
				} while (j < i);
				memset(&ops_[i], 0, sizeof(ops_[i]));
				ops_[i].key = bk[i]->k;
				ops_[i].key_len = bk[i]->klen;
				ops_[i].if_version = KV_ANY_VERSION;
				if (rnd() % 4 == 0) {
					ops_[i].type = KV_OP_DELETE;
				} else {
					ops_[i].type = KV_OP_PUT;
					ops_[i].value = val + i * 10;
					ops_[i].value_len = 10;
				}
			}
			for (i = 0; i < 40; i++)
				val[i] = (uint8_t)rnd();
			assert_int_equal(kv_batch(db, ops_, n), 0);
			for (i = 0; i < n; i++) {
				if (ops_[i].type == KV_OP_DELETE && !live(bk[i])) {
					assert_int_equal(ops_[i].version, 0);
					continue;
				}
				assert_int_equal(ops_[i].version, last_version + 1);
				last_version = ops_[i].version;
				push(bk[i], ops_[i].version, ops_[i].type == KV_OP_DELETE, val + i * 10,
				     ops_[i].type == KV_OP_DELETE ? 0 : 10, 0);
			}
		} else if (r < 70) {
			check_get(db, m);
		} else if (r < 78) {
			check_as_of(db, m, 1 + rnd() % (last_version + 1), rnd() % 2);
		} else if (r < 85) {
			check_versions(db, m);
		} else if (r < 88) {
			check_scan(db);
		} else if (r < 92) {
			clk.ms += rnd() % 500;
		}
		if (op % 20000 == 19999) {
			/* reopened with the next codec: every record keeps its own */
			assert_int_equal(kv_close(db), 0);
			o.compression = (enum kv_codec)((o.compression + 1) % 3);
			assert_int_equal(kv_open(dir, &o, &db), 0);
		}
		if (op % 7000 == 6999)
			assert_int_equal(kv_set_compression(db, (enum kv_codec)(rnd() % 3), 0), 0);
		if (op % 15000 == 14999) {
			assert_int_equal(kv_merge(db), 0);
			model_merge();
			for (size_t i = 0; i < NKEYS; i++) {
				struct mkey *mm = &keys[i];
				struct kv_version *l;
				size_t ln;
				bool lc;
				assert_int_equal(kv_versions(db, mm->k, mm->klen, 0, 0, false, &l, &ln, &lc), 0);
				size_t nm = 0;
				for (size_t j = 0; j < mm->n; j++)
					nm += !expired(&mm->v[j]);
				/* right after a merge: same versions, same cut */
				assert_int_equal(lc, mm->cut);
				assert_int_equal(ln, nm);
				kv_versions_free(l, ln);
			}
		}
	}
	/* a full comparison at the end, before and after a reopen */
	for (int pass = 0; pass < 2; pass++) {
		struct kv_stats st;
		uint64_t nlive = 0;
		for (size_t i = 0; i < NKEYS; i++) {
			check_get(db, &keys[i]);
			check_versions(db, &keys[i]);
			nlive += live(&keys[i]);
		}
		for (int i = 0; i < 20; i++)
			check_scan(db);
		assert_int_equal(kv_stats(db, &st), 0);
		assert_int_equal(st.last_version, last_version);
		assert_true(st.keys >= nlive); /* expired keys count until merged */
		assert_int_equal(kv_close(db), 0);
		assert_int_equal(kv_open(dir, &o, &db), 0);
	}
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
