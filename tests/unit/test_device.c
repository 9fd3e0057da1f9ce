/* test_device.c — what only the device backend has: formatting (and its
 * refusals), both superblock copies, both catalog slots, extents reused
 * without their old bytes ever reading as records, a full device, the
 * device lock, and activations that do not each take a new extent. Runs on
 * a regular file standing in for a device; tests/integration/test_device.sh
 * runs kvd on real loop devices. */
#include "testutil.h"

#include "dev_internal.h"
#include "dev_layout.h"
#include "storage.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>

#include <cmocka.h> /* after the headers it needs */

struct fx {
	char *dir;
	char *img;
};

static void make_image(const char *img, uint64_t size)
{
	int fd = open(img, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

static void format(const char *img, bool force)
{
	struct kv_dev_format_options o = {.extent_size = 1u << 20, .force = force};
	char err[256];
	int rv = kv_dev_format(img, &o, err, sizeof(err));

	if (rv != 0)
		fprintf(stderr, "kv_dev_format: %s\n", err);
	assert_int_equal(rv, 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->dir = tu_mkdtemp("device");
	f->img = tu_path(f->dir, "dev.img");
	make_image(f->img, 64u << 20);
	format(f->img, false);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tu_rmtree(f->dir);
	free(f->dir);
	free(f->img);
	free(f);
	return 0;
}

static kv_store *open_store(const char *img)
{
	struct kv_store_options o;
	kv_store *s;

	kv_store_options_init(&o);
	o.device = img;
	o.device_cache_bytes = 1u << 20;
	assert_int_equal(kv_store_open(NULL, &o, &s), 0);
	return s;
}

static void put(kv_store *s, const char *tenant, const char *k, const char *v)
{
	kv_tenant *t;

	assert_int_equal(kv_store_get(s, tenant, &t), 0);
	assert_int_equal(kv_put(kv_tenant_db(t), k, strlen(k), v, strlen(v), NULL, NULL), 0);
	kv_store_put(s, t);
}

static int get(kv_store *s, const char *tenant, const char *k, char *buf, size_t cap)
{
	struct kv_value v;
	kv_tenant *t;
	int rv;

	assert_int_equal(kv_store_get(s, tenant, &t), 0);
	rv = kv_get(kv_tenant_db(t), k, strlen(k), NULL, &v);
	if (rv == 0) {
		assert_true(v.len < cap);
		memcpy(buf, v.data, v.len);
		buf[v.len] = '\0';
		kv_value_release(&v);
	}
	kv_store_put(s, t);
	return rv;
}

static void on_item(void *arg, const struct kv_dev_check_item *it)
{
	(void)arg;
	printf("check: %s @%llu: %s%s\n", it->where, (unsigned long long)it->off, it->what,
	       it->damage ? "" : " (note)");
}

static struct kv_dev_check_summary check(const char *img)
{
	struct kv_dev_check_summary sum;

	assert_int_equal(kv_dev_check(img, on_item, NULL, &sum), 0);
	return sum;
}

/* Tenants, their data and settings survive a close and an open. */
static void test_store_roundtrip(void **state)
{
	struct fx *f = *state;
	struct kv_tenant_config c;
	char buf[64];
	kv_store *s = open_store(f->img);

	kv_tenant_config_init(&c);
	c.history_versions = 3;
	assert_int_equal(kv_store_create(s, "a", &c), 0);
	put(s, "a", "k1", "v1");
	put(s, "default", "k2", "v2");
	assert_int_equal(kv_store_close(s), 0);

	s = open_store(f->img);
	assert_int_equal(get(s, "a", "k1", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "v1");
	assert_int_equal(get(s, "default", "k2", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "v2");
	{
		kv_tenant *t;
		struct kv_store_stats st;
		assert_int_equal(kv_store_get(s, "a", &t), 0);
		assert_int_equal(kv_tenant_config_of(t)->history_versions, 3);
		kv_store_put(s, t);
		/* the device's figures: its extents, and its cache, which serves
		 * the second read of a record of a sealed segment */
		char val[3000];
		memset(val, 'v', sizeof(val) - 1);
		val[sizeof(val) - 1] = '\0';
		for (int i = 0; i < 2000; i++) {
			char k[16];
			snprintf(k, sizeof(k), "fill%04d", i);
			put(s, "a", k, val); /* 6 MB: segments of 1 MiB roll */
		}
		assert_int_equal(get(s, "a", "fill0000", val, sizeof(val)), 0);
		assert_int_equal(get(s, "a", "fill0000", val, sizeof(val)), 0);
		assert_int_equal(strlen(val), sizeof(val) - 1);
		assert_int_equal(kv_store_stats(s, &st), 0);
		assert_true(st.device);
		assert_int_equal(st.device_extent_size, 1u << 20);
		assert_true(st.device_extents > 50);
		assert_true(st.device_extents_free < st.device_extents);
		assert_int_equal(st.device_cache_bytes, 1u << 20);
		assert_true(st.device_cache_hits >= 1);
		assert_true(st.device_cache_misses >= 1);
	}
	assert_int_equal(kv_store_close(s), 0);
	{
		struct kv_dev_check_summary sum = check(f->img);
		assert_int_equal(sum.damaged, 0);
		assert_int_equal(sum.tenants, 2);
		assert_true(sum.records >= 2);
	}
}

/* A second process (or open) on the device is refused. */
static void test_locked(void **state)
{
	struct fx *f = *state;
	struct kv_store_options o;
	kv_store *s = open_store(f->img), *s2;
	struct kv_storage *st;
	char err[256];

	kv_store_options_init(&o);
	o.device = f->img;
	assert_int_equal(kv_store_open(NULL, &o, &s2), KV_ELOCKED);
	assert_int_equal(kv_storage_dev_open(f->img, 0, true, NULL, &st), KV_ELOCKED);
	assert_int_equal(kv_dev_format(f->img, &(struct kv_dev_format_options){.force = true}, err,
	                               sizeof(err)),
	                 KV_ELOCKED);
	assert_non_null(strstr(err, "kvd is serving it"));
	assert_int_equal(kv_store_close(s), 0);
}

/* A device carrying a file system, or another kvd, is not formatted
 * without force. */
static void test_format_refusals(void **state)
{
	struct fx *f = *state;
	struct kv_dev_format_options o = {.extent_size = 1u << 20};
	char err[256], *cmd;
	int rv;

	/* another kvd */
	assert_int_equal(kv_dev_format(f->img, &o, err, sizeof(err)), KV_EREFUSED);
	assert_non_null(strstr(err, "a kvd device"));
	/* ext4 */
	make_image(f->img, 64u << 20);
	assert_true(asprintf(&cmd, "mkfs.ext4 -q -F %s >/dev/null 2>&1", f->img) > 0);
	rv = system(cmd);
	free(cmd);
	assert_true(WIFEXITED(rv) && WEXITSTATUS(rv) == 0);
	assert_int_equal(kv_dev_format(f->img, &o, err, sizeof(err)), KV_EREFUSED);
	assert_non_null(strstr(err, "ext4"));
	assert_non_null(strstr(err, "--force"));
	format(f->img, true);
	{
		kv_store *s = open_store(f->img);
		put(s, "default", "k", "v");
		assert_int_equal(kv_store_close(s), 0);
	}
	/* nonsense sizes */
	o.extent_size = 3u << 20;
	assert_int_equal(kv_dev_format(f->img, &o, err, sizeof(err)), -EINVAL);
	make_image(f->img, 2u << 20);
	o.extent_size = 1u << 20;
	assert_int_equal(kv_dev_format(f->img, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "too small"));
}

static void zero_at(const char *img, uint64_t off, size_t len)
{
	int fd = open(img, O_RDWR | O_CLOEXEC);
	char *z = calloc(1, len);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, z, len, (off_t)off), (ssize_t)len);
	close(fd);
	free(z);
}

static void read_super_at(const char *img, uint64_t off, struct dev_super *sb)
{
	uint8_t b[DEV_SB_SIZE];
	int fd = open(img, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, b, sizeof(b), (off_t)off), (ssize_t)sizeof(b));
	close(fd);
	assert_int_equal(dev_super_decode(b, sb), 0);
}

/* Block 0 damaged: the end copy serves, and check says so. */
static void test_superblock_fallback(void **state)
{
	struct fx *f = *state;
	struct dev_super sb;
	char buf[16];
	kv_store *s = open_store(f->img);

	put(s, "default", "k", "v");
	assert_int_equal(kv_store_close(s), 0);
	read_super_at(f->img, 0, &sb);
	{
		struct kv_store_stats st;
		s = open_store(f->img);
		assert_int_equal(kv_store_stats(s, &st), 0);
		assert_int_equal(st.device_superblocks_damaged, 0);
		assert_int_equal(kv_store_close(s), 0);
	}
	zero_at(f->img, 0, 4096);
	s = open_store(f->img);
	assert_int_equal(get(s, "default", "k", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "v");
	{
		/* the store says one copy is damaged (kvd warns at start) */
		struct kv_store_stats st;
		assert_int_equal(kv_store_stats(s, &st), 0);
		assert_int_equal(st.device_superblocks_damaged, 1);
	}
	assert_int_equal(kv_store_close(s), 0);
	assert_int_equal(check(f->img).damaged, 1);
	/* both gone: not a device */
	zero_at(f->img, sb.device_size - sb.block_size, 4096);
	{
		struct kv_store_options o;
		kv_store_options_init(&o);
		o.device = f->img;
		assert_int_equal(kv_store_open(NULL, &o, &s), KV_ECORRUPT);
	}
}

/* Each catalog slot torn in turn: the other one (the state before the
 * last catalog write) is used. */
static void test_catalog_slots(void **state)
{
	struct fx *f = *state;
	struct dev_super sb;
	char buf[16];
	kv_store *s;
	int slot;

	read_super_at(f->img, 0, &sb);
	for (slot = 0; slot < 2; slot++) {
		struct kv_storage *st;
		s = open_store(f->img);
		put(s, "default", "k", "v");
		assert_int_equal(kv_store_close(s), 0);
		/* a torn write of one slot: its header survives, its body not */
		zero_at(f->img, sb.catalog_off + (uint64_t)slot * sb.catalog_slot + 4096, 4096);
		zero_at(f->img, sb.catalog_off + (uint64_t)slot * sb.catalog_slot + 64, 64);
		assert_int_equal(kv_storage_dev_open(f->img, 0, false, NULL, &st), 0);
		kv_storage_close(st);
		s = open_store(f->img);
		/* the store opens on whichever slot was sound; the data written
		 * under the newest catalog is there unless that catalog was the
		 * torn one, and the store is usable either way */
		put(s, "default", "k2", "v2");
		assert_int_equal(get(s, "default", "k2", buf, sizeof(buf)), 0);
		assert_int_equal(kv_store_close(s), 0);
		assert_int_equal(check(f->img).damaged, 0); /* rewritten since */
	}
}

/* Extents given back and taken again: a tenant never reads the bytes an
 * earlier tenant left in them, even when the process ends without sealing
 * (a copy of the device taken while the store is open is what a crash
 * leaves). */
static void test_reuse_never_reads_old_records(void **state)
{
	struct fx *f = *state;
	struct kv_tenant_config c;
	char buf[64], *copy = tu_path(f->dir, "copy");
	kv_store *s = open_store(f->img);
	int i;

	kv_tenant_config_init(&c);
	assert_int_equal(kv_store_create(s, "old", &c), 0);
	for (i = 0; i < 200; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%03d", i);
		put(s, "old", k, "old-value");
	}
	assert_int_equal(kv_store_passivate(s, "old"), 0);
	assert_int_equal(kv_store_drop(s, "old"), 0);
	/* the new tenants get the freed extents (the device is small) */
	for (i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "new%02d", i);
		assert_int_equal(kv_store_create(s, name, &c), 0);
		put(s, name, "k000", "new");
	}
	tu_copydir(f->dir, copy);
	assert_int_equal(kv_store_close(s), 0);
	{
		char *img2 = tu_path(copy, "dev.img");
		s = open_store(img2);
		for (i = 0; i < 20; i++) {
			char name[16];
			snprintf(name, sizeof(name), "new%02d", i);
			assert_int_equal(get(s, name, "k000", buf, sizeof(buf)), 0);
			assert_string_equal(buf, "new");
			assert_int_equal(get(s, name, "k001", buf, sizeof(buf)), KV_ENOTFOUND);
		}
		assert_int_equal(kv_store_close(s), 0);
		assert_int_equal(check(img2).damaged, 0);
		free(img2);
	}
	free(copy);
}

/* Passivating and activating a tenant appends to the same segment again:
 * the device does not lose an extent per activation. */
static void test_activations_reuse_segment(void **state)
{
	struct fx *f = *state;
	uint32_t used;
	char buf[32];
	kv_store *s = open_store(f->img);
	int i;

	for (i = 0; i < 30; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%02d", i);
		put(s, "default", k, k);
		assert_int_equal(kv_store_passivate(s, "default"), 0);
	}
	assert_int_equal(kv_store_close(s), 0);
	used = check(f->img).extents_used;
	/* one segment, one extent of hints and blobs */
	assert_true(used <= 3);
	s = open_store(f->img);
	for (i = 0; i < 30; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%02d", i);
		assert_int_equal(get(s, "default", k, buf, sizeof(buf)), 0);
		assert_string_equal(buf, k);
	}
	assert_int_equal(kv_store_close(s), 0);
}

/* Reads of a segment still being written go through the cache for its
 * whole blocks before the one its end is in (they never change), and never
 * for that block, which every append rewrites. */
static void test_cache_active_segment(void **state)
{
	struct fx *f = *state;
	char big[9000], buf[9100], k[16];
	struct kv_store_stats a, b;
	kv_store *s = open_store(f->img);

	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put(s, "default", "big", big);
	put(s, "default", "filler", big); /* the end is blocks past "big" now */
	assert_int_equal(get(s, "default", "big", buf, sizeof(buf)), 0);
	kv_store_stats(s, &a);
	assert_int_equal(get(s, "default", "big", buf, sizeof(buf)), 0);
	assert_string_equal(buf, big);
	kv_store_stats(s, &b);
	assert_true(b.device_cache_hits > a.device_cache_hits);
	assert_int_equal(b.device_cache_misses, a.device_cache_misses);
	/* small values in the block the end is in: each append rewrites it,
	 * and every read sees what the last append left */
	for (int i = 0; i < 40; i++) {
		snprintf(k, sizeof(k), "s%02d", i);
		put(s, "default", k, k);
		for (int j = 0; j <= i; j += 7) {
			char want[16];
			snprintf(want, sizeof(want), "s%02d", j);
			assert_int_equal(get(s, "default", want, buf, sizeof(buf)), 0);
			assert_string_equal(buf, want);
		}
	}
	assert_int_equal(kv_store_close(s), 0);
}

/* A full device: writes fail with ENOSPC, reads go on; dropping data and
 * merging give extents back and writes resume. */
static void test_device_full(void **state)
{
	struct fx *f = *state;
	struct kv_tenant_config c;
	char val[700], buf[1024];
	kv_store *s = open_store(f->img);
	kv_tenant *t;
	kv_db *db;
	int i, rv = 0, n;

	memset(val, 'x', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	kv_tenant_config_init(&c);
	c.history_versions = 1;
	assert_int_equal(kv_store_create(s, "big", &c), 0);
	assert_int_equal(kv_store_get(s, "big", &t), 0);
	db = kv_tenant_db(t);
	for (i = 0; i < 1000000; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%07d", i % 2000);
		rv = kv_put(db, k, strlen(k), val, strlen(val), NULL, NULL);
		if (rv != 0)
			break;
	}
	assert_int_equal(rv, -ENOSPC);
	n = i;
	assert_true(n > 2000);
	kv_store_put(s, t);
	/* reads go on */
	assert_int_equal(get(s, "big", "k0000001", buf, sizeof(buf)), 0);
	assert_string_equal(buf, val);
	/* and after a restart on the full device too */
	assert_int_equal(kv_store_close(s), 0);
	s = open_store(f->img);
	assert_int_equal(get(s, "big", "k0000001", buf, sizeof(buf)), 0);
	assert_string_equal(buf, val);
	assert_int_equal(kv_store_get(s, "big", &t), 0);
	{
		struct kv_stats st;
		kv_stats(kv_tenant_db(t), &st);
		assert_true(st.keys >= 2000);
	}
	kv_store_put(s, t);
	/* the overwritten versions are dead: merge gives their extents back */
	assert_int_equal(kv_store_get(s, "big", &t), 0);
	rv = kv_merge(kv_tenant_db(t));
	kv_store_put(s, t);
	assert_int_equal(rv, 0);
	put(s, "big", "after", "merge");
	assert_int_equal(get(s, "big", "after", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "merge");
	assert_int_equal(kv_store_close(s), 0);
	assert_int_equal(check(f->img).damaged, 0);
}

/* A process that filled the device ends without closing (a crash): its
 * segment was left open, and the activation that follows cannot start a
 * new one. The tenant opens all the same, reads go on, writes get ENOSPC,
 * and a merge frees the device. */
static void test_device_full_crash(void **state)
{
	struct fx *f = *state;
	char val[700], buf[1024];
	pid_t pid;
	int st;

	memset(val, 'x', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		kv_store *s = open_store(f->img);
		kv_tenant *t;
		int rv = 0;
		if (kv_store_get(s, "default", &t) != 0)
			_exit(2);
		for (int i = 0; i < 1000000 && rv == 0; i++) {
			char k[16];
			snprintf(k, sizeof(k), "k%07d", i % 2000);
			rv = kv_put(kv_tenant_db(t), k, strlen(k), val, strlen(val), NULL, NULL);
		}
		_exit(rv == -ENOSPC ? 0 : 1); /* no close: the segment stays open */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	kv_store *s = open_store(f->img);
	kv_tenant *t;
	assert_int_equal(get(s, "default", "k0000001", buf, sizeof(buf)), 0);
	assert_string_equal(buf, val);
	assert_int_equal(kv_store_get(s, "default", &t), 0);
	assert_int_equal(kv_put(kv_tenant_db(t), "more", 4, "x", 1, NULL, NULL), -ENOSPC);
	assert_int_equal(kv_merge(kv_tenant_db(t)), 0);
	assert_int_equal(kv_put(kv_tenant_db(t), "more", 4, "x", 1, NULL, NULL), 0);
	kv_store_put(s, t);
	assert_int_equal(get(s, "default", "more", buf, sizeof(buf)), 0);
	assert_int_equal(kv_store_close(s), 0);
	s = open_store(f->img);
	assert_int_equal(get(s, "default", "more", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "x");
	assert_int_equal(kv_store_close(s), 0);
}

/* A flipped byte in a record on the device: that key reads DATA_LOSS
 * (KV_ECORRUPT), never a wrong value; the others read on; check reports it. */
static void test_damaged_record(void **state)
{
	struct fx *f = *state;
	static const char marker[] = "MARKER-VALUE-0123456789";
	char buf[64];
	kv_store *s = open_store(f->img);
	uint8_t *img;
	off_t size, at = -1;
	int fd, i;

	for (i = 0; i < 50; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%02d", i);
		put(s, "default", k, i == 25 ? marker : "plain-value");
	}
	assert_int_equal(kv_store_close(s), 0);
	/* find the marker's bytes on the device and flip one */
	fd = open(f->img, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	size = lseek(fd, 0, SEEK_END);
	img = malloc((size_t)size);
	assert_int_equal(pread(fd, img, (size_t)size, 0), size);
	for (off_t o = 0; o + (off_t)sizeof(marker) - 1 <= size; o++)
		if (memcmp(img + o, marker, sizeof(marker) - 1) == 0) {
			at = o;
			break;
		}
	assert_true(at >= 0);
	img[at + 3] ^= 0x20;
	assert_int_equal(pwrite(fd, img + at + 3, 1, at + 3), 1);
	close(fd);
	free(img);
	assert_true(check(f->img).damaged >= 1);
	s = open_store(f->img);
	assert_int_equal(get(s, "default", "k25", buf, sizeof(buf)), KV_ECORRUPT);
	assert_int_equal(get(s, "default", "k24", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "plain-value");
	assert_int_equal(get(s, "default", "k26", buf, sizeof(buf)), 0);
	assert_int_equal(kv_store_close(s), 0);
}

/* A merge output the catalog was written with before it was published, and
 * a process that ended before publishing or removing it: the next open
 * gives its extent back (free once a catalog write no longer names it),
 * instead of keeping it taken by nothing for good. */
static void test_leftover_extent_reclaimed(void **state)
{
	struct fx *f = *state;
	struct kv_storage *st;
	struct kv_stor_tenant *tn;
	struct kv_stor_seg *seg;
	struct kv_stor_stats before, after;
	kv_store *s = open_store(f->img);

	put(s, "default", "k", "v");
	assert_int_equal(kv_store_close(s), 0);

	assert_int_equal(kv_storage_dev_open(f->img, 1u << 20, false, NULL, &st), 0);
	st->ops->stats(st, &before);
	assert_int_equal(before.extents_reclaimed, 0);
	assert_int_equal(stor_tenant_open(st, "default", 0, &tn), 0);
	assert_int_equal(stor_seg_create(tn, 9999, KV_STOR_SEG_TEMP, &seg), 0);
	assert_int_equal(stor_seg_write(seg, "x", 1, 0), 0);
	assert_int_equal(stor_tenant_sync(tn), 0); /* a catalog write while it is taken */
	/* the process ends here: nothing publishes or removes the output */
	stor_seg_close(seg);
	stor_tenant_close(tn);
	kv_storage_close(st);

	assert_int_equal(kv_storage_dev_open(f->img, 1u << 20, false, NULL, &st), 0);
	st->ops->stats(st, &after);
	assert_int_equal(after.extents_reclaimed, 1);
	assert_int_equal(after.extents_free, before.extents_free);
	kv_storage_close(st);

	/* the tenant is whole, and the next open finds nothing to give back */
	s = open_store(f->img);
	{
		char buf[8];
		struct kv_store_stats ss;
		assert_int_equal(get(s, "default", "k", buf, sizeof(buf)), 0);
		assert_string_equal(buf, "v");
		kv_store_stats(s, &ss);
		assert_int_equal(ss.device_extents_reclaimed, 0);
	}
	assert_int_equal(kv_store_close(s), 0);
}

/* ---- power cuts ----------------------------------------------------------
 *
 * A workload on a small device (puts under sync=always, segment rolls,
 * a merge, a close and an activation that appends to the sealed segment
 * again) with every write and flush of the device recorded. Then at every
 * point of the record a power cut is replayed onto a copy of the device as
 * it was before the workload: every write before the last completed flush
 * lands, and so does every FUA write (RWF_DSYNC: durable itself, and only
 * itself); each other write after that flush is kept, lost, or torn at a
 * block boundary (blocks are the unit a device writes atomically). Each
 * such device opens, holds every put that was durable before the cut (it
 * was acknowledged before that flush, or its own append was a FUA write)
 * with its value, and holds nothing that was never written. Run with
 * synced appends as RWF_DSYNC writes and as writes linked to a flush.
 */

#include "io.h"

struct pl_ev {
	int type; /* 1 write, 2 flush, 3 ack */
	bool fua; /* 1: durable itself */
	uint64_t off;
	uint8_t *data;
	size_t len;
	uint32_t acked; /* 3: puts acknowledged so far */
};

struct pl_rec {
	struct pl_ev *v;
	size_t n, cap;
	bool on;
};

static struct pl_ev *pl_new(struct pl_rec *r, int type)
{
	struct pl_ev *e;

	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 1024;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		assert_non_null(r->v);
	}
	e = &r->v[r->n++];
	memset(e, 0, sizeof(*e));
	e->type = type;
	return e;
}

static void pl_record(void *arg, const struct kv_io_event *x)
{
	struct pl_rec *r = arg;
	struct pl_ev *e;

	if (!r->on)
		return;
	if (x->type == KV_IO_EV_WRITE) {
		e = pl_new(r, 1);
		e->off = x->off;
		e->len = x->len;
		e->fua = x->fua;
		e->data = malloc(x->len);
		memcpy(e->data, x->buf, x->len);
	} else if (x->type == KV_IO_EV_SYNC) {
		pl_new(r, 2);
	}
}

int db_open(struct kv_storage *st, bool own, const char *tenant, const struct kv_options *opts,
            kv_db **ret_db);

static int pl_sync_mode; /* enum kv_dev_sync of pl_open's stores */

static kv_db *pl_open(const char *img, struct kv_io_fault *f)
{
	struct kv_options o;
	struct kv_storage *st;
	kv_db *db;

	kv_options_init(&o);
	o.background = false;
	o.segment_size = 8192;
	o.history_versions = 1000000;
	o.merge_ratio_pct = 0;
	o.fault = f;
	assert_int_equal(kv_storage_dev_open(img, 1u << 20, false, f, &st), 0);
	kv_storage_dev_set_sync(st, pl_sync_mode);
	assert_int_equal(db_open(st, true, "t", &o, &db), 0);
	return db;
}

#define PL_PUTS 120

static void pl_value(char *buf, size_t cap, uint32_t i)
{
	snprintf(buf, cap, "value-%u-%0*u", i, (int)(i % 200), 0);
}

static void copy_file(const char *from, const char *to)
{
	char *cmd;
	int rv;

	assert_true(asprintf(&cmd, "cp --sparse=always %s %s", from, to) > 0);
	rv = system(cmd);
	free(cmd);
	assert_true(WIFEXITED(rv) && WEXITSTATUS(rv) == 0);
}

/* A device that fails a write, then a flush: the failed put answers the
 * error and leaves nothing; after a failed flush the tenant refuses writes
 * (what the flush covered may be gone) until reopened, and every put
 * acknowledged before is there after the reopen. */
struct failer {
	atomic_int write_err, sync_err;
};

static int fail_write(void *arg, int fd, uint64_t off, size_t len)
{
	(void)fd, (void)off, (void)len;
	return atomic_exchange(&((struct failer *)arg)->write_err, 0);
}

static int fail_sync(void *arg, int fd)
{
	(void)fd;
	return atomic_exchange(&((struct failer *)arg)->sync_err, 0);
}

static void test_write_and_flush_failures(void **state)
{
	struct fx *f = *state;
	struct failer fl = {0};
	struct kv_io_fault fault = {.on_write = fail_write, .on_sync = fail_sync, .arg = &fl};
	struct kv_value v;
	kv_db *db = pl_open(f->img, &fault);

	assert_int_equal(kv_put(db, "a", 1, "1", 1, NULL, NULL), 0);
	atomic_store(&fl.write_err, -EIO);
	assert_int_equal(kv_put(db, "b", 1, "2", 1, NULL, NULL), -EIO);
	assert_int_equal(kv_get(db, "b", 1, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_put(db, "c", 1, "3", 1, NULL, NULL), 0); /* not read-only */
	atomic_store(&fl.sync_err, -EIO);
	assert_int_equal(kv_put(db, "d", 1, "4", 1, NULL, NULL), -EIO);
	assert_int_equal(kv_put(db, "e", 1, "5", 1, NULL, NULL), KV_EREADONLY);
	kv_close(db);
	db = pl_open(f->img, NULL);
	assert_int_equal(kv_get(db, "a", 1, NULL, &v), 0);
	kv_value_release(&v);
	assert_int_equal(kv_get(db, "c", 1, NULL, &v), 0);
	assert_int_equal(v.len, 1);
	assert_memory_equal(v.data, "3", 1);
	kv_value_release(&v);
	assert_int_equal(kv_get(db, "b", 1, NULL, &v), KV_ENOTFOUND);
	assert_int_equal(kv_put(db, "f", 1, "6", 1, NULL, NULL), 0);
	assert_int_equal(kv_close(db), 0);
}

/* A catalog written while an extent is being taken, before its header is,
 * must not name it: a crash right then would leave the catalog naming an
 * extent whose header says something else. The child opens the tenant
 * (which takes an extent for its new active segment); the write of that
 * extent's header first writes the catalog, then the child dies as a
 * SIGKILL would. kv_dev_check of what is left finds no damage. */
struct taker {
	struct kv_storage *st;
	bool busy;
};

static struct taker taker;

static int catalog_then_die(void *arg, int fd, uint64_t off, size_t len)
{
	struct taker *tk = arg;
	struct dev_storage *d;

	(void)fd;
	if (tk->busy || tk->st == NULL)
		return 0;
	d = dev_of(tk->st);
	if (len != d->B)
		return 0;
	for (uint32_t i = 0;; i++) {
		if (i == d->sb.extent_count)
			return 0; /* not an extent header */
		if (off == dev_extent_off(&d->sb, i))
			break;
	}
	tk->busy = true;
	/* another thread's change, which the catalog write carries out */
	pthread_mutex_lock(&d->mu);
	d->changes++;
	pthread_mutex_unlock(&d->mu);
	if (dev_cat_write(d) != 0)
		_exit(12);
	_exit(0);
}

static int count_damage_cb_n;

static void count_damage(void *arg, const struct kv_dev_check_item *it)
{
	(void)arg;
	if (it->damage) {
		count_damage_cb_n++;
		fprintf(stderr, "damage: %s: %s\n", it->where, it->what);
	}
}

static void test_catalog_while_taking_an_extent(void **state)
{
	struct fx *f = *state;
	struct kv_dev_check_summary sum;
	struct kv_io_fault fault = {.on_write = catalog_then_die, .arg = &taker};
	kv_db *db = pl_open(f->img, NULL);
	int status;
	pid_t pid;

	assert_int_equal(kv_put(db, "a", 1, "1", 1, NULL, NULL), 0);
	assert_int_equal(kv_close(db), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct kv_options o;
		kv_options_init(&o);
		o.background = false;
		o.segment_size = 8192;
		if (kv_storage_dev_open(f->img, 1u << 20, false, &fault, &taker.st) != 0)
			_exit(10);
		if (db_open(taker.st, true, "t", &o, &db) != 0)
			_exit(13);
		for (int i = 0; i < 100; i++) /* until a segment is full */
			(void)kv_put(db, "b", 1, "0123456789abcdef0123456789abcdef", 32, NULL,
			             NULL);
		_exit(11); /* no extent was taken */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	count_damage_cb_n = 0;
	assert_int_equal(kv_dev_check(f->img, count_damage, NULL, &sum), 0);
	assert_int_equal(sum.damaged, 0);
	assert_int_equal(count_damage_cb_n, 0);
	/* and the tenant opens with its put */
	db = pl_open(f->img, NULL);
	{
		struct kv_value v;
		assert_int_equal(kv_get(db, "a", 1, NULL, &v), 0);
		kv_value_release(&v);
	}
	assert_int_equal(kv_close(db), 0);
}

static void power_cuts(void **state, int mode)
{
	struct fx *f = *state;
	struct pl_rec r = {0};
	struct kv_io_fault fault = {.record = pl_record, .arg = &r};
	char *base = tu_path(f->dir, "base.img"), *cut = tu_path(f->dir, "cut.img");
	uint64_t seed = tu_seed("test_power_cuts", 42);
	uint32_t i, acked = 0, cuts = 0, fua_writes = 0;
	kv_db *db;
	size_t c;

	pl_sync_mode = mode;
	make_image(f->img, 16u << 20);
	format(f->img, true);
	copy_file(f->img, base);
	r.on = true;
	db = pl_open(f->img, &fault);
	for (i = 0; i < PL_PUTS; i++) {
		char k[16], v[256];
		snprintf(k, sizeof(k), "k%03u", i % 40);
		pl_value(v, sizeof(v), i);
		assert_int_equal(kv_put(db, k, strlen(k), v, strlen(v), NULL, NULL), 0);
		pl_new(&r, 3)->acked = ++acked;
		if (i == 50)
			assert_int_equal(kv_merge(db), 0);
		if (i == 80) {
			/* a close seals; the next open appends to that segment again */
			assert_int_equal(kv_close(db), 0);
			db = pl_open(f->img, &fault);
		}
	}
	assert_int_equal(kv_close(db), 0);
	r.on = false;
	for (c = 0; c < r.n; c++)
		fua_writes += r.v[c].type == 1 && r.v[c].fua;

	srand((unsigned)seed);
	for (c = 0; c <= r.n; c++) {
		size_t last_flush = 0, last_write = SIZE_MAX, j;
		bool durable[PL_PUTS] = {false};
		int fd;
		/* every cut where the record has a write; the others change nothing */
		if (c < r.n && r.v[c].type != 1)
			continue;
		for (j = 0; j < c; j++)
			if (r.v[j].type == 2)
				last_flush = j + 1;
		/* a put is durable when acknowledged before the last flush, or
		 * when its append (the write before its acknowledgement) was FUA */
		for (j = 0; j < c; j++) {
			if (r.v[j].type == 1)
				last_write = j;
			else if (r.v[j].type == 3)
				durable[r.v[j].acked - 1] =
				        j < last_flush ||
				        (last_write != SIZE_MAX && r.v[last_write].fua);
		}

		copy_file(base, cut);
		fd = open(cut, O_RDWR | O_CLOEXEC);
		assert_true(fd >= 0);
		for (j = 0; j < c; j++) {
			const struct pl_ev *e = &r.v[j];
			size_t len = e->len;
			if (e->type != 1)
				continue;
			if (j >= last_flush && !e->fua) {
				int fate = rand() % 3; /* kept, lost, torn */
				if (fate == 1)
					continue;
				if (fate == 2)
					len = (size_t)(rand() % (int)(len / 4096 + 1)) * 4096;
			}
			assert_int_equal(pwrite(fd, e->data, len, (off_t)e->off), (ssize_t)len);
		}
		close(fd);
		cuts++;
		{
			kv_db *d2 = pl_open(cut, NULL);
			for (i = 0; i < 40; i++) {
				char k[16], v[256];
				struct kv_value val;
				uint32_t last = i; /* the newest durable put of the key */
				int rv;
				bool acked_one = false;
				for (uint32_t p = i; p < PL_PUTS; p += 40)
					if (durable[p]) {
						last = p;
						acked_one = true;
					}
				snprintf(k, sizeof(k), "k%03u", i);
				rv = kv_get(d2, k, strlen(k), NULL, &val);
				if (!acked_one) {
					assert_true(rv == 0 || rv == KV_ENOTFOUND);
				} else {
					assert_int_equal(rv, 0);
				}
				if (rv == 0) {
					/* a value that was written for the key, no older than the
					 * last acknowledged one */
					bool known = false;
					for (uint32_t p = i; p < PL_PUTS; p += 40) {
						pl_value(v, sizeof(v), p);
						if (val.len == strlen(v) &&
						    memcmp(val.data, v, val.len) == 0) {
							known = true;
							if (acked_one)
								assert_true(p >= last);
						}
					}
					assert_true(known);
					kv_value_release(&val);
				}
			}
			assert_int_equal(kv_close(d2), 0);
		}
	}
	printf("%u power cuts replayed over %zu recorded events (%u at a FUA write)\n", cuts, r.n,
	       fua_writes);
	assert_true(cuts > 100);
	/* under RWF_DSYNC every put's append is a FUA write; else none is */
	if (mode == KV_DEV_SYNC_DSYNC)
		assert_true(fua_writes >= PL_PUTS);
	else
		assert_int_equal(fua_writes, 0);
	for (c = 0; c < r.n; c++)
		free(r.v[c].data);
	free(r.v);
	free(base);
	free(cut);
	pl_sync_mode = KV_DEV_SYNC_DSYNC;
}

static void test_power_cuts(void **state)
{
	power_cuts(state, KV_DEV_SYNC_DSYNC);
}

static void test_power_cuts_flush(void **state)
{
	power_cuts(state, KV_DEV_SYNC_FLUSH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_store_roundtrip, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_locked, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_format_refusals, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_superblock_fallback, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_catalog_slots, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_catalog_while_taking_an_extent, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_reuse_never_reads_old_records, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_activations_reuse_segment, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_device_full, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_damaged_record, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_write_and_flush_failures, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_cache_active_segment, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_leftover_extent_reclaimed, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_device_full_crash, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_power_cuts, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_power_cuts_flush, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
