/* test_syncmark.c — sync marks: after a power cut that kept unsynced writes out of order, recovery cuts the active segment at the first hole past the last durable point (the state stays a prefix), while damage to what was durable is reported and skipped, never cut. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/wait.h>
/* clang-format off: cmocka.h needs the three above first */
#include <cmocka.h>

struct child {
	struct tu_clock clk;
	struct kv_options o;
};

static void put(kv_db *db, const char *k)
{
	char v[300];

	memset(v, k[0], sizeof(v));
	memcpy(v, k, strlen(k));
	if (kv_put(db, k, strlen(k), v, sizeof(v), NULL, NULL) != 0)
		_exit(11);
}

/* In a child: a1..a5 synced by the interval sync (kv_tick), then b1..b5
 * written and never synced; the child ends without closing (a crash; the
 * page cache holds everything, as a power cut may keep any of it). */
static void write_history(const char *dir)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct child c = {.clk = {1000000}};
		kv_db *db;
		tu_options(&c.o, &c.clk);
		c.o.sync = KV_SYNC_INTERVAL;
		c.o.sync_interval_ms = 100;
		if (kv_open(dir, &c.o, &db) != 0)
			_exit(10);
		put(db, "a1");
		put(db, "a2");
		put(db, "a3");
		put(db, "a4");
		put(db, "a5");
		__atomic_add_fetch(&c.clk.ms, 1000, __ATOMIC_SEQ_CST);
		if (kv_tick(db) != 0)
			_exit(12);
		__atomic_add_fetch(&c.clk.ms, 1000, __ATOMIC_SEQ_CST);
		put(db, "b1"); /* its batch ends with a mark: durable through a5 */
		put(db, "b2");
		put(db, "b3");
		put(db, "b4");
		put(db, "b5");
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* The one segment with records (the active one). */
static char *active_segment(const char *dir)
{
	char names[16][64];
	int n = tu_list_ext(dir, ".seg", names, 16);

	assert_true(n >= 1);
	return tu_path(dir, "%s", names[n - 1]);
}

static off_t find(const char *path, const char *what)
{
	int fd = open(path, O_RDONLY);
	off_t size = tu_file_size(path), at = -1;
	char *buf = malloc((size_t)size);

	assert_true(fd >= 0 && buf != NULL);
	assert_int_equal(pread(fd, buf, (size_t)size, 0), (ssize_t)size);
	close(fd);
	for (off_t i = 0; i + (off_t)strlen(what) <= size; i++)
		if (memcmp(buf + i, what, strlen(what)) == 0) {
			at = i;
			break;
		}
	free(buf);
	return at;
}

/* Zeroes len bytes at off: a write the disk never got. */
static void zero(const char *path, off_t off, size_t len)
{
	int fd = open(path, O_WRONLY);
	char *z = calloc(1, len);

	assert_true(fd >= 0 && z != NULL);
	assert_int_equal(pwrite(fd, z, len, off), (ssize_t)len);
	close(fd);
	free(z);
}

static int get(kv_db *db, const char *k)
{
	struct kv_value v;
	int rv = kv_get(db, k, strlen(k), NULL, &v);

	if (rv == 0)
		kv_value_release(&v);
	return rv;
}

/* b2 lost, b3..b5 kept (out of order): everything from b2 on is cut. */
static void test_hole_past_the_durable_point_is_cut(void **state)
{
	char *dir = tu_mkdtemp("hole"), *seg;
	struct kv_options o;
	struct kv_recovery_info ri;
	kv_db *db;
	off_t b2;

	(void)state;
	write_history(dir);
	seg = active_segment(dir);
	/* the record of b2 starts 48 bytes before its key */
	b2 = find(seg, "b2") - 48;
	assert_true(b2 > 0);
	zero(seg, b2, 100);

	tu_options(&o, NULL);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.corrupt_records, 0);
	assert_true(ri.truncated_bytes >= 4 * 350);
	assert_int_equal(get(db, "a5"), 0);
	assert_int_equal(get(db, "b1"), 0);
	/* a prefix: nothing written after the hole survives it */
	assert_int_equal(get(db, "b2"), KV_ENOTFOUND);
	assert_int_equal(get(db, "b3"), KV_ENOTFOUND);
	assert_int_equal(get(db, "b5"), KV_ENOTFOUND);
	assert_int_equal(kv_close(db), 0);
	{
		struct kv_check_summary sum;
		assert_int_equal(kv_check(dir, NULL, NULL, &sum), 0);
		assert_int_equal(sum.damaged, 0);
	}
	free(seg);
	tu_rmtree(dir);
	free(dir);
}

/* a3 damaged, though durable (a mark after it says so): damage, reported and
 * skipped; what follows is kept. */
static void test_damage_before_the_durable_point_is_kept_around(void **state)
{
	char *dir = tu_mkdtemp("rot"), *seg;
	struct kv_options o;
	struct kv_recovery_info ri;
	kv_db *db;
	off_t a3;

	(void)state;
	write_history(dir);
	seg = active_segment(dir);
	a3 = find(seg, "a3");
	assert_true(a3 > 0);
	tu_flip_byte(seg, a3 + 100); /* in its value: the header still makes sense */

	tu_options(&o, NULL);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.corrupt_records, 1);
	assert_int_equal(ri.truncated_bytes, 0);
	assert_int_equal(get(db, "a3"), KV_ECORRUPT);
	assert_int_equal(get(db, "a4"), 0);
	assert_int_equal(get(db, "b1"), 0);
	assert_int_equal(get(db, "b5"), 0);
	assert_int_equal(kv_close(db), 0);
	free(seg);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hole_past_the_durable_point_is_cut),
		cmocka_unit_test(test_damage_before_the_durable_point_is_kept_around),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
