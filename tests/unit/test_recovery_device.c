/* test_recovery_device.c — recovery on the device backend at every cut byte of the tail: the active
 * segment's extent past byte N lost (zeroed, or holding the records of an earlier use of the
 * extent) keeps exactly the whole records before N, and a batch cut anywhere is all or nothing; a
 * segment left open in a 64 MiB extent with one record is scanned to that record alone (the scan's
 * time printed), checked without damage and sealed after it. */
/*
 * On a device a "cut" is the part of the active segment's extent past byte
 * N that never reached the device: it reads as zeros (a fresh extent) or as
 * whatever an earlier use of the extent left there. The earlier use is
 * made as the format says it would be: records at the same places (the
 * same keys, other values, one more record after them) whose CRCs carry
 * the seed of the extent's previous generation (docs/FORMAT.md, "Record
 * CRCs are seeded"). Recovery must keep exactly the whole records before
 * N, never a stale one, and the repaired tenant must take writes and
 * survive a clean reopen. The file backend's cases (a truncated file, a
 * segment shorter than its header, .tmp leftovers, the LOCK file) are in
 * test_recovery.c.
 */
#include "testutil.h"

#include "dev_internal.h"
#include "record.h"
#include "segment.h"
#include "storage.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/wait.h>

#include <cmocka.h> /* after the headers it needs */

int db_open(struct kv_storage *st, bool own, const char *tenant, const struct kv_options *opts,
            kv_db **ret_db);

#define IMG_SIZE (16u << 20)
#define EXTENT   (1u << 20)

static void make_image_of(const char *img, uint64_t size, uint64_t extent)
{
	struct kv_dev_format_options fo = {.extent_size = extent, .force = true};
	char err[256];
	int fd = open(img, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	if (kv_dev_format(img, &fo, err, sizeof(err)) != 0)
		fail_msg("kv_dev_format: %s", err);
}

static void make_image(const char *img)
{
	make_image_of(img, IMG_SIZE, EXTENT);
}

static void copy_file(const char *from, const char *to)
{
	char *cmd;
	int rv;

	assert_true(asprintf(&cmd, "cp --sparse=always '%s' '%s'", from, to) > 0);
	rv = system(cmd);
	free(cmd);
	assert_true(WIFEXITED(rv) && WEXITSTATUS(rv) == 0);
}

static int open_db(const char *img, kv_db **ret)
{
	struct kv_options o;
	struct kv_storage *st;
	int rv;

	kv_options_init(&o);
	o.background = false;
	if ((rv = kv_storage_dev_open(img, 1u << 20, false, NULL, &st)) != 0)
		return rv;
	return db_open(st, true, "t", &o, ret);
}

/* Runs fn in a child that opens the tenant, calls fn and exits without
 * closing: what a crash leaves on the device (every write was issued). */
static void crash_after(const char *img, void (*fn)(kv_db *db))
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		kv_db *db;
		if (open_db(img, &db) != 0)
			_exit(10);
		fn(db);
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

static void write_ten(kv_db *db)
{
	char k[16], v[200];

	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "key%02d", i);
		memset(v, 'a' + i, sizeof(v));
		put_or_die(db, k, v, (size_t)(17 * i + 3));
	}
}

static void write_last(kv_db *db)
{
	put_or_die(db, "last", "the-last-value", 14);
}

static void write_batch(kv_db *db)
{
	struct kv_op ops[3] = {
	        {.type = KV_OP_PUT,
	         .key = "b1",
	         .key_len = 2,
	         .value = "v1",
	         .value_len = 2,
	         .if_version = KV_ANY_VERSION},
	        {.type = KV_OP_PUT,
	         .key = "b2",
	         .key_len = 2,
	         .value = "v2",
	         .value_len = 2,
	         .if_version = KV_ANY_VERSION},
	        {.type = KV_OP_DELETE, .key = "key03", .key_len = 5, .if_version = KV_ANY_VERSION},
	};
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

/* The tenant's newest segment as the catalog names it: where its bytes
 * start on the device, its extent's seed and the previous generation's,
 * and its bytes (up to the extent's data capacity). */
struct tail {
	uint32_t id;
	uint64_t data; /* byte offset of the segment's byte 0 on the device */
	uint32_t seed, old_seed;
	uint8_t *bytes;
	uint64_t cap;
	uint64_t ends[64]; /* the end of each record that checks out, in order */
	int n;
};

static void read_tail(const char *img, struct tail *t)
{
	struct kv_storage *st;
	struct dev_storage *d;
	struct dev_tenant *tn = NULL;
	struct dev_segment *s = NULL;
	uint64_t at = SEG_HEADER_SIZE;
	int fd;

	memset(t, 0, sizeof(*t));
	assert_int_equal(kv_storage_dev_open(img, 1u << 20, true, NULL, &st), 0);
	d = (struct dev_storage *)st;
	for (size_t i = 0; i < d->ntenants; i++)
		if (strcmp(d->tenants[i]->name, "t") == 0)
			tn = d->tenants[i];
	assert_non_null(tn);
	for (size_t i = 0; i < tn->nsegs; i++)
		if (!tn->segs[i]->temp && (s == NULL || tn->segs[i]->id > s->id))
			s = tn->segs[i];
	assert_non_null(s);
	t->id = s->id;
	t->data = data_off(d, s->extent);
	t->seed = dev_seg_seed(d->sb.uuid, s->extent, d->ext[s->extent].generation);
	assert_true(d->ext[s->extent].generation > 0);
	t->old_seed = dev_seg_seed(d->sb.uuid, s->extent, d->ext[s->extent].generation - 1);
	t->cap = d->cap;
	kv_storage_close(st);

	t->bytes = malloc(t->cap);
	assert_non_null(t->bytes);
	fd = open(img, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, t->bytes, t->cap, (off_t)t->data), (ssize_t)t->cap);
	close(fd);
	/* the records that check out, from the segment's header on */
	while (at + REC_HEADER_SIZE <= t->cap && t->n < 64) {
		struct rec_header h;
		uint64_t size;
		rec_decode_header(t->bytes + at, &h);
		size = rec_size(h.key_len, h.value_len);
		if (rec_check_header(&h, KV_KEY_SIZE_MAX, (uint32_t)t->cap, t->cap - at) != 0 ||
		    rec_verify(t->bytes + at, size, t->seed) != 0)
			break;
		at += size;
		t->ends[t->n++] = at;
	}
}

/* What an earlier use of the extent left at the tail's places: the same
 * segment header, then the same records with other values (every value
 * byte inverted) under the previous generation's seed, then one more
 * record ("ghost"). */
static uint8_t *earlier_use(const struct tail *t, uint64_t *ret_len)
{
	uint8_t *b = calloc(1, t->cap);
	uint64_t at = SEG_HEADER_SIZE;

	assert_non_null(b);
	memcpy(b, t->bytes, SEG_HEADER_SIZE);
	for (int i = 0; i < t->n; i++) {
		struct rec_header h;
		const uint8_t *r = t->bytes + at;
		uint8_t val[4096];
		rec_decode_header(r, &h);
		assert_true(h.value_len <= sizeof(val));
		for (uint32_t j = 0; j < h.value_len; j++)
			val[j] = (uint8_t)~r[REC_HEADER_SIZE + h.key_len + j];
		rec_encode(b + at, &h, r + REC_HEADER_SIZE, val, t->old_seed);
		at = t->ends[i];
	}
	{
		struct rec_header h = {.type = 1, .key_len = 5, .value_len = 5, .version = 1000};
		rec_encode(b + at, &h, "ghost", "boo!!", t->old_seed);
		at += rec_size(5, 5);
	}
	*ret_len = at;
	return b;
}

/* A copy of img whose active segment lost its bytes from cut on: zeros, or
 * (stale) the earlier use's bytes there. */
static void cut_copy(const char *img, const char *copy, const struct tail *t, uint64_t cut,
                     bool stale, const uint8_t *old, uint64_t old_len)
{
	uint64_t end = (old_len > t->ends[t->n - 1] ? old_len : t->ends[t->n - 1]) + 4096;
	uint8_t *z = calloc(1, end);
	int fd;

	assert_non_null(z);
	if (stale)
		memcpy(z, old, old_len);
	copy_file(img, copy);
	fd = open(copy, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, z + cut, end - cut, (off_t)(t->data + cut)),
	                 (ssize_t)(end - cut));
	close(fd);
	free(z);
}

/* Writes the ten keys and then the last one, each in a process that
 * crashes; the tail is the segment the second one wrote "last" into. */
static void ten_then(const char *img, void (*fn)(kv_db *db), struct tail *t)
{
	make_image(img);
	crash_after(img, write_ten);
	crash_after(img, fn);
	read_tail(img, t);
	assert_true(t->n >= 1);
}

/* The cut after cut: every 7th byte before s1 and s1 - 1, then every byte. */
static uint64_t next_cut(uint64_t cut, uint64_t s1)
{
	if (cut + 1 >= s1)
		return cut + 1;
	return cut + 7 < s1 ? cut + 7 : s1 - 1;
}

static void test_cut_every_byte(void **state)
{
	char *dir = tu_mkdtemp("devtorn");
	char *img = tu_path(dir, "dev.img"), *copy = tu_path(dir, "cut.img");
	struct tail t;
	uint64_t old_len, s1, s2;
	uint8_t *old;
	int cases = 0;

	(void)state;
	ten_then(img, write_last, &t);
	/* the record "last" is the tail's last record: [s1, s2) */
	s2 = t.ends[t.n - 1];
	s1 = t.n >= 2 ? t.ends[t.n - 2] : SEG_HEADER_SIZE;
	assert_int_equal(s2 - s1, rec_size(4, 14));
	old = earlier_use(&t, &old_len);
	for (int stale = 0; stale < 2; stale++) {
		/* every byte of the record; in the segment's header, every 7th
		 * (and its last) */
		for (uint64_t cut = 0; cut <= s2; cut = next_cut(cut, s1)) {
			struct kv_recovery_info ri;
			struct kv_value val;
			kv_db *db;
			bool whole = cut == s2;

			cut_copy(img, copy, &t, cut, stale, old, old_len);
			assert_int_equal(open_db(copy, &db), 0);
			assert_int_equal(kv_recovery_info(db, &ri), 0);
			check_ten(db);
			if (!whole) {
				assert_int_equal(kv_get(db, "last", 4, NULL, &val), KV_ENOTFOUND);
			} else {
				assert_int_equal(kv_get(db, "last", 4, NULL, &val), 0);
				assert_int_equal(val.len, 14);
				assert_memory_equal(val.data, "the-last-value", 14);
				assert_int_equal(val.version, 11);
				kv_value_release(&val);
			}
			/* the earlier use's records never read back */
			assert_int_equal(kv_get(db, "ghost", 5, NULL, &val), KV_ENOTFOUND);
			/* a segment header that is not there is counted as
			 * damage: seg_create flushes it before any catalog names
			 * the segment, so only damage takes it (the data is the
			 * same either way) */
			if (cut >= SEG_HEADER_SIZE || stale)
				assert_int_equal(ri.corrupt_records, 0);
			/* the repaired tenant takes writes and reopens whole */
			assert_int_equal(kv_put(db, "after", 5, "x", 1, NULL, NULL), 0);
			assert_int_equal(kv_close(db), 0);
			assert_int_equal(open_db(copy, &db), 0);
			assert_int_equal(kv_get(db, "after", 5, NULL, &val), 0);
			assert_int_equal(val.version, whole ? 12 : 11);
			kv_value_release(&val);
			assert_int_equal(kv_get(db, "last", 4, NULL, &val),
			                 whole ? 0 : KV_ENOTFOUND);
			if (whole)
				kv_value_release(&val);
			assert_int_equal(kv_get(db, "ghost", 5, NULL, &val), KV_ENOTFOUND);
			check_ten(db);
			assert_int_equal(kv_close(db), 0);
			cases++;
		}
	}
	print_message("%d cuts (the %llu bytes of the last record and 10 in the segment header, "
	              "zeroed and stale)\n",
	              cases, (unsigned long long)(s2 - s1 + 1));
	free(old);
	free(t.bytes);
	free(img);
	free(copy);
	tu_rmtree(dir);
	free(dir);
}

/* A batch cut at any byte of its records is all or nothing, with an
 * earlier use's bytes past the cut (zeros past a cut are the case above;
 * both at every byte of a batch would double this test's time, spent in
 * the scan of the whole extent an unsealed segment gets). */
static void test_batch_cut_every_byte(void **state)
{
	char *dir = tu_mkdtemp("devbatch");
	char *img = tu_path(dir, "dev.img"), *copy = tu_path(dir, "cut.img");
	struct tail t;
	uint64_t old_len, s1, s2;
	uint8_t *old;

	(void)state;
	ten_then(img, write_batch, &t);
	assert_true(t.n >= 3);
	s2 = t.ends[t.n - 1];
	s1 = t.n >= 4 ? t.ends[t.n - 4] : SEG_HEADER_SIZE;
	old = earlier_use(&t, &old_len);
	for (int stale = 1; stale < 2; stale++) {
		for (uint64_t cut = s1; cut <= s2; cut++) {
			struct kv_value val;
			kv_db *db;
			/* whole: the bytes past the cut are the batch's own (an
			 * earlier use may have left the same bytes at its end) */
			bool whole = cut == s2 ||
			             (stale && memcmp(old + cut, t.bytes + cut, s2 - cut) == 0);

			cut_copy(img, copy, &t, cut, stale, old, old_len);
			assert_int_equal(open_db(copy, &db), 0);
			{
				int rv = kv_get(db, "b1", 2, NULL, &val);
				if (rv != (whole ? 0 : KV_ENOTFOUND))
					fail_msg("cut %llu of [%llu, %llu], %s: b1 %s",
					         (unsigned long long)cut, (unsigned long long)s1,
					         (unsigned long long)s2, stale ? "stale" : "zeroed",
					         kv_strerror(rv));
			}
			if (whole)
				kv_value_release(&val);
			assert_int_equal(kv_get(db, "b2", 2, NULL, &val), whole ? 0 : KV_ENOTFOUND);
			if (whole)
				kv_value_release(&val);
			assert_int_equal(kv_get(db, "key03", 5, NULL, &val),
			                 whole ? KV_ENOTFOUND : 0);
			if (!whole)
				kv_value_release(&val);
			assert_int_equal(kv_get(db, "ghost", 5, NULL, &val), KV_ENOTFOUND);
			assert_int_equal(kv_close(db), 0);
		}
	}
	free(old);
	free(t.bytes);
	free(img);
	free(copy);
	tu_rmtree(dir);
	free(dir);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_rec(void *arg, const struct seg_scan_rec *r)
{
	(void)r;
	(*(uint64_t *)arg)++;
	return 0;
}

struct open_notes {
	uint32_t notes;  /* "open (not sealed)" notes */
	char first[512]; /* the first damage reported, if any */
};

static void note_item(void *arg, const struct kv_dev_check_item *it)
{
	struct open_notes *o = arg;

	if (!it->damage && strstr(it->what, "open (not sealed)") != NULL)
		o->notes++;
	if (it->damage && o->first[0] == '\0')
		snprintf(o->first, sizeof(o->first), "%s at %llu: %s", it->where,
		         (unsigned long long)it->off, it->what);
}

/* A segment left open in a 64 MiB extent with one record, the rest of the
 * extent zeros (never written) or random bytes (another use's): the scan
 * finds that record and no other, and ends the log after it; kvd --check
 * (kv_dev_check) counts no damage and notes the open segment; recovery
 * keeps the record, seals the segment there and says so (open_segment,
 * open_end), never a torn write. Prints how long the scan of the extent
 * takes (segment.c skips offsets whose type byte no record has). */
static void test_open_extent_one_record(void **state)
{
	char *dir = tu_mkdtemp("devopen");
	char *img = tu_path(dir, "dev.img"), *copy = tu_path(dir, "open.img");
	struct tail t;
	uint64_t end;

	(void)state;
	make_image_of(img, 1ull << 30, 64ull << 20);
	crash_after(img, write_last);
	read_tail(img, &t);
	assert_true(t.n >= 1);
	end = t.ends[t.n - 1];
	for (int stale = 0; stale < 2; stale++) {
		struct kv_dev_check_summary sum;
		struct open_notes on = {0};
		struct kv_recovery_info ri;
		struct seg_scan_result res;
		struct kv_stor_tenant *tn;
		struct kv_storage *st;
		struct kv_value val;
		uint64_t recs = 0;
		struct seg *s;
		double t0, scan_s, open_s;
		kv_db *db;

		copy_file(img, copy);
		if (stale) {
			uint64_t len = t.cap - end;
			uint8_t *junk = malloc(len);
			int fd = open(copy, O_RDWR | O_CLOEXEC);
			assert_non_null(junk);
			srand(7);
			for (uint64_t i = 0; i < len; i++)
				junk[i] = (uint8_t)rand();
			assert_true(fd >= 0);
			assert_int_equal(pwrite(fd, junk, len, (off_t)(t.data + end)),
			                 (ssize_t)len);
			close(fd);
			free(junk);
		}
		/* the scan recovery and check make of it */
		assert_int_equal(kv_storage_dev_open(copy, 1u << 20, true, NULL, &st), 0);
		assert_int_equal(stor_tenant_open(st, "t", 0, &tn), 0);
		assert_int_equal(seg_open(tn, t.id, &s), 0);
		assert_false(s->h->sealed);
		assert_int_equal(s->size, t.cap); /* an open segment: its extent's room */
		t0 = now_s();
		assert_int_equal(seg_scan(s->h, s->size, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX,
		                          SEG_SCAN_ACTIVE, count_rec, NULL, &recs, &res),
		                 0);
		scan_s = now_s() - t0;
		assert_int_equal(recs, 1);
		assert_int_equal(res.records, 1);
		assert_int_equal(res.valid_end, end);
		assert_int_equal(res.corrupt_records, 0);
		assert_int_equal(res.unsynced_cut, 0);
		seg_unref(s);
		stor_tenant_close(tn);
		kv_storage_close(st);

		assert_int_equal(kv_dev_check(copy, note_item, &on, &sum), 0);
		if (sum.damaged != 0)
			fail_msg("kvd --check of an open segment (%s): %u damage, first %s",
			         stale ? "random bytes after its record" : "zeros after its record",
			         sum.damaged, on.first);
		assert_true(on.notes >= 1);

		t0 = now_s();
		assert_int_equal(open_db(copy, &db), 0);
		open_s = now_s() - t0;
		assert_int_equal(kv_recovery_info(db, &ri), 0);
		assert_int_equal(ri.open_segment, t.id);
		assert_int_equal(ri.open_end, end);
		assert_int_equal(ri.corrupt_records, 0);
		assert_int_equal(kv_get(db, "last", 4, NULL, &val), 0);
		assert_memory_equal(val.data, "the-last-value", 14);
		kv_value_release(&val);
		assert_int_equal(kv_close(db), 0);
		print_message("open segment of a 64 MiB extent, one record, then %s: scan %.3f s, "
		              "recovery (kv_open) %.3f s\n",
		              stale ? "random bytes" : "zeros", scan_s, open_s);
	}
	free(t.bytes);
	free(img);
	free(copy);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_cut_every_byte),
	        cmocka_unit_test(test_batch_cut_every_byte),
	        cmocka_unit_test(test_open_extent_one_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
