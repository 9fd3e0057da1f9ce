/* test_device.c — what only the device backend has: formatting (and its
 * refusals), both superblock copies, both catalog slots, extents reused
 * without their old bytes ever reading as records, a full device, the
 * device lock, and activations that do not each take a new extent. Runs on
 * a regular file standing in for a device; tests/integration/test_device.sh
 * runs kvd on real loop devices. */
#include "testutil.h"

#include "dev_layout.h"
#include "storage.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <cmocka.h>

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
		assert_int_equal(kv_store_get(s, "a", &t), 0);
		assert_int_equal(kv_tenant_config_of(t)->history_versions, 3);
		kv_store_put(s, t);
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
	zero_at(f->img, 0, 4096);
	s = open_store(f->img);
	assert_int_equal(get(s, "default", "k", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "v");
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_locked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_format_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_superblock_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_catalog_slots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reuse_never_reads_old_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_activations_reuse_segment, setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_full, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
