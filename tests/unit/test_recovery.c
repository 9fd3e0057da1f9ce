/* test_recovery.c — crashes, torn tails at every byte, bad checksums, damaged and missing hints never block open or return bad data; a torn batch stays cut off across a later write and a second crash; a segment shorter than its header is removed. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "fault.h"
#include "io.h"

static void opts(struct kv_options *o)
{
	kv_options_init(o);
	o->background = false;
}

/* Runs fn in a child that opens dir, calls fn, and exits without closing:
 * what a crash (kill -9) leaves behind. */
static void crash_after(const char *dir, const struct kv_options *o, void (*fn)(kv_db *db, void *arg),
                        void *arg)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		kv_db *db;
		if (kv_open(dir, o, &db) != 0)
			_exit(10);
		fn(db, arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void put_or_die(kv_db *db, const char *k, const void *v, size_t vlen)
{
	if (kv_put(db, k, strlen(k), v, vlen, NULL, NULL) != 0)
		_exit(11);
}

static void write_ten(kv_db *db, void *arg)
{
	char k[16], v[200];

	(void)arg;
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "key%02d", i);
		memset(v, 'a' + i, sizeof(v));
		put_or_die(db, k, v, (size_t)(17 * i + 3));
	}
}

static void write_last(kv_db *db, void *arg)
{
	(void)arg;
	put_or_die(db, "last", "the-last-value", 14);
}

static void write_batch(kv_db *db, void *arg)
{
	struct kv_op ops[3] = {
		{.type = KV_OP_PUT, .key = "b1", .key_len = 2, .value = "v1", .value_len = 2,
		 .if_version = KV_ANY_VERSION},
		{.type = KV_OP_PUT, .key = "b2", .key_len = 2, .value = "v2", .value_len = 2,
		 .if_version = KV_ANY_VERSION},
		{.type = KV_OP_DELETE, .key = "key03", .key_len = 5, .if_version = KV_ANY_VERSION},
	};
	(void)arg;
	if (kv_batch(db, ops, 3) != 0)
		_exit(12);
}

static void check_ten(kv_db *db)
{
	char k[16], v[200];

	for (int i = 0; i < 10; i++) {
		struct kv_value val;
		snprintf(k, sizeof(k), "key%02d", i);
		memset(v, 'a' + i, sizeof(v));
		assert_int_equal(kv_get(db, k, strlen(k), NULL, &val), 0);
		assert_int_equal(val.len, (size_t)(17 * i + 3));
		assert_memory_equal(val.data, v, val.len);
		assert_int_equal(val.version, (uint64_t)i + 1);
		kv_value_release(&val);
	}
}

static char *only_segment(const char *dir)
{
	char names[8][64];
	int n = tu_list_ext(dir, ".seg", names, 8);

	assert_int_equal(n, 1);
	return tu_path(dir, "%s", names[0]);
}

static void test_torn_tail_every_byte(void **state)
{
	char *dir = tu_mkdtemp("torn");
	char *seg;
	struct kv_options o;
	off_t s1, s2;

	(void)state;
	opts(&o);
	crash_after(dir, &o, write_ten, NULL);
	seg = only_segment(dir);
	s1 = tu_file_size(seg);
	crash_after(dir, &o, write_last, NULL);
	s2 = tu_file_size(seg);
	assert_true(s2 > s1);
	free(seg);

	for (off_t cut = s1; cut <= s2; cut++) {
		char *copy = tu_mkdtemp("torncopy");
		struct kv_recovery_info ri;
		struct kv_value val;
		kv_db *db;
		char *cseg;

		tu_copydir(dir, copy);
		cseg = only_segment(copy);
		assert_int_equal(truncate(cseg, cut), 0);
		assert_int_equal(kv_open(copy, &o, &db), 0);
		assert_int_equal(kv_recovery_info(db, &ri), 0);
		check_ten(db);
		if (cut < s2) {
			assert_int_equal(kv_get(db, "last", 4, NULL, &val), KV_ENOTFOUND);
			assert_int_equal(ri.truncated_bytes, (uint64_t)(cut - s1));
			assert_int_equal(tu_file_size(cseg), s1);
		} else {
			assert_int_equal(kv_get(db, "last", 4, NULL, &val), 0);
			assert_int_equal(val.version, 11);
			kv_value_release(&val);
			assert_int_equal(ri.truncated_bytes, 0);
		}
		assert_int_equal(ri.corrupt_records, 0);
		/* the repaired database takes writes and survives another crash */
		assert_int_equal(kv_put(db, "after", 5, "x", 1, NULL, NULL), 0);
		assert_int_equal(kv_close(db), 0);
		assert_int_equal(kv_open(copy, &o, &db), 0);
		assert_int_equal(kv_get(db, "after", 5, NULL, &val), 0);
		assert_int_equal(val.version, cut < s2 ? 11 : 12);
		kv_value_release(&val);
		check_ten(db);
		assert_int_equal(kv_close(db), 0);
		free(cseg);
		tu_rmtree(copy);
		free(copy);
	}
	tu_rmtree(dir);
	free(dir);
}

static void test_bad_crc_tail(void **state)
{
	char *dir = tu_mkdtemp("badcrc");
	struct kv_options o;
	struct kv_recovery_info ri;
	struct kv_value val;
	kv_db *db;
	char *seg;
	off_t s2;

	(void)state;
	opts(&o);
	crash_after(dir, &o, write_ten, NULL);
	crash_after(dir, &o, write_last, NULL);
	seg = only_segment(dir);
	s2 = tu_file_size(seg);
	tu_flip_byte(seg, s2 - 3); /* inside the last value */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_true(ri.truncated_bytes > 0);
	check_ten(db);
	assert_int_equal(kv_get(db, "last", 4, NULL, &val), KV_ENOTFOUND);
	assert_int_equal(kv_close(db), 0);
	free(seg);
	tu_rmtree(dir);
	free(dir);
}

static void test_batch_all_or_nothing(void **state)
{
	char *dir = tu_mkdtemp("batch");
	char *seg;
	struct kv_options o;
	off_t s1, s2;

	(void)state;
	opts(&o);
	crash_after(dir, &o, write_ten, NULL);
	seg = only_segment(dir);
	s1 = tu_file_size(seg);
	crash_after(dir, &o, write_batch, NULL);
	s2 = tu_file_size(seg);
	free(seg);
	for (off_t cut = s1; cut <= s2; cut++) {
		char *copy = tu_mkdtemp("batchcopy");
		struct kv_value val;
		kv_db *db;
		char *cseg;
		bool whole = cut == s2;

		tu_copydir(dir, copy);
		cseg = only_segment(copy);
		assert_int_equal(truncate(cseg, cut), 0);
		assert_int_equal(kv_open(copy, &o, &db), 0);
		assert_int_equal(kv_get(db, "b1", 2, NULL, &val), whole ? 0 : KV_ENOTFOUND);
		if (whole)
			kv_value_release(&val);
		assert_int_equal(kv_get(db, "b2", 2, NULL, &val), whole ? 0 : KV_ENOTFOUND);
		if (whole)
			kv_value_release(&val);
		assert_int_equal(kv_get(db, "key03", 5, NULL, &val), whole ? KV_ENOTFOUND : 0);
		if (!whole)
			kv_value_release(&val);
		assert_int_equal(kv_close(db), 0);
		free(cseg);
		tu_rmtree(copy);
		free(copy);
	}
	tu_rmtree(dir);
	free(dir);
}

static void write_after(kv_db *db, void *arg)
{
	(void)arg;
	put_or_die(db, "after", "x", 1);
}

/* A torn batch stays cut off when the repaired log is written to and the
 * process crashes again (no hint written in between): the later write must
 * not complete the batch's first records into a visible half batch. */
static void test_torn_batch_then_write_then_crash(void **state)
{
	char *dir = tu_mkdtemp("batch2");
	char *seg;
	struct kv_options o;
	off_t s1, s2;

	(void)state;
	opts(&o);
	crash_after(dir, &o, write_ten, NULL);
	seg = only_segment(dir);
	s1 = tu_file_size(seg);
	crash_after(dir, &o, write_batch, NULL);
	s2 = tu_file_size(seg);
	free(seg);
	for (off_t cut = s1; cut < s2; cut++) {
		char *copy = tu_mkdtemp("batch2copy");
		struct kv_value val;
		kv_db *db;
		char *cseg;

		tu_copydir(dir, copy);
		cseg = only_segment(copy);
		assert_int_equal(truncate(cseg, cut), 0);
		crash_after(copy, &o, write_after, NULL);
		assert_int_equal(kv_open(copy, &o, &db), 0);
		assert_int_equal(kv_get(db, "b1", 2, NULL, &val), KV_ENOTFOUND);
		assert_int_equal(kv_get(db, "b2", 2, NULL, &val), KV_ENOTFOUND);
		check_ten(db);
		assert_int_equal(kv_get(db, "after", 5, NULL, &val), 0);
		assert_int_equal(val.len, 1);
		assert_memory_equal(val.data, "x", 1);
		assert_true(val.version >= 11); /* after the ten, never below */
		kv_value_release(&val);
		assert_int_equal(kv_close(db), 0);
		free(cseg);
		tu_rmtree(copy);
		free(copy);
	}
	tu_rmtree(dir);
	free(dir);
}

/* Many small segments, closed cleanly (all sealed, all with hints). */
static void fill_segments(const char *dir, struct kv_options *o, int n)
{
	kv_db *db;
	char k[32], v[64];

	opts(o);
	o->segment_size = 4096;
	assert_int_equal(kv_open(dir, o, &db), 0);
	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "seg-key-%05d", i);
		snprintf(v, sizeof(v), "value-%05d-%040d", i, i);
		assert_int_equal(kv_put(db, k, strlen(k), v, strlen(v), NULL, NULL), 0);
	}
	assert_int_equal(kv_close(db), 0);
}

static int check_all(kv_db *db, int n, int *ret_corrupt)
{
	char k[32], v[64];
	int ok = 0, corrupt = 0;

	for (int i = 0; i < n; i++) {
		struct kv_value val;
		int rv;
		snprintf(k, sizeof(k), "seg-key-%05d", i);
		snprintf(v, sizeof(v), "value-%05d-%040d", i, i);
		rv = kv_get(db, k, strlen(k), NULL, &val);
		if (rv == 0) {
			/* whatever is returned is exactly what was written */
			assert_int_equal(val.len, strlen(v));
			assert_memory_equal(val.data, v, val.len);
			kv_value_release(&val);
			ok++;
		} else {
			assert_true(rv == KV_ECORRUPT || rv == KV_ENOTFOUND);
			corrupt++;
		}
	}
	*ret_corrupt = corrupt;
	return ok;
}

/* Finds the offset of needle in a file; -1 if absent. */
static off_t find_in_file(const char *path, const char *needle)
{
	FILE *f = fopen(path, "rb");
	static char buf[1 << 16];
	size_t n, nl = strlen(needle);
	off_t at = -1;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	for (size_t i = 0; i + nl <= n; i++)
		if (memcmp(buf + i, needle, nl) == 0) {
			at = (off_t)i;
			break;
		}
	return at;
}

static void test_corrupt_sealed_segment(void **state)
{
	char *dir = tu_mkdtemp("sealed");
	char names[256][64];
	struct kv_options o;
	struct kv_recovery_info ri;
	struct kv_value val;
	kv_db *db;
	char *seg = NULL, *hint;
	int nseg, ok, corrupt;
	off_t at = -1;

	(void)state;
	fill_segments(dir, &o, 400);
	nseg = tu_list_ext(dir, ".seg", names, 256);
	assert_true(nseg > 5);
	/* damage the value of key 00100, in a sealed segment in the middle */
	for (int i = 0; i < nseg; i++) {
		seg = tu_path(dir, "%s", names[i]);
		at = find_in_file(seg, "value-00100-");
		if (at >= 0)
			break;
		free(seg);
		seg = NULL;
	}
	assert_non_null(seg);
	tu_flip_byte(seg, at + 20);

	/* with its hint: opens, the damaged record reads as data loss */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_get(db, "seg-key-00100", 13, NULL, &val), KV_ECORRUPT);
	ok = check_all(db, 400, &corrupt);
	assert_int_equal(ok, 399);
	assert_int_equal(corrupt, 1);
	assert_int_equal(kv_close(db), 0);

	/* without its hint: the scan reports the damaged record, and, its header
	 * being intact, still indexes it: the read says data loss, not "not
	 * found" or an older value */
	assert_true(asprintf(&hint, "%.*s.hint", (int)strlen(seg) - 4, seg) > 0);
	assert_int_equal(unlink(hint), 0);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.corrupt_records, 1);
	assert_true(ri.corrupt_bytes > 0);
	assert_int_equal(ri.truncated_bytes, 0);
	assert_int_equal(ri.segments_scanned, 1);
	ok = check_all(db, 400, &corrupt);
	assert_int_equal(ok, 399);
	assert_int_equal(kv_get(db, "seg-key-00100", 13, NULL, &val), KV_ECORRUPT);
	assert_int_equal(kv_close(db), 0);
	/* the hint written for it at close keeps the damaged entry too */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.segments_scanned, 0);
	assert_int_equal(kv_get(db, "seg-key-00100", 13, NULL, &val), KV_ECORRUPT);
	assert_int_equal(kv_close(db), 0);
	free(hint);
	free(seg);
	tu_rmtree(dir);
	free(dir);
}

static void test_hint_fallback(void **state)
{
	char *dir = tu_mkdtemp("hint");
	char names[256][64];
	struct kv_options o;
	struct kv_recovery_info ri;
	kv_db *db;
	char *hint;
	int nh, corrupt;

	(void)state;
	fill_segments(dir, &o, 300);
	nh = tu_list_ext(dir, ".hint", names, 256);
	assert_true(nh > 3);
	/* reopen: everything from hints (without the key-directory image the
	 * close wrote, which would be taken instead: test_kdimage.c) */
	hint = tu_path(dir, "KEYDIR");
	assert_int_equal(unlink(hint), 0);
	free(hint);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.hints_rejected, 0);
	assert_int_equal(ri.segments_scanned, 0);
	assert_int_equal(ri.hints_loaded, (uint32_t)nh);
	assert_int_equal(check_all(db, 300, &corrupt), 300);
	assert_int_equal(kv_close(db), 0);

	/* a damaged hint is rejected and its segment scanned */
	hint = tu_path(dir, "%s", names[1]);
	tu_flip_byte(hint, tu_file_size(hint) / 2);
	free(hint);
	/* a truncated one too */
	hint = tu_path(dir, "%s", names[2]);
	assert_int_equal(truncate(hint, tu_file_size(hint) - 7), 0);
	free(hint);
	/* a missing one is just scanned */
	hint = tu_path(dir, "%s", names[3]);
	assert_int_equal(unlink(hint), 0);
	free(hint);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.hints_rejected, 2);
	assert_int_equal(ri.segments_scanned, 3);
	assert_int_equal(ri.corrupt_records, 0);
	assert_int_equal(check_all(db, 300, &corrupt), 300);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* The hints of segments this process wrote are collected as their batches
 * land, not read back: they are the same bytes a scan of the segment gives
 * (puts, deletes, TTLs, an atomic batch, sync marks skipped). */
static void read_all(const char *path, uint8_t **ret, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	off_t n = tu_file_size(path);

	assert_non_null(f);
	assert_true(n > 0);
	*ret = malloc((size_t)n);
	assert_non_null(*ret);
	assert_int_equal(fread(*ret, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*ret_len = (size_t)n;
}

/* An open after a clean close that writes nothing starts no segment and
 * leaves META as it was; the first write after one starts the next segment,
 * with versions above the old ones, and a crash after it loses nothing. */
static void test_reopen_without_writes(void **state)
{
	char *dir = tu_mkdtemp("recovery");
	char *meta = tu_path(dir, "META");
	char before[16][64], after[16][64];
	uint8_t *m0, *m1;
	size_t l0, l1;
	struct kv_options o;
	struct kv_value v;
	uint64_t ver0, ver1;
	kv_db *db;
	int n0, n1;

	(void)state;
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_put(db, "a", 1, "1", 1, NULL, &ver0), 0);
	assert_int_equal(kv_close(db), 0);
	/* (the first open lists in META the segment the close sealed) */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_close(db), 0);
	n0 = tu_list_ext(dir, ".seg", before, 16);
	read_all(meta, &m0, &l0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(kv_open(dir, &o, &db), 0);
		assert_int_equal(kv_get(db, "a", 1, NULL, &v), 0);
		kv_value_release(&v);
		assert_int_equal(kv_close(db), 0);
	}
	n1 = tu_list_ext(dir, ".seg", after, 16);
	assert_int_equal(n1, n0);
	for (int i = 0; i < n0; i++)
		assert_string_equal(after[i], before[i]);
	read_all(meta, &m1, &l1);
	assert_int_equal(l1, l0);
	assert_memory_equal(m1, m0, l0);

	crash_after(dir, &o, write_last, NULL);
	assert_int_equal(tu_list_ext(dir, ".seg", after, 16), n0 + 1);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_get(db, "last", 4, NULL, &v), 0);
	ver1 = v.version;
	kv_value_release(&v);
	assert_true(ver1 > ver0);
	assert_int_equal(kv_get(db, "a", 1, NULL, &v), 0);
	kv_value_release(&v);
	assert_int_equal(kv_close(db), 0);
	free(m0);
	free(m1);
	free(meta);
	tu_rmtree(dir);
	free(dir);
}

static void test_hint_collected(void **state)
{
	char *dir = tu_mkdtemp("collect");
	char names[256][64], k[32], v[64];
	uint8_t *collected[256];
	size_t lens[256];
	struct kv_options o;
	struct kv_recovery_info ri;
	struct kv_write_opts wo = {.if_version = KV_ANY_VERSION};
	kv_db *db;
	int nh, i;

	(void)state;
	opts(&o);
	o.segment_size = 4096;
	o.sync = KV_SYNC_INTERVAL; /* sync marks in the segments */
	o.sync_interval_ms = 1;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (i = 0; i < 400; i++) {
		snprintf(k, sizeof(k), "key-%03d", i % 150);
		snprintf(v, sizeof(v), "value-%05d", i);
		wo.ttl_ms = i % 3 == 0 ? 3600000 : 0;
		if (i % 7 == 6) {
			int rv = kv_delete(db, k, strlen(k), NULL, NULL);
			assert_true(rv == 0 || rv == KV_ENOTFOUND);
		} else if (i % 11 == 10) {
			struct kv_op ops[3] = {
			        {.type = KV_OP_PUT, .key = "b1", .key_len = 2, .value = v,
			         .value_len = strlen(v), .if_version = KV_ANY_VERSION},
			        {.type = KV_OP_DELETE, .key = "b2", .key_len = 2,
			         .if_version = KV_ANY_VERSION},
			        {.type = KV_OP_PUT, .key = k, .key_len = strlen(k), .value = v,
			         .value_len = strlen(v), .if_version = KV_ANY_VERSION},
			};
			assert_int_equal(kv_batch(db, ops, 3), 0);
		} else {
			assert_int_equal(kv_put(db, k, strlen(k), v, strlen(v), &wo, NULL), 0);
		}
		if (i % 50 == 0)
			assert_int_equal(kv_tick(db) < 0, false); /* interval syncs, marks */
	}
	assert_int_equal(kv_close(db), 0);
	nh = tu_list_ext(dir, ".hint", names, 256);
	assert_true(nh > 5);
	for (i = 0; i < nh; i++) {
		char *p = tu_path(dir, "%s", names[i]);
		read_all(p, &collected[i], &lens[i]);
		assert_int_equal(unlink(p), 0);
		free(p);
	}
	/* every segment scanned now, its hint written from the scan */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.hints_loaded, 0);
	assert_true(ri.segments_scanned >= (uint32_t)nh);
	assert_int_equal(kv_close(db), 0);
	for (i = 0; i < nh; i++) {
		char *p = tu_path(dir, "%s", names[i]);
		uint8_t *scanned;
		size_t n;
		read_all(p, &scanned, &n);
		assert_int_equal(n, lens[i]);
		assert_memory_equal(scanned, collected[i], n);
		free(scanned);
		free(collected[i]);
		free(p);
	}
	tu_rmtree(dir);
	free(dir);
}

static void test_damaged_segment_header(void **state)
{
	char *dir = tu_mkdtemp("hdr");
	char names[256][64];
	struct kv_options o;
	struct kv_recovery_info ri;
	kv_db *db;
	char *p;
	int corrupt;

	(void)state;
	fill_segments(dir, &o, 200);
	assert_true(tu_list_ext(dir, ".seg", names, 256) > 3);
	p = tu_path(dir, "%s", names[1]);
	tu_flip_byte(p, 3); /* the magic */
	free(p);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.corrupt_records, 1);
	assert_int_equal(check_all(db, 200, &corrupt), 200);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void crash_idle(kv_db *db, void *arg)
{
	(void)db;
	(void)arg;
}

static void test_stale_lock_after_crash(void **state)
{
	char *dir = tu_mkdtemp("lock");
	struct kv_options o;
	kv_db *db;

	(void)state;
	opts(&o);
	crash_after(dir, &o, write_ten, NULL);
	crash_after(dir, &o, crash_idle, NULL);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	check_ten(db);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_leftover_tmp_files(void **state)
{
	char *dir = tu_mkdtemp("tmp");
	struct kv_options o;
	kv_db *db;
	char *t;
	FILE *f;

	(void)state;
	opts(&o);
	crash_after(dir, &o, write_ten, NULL);
	t = tu_path(dir, "000000ff.seg.tmp");
	f = fopen(t, "w");
	fputs("partial merge output", f);
	fclose(f);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(tu_file_size(t), -1);
	check_ten(db);
	assert_int_equal(kv_close(db), 0);
	free(t);
	tu_rmtree(dir);
	free(dir);
}

/* A segment shorter than its header (a crash while it was being created)
 * is deleted at open; the rest is intact and takes writes. */
static void test_short_segment_removed(void **state)
{
	char *dir = tu_mkdtemp("shortseg");
	struct kv_options o;
	struct kv_recovery_info ri;
	struct kv_value val;
	kv_db *db;
	char *p;
	FILE *f;

	(void)state;
	opts(&o);
	crash_after(dir, &o, write_ten, NULL);
	p = tu_path(dir, "00000002.seg");
	f = fopen(p, "w");
	assert_non_null(f);
	fputs("KVDSEG", f); /* a few bytes of a header */
	fclose(f);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(tu_file_size(p), -1);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_int_equal(ri.corrupt_records, 0);
	check_ten(db);
	assert_int_equal(kv_put(db, "after", 5, "x", 1, NULL, NULL), 0);
	assert_int_equal(kv_close(db), 0);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	check_ten(db);
	assert_int_equal(kv_get(db, "after", 5, NULL, &val), 0);
	assert_int_equal(val.version, 11);
	kv_value_release(&val);
	assert_int_equal(kv_close(db), 0);
	free(p);
	tu_rmtree(dir);
	free(dir);
}

/* A short write must be finished (io_uring) or failed, never acknowledged half done. */
static void test_short_write(void **state)
{
	char *dir = tu_mkdtemp("short");
	struct kv_options o;
	struct tf_fault f;
	struct kv_value val;
	struct kv_stats st;
	kv_db *db;
	int rv;

	(void)state;
	opts(&o);
	tf_fault_init(&f);
	o.fault = &f.hooks;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_stats(db, &st), 0);
	f.short_write = 1;
	rv = kv_put(db, "k", 1, "0123456789abcdef", 16, NULL, NULL);
	/* a write cut short by an error fails its request, and nothing of it
	 * stays (a short write without error is finished by the write loop) */
	assert_int_equal(rv, -EIO);
	assert_int_equal(kv_get(db, "k", 1, NULL, &val), KV_ENOTFOUND);
	/* a failed write is not a failed sync: the database stays writable */
	assert_int_equal(kv_stats(db, &st), 0);
	assert_false(st.read_only);
	assert_int_equal(kv_put(db, "k2", 2, "v", 1, NULL, NULL), 0);
	assert_int_equal(kv_close(db), 0);
	o.fault = NULL;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_get(db, "k2", 2, NULL, &val), 0);
	assert_int_equal(val.len, 1);
	assert_memory_equal(val.data, "v", 1);
	kv_value_release(&val);
	/* and nothing of the half-written record came back from the disk */
	assert_int_equal(kv_get(db, "k", 1, NULL, &val), KV_ENOTFOUND);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_torn_tail_every_byte),
		cmocka_unit_test(test_bad_crc_tail),
		cmocka_unit_test(test_batch_all_or_nothing),
		cmocka_unit_test(test_torn_batch_then_write_then_crash),
		cmocka_unit_test(test_corrupt_sealed_segment),
		cmocka_unit_test(test_hint_fallback),
		cmocka_unit_test(test_hint_collected),
		cmocka_unit_test(test_reopen_without_writes),
		cmocka_unit_test(test_damaged_segment_header),
		cmocka_unit_test(test_stale_lock_after_crash),
		cmocka_unit_test(test_leftover_tmp_files),
		cmocka_unit_test(test_short_segment_removed),
		cmocka_unit_test(test_short_write),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
