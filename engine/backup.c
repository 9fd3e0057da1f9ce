/*
 * backup.c — a database copied, as of one version, into a directory of
 * files (kv_backup), and such a directory made a tenant of a store again
 * (kv_store_restore). docs/BACKUP.md says how they are used.
 *
 * Why a backup taken while writes go on holds exactly the versions up to V:
 *
 *   1. A barrier on the write path (write_barrier: no batch in flight, none
 *      formed meanwhile) notes V = the last committed version, the active
 *      segment's id and its tail L, the segment table and META's bytes.
 *      Batches are appended in version order and a batch's bytes are all
 *      written before its versions commit, so the bytes up to L are every
 *      record of version ≤ V that is not in a sealed segment, and no record
 *      above V lies before L.
 *   2. Sealed segments never change (segment.h invariant 2) until a merge
 *      retires them; merge_mu is held from before the barrier to the end,
 *      so no merge starts, retires a segment or writes a commit meanwhile:
 *      the sealed segments, hints and merge commits read later are the ones
 *      of the barrier's moment. Segments sealed after the barrier are not
 *      copied, and neither is a hint of the segment that was active.
 *   3. The copy is then what recovery would find after a crash at the
 *      barrier that lost nothing written: META (as of the barrier, written
 *      last), sealed segments, and the active segment ending at L on a
 *      batch boundary. Recovery indexes every record in it and the next
 *      version is V + 1.
 *
 * A device's records carry the crc seed of their extent (record.h
 * invariant 1); copies are reseeded record by record for the seed of where
 * they go (0 in files).
 *
 * Threads: kv_backup runs on the calling thread, which must not be the
 * database's write-path driver (kvd: not the tenant's worker) — the
 * barrier waits for it.
 */
#include "backup.h"
#include "kdimage.h"

#include "db.h"
#include "endian_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COPY_BUF    (4u << 20)
/* The blob a backup ends with (its version, as text): a directory without
 * it is not a whole backup, and kv_store_restore refuses it. */
#define BACKUP_MARK "BACKUP"

struct bk_seg {
	uint32_t id;
	uint64_t len; /* bytes to copy */
	bool sealed;  /* sealed at the barrier: immutable, its hint is copied */
};

struct bk_snap {
	uint64_t version;
	struct bk_seg *segs;
	size_t nsegs;
	uint8_t *meta; /* META's bytes, NULL: none */
	size_t meta_len;
};

/* ---- copying segments ------------------------------------------------------ */

/* Rewrites the crc of every whole record in buf[0, len) (which starts at a
 * record) for dst_seed instead of src_seed; returns how many bytes the
 * whole records took. *ret_need: the size of a record that starts there and
 * does not fit (0: none, or damage). */
static size_t reseed(uint8_t *buf, size_t len, uint32_t xor_seed, size_t *ret_need)
{
	size_t off = 0;

	*ret_need = 0;
	while (len - off >= REC_HEADER_SIZE) {
		struct rec_header h;
		uint64_t sz;

		rec_decode_header(buf + off, &h);
		sz = h.type == REC_SYNC ? REC_SYNC_SIZE : rec_size(h.key_len, h.value_len);
		if (rec_check_header(&h, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, UINT64_MAX) != 0)
			return off; /* damage: copied as it is */
		if (sz > len - off) {
			*ret_need = (size_t)sz;
			return off;
		}
		put_le32(buf + off, get_le32(buf + off) ^ xor_seed);
		off += (size_t)sz;
	}
	return off;
}

/* Copies the first len bytes of segment id of src into a new segment id of
 * dst, sealed there at len. */
static int seg_copy(struct kv_stor_tenant *src, uint32_t id, uint64_t len,
                    struct kv_stor_tenant *dst)
{
	struct kv_stor_seg *sh = NULL, *dh = NULL;
	uint8_t *buf = NULL;
	size_t cap = COPY_BUF;
	uint64_t size, off = 0;
	uint32_t xor_seed;
	bool walk;
	int rv;

	if ((rv = stor_seg_open(src, id, &sh, &size)) != 0)
		return rv;
	if (size < len) {
		rv = KV_ECORRUPT;
		goto out;
	}
	if ((rv = stor_seg_create(dst, id, 0, &dh)) != 0)
		goto out;
	if ((buf = malloc(cap)) == NULL) {
		rv = -ENOMEM;
		goto out;
	}
	xor_seed = sh->crc_seed ^ dh->crc_seed;
	walk = xor_seed != 0;
	while (off < len) {
		size_t n = len - off < cap ? (size_t)(len - off) : cap;
		size_t take = n, need = 0;

		if ((rv = stor_seg_read(sh, buf, n, off)) != 0)
			goto out;
		if (walk && off >= SEG_HEADER_SIZE) {
			take = reseed(buf, n, xor_seed, &need);
			if (take == 0 && need > cap) {
				uint8_t *nb = realloc(buf, need);
				if (nb == NULL) {
					rv = -ENOMEM;
					goto out;
				}
				buf = nb;
				cap = need;
				continue;
			}
			if (take == 0) {
				/* damage, or a record cut at len: the rest as it is */
				take = n;
				walk = false;
			}
		} else if (walk && off + n > SEG_HEADER_SIZE) {
			take = SEG_HEADER_SIZE - (size_t)off;
		}
		if ((rv = stor_seg_write(dh, buf, take, off)) != 0)
			goto out;
		off += take;
	}
	rv = stor_seg_seal(dh, len);
out:
	free(buf);
	stor_seg_close(dh);
	stor_seg_close(sh);
	if (rv != 0 && dh != NULL)
		stor_seg_remove(dst, id, 0);
	return rv;
}

/* 1 when the hint of segment id was linked or copied, 0 when there is
 * none, or an error. */
static int hint_copy(struct kv_stor_tenant *src, uint32_t id, struct kv_stor_tenant *dst, bool link,
                     uint64_t *ret_bytes)
{
	uint8_t *buf;
	size_t len;
	int rv;

	if (link && src->st->ops->hint_link != NULL) {
		rv = src->st->ops->hint_link(src, id, dst);
		if (rv == 0)
			return 1;
		if (rv == -ENOENT)
			return 0;
	}
	if ((rv = stor_hint_get(src, id, KV_STOR_META_MAX, &buf, &len)) != 0)
		return rv == -ENOENT || rv == KV_ECORRUPT ? 0 : rv; /* a hint is only a cache */
	rv = stor_hint_put(dst, id, buf, len);
	free(buf);
	if (rv == 0)
		*ret_bytes += len;
	return rv == 0 ? 1 : rv;
}

/* The metadata blobs of a tenant, but LOCK and META (and, for a restore,
 * TENANT, which kv_store_create wrote). */
struct meta_names {
	char (*v)[KV_STOR_NAME_MAX + 1];
	size_t n, cap;
	bool skip_tenant;
};

static int meta_name_fn(void *arg, const struct kv_stor_entry *e)
{
	struct meta_names *m = arg;

	if (e->kind != KV_STOR_META || strcmp(e->name, "LOCK") == 0 ||
	    strcmp(e->name, "META") == 0 || strcmp(e->name, BACKUP_MARK) == 0 ||
	    strcmp(e->name, KDIMAGE_NAME) == 0 || /* a cache, rebuilt at the next close */
	    strlen(e->name) > KV_STOR_NAME_MAX ||
	    (m->skip_tenant && strcmp(e->name, "TENANT") == 0))
		return 0;
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 8;
		void *nv = realloc(m->v, nc * sizeof(*m->v));
		if (nv == NULL)
			return -ENOMEM;
		m->v = nv;
		m->cap = nc;
	}
	snprintf(m->v[m->n++], KV_STOR_NAME_MAX + 1, "%s", e->name);
	return 0;
}

/* Copies every metadata blob but LOCK, META, KEYDIR (and TENANT with
 * skip_tenant). */
static int metas_copy(struct kv_stor_tenant *src, struct kv_stor_tenant *dst, bool skip_tenant,
                      struct kv_backup_info *info)
{
	struct meta_names m = {.skip_tenant = skip_tenant};
	size_t i;
	int rv;

	if ((rv = stor_list(src, meta_name_fn, &m)) != 0)
		goto out;
	for (i = 0; i < m.n; i++) {
		uint8_t *buf;
		size_t len;

		if ((rv = stor_meta_get(src, m.v[i], KV_STOR_META_MAX, &buf, &len)) != 0) {
			if (rv == -ENOENT)
				continue; /* STATS rewritten meanwhile, and the like */
			goto out;
		}
		rv = stor_meta_put(dst, m.v[i], buf, len, 0);
		free(buf);
		if (rv != 0)
			goto out;
		info->bytes_copied += len;
		info->files++;
	}
	rv = 0;
out:
	free(m.v);
	return rv;
}

static int meta_copy(const struct bk_snap *snap, struct kv_stor_tenant *dst,
                     struct kv_backup_info *info)
{
	int rv;

	if (snap->meta == NULL)
		return 0;
	if ((rv = stor_meta_put(dst, "META", snap->meta, snap->meta_len, KV_STOR_DURABLE)) != 0)
		return rv;
	info->bytes_copied += snap->meta_len;
	info->files++;
	return 0;
}

/* Copies the segments of snap (linking sealed ones where the backend can),
 * their hints, the metadata and META, durably. META first for a restore
 * (a tenant a crash cut short lacks what it lists: damage, reported), last
 * for a backup (written after what it lists). */
static int tenant_copy(struct kv_stor_tenant *src, const struct bk_snap *snap,
                       struct kv_stor_tenant *dst, bool restore, struct kv_backup_info *info)
{
	size_t i;
	int rv;

	if (restore && (rv = meta_copy(snap, dst, info)) != 0)
		return rv;
	for (i = 0; i < snap->nsegs; i++) {
		const struct bk_seg *bs = &snap->segs[i];
		bool linked = false;

		if (!restore && bs->sealed && src->st->ops->seg_link != NULL &&
		    src->st->ops->seg_link(src, bs->id, dst) == 0) {
			linked = true;
			info->segments_linked++;
			info->bytes_linked += bs->len;
		}
		if (!linked) {
			if ((rv = seg_copy(src, bs->id, bs->len, dst)) != 0)
				return rv;
			info->bytes_copied += bs->len;
		}
		info->segments++;
		info->files++;
		if (bs->sealed) {
			if ((rv = hint_copy(src, bs->id, dst, !restore, &info->bytes_copied)) < 0)
				return rv;
			info->files += (uint32_t)rv;
		}
	}
	if ((rv = metas_copy(src, dst, restore, info)) != 0)
		return rv;
	/* everything META lists is in place and synced before it (a segment
	 * copy is sealed, a link shares synced bytes); the directory too */
	if ((rv = stor_tenant_sync(dst)) != 0)
		return rv;
	if (!restore && (rv = meta_copy(snap, dst, info)) != 0)
		return rv;
	return stor_tenant_sync(dst);
}

static int remove_fn(void *arg, const struct kv_stor_entry *e)
{
	struct kv_stor_tenant *t = arg;

	switch (e->kind) {
	case KV_STOR_SEGMENT:
		stor_seg_remove(t, e->id, 0);
		break;
	case KV_STOR_HINT:
		stor_hint_remove(t, e->id);
		break;
	default:
		stor_meta_remove(t, e->name);
		break;
	}
	return 0;
}

static void snap_free(struct bk_snap *snap)
{
	free(snap->segs);
	free(snap->meta);
	memset(snap, 0, sizeof(*snap));
}

/* ---- kv_backup --------------------------------------------------------------- */

/* [driver] the barrier of step 1 at the top of the file */
static int snap_fn(kv_db *db, void *arg)
{
	struct bk_snap *snap = arg;
	size_t i;
	int rv;

	snap->version = atomic_load(&db->committed_version);
	rv = stor_meta_get(db->tn, "META", KV_STOR_META_MAX, &snap->meta, &snap->meta_len);
	if (rv != 0 && rv != -ENOENT)
		return rv;
	pthread_mutex_lock(&db->seg_mu);
	snap->segs = calloc(db->nsegs + 1, sizeof(*snap->segs));
	if (snap->segs == NULL) {
		pthread_mutex_unlock(&db->seg_mu);
		return -ENOMEM;
	}
	for (i = 0; i < db->nsegs; i++) {
		struct seg *s = db->segs[i];
		struct bk_seg *bs = &snap->segs[snap->nsegs];

		if (s->retired || s->lost)
			continue; /* a lost one stays listed in META: the copy reports it too */
		bs->id = s->id;
		if (s == db->active) {
			bs->len = db->tail;
			bs->sealed = false;
		} else {
			bs->len = s->size;
			bs->sealed = s->sealed;
		}
		snap->nsegs++;
	}
	pthread_mutex_unlock(&db->seg_mu);
	return 0;
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* dir: missing (created, its parent must exist) or an empty directory. */
static int dir_prepare(const char *dir)
{
	struct stat st;
	int fd;

	if (mkdir(dir, 0750) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (stat(dir, &st) != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	{
		DIR *d = fdopendir(fd);
		struct dirent *de;
		int rv = 0;

		if (d == NULL) {
			rv = -errno;
			close(fd);
			return rv;
		}
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
				rv = -ENOTEMPTY;
				break;
			}
		}
		closedir(d);
		return rv;
	}
}

int kv_backup(kv_db *db, const char *dir, struct kv_backup_info *ret)
{
	struct kv_backup_info info;
	struct bk_snap snap;
	struct kv_storage *fst = NULL;
	struct kv_stor_tenant *dst = NULL;
	uint64_t t0 = mono_us();
	int rv;

	memset(&info, 0, sizeof(info));
	memset(&snap, 0, sizeof(snap));
	if ((rv = dir_prepare(dir)) != 0)
		return rv;
	if ((rv = kv_storage_file_open(NULL, NULL, &fst)) != 0)
		return rv;
	if ((rv = stor_tenant_open(fst, dir, 0, &dst)) != 0)
		goto out;
	/* no merge retires a segment or commits while the copy runs (step 2) */
	pthread_mutex_lock(&db->merge_mu);
	rv = write_barrier(db, snap_fn, &snap);
	if (rv == 0) {
		info.version = snap.version;
		rv = tenant_copy(db->tn, &snap, dst, false, &info);
	}
	pthread_mutex_unlock(&db->merge_mu);
	if (rv == 0) {
		char mark[64];
		int n = snprintf(mark, sizeof(mark), "version=%" PRIu64 "\n", snap.version);
		if ((rv = stor_meta_put(dst, BACKUP_MARK, mark, (size_t)n, KV_STOR_DURABLE)) == 0)
			info.files++;
	}
	if (rv != 0) {
		/* half a backup is no backup: what was written goes */
		stor_list(dst, remove_fn, dst);
		goto out;
	}
	info.elapsed_us = mono_us() - t0;
	if (ret != NULL)
		*ret = info;
out:
	snap_free(&snap);
	stor_tenant_close(dst);
	kv_storage_close(fst);
	return rv;
}

/* ---- the store's calls --------------------------------------------------------- */

/* Whether dir is the store's directory or inside it (by their real paths;
 * dir's parent, as dir itself may not exist yet). */
static int dir_inside(const char *store_dir, const char *dir, bool *ret)
{
	char sreal[PATH_MAX], preal[PATH_MAX], parent[PATH_MAX];
	const char *slash;
	size_t sl;

	if (store_dir == NULL) {
		*ret = false;
		return 0;
	}
	if (realpath(store_dir, sreal) == NULL)
		return -errno;
	if (strlen(dir) >= sizeof(parent))
		return -ENAMETOOLONG;
	strcpy(parent, dir);
	/* strip trailing slashes, then the last component */
	while (strlen(parent) > 1 && parent[strlen(parent) - 1] == '/')
		parent[strlen(parent) - 1] = '\0';
	if ((slash = strrchr(parent, '/')) == NULL)
		strcpy(parent, ".");
	else if (slash == parent)
		parent[1] = '\0';
	else
		parent[slash - parent] = '\0';
	if (realpath(parent, preal) == NULL)
		return -errno;
	sl = strlen(sreal);
	/* the parent inside the store, or the store's directory itself */
	if (strncmp(preal, sreal, sl) == 0 && (preal[sl] == '\0' || preal[sl] == '/')) {
		*ret = true;
		return 0;
	}
	{
		char dreal[PATH_MAX];
		if (realpath(dir, dreal) != NULL && strcmp(dreal, sreal) == 0) {
			*ret = true;
			return 0;
		}
	}
	*ret = false;
	return 0;
}

int kv_store_backup(kv_store *s, const char *name, const char *dir, struct kv_backup_info *ret)
{
	kv_tenant *t;
	bool inside;
	int rv;

	if ((rv = dir_inside(store_dir_of(s), dir, &inside)) != 0)
		return rv;
	if (inside)
		return -EINVAL;
	if ((rv = kv_store_get(s, name, &t)) != 0)
		return rv;
	rv = kv_backup(kv_tenant_db(t), dir, ret);
	kv_store_put(s, t);
	return rv;
}

/* ---- restoring ------------------------------------------------------------------ */

static int seg_list_fn(void *arg, const struct kv_stor_entry *e)
{
	struct bk_snap *snap = arg;

	if (e->kind != KV_STOR_SEGMENT)
		return 0;
	if ((snap->nsegs & 63) == 0) {
		void *nv = realloc(snap->segs, (snap->nsegs + 64) * sizeof(*snap->segs));
		if (nv == NULL)
			return -ENOMEM;
		snap->segs = nv;
	}
	snap->segs[snap->nsegs].id = e->id;
	snap->segs[snap->nsegs].sealed = true;
	snap->nsegs++;
	return 0;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct bk_seg *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Reads the backup in src: its segments (every one whole) and META. */
static int backup_read(struct kv_stor_tenant *src, struct bk_snap *snap)
{
	size_t i;
	int rv;

	if ((rv = stor_meta_get(src, BACKUP_MARK, 64, &snap->meta, &snap->meta_len)) != 0)
		return rv == KV_ECORRUPT ? -ENOENT : rv; /* not a whole backup */
	free(snap->meta);
	snap->meta = NULL;
	if ((rv = stor_list(src, seg_list_fn, snap)) != 0)
		return rv;
	if (snap->nsegs > 0)
		qsort(snap->segs, snap->nsegs, sizeof(*snap->segs), cmp_seg);
	for (i = 0; i < snap->nsegs; i++) {
		struct kv_stor_seg *h;
		if ((rv = stor_seg_open(src, snap->segs[i].id, &h, &snap->segs[i].len)) != 0)
			return rv;
		stor_seg_close(h);
	}
	return stor_meta_get(src, "META", KV_STOR_META_MAX, &snap->meta, &snap->meta_len);
}

int kv_store_restore(kv_store *s, const char *name, const char *dir, bool force)
{
	struct kv_storage *fst = NULL, *st = store_storage_of(s);
	struct kv_stor_tenant *src = NULL, *dst = NULL;
	struct kv_tenant_config cfg;
	struct kv_backup_info info;
	struct bk_snap snap;
	char why[256];
	bool created = false;
	int rv;

	memset(&snap, 0, sizeof(snap));
	memset(&info, 0, sizeof(info));
	if (!kv_tenant_name_valid(name, strlen(name)))
		return -EINVAL;
	if (st->shared)
		return -ENOTSUP;
	if ((rv = kv_storage_file_open(NULL, NULL, &fst)) != 0)
		return rv;
	if ((rv = stor_tenant_open(fst, dir, 0, &src)) != 0)
		goto out;
	/* first BACKUP: a directory that is no backup is -ENOENT */
	if ((rv = backup_read(src, &snap)) != 0 ||
	    (rv = kv_tenant_file_read(dir, NULL, why, sizeof(why), &cfg)) != 0)
		goto out;
	if (force && (rv = kv_store_drop(s, name)) != 0 && rv != -ENOENT)
		goto out;
	if ((rv = kv_store_create(s, name, &cfg)) != 0)
		goto out;
	created = true;
	if ((rv = stor_tenant_open(st, name, 0, &dst)) != 0)
		goto out;
	rv = tenant_copy(src, &snap, dst, true, &info);
out:
	stor_tenant_close(dst);
	if (rv != 0 && created)
		kv_store_drop(s, name);
	snap_free(&snap);
	stor_tenant_close(src);
	kv_storage_close(fst);
	return rv;
}
