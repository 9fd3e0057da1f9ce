/*
 * dev_format.c — kv_dev_format and kv_dev_check (kvengine.h): formatting a
 * device for the device backend, after libblkid's probe found nothing on
 * it, and checking every structure of a formatted one.
 */
#include "db.h"
#include "dev_layout.h"
#include "kvengine.h"
#include "storage.h"

#include <blkid/blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What libblkid finds on the device ("ext4", "dos partition table"…), or
 * a kvd superblock: 1 with what filled in, 0 when nothing, -errno. */
static int probe(const char *path, int fd, const struct dev_geometry *g, char *what, size_t len)
{
	const char *v = NULL;
	blkid_probe pr;
	uint8_t *b = NULL;
	int rv;

	/* its own descriptor: libblkid's reads are not aligned for O_DIRECT */
	if ((pr = blkid_new_probe_from_filename(path)) == NULL)
		return errno ? -errno : -EIO;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_ENTRY_DETAILS);
	rv = blkid_do_safeprobe(pr);
	if (rv == 0) {
		if (blkid_probe_lookup_value(pr, "TYPE", &v, NULL) == 0) {
			const char *usage = NULL;
			blkid_probe_lookup_value(pr, "USAGE", &usage, NULL);
			snprintf(what, len, "%s (%s)", v, usage ? usage : "a signature");
		} else if (blkid_probe_lookup_value(pr, "PTTYPE", &v, NULL) == 0) {
			snprintf(what, len, "a %s partition table", v);
		} else {
			snprintf(what, len, "a signature libblkid knows");
		}
		blkid_free_probe(pr);
		return 1;
	}
	blkid_free_probe(pr);
	if (rv == -2) {
		snprintf(what, len, "signatures that contradict each other");
		return 1;
	}
	if (rv < 0)
		return -EIO;
	/* another kvd: libblkid does not know our superblock */
	if (posix_memalign((void **)&b, g->block, g->block) != 0)
		return -ENOMEM;
	rv = 0;
	if ((pread(fd, b, g->block, 0) == (ssize_t)g->block && memcmp(b, DEV_SB_MAGIC, 8) == 0) ||
	    (g->size >= g->block &&
	     pread(fd, b, g->block, (off_t)(g->size - g->size % g->block - g->block)) ==
	         (ssize_t)g->block &&
	     memcmp(b, DEV_SB_MAGIC, 8) == 0)) {
		snprintf(what, len, "a kvd device");
		rv = 1;
	}
	free(b);
	return rv;
}

int kv_dev_format(const char *device, const struct kv_dev_format_options *o, char *err,
                  size_t errlen)
{
	uint64_t es = o && o->extent_size ? o->extent_size : KV_DEV_EXTENT_SIZE_DEFAULT;
	uint32_t nodes = o && o->nodes ? o->nodes : 1;
	struct dev_geometry g;
	char what[128];
	struct stat st;
	int fd, rv;

	err[0] = '\0';
	if (es < KV_DEV_EXTENT_SIZE_MIN || es > (1ull << 30) || (es & (es - 1)) != 0) {
		snprintf(err, errlen, "extent size %llu: a power of two from 1 MiB to 1 GiB",
		         (unsigned long long)es);
		return -EINVAL;
	}
	if (nodes > KV_DEV_NODES_MAX) {
		snprintf(err, errlen, "%u nodes: from 1 to %u", nodes, KV_DEV_NODES_MAX);
		return -EINVAL;
	}
	if (stat(device, &st) != 0) {
		rv = -errno;
		snprintf(err, errlen, "%s: %s", device, strerror(errno));
		return rv;
	}
	if (S_ISBLK(st.st_mode)) {
		/* O_EXCL on a block device: refused while it is mounted or held */
		int x = open(device, O_RDONLY | O_EXCL | O_CLOEXEC);
		if (x < 0) {
			rv = -errno;
			snprintf(err, errlen, "%s: %s (mounted, or held by another program?)", device,
			         strerror(errno));
			return rv;
		}
		close(x);
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: neither a block device nor a regular file", device);
		return -ENOTBLK;
	}
	if ((fd = dev_open_locked(device, false)) < 0) {
		snprintf(err, errlen, "%s: %s", device,
		         fd == KV_ELOCKED ? "a kvd is serving it" : strerror(-fd));
		return fd;
	}
	if ((rv = dev_geometry(fd, &g)) != 0) {
		snprintf(err, errlen, "%s: reading its geometry: %s", device, strerror(-rv));
		goto out;
	}
	rv = probe(device, fd, &g, what, sizeof(what));
	if (rv < 0) {
		snprintf(err, errlen, "%s: probing for signatures: %s", device, strerror(-rv));
		goto out;
	}
	if (rv == 1 && !(o && o->force)) {
		snprintf(err, errlen, "%s carries %s: not formatted (--force overwrites it)", device,
		         what);
		rv = KV_EREFUSED;
		goto out;
	}
	rv = dev_write_fresh(fd, &g, es, nodes, err, errlen);
out:
	close(fd);
	return rv;
}

/* ---- check ------------------------------------------------------------- */

struct dev_ck {
	kv_dev_check_fn fn;
	void *arg;
	struct kv_dev_check_summary sum;
	const char *tenant;
};

static void dev_report(struct dev_ck *c, const char *where, uint64_t off, const char *what,
                       bool damage)
{
	struct kv_dev_check_item it = {.off = off, .what = what, .damage = damage};

	snprintf(it.where, sizeof(it.where), "%s", where);
	if (damage)
		c->sum.damaged++;
	else
		c->sum.notes++;
	if (c->fn)
		c->fn(c->arg, &it);
}

static void on_item(void *arg, const struct kv_check_item *it)
{
	struct dev_ck *c = arg;
	char where[96];

	snprintf(where, sizeof(where), "tenant %s %s", c->tenant, it->file);
	dev_report(c, where, it->off, it->what, it->damage);
}

struct dev_ck_ctx {
	struct dev_ck *c;
	struct kv_storage *st;
};

static int check_tenant(void *arg, const char *tenant)
{
	struct dev_ck_ctx *x = arg;
	struct kv_check_summary s;
	int rv;

	x->c->tenant = tenant;
	x->c->sum.tenants++;
	rv = db_check(x->st, tenant, on_item, x->c, &s);
	if (rv == 0)
		x->c->sum.records += s.records;
	return rv;
}

static void ext_report(void *arg, uint32_t extent, uint64_t off, const char *what)
{
	char where[32];

	snprintf(where, sizeof(where), "extent %u", extent);
	dev_report(arg, where, off, what, true);
}

/* Both superblock copies and both catalog slots, read raw. */
static int check_raw(struct dev_ck *c, int fd, const struct dev_geometry *g)
{
	struct dev_super sb[2];
	uint64_t at[2] = {0, g->size - g->size % g->block - g->block};
	uint8_t *b;
	int ok[2], i, rv = 0;

	if (posix_memalign((void **)&b, g->block, g->block) != 0)
		return -ENOMEM;
	for (i = 0; i < 2; i++) {
		ok[i] = pread(fd, b, g->block, (off_t)at[i]) == (ssize_t)g->block &&
		        dev_super_decode(b, &sb[i]) == 0;
		if (!ok[i])
			dev_report(c, i == 0 ? "superblock 0" : "superblock 1", at[i],
			           "superblock copy damaged (the other one is used)", true);
	}
	if (ok[0] && ok[1] && memcmp(sb[0].uuid, sb[1].uuid, 16) != 0)
		dev_report(c, "superblock 1", at[1], "the two superblock copies name different devices",
		           true);
	if (ok[0] || ok[1]) {
		const struct dev_super *s = ok[0] ? &sb[0] : &sb[1];
		for (i = 0; i < 2 * (int)s->max_nodes && rv == 0; i++) {
			struct dev_cat_header h;
			uint32_t node = (uint32_t)i / 2 + 1;
			uint64_t off = dev_slot_off(s, node, i % 2);
			uint8_t *slot = NULL;
			char where[48];
			int r = dev_cat_slot_read(fd, NULL, s, node, i % 2, &slot, &h);
			if (s->max_nodes > 1)
				snprintf(where, sizeof(where), "node %u catalog slot %d", node, i % 2);
			else
				snprintf(where, sizeof(where), "catalog slot %d", i);
			if (r == 2 || r == -EIO)
				dev_report(c, where, off,
				           "catalog slot torn or damaged (the other slot is used)", true);
			else if (r == 1)
				dev_report(c, where, off, "catalog slot holds no catalog", false);
			else if (r < 0)
				rv = r;
			free(slot);
		}
	}
	free(b);
	return rv;
}

int kv_dev_check(const char *device, kv_dev_check_fn fn, void *arg,
                 struct kv_dev_check_summary *ret)
{
	struct dev_ck c = {.fn = fn, .arg = arg};
	struct dev_geometry g;
	struct kv_storage *st;
	int fd, rv;

	if ((fd = dev_open_locked(device, true)) < 0)
		return fd;
	rv = dev_geometry(fd, &g);
	if (rv == 0)
		rv = check_raw(&c, fd, &g);
	close(fd);
	if (rv != 0)
		return rv;
	if ((rv = kv_storage_dev_open(device, 1u << 20, true, NULL, &st)) != 0)
		return rv;
	{
		struct dev_ck_ctx x = {&c, st};
		rv = st->ops->tenant_list(st, check_tenant, &x);
	}
	if (rv == 0)
		rv = dev_storage_check_extents(st, ext_report, &c, &c.sum.extents_used,
		                               &c.sum.extents_free);
	kv_storage_close(st);
	if (rv == 0 && ret)
		*ret = c.sum;
	return rv;
}
