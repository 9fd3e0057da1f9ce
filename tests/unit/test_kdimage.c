/* test_kdimage.c — the key-directory image of a clean close (engine/kdimage.c). */
/*
 *   - a clean close writes it, the next open takes it (nothing read from the
 *     segments or hints), removes it, and has every key, version, tombstone
 *     and count it had before, and goes on writing versions above the old;
 *   - an image that does not match what is there is not used, and nothing
 *     acknowledged is lost: an old image put back after writes, after a
 *     crash after writes, after a merge, after META alone changed; with a
 *     hint file gone; damaged;
 *   - a store of tenants activates from it too.
 */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvengine.h"

#define NKEYS 3000

static void opts(struct kv_options *o)
{
	kv_options_init(o);
	o->background = false;
	o->segment_size = 64 * 1024; /* several segments */
	o->sync = KV_SYNC_NONE;
}

static void put_n(kv_db *db, int from, int to, const char *tag)
{
	char k[32], v[64];

	for (int i = from; i < to; i++) {
		snprintf(k, sizeof(k), "img-key-%06d", i);
		snprintf(v, sizeof(v), "%s-%06d-%030d", tag, i, i);
		assert_int_equal(kv_put(db, k, strlen(k), v, strlen(v), NULL, NULL), 0);
	}
}

/* Every key of [0, n) holds tag's value; returns how many did. */
static int count_tag(kv_db *db, int n, const char *tag)
{
	char k[32], v[64];
	int ok = 0;

	for (int i = 0; i < n; i++) {
		struct kv_value val;
		snprintf(k, sizeof(k), "img-key-%06d", i);
		snprintf(v, sizeof(v), "%s-%06d-%030d", tag, i, i);
		if (kv_get(db, k, strlen(k), NULL, &val) == 0) {
			ok += val.len == strlen(v) && memcmp(val.data, v, val.len) == 0;
			kv_value_release(&val);
		}
	}
	return ok;
}

static bool image_used(kv_db *db)
{
	struct kv_recovery_info ri;

	assert_int_equal(kv_recovery_info(db, &ri), 0);
	return ri.keydir_image;
}

static bool exists(const char *dir, const char *name)
{
	char *p = tu_path(dir, "%s", name);
	bool e = access(p, F_OK) == 0;

	free(p);
	return e;
}

static void copy_file(const char *dir, const char *from, const char *to)
{
	char *a = tu_path(dir, "%s", from), *b = tu_path(dir, "%s", to);
	FILE *in = fopen(a, "rb"), *out = fopen(b, "wb");
	char buf[65536];
	size_t n;

	assert_non_null(in);
	assert_non_null(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	assert_int_equal(fclose(in), 0);
	assert_int_equal(fclose(out), 0);
	free(a);
	free(b);
}

/* NKEYS keys of tag "a" (then of tag b, when not NULL) in a database in dir,
 * closed: its image written; a copy of it kept as old-image. */
static void fill_closed(const char *dir, struct kv_options *o, const char *b)
{
	kv_db *db;

	opts(o);
	assert_int_equal(kv_open(dir, o, &db), 0);
	put_n(db, 0, NKEYS, "a");
	if (b != NULL)
		put_n(db, 0, NKEYS, b);
	assert_int_equal(kv_close(db), 0);
	copy_file(dir, "KEYDIR", "old-image");
}

static void test_taken_at_open(void **state)
{
	char *dir = tu_mkdtemp("kdimage");
	struct kv_options o;
	struct kv_stats before, after;
	struct kv_value val;
	uint64_t v1;
	kv_db *db;

	(void)state;
	opts(&o);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	put_n(db, 0, NKEYS, "a");
	put_n(db, 0, NKEYS / 2, "b"); /* history: dead bytes */
	for (int i = 0; i < 100; i++) {
		char k[32];
		snprintf(k, sizeof(k), "img-key-%06d", i);
		assert_int_equal(kv_delete(db, k, strlen(k), NULL, NULL), 0);
	}
	assert_int_equal(kv_put(db, "last", 4, "x", 1, NULL, &v1), 0);
	assert_int_equal(kv_stats(db, &before), 0);
	assert_int_equal(kv_close(db), 0);
	assert_true(exists(dir, "KEYDIR"));

	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_true(image_used(db));
	assert_false(exists(dir, "KEYDIR")); /* taken: it never outlives the open */
	assert_int_equal(kv_stats(db, &after), 0);
	assert_int_equal(after.keys, before.keys);
	assert_int_equal(after.tombstones, before.tombstones);
	assert_int_equal(after.live_bytes, before.live_bytes);
	assert_int_equal(after.tombstone_bytes, before.tombstone_bytes);
	assert_true(after.disk_bytes >= before.disk_bytes); /* a new segment's header, maybe */
	assert_int_equal(count_tag(db, 100, "b"), 0);       /* deleted */
	assert_int_equal(count_tag(db, NKEYS / 2, "b"), NKEYS / 2 - 100);
	assert_int_equal(count_tag(db, NKEYS, "a"), NKEYS - NKEYS / 2);
	assert_int_equal(kv_get(db, "last", 4, NULL, &val), 0);
	assert_int_equal(val.version, v1);
	kv_value_release(&val);
	/* versions go on above the old ones */
	uint64_t v2;
	assert_int_equal(kv_put(db, "last", 4, "y", 1, NULL, &v2), 0);
	assert_true(v2 > v1);
	assert_int_equal(kv_close(db), 0);

	/* and again: the second image has the new write */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_true(image_used(db));
	assert_int_equal(kv_get(db, "last", 4, NULL, &val), 0);
	assert_int_equal(val.version, v2);
	assert_memory_equal(val.data, "y", 1);
	kv_value_release(&val);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* An image of an older state put back: the open must see what is there. */
static void test_stale_image_after_writes(void **state)
{
	char *dir = tu_mkdtemp("kdimage");
	struct kv_options o;
	kv_db *db;

	(void)state;
	fill_closed(dir, &o, NULL);

	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_true(image_used(db));
	put_n(db, 0, 10, "b"); /* appends to the segment the image knew */
	assert_int_equal(kv_close(db), 0);
	copy_file(dir, "old-image", "KEYDIR");

	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_false(image_used(db));
	assert_false(exists(dir, "KEYDIR"));
	assert_int_equal(count_tag(db, 10, "b"), 10);
	assert_int_equal(count_tag(db, NKEYS, "a"), NKEYS - 10);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void write_and_crash(const char *dir, const struct kv_options *o)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		kv_db *db;
		char k[32], v[64];
		if (kv_open(dir, o, &db) != 0 || !image_used(db))
			_exit(10);
		for (int i = 0; i < 10; i++) {
			snprintf(k, sizeof(k), "img-key-%06d", i);
			snprintf(v, sizeof(v), "%s-%06d-%030d", "c", i, i);
			if (kv_put(db, k, strlen(k), v, strlen(v), NULL, NULL) != 0 ||
			    kv_sync(db) != 0)
				_exit(11);
		}
		_exit(0); /* no close: what kill -9 leaves */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_stale_image_after_crash(void **state)
{
	char *dir = tu_mkdtemp("kdimage");
	struct kv_options o;
	kv_db *db;

	(void)state;
	fill_closed(dir, &o, NULL);
	write_and_crash(dir, &o);
	/* as if the image's removal had not reached the disk */
	copy_file(dir, "old-image", "KEYDIR");
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_false(image_used(db));
	assert_int_equal(count_tag(db, 10, "c"), 10);
	assert_int_equal(count_tag(db, NKEYS, "a"), NKEYS - 10);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

/* CRC32C, bit by bit (META's checksum, docs/FORMAT.md). */
static uint32_t crc32c_bits(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n-- > 0) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
	}
	return ~c;
}

static uint32_t le32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* An image is used only beside the META it was written with: META
 * rewritten with another compact revision (and its checksum), nothing else
 * touched since the close, and the image is not used. */
static void test_stale_image_after_meta_change(void **state)
{
	char *dir = tu_mkdtemp("kdimage");
	char *meta = tu_path(dir, "META");
	struct kv_options o;
	struct kv_stats st;
	uint8_t buf[4096];
	size_t n;
	FILE *f;
	kv_db *db;

	(void)state;
	fill_closed(dir, &o, NULL);
	assert_non_null(f = fopen(meta, "r+b"));
	n = fread(buf, 1, sizeof(buf), f);
	assert_true(n >= 52 && n < sizeof(buf));
	assert_int_equal(crc32c_bits(buf, n - 4), le32(buf + n - 4));
	for (int i = 0; i < 8; i++)
		assert_int_equal(buf[16 + i], 0); /* compact revision 0 */
	buf[16] = 5;
	uint32_t c = crc32c_bits(buf, n - 4);
	for (int i = 0; i < 4; i++)
		buf[n - 4 + i] = (uint8_t)(c >> (8 * i));
	assert_int_equal(fseek(f, 0, SEEK_SET), 0);
	assert_int_equal(fwrite(buf, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
	assert_true(exists(dir, "KEYDIR"));

	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_false(image_used(db));
	assert_false(exists(dir, "KEYDIR"));
	assert_int_equal(kv_stats(db, &st), 0);
	assert_int_equal(st.compact_revision, 5);
	assert_int_equal(count_tag(db, NKEYS, "a"), NKEYS);
	assert_int_equal(kv_close(db), 0);
	free(meta);
	tu_rmtree(dir);
	free(dir);
}

static void test_stale_image_after_merge(void **state)
{
	char *dir = tu_mkdtemp("kdimage");
	struct kv_options o;
	kv_db *db;

	(void)state;
	fill_closed(dir, &o, "b");
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_merge(db), 0);
	assert_int_equal(kv_close(db), 0);
	copy_file(dir, "old-image", "KEYDIR");
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_false(image_used(db));
	assert_int_equal(count_tag(db, NKEYS, "b"), NKEYS);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_hint_gone_or_image_damaged(void **state)
{
	char *dir = tu_mkdtemp("kdimage");
	char names[64][64];
	struct kv_options o;
	struct kv_recovery_info ri;
	kv_db *db;
	char *p;
	int nh;

	(void)state;
	fill_closed(dir, &o, NULL);
	/* a hint file deleted (an operator asking for a scan): scanned */
	nh = tu_list_ext(dir, ".hint", names, 64);
	assert_true(nh > 1);
	p = tu_path(dir, "%s", names[0]);
	assert_int_equal(unlink(p), 0);
	free(p);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_false(ri.keydir_image);
	assert_int_equal(ri.segments_scanned, 1);
	assert_int_equal(count_tag(db, NKEYS, "a"), NKEYS);
	assert_int_equal(kv_close(db), 0);
	/* a segment cut short since the close: not taken, the loss reported */
	nh = tu_list_ext(dir, ".seg", names, 64);
	assert_true(nh > 1);
	p = tu_path(dir, "%s", names[0]);
	assert_int_equal(truncate(p, tu_file_size(p) - 10), 0);
	free(p);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_false(ri.keydir_image);
	assert_true(ri.lost_bytes > 0 || ri.corrupt_records > 0);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	fill_closed(dir, &o, NULL);
	/* one byte of the image flipped: hints instead */
	p = tu_path(dir, "KEYDIR");
	tu_flip_byte(p, 4096);
	free(p);
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_false(ri.keydir_image);
	assert_true(ri.hints_loaded > 0);
	assert_int_equal(count_tag(db, NKEYS, "a"), NKEYS);
	assert_int_equal(kv_close(db), 0);
	tu_rmtree(dir);
	free(dir);
}

static void test_store_activation(void **state)
{
	char *dir = tu_mkdtemp("kdimage");
	struct kv_store_options so;
	struct kv_tenant_config tc;
	kv_store *s;
	kv_tenant *t;
	uint64_t us;

	(void)state;
	kv_store_options_init(&so);
	assert_int_equal(kv_store_open(dir, &so, &s), 0);
	kv_tenant_config_init(&tc);
	assert_int_equal(kv_store_create(s, "t1", &tc), 0);
	assert_int_equal(kv_store_get(s, "t1", &t), 0);
	put_n(kv_tenant_db(t), 0, NKEYS, "a");
	kv_store_put(s, t);
	assert_int_equal(kv_store_passivate(s, "t1"), 0);
	assert_int_equal(kv_store_activate(s, "t1", &us), 0);
	assert_int_equal(kv_store_get(s, "t1", &t), 0);
	assert_true(image_used(kv_tenant_db(t)));
	assert_int_equal(count_tag(kv_tenant_db(t), NKEYS, "a"), NKEYS);
	kv_store_put(s, t);
	assert_int_equal(kv_store_close(s), 0);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_taken_at_open),
	        cmocka_unit_test(test_stale_image_after_writes),
	        cmocka_unit_test(test_stale_image_after_crash),
	        cmocka_unit_test(test_stale_image_after_merge),
	        cmocka_unit_test(test_stale_image_after_meta_change),
	        cmocka_unit_test(test_hint_gone_or_image_damaged),
	        cmocka_unit_test(test_store_activation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
