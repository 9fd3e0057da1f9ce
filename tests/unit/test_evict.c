/* test_evict.c — max_keys and max_bytes under evict=refuse and evict=oldest: refusals, the least recently written keys evicted (atomically, never one the write itself writes), their history gone after merge and reopen, the order rebuilt at open and kept across merges, concurrent writers held to the limits; on files and (evict-device) on a device. */
#include "testutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <cmocka.h>

#include "record.h"

struct fx {
	char *dir;
	kv_db *db;
	struct tu_clock clk;
	struct kv_options o;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->dir = tu_mkdtemp("evict");
	f->clk.ms = 1700000000000ull;
	tu_options(&f->o, &f->clk);
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

static void open_db(struct fx *f)
{
	assert_int_equal(kv_open(f->dir, &f->o, &f->db), 0);
}

static void reopen(struct fx *f)
{
	assert_int_equal(kv_close(f->db), 0);
	f->db = NULL;
	open_db(f);
}

static int put(kv_db *db, const char *k, const char *v, uint64_t *ret_version)
{
	return kv_put(db, k, strlen(k), v, strlen(v), NULL, ret_version);
}

static uint64_t put_ok(kv_db *db, const char *k, const char *v)
{
	uint64_t ver = 0;

	assert_int_equal(put(db, k, v, &ver), 0);
	return ver;
}

static bool present(kv_db *db, const char *k)
{
	struct kv_value v;
	int rv = kv_get(db, k, strlen(k), NULL, &v);

	if (rv == 0) {
		kv_value_release(&v);
		return true;
	}
	assert_int_equal(rv, KV_ENOTFOUND);
	return false;
}

static struct kv_stats stats(kv_db *db)
{
	struct kv_stats s;

	assert_int_equal(kv_stats(db, &s), 0);
	return s;
}

/* Bytes max_bytes counts: the newest records of the live keys. */
static uint64_t key_bytes(kv_db *db)
{
	struct kv_stats s = stats(db);

	return s.live_bytes - s.tombstone_bytes;
}

/* Every present key among names[0..n), as a bit mask. */
static unsigned present_mask(kv_db *db, const char *const *names, size_t n)
{
	unsigned m = 0;

	for (size_t i = 0; i < n; i++)
		if (present(db, names[i]))
			m |= 1u << i;
	return m;
}

/* refuse: a put past max_bytes fails with KV_EMAXKEYS and changes nothing;
 * overwrites that do not grow and deletes still go through. */
static void test_refuse_max_bytes(void **state)
{
	struct fx *f = *state;
	uint64_t rec;

	f->o.max_bytes = 0;
	open_db(f);
	put_ok(f->db, "k1", "0123456789");
	rec = key_bytes(f->db); /* one record of a 2-byte key, 10-byte value */
	reopen(f);
	assert_int_equal(kv_delete(f->db, "k1", 2, NULL, NULL), 0);
	assert_int_equal(kv_close(f->db), 0);
	f->o.max_bytes = 3 * rec;
	open_db(f);
	assert_int_equal(key_bytes(f->db), 0);
	put_ok(f->db, "k1", "0123456789");
	put_ok(f->db, "k2", "0123456789");
	put_ok(f->db, "k3", "0123456789");
	assert_int_equal(key_bytes(f->db), 3 * rec);
	assert_int_equal(put(f->db, "k4", "0123456789", NULL), KV_EMAXKEYS);
	assert_int_equal(put(f->db, "k4", "", NULL), KV_EMAXKEYS);
	/* an overwrite that grows is refused, one that does not is not */
	assert_int_equal(put(f->db, "k1", "0123456789a", NULL), KV_EMAXKEYS);
	put_ok(f->db, "k1", "9876543210");
	put_ok(f->db, "k1", "01234");
	assert_false(present(f->db, "k4"));
	assert_int_equal(key_bytes(f->db), 3 * rec - 5);
	/* five bytes are free now: a 5-byte value of a 2-byte key fits */
	put_ok(f->db, "k1", "0123456789");
	assert_int_equal(kv_delete(f->db, "k2", 2, NULL, NULL), 0);
	put_ok(f->db, "k4", "0123456789");
	assert_int_equal(stats(f->db).evictions, 0);
	/* the tombstone of k2 is not counted */
	assert_int_equal(key_bytes(f->db), 3 * rec);
	assert_true(stats(f->db).tombstone_bytes > 0);
}

/* oldest: the least recently written key goes; an overwrite makes a key
 * the newest; the evicted key reads as deleted, its history as cut. */
static void test_oldest_evicts_least_recently_written(void **state)
{
	struct fx *f = *state;
	static const char *const names[] = {"a", "b", "c", "d", "e"};
	struct kv_read_opts ro = {0};
	struct kv_version *vs;
	struct kv_value v;
	size_t n;
	bool cut;
	uint64_t vb;

	f->o.max_keys = 3;
	f->o.evict = KV_EVICT_OLDEST;
	f->o.history_versions = 5;
	open_db(f);
	put_ok(f->db, "a", "a1");
	vb = put_ok(f->db, "b", "b1");
	put_ok(f->db, "c", "c1");
	put_ok(f->db, "a", "a2"); /* a is now the newest */
	assert_int_equal(stats(f->db).evictions, 0);
	put_ok(f->db, "d", "d1"); /* evicts b */
	assert_int_equal(present_mask(f->db, names, 5), 0x1 | 0x4 | 0x8);
	assert_int_equal(stats(f->db).evictions, 1);
	assert_int_equal(stats(f->db).keys, 3);
	put_ok(f->db, "e", "e1"); /* evicts c */
	assert_int_equal(present_mask(f->db, names, 5), 0x1 | 0x8 | 0x10);
	put_ok(f->db, "a", "a3"); /* an overwrite evicts nothing */
	assert_int_equal(stats(f->db).evictions, 2);
	/* b's history is gone: Versions shows only the eviction's tombstone */
	assert_int_equal(kv_versions(f->db, "b", 1, 10, 0, true, &vs, &n, &cut), 0);
	assert_int_equal(n, 1);
	assert_true(vs[0].tombstone);
	assert_null(vs[0].data);
	assert_true(cut);
	kv_versions_free(vs, n);
	ro.as_of = vb;
	assert_int_equal(kv_get(f->db, "b", 1, &ro, &v), KV_ECOMPACTED);
	ro.as_of = 0;
	ro.version = vb;
	assert_int_equal(kv_get(f->db, "b", 1, &ro, &v), KV_ECOMPACTED);
	/* overwritten heads leave the order: its memory stays that of its
	 * first allocation (256 entries) */
	for (int i = 0; i < 5000; i++)
		put_ok(f->db, "e", i % 2 ? "e2" : "e3");
	assert_true(stats(f->db).evict_order_bytes <= 256 * 16);
	assert_int_equal(stats(f->db).evictions, 2);
	/* a deleted key is not evicted twice, and frees its place */
	assert_int_equal(kv_delete(f->db, "d", 1, NULL, NULL), 0);
	put_ok(f->db, "b", "b2");
	assert_int_equal(stats(f->db).evictions, 2);
	assert_int_equal(present_mask(f->db, names, 5), 0x1 | 0x2 | 0x10);
}

/* oldest with max_bytes: as many keys go as the new value needs; a value
 * that cannot fit even alone is refused and evicts nothing. */
static void test_oldest_max_bytes(void **state)
{
	struct fx *f = *state;
	static const char *const names[] = {"k0", "k1", "k2", "k3", "k4", "k5"};
	char big[400];
	uint64_t rec;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	open_db(f);
	put_ok(f->db, "k0", "0123456789");
	rec = key_bytes(f->db);
	assert_int_equal(kv_close(f->db), 0);
	tu_rmtree(f->dir);
	free(f->dir);
	f->dir = tu_mkdtemp("evict");
	f->o.max_bytes = 5 * rec;
	f->o.evict = KV_EVICT_OLDEST;
	open_db(f);
	for (size_t i = 0; i < 5; i++)
		put_ok(f->db, names[i], "0123456789");
	assert_int_equal(key_bytes(f->db), 5 * rec);
	assert_int_equal(stats(f->db).evictions, 0);
	/* 20 more value bytes than a record of 10: two keys go */
	put_ok(f->db, "k5", "0123456789012345678901234567890");
	assert_int_equal(present_mask(f->db, names, 6), 0x4 | 0x8 | 0x10 | 0x20);
	assert_int_equal(stats(f->db).evictions, 2);
	assert_true(key_bytes(f->db) <= 5 * rec);
	/* too big for the whole budget: refused, nothing evicted */
	assert_int_equal(put(f->db, "k0", big, NULL), KV_EMAXKEYS);
	assert_int_equal(present_mask(f->db, names, 6), 0x4 | 0x8 | 0x10 | 0x20);
	assert_int_equal(stats(f->db).evictions, 2);
	/* growing the newest key to a record of 4 * rec: k2 and k3 go (k4,
	 * the only other one left, fits beside it), never k5 itself */
	assert_true(10 + 3 * rec < sizeof(big));
	assert_int_equal(kv_put(f->db, "k5", 2, big, 10 + 3 * rec, NULL, NULL), 0);
	assert_int_equal(present_mask(f->db, names, 6), 0x10 | 0x20);
	assert_int_equal(stats(f->db).evictions, 4);
	assert_int_equal(key_bytes(f->db), 5 * rec);
}

/* A batch evicts atomically with its writes, never a key it writes; a batch
 * that fails evicts nothing; one that cannot fit is refused whole. */
static void test_batch_atomic(void **state)
{
	struct fx *f = *state;
	static const char *const names[] = {"k1", "k2", "k3", "k4", "k5", "k6"};
	struct kv_op ops[3];
	uint64_t v4;

	f->o.max_keys = 4;
	f->o.evict = KV_EVICT_OLDEST;
	open_db(f);
	for (size_t i = 0; i < 3; i++)
		put_ok(f->db, names[i], "v");
	v4 = put_ok(f->db, "k4", "v");
	/* k1 is the oldest but the batch writes it: k2 and k3 go */
	memset(ops, 0, sizeof(ops));
	for (size_t i = 0; i < 3; i++) {
		ops[i].type = KV_OP_PUT;
		ops[i].key = i == 2 ? "k1" : names[4 + i];
		ops[i].key_len = 2;
		ops[i].value = "w";
		ops[i].value_len = 1;
		ops[i].if_version = KV_ANY_VERSION;
	}
	assert_int_equal(kv_batch(f->db, ops, 3), 0);
	assert_int_equal(present_mask(f->db, names, 6), 0x1 | 0x8 | 0x10 | 0x20);
	assert_int_equal(stats(f->db).evictions, 2);
	/* the same shape, its last condition failing: nothing changes */
	ops[0].key = "k2";
	ops[1].key = "k3";
	ops[2].key = "k4";
	ops[2].if_version = v4 + 1000;
	assert_int_equal(kv_batch(f->db, ops, 3), KV_ECONFLICT);
	assert_int_equal(present_mask(f->db, names, 6), 0x1 | 0x8 | 0x10 | 0x20);
	assert_int_equal(stats(f->db).evictions, 2);
	assert_int_equal(stats(f->db).keys, 4);
	/* five keys in one batch of a four-key tenant: nothing to evict that
	 * the batch does not write, so it is refused whole */
	{
		struct kv_op five[5];
		static const char *const keys[] = {"k1", "k4", "k5", "k6", "k7"};
		memset(five, 0, sizeof(five));
		for (size_t i = 0; i < 5; i++) {
			five[i].type = KV_OP_PUT;
			five[i].key = keys[i];
			five[i].key_len = 2;
			five[i].value = "z";
			five[i].value_len = 1;
			five[i].if_version = KV_ANY_VERSION;
		}
		assert_int_equal(kv_batch(f->db, five, 5), KV_EMAXKEYS);
		assert_int_equal(five[4].status, KV_EMAXKEYS);
		assert_int_equal(present_mask(f->db, names, 6), 0x1 | 0x8 | 0x10 | 0x20);
		assert_false(present(f->db, "k7"));
		assert_int_equal(stats(f->db).evictions, 2);
	}
}

#ifndef TU_DEVICE
/* Whether any file of dir holds the bytes of needle. */
static bool files_hold(const char *dir, const char *needle)
{
	char names[256][64];
	int n = tu_list_ext(dir, "", names, 256);
	bool found = false;

	for (int i = 0; i < n && !found; i++) {
		char *p = tu_path(dir, "%s", names[i]);
		FILE *fp = fopen(p, "rb");
		size_t len = 0, cap = 0, got;
		char *buf = NULL;
		if (fp != NULL) {
			do {
				if (len == cap) {
					cap = cap ? cap * 2 : 65536;
					buf = realloc(buf, cap);
					assert_non_null(buf);
				}
				got = fread(buf + len, 1, cap - len, fp);
				len += got;
			} while (got > 0);
			fclose(fp);
			found = memmem(buf, len, needle, strlen(needle)) != NULL;
		}
		free(buf);
		free(p);
	}
	return found;
}
#endif

/* After eviction, merge and reopen, nothing reads the evicted values (Get
 * as of their versions, Versions, a scan as of before the eviction), and
 * merge dropped their records from the files. */
static void test_evicted_history_gone_after_merge(void **state)
{
	struct fx *f = *state;
	struct kv_read_opts ro = {0};
	struct kv_scan_opts so = {0};
	struct kv_version *vs;
	struct kv_entry ent;
	struct kv_value v;
	kv_iter *it;
	size_t n, seen = 0;
	bool cut;
	uint64_t v1, v2, before;

	f->o.max_keys = 2;
	f->o.evict = KV_EVICT_OLDEST;
	f->o.history_versions = 10; /* merge would keep every linked version */
	open_db(f);
	v1 = put_ok(f->db, "gone", "secret-value-one");
	v2 = put_ok(f->db, "gone", "secret-value-two");
	put_ok(f->db, "stay", "kept-value-one");
	before = put_ok(f->db, "stay", "kept-value-two");
#ifndef TU_DEVICE
	assert_true(files_hold(f->dir, "secret-value-one"));
#endif
	put_ok(f->db, "new", "v"); /* evicts "gone" */
	assert_int_equal(stats(f->db).evictions, 1);
	assert_int_equal(kv_merge(f->db), 0);
	reopen(f);
#ifndef TU_DEVICE
	/* (on a device, a retired extent keeps its bytes until reused) */
	assert_false(files_hold(f->dir, "secret-value-one"));
	assert_false(files_hold(f->dir, "secret-value-two"));
	assert_true(files_hold(f->dir, "kept-value-one")); /* history of others kept */
#endif
	assert_false(present(f->db, "gone"));
	ro.as_of = v2;
	assert_int_not_equal(kv_get(f->db, "gone", 4, &ro, &v), 0);
	ro.as_of = 0;
	ro.version = v1;
	assert_int_not_equal(kv_get(f->db, "gone", 4, &ro, &v), 0);
	assert_int_equal(kv_versions(f->db, "gone", 4, 10, 0, true, &vs, &n, &cut), 0);
	for (size_t i = 0; i < n; i++)
		assert_true(vs[i].tombstone && vs[i].data == NULL);
	kv_versions_free(vs, n);
	so.as_of = before;
	assert_int_equal(kv_iter_open(f->db, &so, &it), 0);
	while (kv_iter_next(it, &ent) == 0) {
		assert_false(ent.key_len == 4 && memcmp(ent.key, "gone", 4) == 0);
		seen++;
	}
	kv_iter_close(it);
	assert_int_equal(seen, 1); /* "stay" as of then */
	/* the order after the merge and the reopen: "stay" is the oldest */
	put_ok(f->db, "newer", "v");
	assert_false(present(f->db, "stay"));
	assert_true(present(f->db, "new"));
}

/* The write order survives close and reopen (rebuilt from the key
 * directory by version) and merges (a moved head is still found). */
static void test_order_after_reopen_and_merge(void **state)
{
	struct fx *f = *state;
	static const char *const names[] = {"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"};

	f->o.max_keys = 4;
	f->o.evict = KV_EVICT_OLDEST;
	open_db(f);
	for (size_t i = 0; i < 4; i++)
		put_ok(f->db, names[i], "v");
	put_ok(f->db, "k1", "w");
	put_ok(f->db, "k2", "w"); /* order: k3 k4 k1 k2 */
	reopen(f);
	assert_int_equal(stats(f->db).evict_order_bytes > 0, true);
	put_ok(f->db, "k5", "v"); /* evicts k3 */
	assert_int_equal(present_mask(f->db, names, 8), 0x1 | 0x2 | 0x8 | 0x10);
	/* a merge moves every head into a new segment, and (history 1) drops
	 * k3's tombstone */
	assert_int_equal(stats(f->db).tombstones, 1);
	assert_int_equal(kv_merge(f->db), 0);
	assert_int_equal(stats(f->db).tombstones, 0);
	assert_int_equal(stats(f->db).tombstone_bytes, 0);
	put_ok(f->db, "k6", "v"); /* evicts k4 */
	assert_int_equal(present_mask(f->db, names, 8), 0x1 | 0x2 | 0x10 | 0x20);
	reopen(f);
	put_ok(f->db, "k7", "v"); /* evicts k1 */
	put_ok(f->db, "k8", "v"); /* evicts k2 */
	assert_int_equal(present_mask(f->db, names, 8), 0x10 | 0x20 | 0x40 | 0x80);
	assert_int_equal(stats(f->db).evictions, 2); /* since this open */
	/* under refuse the same database keeps no order */
	assert_int_equal(kv_close(f->db), 0);
	f->o.evict = KV_EVICT_REFUSE;
	open_db(f);
	assert_int_equal(stats(f->db).evict_order_bytes, 0);
	assert_int_equal(put(f->db, "k1", "v", NULL), KV_EMAXKEYS);
}

/* A batch of n new keys "b<round>-<i>" (8 bytes), values of 8 bytes. */
static int put_batch(kv_db *db, int round, int n)
{
	struct kv_op ops[64];
	char keys[64][24];

	memset(ops, 0, sizeof(ops));
	for (int i = 0; i < n; i++) {
		snprintf(keys[i], sizeof(keys[i]), "b%03d-%03d", round, i);
		ops[i].type = KV_OP_PUT;
		ops[i].key = keys[i];
		ops[i].key_len = 8;
		ops[i].value = "01234567";
		ops[i].value_len = 8;
		ops[i].if_version = KV_ANY_VERSION;
	}
	return kv_batch(db, ops, (size_t)n);
}

/* Evictions that do not fit in what is left of a segment move their
 * request to the next one; a request whose records and evictions do not
 * fit in a whole segment is refused. */
static void test_evictions_cross_segment_ends(void **state)
{
	struct fx *f = *state;
	char key[24];

	f->o.segment_size = 4096;
	f->o.max_keys = 30;
	f->o.evict = KV_EVICT_OLDEST;
	open_db(f);
	/* 20 puts of 64 bytes and 20 tombstones of 56: 2400 bytes a round */
	for (int r = 0; r < 40; r++) {
		assert_int_equal(put_batch(f->db, r, 20), 0);
		assert_true(stats(f->db).keys <= 30);
	}
	assert_int_equal(stats(f->db).keys, 30);
	assert_int_equal(stats(f->db).evictions, 40 * 20 - 30);
	/* the newest 30: round 39's 20 and round 38's last 10 */
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "b039-%03d", i);
		assert_true(present(f->db, key));
		snprintf(key, sizeof(key), "b038-%03d", i);
		assert_int_equal(present(f->db, key), i >= 10);
	}
	/* 30 puts and 30 evictions, 3600 bytes: in a segment of their own */
	reopen(f);
	assert_int_equal(put_batch(f->db, 99, 30), 0);
	assert_int_equal(stats(f->db).keys, 30);
	/* room for 30 more keys: 60 puts (3840 bytes) fit a segment, not with
	 * 30 evictions (1680 more): refused, nothing changed */
	assert_int_equal(kv_close(f->db), 0);
	f->o.max_keys = 60;
	open_db(f);
	assert_int_equal(put_batch(f->db, 97, 60), KV_EMAXKEYS);
	snprintf(key, sizeof(key), "b097-%03d", 0);
	assert_false(present(f->db, key));
	assert_int_equal(stats(f->db).keys, 30);
	assert_int_equal(put_batch(f->db, 96, 40), 0); /* 10 evictions */
	assert_int_equal(stats(f->db).keys, 60);
	assert_int_equal(stats(f->db).evictions, 10);
	snprintf(key, sizeof(key), "b099-%03d", 9);
	assert_false(present(f->db, key));
	snprintf(key, sizeof(key), "b099-%03d", 10);
	assert_true(present(f->db, key));
}

/* ---- concurrent writers ------------------------------------------------- */

#define WRITERS 8
#define PER_WRITER 1500
#define LIMIT_KEYS 200

struct conc {
	kv_db *db;
	int id;
	uint64_t versions[PER_WRITER];
	uint64_t max_keys, max_bytes;
	atomic_bool stop;
	atomic_int violations;
	atomic_int samples;
};

static void *writer_main(void *arg)
{
	struct conc *c = arg;
	char key[32], val[32];

	for (int i = 0; i < PER_WRITER;) {
		if (i % 3 == 2 && i + 4 <= PER_WRITER) {
			/* a batch of four */
			struct kv_op ops[4];
			char keys[4][32];
			memset(ops, 0, sizeof(ops));
			for (int j = 0; j < 4; j++) {
				snprintf(keys[j], sizeof(keys[j]), "w%d-%06d", c->id, i + j);
				ops[j].type = KV_OP_PUT;
				ops[j].key = keys[j];
				ops[j].key_len = strlen(keys[j]);
				ops[j].value = "0123456789abcdef";
				ops[j].value_len = 16;
				ops[j].if_version = KV_ANY_VERSION;
			}
			if (kv_batch(c->db, ops, 4) != 0)
				atomic_fetch_add(&c->violations, 1000);
			for (int j = 0; j < 4; j++)
				c->versions[i + j] = ops[j].version;
			i += 4;
			continue;
		}
		snprintf(key, sizeof(key), "w%d-%06d", c->id, i);
		snprintf(val, sizeof(val), "0123456789abcdef");
		if (kv_put(c->db, key, strlen(key), val, strlen(val), NULL, &c->versions[i]) != 0)
			atomic_fetch_add(&c->violations, 1000);
		i++;
	}
	return NULL;
}

static void *sampler_main(void *arg)
{
	struct conc *c = arg;

	while (!atomic_load(&c->stop)) {
		struct kv_stats s;
		kv_stats(c->db, &s);
		if ((c->max_keys && s.keys > c->max_keys) ||
		    (c->max_bytes && s.live_bytes - s.tombstone_bytes > c->max_bytes))
			atomic_fetch_add(&c->violations, 1);
		atomic_fetch_add(&c->samples, 1);
	}
	return NULL;
}

struct vk {
	uint64_t version;
	int writer, i;
};

static int by_version_desc(const void *a, const void *b)
{
	uint64_t x = ((const struct vk *)a)->version, y = ((const struct vk *)b)->version;

	return x > y ? -1 : x < y;
}

/* WRITERS threads write distinct keys; a sampler sees the limits hold all
 * the while; at the end the keys present are exactly the newest written. */
static void run_concurrent(struct fx *f, uint64_t max_keys, uint64_t max_bytes)
{
	static struct conc cs[WRITERS];
	struct conc *s0 = &cs[0];
	pthread_t th[WRITERS], sampler;
	struct vk *all = calloc(WRITERS * PER_WRITER, sizeof(*all));
	struct kv_stats st;
	size_t n = 0, live;
	int violations = 0;

	assert_non_null(all);
	f->o.max_keys = max_keys;
	f->o.max_bytes = max_bytes;
	f->o.evict = KV_EVICT_OLDEST;
	f->o.sync = KV_SYNC_NONE;
	f->o.segment_size = 256u << 10; /* evictions cross segment ends */
	open_db(f);
	memset(cs, 0, sizeof(cs));
	for (int w = 0; w < WRITERS; w++) {
		cs[w].db = f->db;
		cs[w].id = w;
		cs[w].max_keys = max_keys;
		cs[w].max_bytes = max_bytes;
	}
	assert_int_equal(pthread_create(&sampler, NULL, sampler_main, s0), 0);
	for (int w = 0; w < WRITERS; w++)
		assert_int_equal(pthread_create(&th[w], NULL, writer_main, &cs[w]), 0);
	for (int w = 0; w < WRITERS; w++)
		pthread_join(th[w], NULL);
	atomic_store(&s0->stop, true);
	pthread_join(sampler, NULL);
	for (int w = 0; w < WRITERS; w++)
		violations += atomic_load(&cs[w].violations);
	assert_int_equal(violations, 0);
	assert_true(atomic_load(&s0->samples) > 0);
	for (int w = 0; w < WRITERS; w++)
		for (int i = 0; i < PER_WRITER; i++)
			all[n++] = (struct vk){cs[w].versions[i], w, i};
	qsort(all, n, sizeof(*all), by_version_desc);
	st = stats(f->db);
	live = st.keys;
	assert_true(live > 0);
	if (max_keys)
		assert_int_equal(live, max_keys);
	assert_int_equal(st.evictions, n - live);
	/* the newest `live` keys are present, every older one is gone */
	for (size_t j = 0; j < n; j++) {
		char key[32];
		snprintf(key, sizeof(key), "w%d-%06d", all[j].writer, all[j].i);
		if (present(f->db, key) != (j < live))
			fail_msg("key %s (version %" PRIu64 ", rank %zu of %zu live) %s", key,
			         all[j].version, j, live, j < live ? "missing" : "present");
	}
	free(all);
}

static void test_concurrent_max_keys(void **state)
{
	run_concurrent(*state, LIMIT_KEYS, 0);
}

static void test_concurrent_max_bytes(void **state)
{
	/* keys of 9 bytes, values of 16: records of 25 bytes and the header */
	run_concurrent(*state, 0, 150 * (REC_HEADER_SIZE + 9 + 16) + 7);
	assert_int_equal(key_bytes(((struct fx *)*state)->db) / (REC_HEADER_SIZE + 9 + 16), 150);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_refuse_max_bytes, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_oldest_evicts_least_recently_written, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_oldest_max_bytes, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_batch_atomic, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_evicted_history_gone_after_merge, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_order_after_reopen_and_merge, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_evictions_cross_segment_ends, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_concurrent_max_keys, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_concurrent_max_bytes, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
