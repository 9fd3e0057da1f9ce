/* test_scan.c — scans read only what they return: keys-only scans never read the log, a
 * scan with a limit reads no more records than it returns, and pages bounded by the limit
 * still return the right entries past deletes, both ways, through mappings and reads. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <cmocka.h>

#include "io.h"

#define NKEYS     300
#define VALUE_LEN 1000

static struct tu_clock clk = {1700000000000ull};

/* Every read of the log the engine makes through the storage layer. */
struct read_count {
	struct kv_io_fault hooks;
	atomic_ullong reads;
	atomic_ullong bytes;
};

static int count_read(void *arg, int fd, uint64_t off, size_t len)
{
	struct read_count *c = arg;

	(void)fd;
	(void)off;
	atomic_fetch_add(&c->reads, 1);
	atomic_fetch_add(&c->bytes, len);
	return 0;
}

static void key_of(unsigned i, char *k, size_t len)
{
	snprintf(k, len, "key%05u", i);
}

static void value_of(unsigned i, uint8_t *v)
{
	for (size_t j = 0; j < VALUE_LEN; j++)
		v[j] = (uint8_t)(i * 31u + j);
}

/* Opens a database in dir (counting reads when c is set, which turns mapped
 * reads off) and writes the NKEYS keys in the order i * stride % NKEYS
 * (stride prime to NKEYS), so neighbours in key order lie apart in the log
 * unless stride is 1. */
static kv_db *open_filled(const char *dir, struct read_count *c, unsigned stride)
{
	struct kv_options o;
	uint8_t v[VALUE_LEN];
	kv_db *db;

	tu_options(&o, &clk);
	if (c != NULL) {
		memset(c, 0, sizeof(*c));
		c->hooks.on_read = count_read;
		c->hooks.arg = c;
		o.fault = &c->hooks;
	}
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (unsigned n = 0; n < NKEYS; n++) {
		unsigned i = (unsigned)((n * (uint64_t)stride) % NKEYS);
		char k[16];
		key_of(i, k, sizeof k);
		value_of(i, v);
		assert_int_equal(kv_put(db, k, strlen(k), v, sizeof v, NULL, NULL), 0);
	}
	return db;
}

/* Scans with these options and checks every entry against the keys that
 * are live (live[i]): in order from first, stepping by step (+1 or -1),
 * skipping dead ones. Returns how many it saw. */
static uint64_t scan_check(kv_db *db, const struct kv_scan_opts *so, const bool *live, int first,
                           int step)
{
	struct kv_entry e;
	uint8_t want[VALUE_LEN];
	uint64_t n = 0;
	int i = first, rv;
	kv_iter *it;

	assert_int_equal(kv_iter_open(db, so, &it), 0);
	while ((rv = kv_iter_next(it, &e)) == 0) {
		char k[16];
		while (i >= 0 && i < NKEYS && !live[i])
			i += step;
		assert_true(i >= 0 && i < NKEYS);
		key_of((unsigned)i, k, sizeof k);
		assert_int_equal(e.key_len, strlen(k));
		assert_memory_equal(e.key, k, e.key_len);
		if (so->keys_only) {
			assert_null(e.value);
		} else {
			value_of((unsigned)i, want);
			assert_int_equal(e.value_len, VALUE_LEN);
			assert_memory_equal(e.value, want, VALUE_LEN);
		}
		n++;
		i += step;
	}
	assert_int_equal(rv, KV_EEND);
	kv_iter_close(it);
	return n;
}

static void all_live(bool *live)
{
	for (int i = 0; i < NKEYS; i++)
		live[i] = true;
}

/* A keys-only scan answers from the key directory alone. */
static void test_keys_only_reads_nothing(void **state)
{
	char *dir = tu_mkdtemp("scan-keys");
	struct read_count c;
	struct kv_scan_opts so = {.keys_only = true};
	bool live[NKEYS];
	kv_db *db = open_filled(dir, &c, 7);
	uint64_t reads;

	(void)state;
	all_live(live);
	reads = atomic_load(&c.reads);
	assert_int_equal(scan_check(db, &so, live, 0, 1), NKEYS);
	so.reverse = true;
	assert_int_equal(scan_check(db, &so, live, NKEYS - 1, -1), NKEYS);
	so.reverse = false;
	so.limit = 10;
	assert_int_equal(scan_check(db, &so, live, 0, 1), 10);
	assert_int_equal(atomic_load(&c.reads), reads);
	/* the same scan with values reads the log: the count sees reads */
	so.keys_only = false;
	assert_int_equal(scan_check(db, &so, live, 0, 1), 10);
	assert_true(atomic_load(&c.reads) > reads);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* A scan of limit records reads those records only, not a whole page. */
static void test_limit_bounds_reads(void **state)
{
	char *dir = tu_mkdtemp("scan-limit");
	struct read_count c;
	bool live[NKEYS];
	const uint64_t rec_max = VALUE_LEN + 128; /* a record: header, key, value */
	kv_db *db;

	(void)state;
	all_live(live);
	/* written in key order: the scanned records are adjacent in the log */
	db = open_filled(dir, &c, 1);
	for (uint64_t limit = 1; limit <= 5; limit += 2) {
		struct kv_scan_opts so = {.start = "key00100", .start_len = 8, .limit = limit};
		uint64_t reads = atomic_load(&c.reads), bytes = atomic_load(&c.bytes);
		assert_int_equal(scan_check(db, &so, live, 100, 1), limit);
		assert_int_equal(atomic_load(&c.reads) - reads, 1);
		assert_true(atomic_load(&c.bytes) - bytes <= limit * rec_max);
	}
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	assert_int_equal(mkdir(dir, 0700), 0);

	/* written scattered: one read per record at most, none beyond the limit */
	db = open_filled(dir, &c, 7);
	for (uint64_t limit = 1; limit <= 9; limit += 4) {
		struct kv_scan_opts so = {.start = "key00050", .start_len = 8, .limit = limit};
		uint64_t reads = atomic_load(&c.reads), bytes = atomic_load(&c.bytes);
		assert_int_equal(scan_check(db, &so, live, 50, 1), limit);
		assert_true(atomic_load(&c.reads) - reads <= limit);
		assert_true(atomic_load(&c.bytes) - bytes <= limit * (rec_max + 4096));
	}
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* Pages cut by the limit still find limit live entries past deleted ones,
 * forwards and backwards, by reads (counted) and through mappings. */
static void test_limit_pages_skip_deleted(void **state)
{
	static const uint64_t limits[] = {1, 2, 50, 127, 128, 129, 199, 200, 1000};
	char *dir = tu_mkdtemp("scan-pages");
	bool live[NKEYS];

	(void)state;
	for (int mapped = 0; mapped < 2; mapped++) {
		struct read_count c;
		kv_db *db = open_filled(dir, mapped ? NULL : &c, mapped ? 11 : 13);
		uint64_t nlive = 0;

		all_live(live);
		/* runs of deleted keys longer than a small page */
		for (int i = 0; i < NKEYS; i++) {
			char k[16];
			if (i % 3 == 0 || (i >= 20 && i < 40)) {
				key_of((unsigned)i, k, sizeof k);
				assert_int_equal(kv_delete(db, k, strlen(k), NULL, NULL), 0);
				live[i] = false;
			}
		}
		for (int i = 0; i < NKEYS; i++)
			nlive += live[i];
		for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
			uint64_t want = limits[l] < nlive ? limits[l] : nlive;
			struct kv_scan_opts so = {.limit = limits[l]};
			assert_int_equal(scan_check(db, &so, live, 0, 1), want);
			so.reverse = true;
			assert_int_equal(scan_check(db, &so, live, NKEYS - 1, -1), want);
			so.reverse = false;
			so.start = "key00018";
			so.start_len = 8;
			want = 0;
			for (int i = 18; i < NKEYS && want < limits[l]; i++)
				want += live[i];
			assert_int_equal(scan_check(db, &so, live, 18, 1), want);
		}
		/* after a merge the same answers */
		assert_int_equal(kv_merge(db), 0);
		for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
			uint64_t want = limits[l] < nlive ? limits[l] : nlive;
			struct kv_scan_opts so = {.limit = limits[l]};
			assert_int_equal(scan_check(db, &so, live, 0, 1), want);
		}
		assert_int_equal(kv_close(db), 0);
		tu_rmtree(dir);
		assert_int_equal(mkdir(dir, 0700), 0);
	}
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_keys_only_reads_nothing),
	        cmocka_unit_test(test_limit_bounds_reads),
	        cmocka_unit_test(test_limit_pages_skip_deleted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
