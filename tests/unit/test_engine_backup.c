/* test_engine_backup.c — kv_backup under a writer and merges racing it: the backup opens to exactly the as-of scan at its version, checks clean, and refuses a directory that is not empty. */
#include "testutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h> /* after the headers it needs */

#define NKEYS    400
#define NBACKUPS 6

static struct tu_clock clk = {1700000000000ull};
static _Atomic bool stop_flag;
static _Atomic uint64_t writes, merges, merges_asked;

static void *writer_main(void *arg)
{
	kv_db *db = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull, i = 0;

	while (!atomic_load(&stop_flag)) {
		char k[16], v[160];
		int n, rv;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		snprintf(k, sizeof(k), "k%04u", (unsigned)(x % NKEYS));
		if (x % 5 == 0) {
			rv = kv_delete(db, k, strlen(k), NULL, NULL);
			assert_true(rv == 0 || rv == KV_ENOTFOUND);
		} else {
			n = snprintf(v, sizeof(v), "%" PRIu64 ":%0*u", i, (int)(x % 140), 1u);
			assert_int_equal(kv_put(db, k, strlen(k), v, (size_t)n, NULL, NULL), 0);
		}
		atomic_store(&writes, ++i);
	}
	return NULL;
}

static void *merger_main(void *arg)
{
	kv_db *db = arg;

	/* one merge per request, each racing the backup taken meanwhile */
	while (!atomic_load(&stop_flag)) {
		if (atomic_load(&merges) == atomic_load(&merges_asked)) {
			usleep(200);
			continue;
		}
		assert_int_equal(kv_merge(db), 0);
		atomic_fetch_add(&merges, 1);
	}
	return NULL;
}

struct row {
	char k[16];
	char v[160];
	size_t vl;
	uint64_t version;
};

/* Every key (newest first) of db as of as_of (0: now), into rows. */
static size_t scan(kv_db *db, uint64_t as_of, struct row *rows, size_t cap, uint64_t *ret_at)
{
	struct kv_scan_opts so = {.as_of = as_of};
	struct kv_entry e;
	kv_iter *it;
	size_t n = 0;
	int rv;

	assert_int_equal(kv_iter_open(db, &so, &it), 0);
	while ((rv = kv_iter_next(it, &e)) == 0) {
		assert_true(n < cap && e.key_len < sizeof(rows[n].k) &&
		            e.value_len <= sizeof(rows[n].v));
		memcpy(rows[n].k, e.key, e.key_len);
		rows[n].k[e.key_len] = '\0';
		memcpy(rows[n].v, e.value, e.value_len);
		rows[n].vl = e.value_len;
		rows[n].version = e.version;
		n++;
	}
	assert_int_equal(rv, KV_EEND);
	if (ret_at != NULL)
		*ret_at = kv_iter_version(it);
	kv_iter_close(it);
	return n;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits (30 s at most) until the counter reaches n. */
static void wait_for(_Atomic uint64_t *c, uint64_t n)
{
	uint64_t t0 = mono_ms();

	while (atomic_load(c) < n) {
		assert_true(mono_ms() - t0 < 30000);
		usleep(1000);
	}
}

static void check_item(void *arg, const struct kv_check_item *it)
{
	if (it->damage) {
		fprintf(stderr, "damage: %s at %" PRIu64 ": %s\n", it->file, it->off, it->what);
		(*(int *)arg)++;
	}
}

/* The backup in bdir, of version v, against db as of v (and of an older
 * version). */
static void compare(kv_db *db, const char *bdir, uint64_t v, const struct kv_options *o)
{
	static struct row a[NKEYS + 1], b[NKEYS + 1];
	struct kv_check_summary sum;
	size_t na, nb, i;
	uint64_t at;
	int findings = 0;
	kv_db *bk;

	na = scan(db, v, a, NKEYS + 1, NULL);
	assert_int_equal(kv_check(bdir, check_item, &findings, &sum), 0);
	assert_int_equal(findings, 0);
	assert_int_equal(kv_open(bdir, o, &bk), 0);
	nb = scan(bk, 0, b, NKEYS + 1, &at);
	assert_int_equal(at, v);
	assert_int_equal(na, nb);
	for (i = 0; i < na; i++) {
		assert_string_equal(a[i].k, b[i].k);
		assert_int_equal(a[i].version, b[i].version);
		assert_int_equal(a[i].vl, b[i].vl);
		assert_memory_equal(a[i].v, b[i].v, a[i].vl);
	}
	/* an older version too: the chains came along */
	na = scan(db, v / 2, a, NKEYS + 1, NULL);
	nb = scan(bk, v / 2, b, NKEYS + 1, NULL);
	assert_int_equal(na, nb);
	for (i = 0; i < na; i++) {
		assert_string_equal(a[i].k, b[i].k);
		assert_int_equal(a[i].version, b[i].version);
		assert_memory_equal(a[i].v, b[i].v, a[i].vl);
	}
	assert_int_equal(kv_close(bk), 0);
}

static void test_backup_under_writes_and_merges(void **state)
{
	char *dir = tu_mkdtemp("bk-src"), *out = tu_mkdtemp("bk-out"), *shm = NULL, *bdir, *busy;
	char *dirs[NBACKUPS];
	uint64_t versions[NBACKUPS];
	struct kv_backup_info bi;
	struct kv_options o;
	struct stat st;
	pthread_t wt, mt;
	kv_db *db;
	int k;

	(void)state;
	tu_options(&o, &clk);
	o.segment_size = 8 * 1024;
	o.merge_ratio_pct = 0;
	o.history_versions = 1000; /* merges move records, keep every version */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	atomic_store(&stop_flag, false);
	assert_int_equal(pthread_create(&wt, NULL, writer_main, db), 0);
	assert_int_equal(pthread_create(&mt, NULL, merger_main, db), 0);
	wait_for(&writes, 3000);
	atomic_store(&merges_asked, 1);
	wait_for(&merges, 1);

	/* backups on the same file system (links) and, where /dev/shm is
	 * a tmpfs, on another (copies: a longer window for a merge) */
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
	    asprintf(&shm, "/dev/shm/kvtest-bk-%d", (int)getpid()) > 0)
		assert_int_equal(mkdir(shm, 0700), 0);
	for (k = 0; k < NBACKUPS; k++) {
		uint64_t w = atomic_load(&writes), m = atomic_load(&merges);
		char name[16];

		snprintf(name, sizeof(name), "b%d", k);
		dirs[k] = tu_path(shm != NULL && k % 2 ? shm : out, "%s", name);
		atomic_fetch_add(&merges_asked, 1);
		assert_int_equal(kv_backup(db, dirs[k], &bi), 0);
		assert_true(bi.version > 0 && bi.segments >= 2);
		if (!(shm != NULL && k % 2))
			assert_true(bi.segments_linked >= 1);
		versions[k] = bi.version;
		wait_for(&writes, w + 300);
		wait_for(&merges, m + 1);
	}
	bdir = dirs[0];
	/* a directory that is not empty, a file, a missing parent */
	assert_int_equal(kv_backup(db, bdir, NULL), -ENOTEMPTY);
	busy = tu_path(bdir, "META");
	assert_int_equal(kv_backup(db, busy, NULL), -ENOTDIR);
	free(busy);
	busy = tu_path(out, "no/such");
	assert_int_equal(kv_backup(db, busy, NULL), -ENOENT);
	free(busy);

	{
		uint64_t w = atomic_load(&writes), m = atomic_load(&merges);
		atomic_fetch_add(&merges_asked, 1);
		wait_for(&writes, w + 1000);
		wait_for(&merges, m + 1);
	}
	atomic_store(&stop_flag, true);
	pthread_join(wt, NULL);
	pthread_join(mt, NULL);

	for (k = 0; k < NBACKUPS; k++) {
		compare(db, dirs[k], versions[k], &o);
		free(dirs[k]);
	}
	assert_int_equal(kv_close(db), 0);
	if (shm != NULL) {
		tu_rmtree(shm);
		free(shm);
	}
	tu_rmtree(out);
	tu_rmtree(dir);
	free(out);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_backup_under_writes_and_merges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
