/*
 * storage_dev.c — the `device` storage backend (storage.h): every tenant of
 * a store in the extents of one block device (or a regular file standing in
 * for one), laid out as dev_layout.h and docs/FORMAT.md describe. Its
 * appends are in dev_append.c, its catalog and extents in dev_catalog.c.
 *
 * What lives where:
 *   - a segment is one extent (its data after the extent's header block);
 *     the engine's segment size is bounded by what an extent holds
 *     (kv_storage.seg_max);
 *   - hint data and metadata blobs up to DEV_INLINE_MAX bytes live in the
 *     catalog itself; larger ones are packed into the tenant's AUX extents
 *     (one open for packing at a time; a blob larger than half an
 *     extent gets extents of its own), each with its CRC32C in the catalog;
 *   - the catalog (in memory here, written whole to the older slot of
 *     this node's pair by cat_write; dev_shared.c for a shared device) holds the tenants, their objects and the extent table.
 *     Namespace changes (creating, publishing, sealing and removing
 *     segments, blob puts and removals) change the memory copy and become
 *     durable with the next catalog write: tenant_sync, a durable meta_put,
 *     seg_seal, tenant_create and tenant_drop write it.
 *
 * Invariants:
 *   1. Every write covers whole blocks. An append that starts inside a block
 *      rewrites that block whole, from the segment's copy of its tail block
 *      (dev_segment.tail), so the bytes before it are the same bytes.
 *   2. A segment is written by one writer at a time (the engine's order);
 *      no two writes of one block are ever in flight.
 *   3. Each use of an extent has its own generation, above every earlier
 *      one (the catalog's and the one its header block last carried), so its
 *      records' crc seed (record.h) differs from every earlier use's: bytes
 *      an earlier use left never pass for records.
 *   4. An extent no catalog references any more is given to a new use only
 *      once a catalog write that no longer references it is durable
 *      (dev_extent.free_after), and only once no handle reads it.
 *   5. A segment's length is exact once it is sealed (seg_seal, or
 *      publishing a merge output, which is complete); a segment that was
 *      not sealed when the process ended reports the extent's capacity, and
 *      recovery finds where its records end (the crc seed stops it at the
 *      first block an earlier use left). Such a segment is never appended
 *      to again (kv_storage.append_reopened false): the engine seals it and
 *      starts a new one.
 *   6. Only bytes that no longer change go through the read cache
 *      (dev_cache.h): sealed segments, blobs, and the whole blocks of a
 *      segment being written below the block its end is in (an append
 *      rewrites only that block: invariant 1). A truncation drops what
 *      it rewrites; reopening a sealed segment drops all of it.
 *   7. A synced append under KV_DEV_SYNC_DSYNC is one RWF_DSYNC write: on a
 *      block device the kernel sets FUA on it and issues no flush before
 *      it, so it makes that write durable and nothing written before. That
 *      is enough because a segment that takes synced appends takes nothing
 *      else: a tenant's sync mode is fixed while it is open, its segment
 *      header and catalog entry were flushed when the segment was created
 *      (the engine's write_roll syncs the tenant after seg_create), and
 *      every append to it is synced. A device without FUA gets a write and
 *      a flush after it from the kernel, which is more.
 *
 * Threads: d->mu guards every structure in memory; d->cat_mu orders catalog
 * writes (never taken under d->mu). I/O runs without d->mu held.
 */
#include "dev_internal.h"

#include "crc.h"
#include "endian_util.h"
#include "io.h"
#include "kvengine.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct dev_tenant *ten_of(struct kv_stor_tenant *t)
{
	return dev_ten_of(t);
}


/* ---- tenants ----------------------------------------------------------- */

static struct dev_tenant *tenant_find(struct dev_storage *d, const char *name)
{
	size_t i;

	for (i = 0; i < d->ntenants; i++)
		if (!d->tenants[i]->lost && !d->tenants[i]->tomb &&
		    strcmp(d->tenants[i]->name, name) == 0)
			return d->tenants[i];
	return NULL;
}

/* A tenant in memory only. [d->mu] */
static int tenant_new(struct dev_storage *d, const char *name, struct dev_tenant **ret)
{
	struct dev_tenant *t;

	if (strlen(name) > KV_TENANT_NAME_MAX || name[0] == '\0' || strchr(name, '/') != NULL)
		return -EINVAL;
	if (dev_shared(d))
		return dev_shared_tenant_new(d, name, ret);
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return -ENOMEM;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->id = d->next_tenant++;
	t->owner = 1;
	t->epoch = 1;
	t->aux = NONE;
	atomic_init(&t->owned, true);
	if (dev_tenant_add(d, t) != 0) {
		free(t);
		return -ENOMEM;
	}
	d->changes++;
	*ret = t;
	return 0;
}

static struct dev_blob *blob_find(struct dev_tenant *t, uint8_t kind, uint32_t id,
                                  const char *name)
{
	size_t i;

	for (i = 0; i < t->nblobs; i++) {
		struct dev_blob *b = &t->blobs[i];
		if (b->kind == kind && (kind == KV_STOR_HINT ? b->id == id : !strcmp(b->name, name)))
			return b;
	}
	return NULL;
}

/* Gives back what blob b holds on the device. [d->mu] */
static void blob_unref(struct dev_storage *d, struct dev_tenant *t, struct dev_blob *b)
{
	uint32_t k;

	for (k = 0; k < b->nexts; k++) {
		struct dev_extent *e = &d->ext[b->exts[k]];
		if (e->users > 0 && --e->users == 0 && b->exts[k] != t->aux)
			dev_ext_release(d, b->exts[k]);
	}
	dev_blob_clear(b);
}

static void blob_drop(struct dev_storage *d, struct dev_tenant *t, struct dev_blob *b)
{
	blob_unref(d, t, b);
	*b = t->blobs[--t->nblobs];
	d->changes++;
}

static int dev_tenant_create(struct kv_storage *st, const char *tenant, const char *meta_name,
                             const void *buf, size_t len);
static int dev_meta_put(struct kv_stor_tenant *t, const char *name, const void *buf, size_t len,
                        unsigned flags);

static int dev_tenant_open(struct kv_storage *st, const char *tenant, unsigned flags,
                           struct kv_stor_tenant **ret)
{
	struct dev_storage *d = dev_of(st);
	struct dev_tenant_h *h;
	struct dev_tenant *t;
	int rv = 0;

	if ((h = calloc(1, sizeof(*h))) == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&d->mu);
	t = tenant_find(d, tenant);
	if (t == NULL && (flags & KV_STOR_CREATE))
		rv = tenant_new(d, tenant, &t);
	else if (t == NULL)
		rv = -ENOENT;
	if (rv == 0)
		t->handles++;
	pthread_mutex_unlock(&d->mu);
	if (rv != 0) {
		free(h);
		return rv;
	}
	h->base.st = st;
	h->t = t;
	*ret = &h->base;
	return 0;
}

static void dev_tenant_close(struct kv_stor_tenant *th)
{
	struct dev_storage *d;
	struct dev_tenant_h *h = (struct dev_tenant_h *)th;

	if (th == NULL)
		return;
	d = dev_of(th->st);
	pthread_mutex_lock(&d->mu);
	if (h->lock > 0)
		h->t->lock--;
	else if (h->lock < 0)
		h->t->lock = 0;
	h->t->handles--;
	pthread_mutex_unlock(&d->mu);
	free(h);
	/* what a database closed with (hints, STATS) lasts beyond the process,
	 * as the page cache keeps a closed file's writes on files */
	dev_cat_write(d);
}

static int dev_tenant_lock(struct kv_stor_tenant *th, bool exclusive)
{
	struct dev_storage *d = dev_of(th->st);
	struct dev_tenant_h *h = (struct dev_tenant_h *)th;
	int rv = 0;

	pthread_mutex_lock(&d->mu);
	if (h->lock != 0)
		rv = -EINVAL;
	else if (exclusive ? h->t->lock != 0 : h->t->lock < 0)
		rv = KV_ELOCKED;
	else if (exclusive)
		h->t->lock = h->lock = -1;
	else
		h->t->lock++, h->lock = 1;
	pthread_mutex_unlock(&d->mu);
	return rv;
}

static int dev_tenant_sync(struct kv_stor_tenant *t)
{
	return dev_cat_write(dev_of(t->st));
}

static int dev_tenant_create(struct kv_storage *st, const char *tenant, const char *meta_name,
                             const void *buf, size_t len)
{
	struct kv_stor_tenant *th;
	int rv;

	if ((rv = dev_tenant_open(st, tenant, KV_STOR_CREATE, &th)) != 0)
		return rv;
	rv = dev_meta_put(th, meta_name, buf, len, KV_STOR_DURABLE);
	dev_tenant_close(th);
	return rv;
}

static int dev_tenant_drop(struct kv_storage *st, const char *tenant)
{
	struct dev_storage *d = dev_of(st);
	struct dev_tenant *t;
	size_t i;

	pthread_mutex_lock(&d->mu);
	if ((t = tenant_find(d, tenant)) == NULL) {
		pthread_mutex_unlock(&d->mu);
		return -ENOENT;
	}
	if (t->handles > 0 || dev_writable(t) != 0) {
		pthread_mutex_unlock(&d->mu);
		return t->handles > 0 ? -EBUSY : -ESTALE;
	}
	for (i = 0; i < t->nsegs; i++)
		dev_ext_release(d, t->segs[i]->extent);
	while (t->nblobs > 0)
		blob_drop(d, t, &t->blobs[0]);
	if (t->aux != NONE)
		dev_ext_release(d, t->aux);
	d->changes++;
	if (dev_shared(d)) {
		/* a tombstone, so no node's older entry brings it back */
		for (i = 0; i < t->nsegs; i++) {
			free(t->segs[i]->tail);
			free(t->segs[i]);
		}
		t->nsegs = 0;
		t->aux = NONE;
		t->tomb = true;
		atomic_store(&t->owned, false);
		pthread_mutex_unlock(&d->mu);
		return dev_cat_write(d);
	}
	for (i = 0; i < d->ntenants; i++)
		if (d->tenants[i] == t)
			d->tenants[i] = d->tenants[--d->ntenants];
	pthread_mutex_unlock(&d->mu);
	dev_tenant_free(t);
	return dev_cat_write(d);
}

static int dev_tenant_list(struct kv_storage *st, int (*fn)(void *arg, const char *tenant),
                           void *arg)
{
	struct dev_storage *d = dev_of(st);
	char (*names)[KV_TENANT_NAME_MAX + 1];
	size_t i, n;
	int rv = 0;

	pthread_mutex_lock(&d->mu);
	if ((names = calloc(d->ntenants ? d->ntenants : 1, sizeof(*names))) == NULL) {
		pthread_mutex_unlock(&d->mu);
		return -ENOMEM;
	}
	for (i = n = 0; i < d->ntenants; i++)
		if (!d->tenants[i]->lost && !d->tenants[i]->tomb)
			memcpy(names[n++], d->tenants[i]->name, sizeof(names[0]));
	pthread_mutex_unlock(&d->mu);
	for (i = 0; i < n && rv == 0; i++)
		rv = fn(arg, names[i]);
	free(names);
	return rv;
}

static int dev_list(struct kv_stor_tenant *th, kv_stor_list_fn fn, void *arg)
{
	struct dev_storage *d = dev_of(th->st);
	struct dev_tenant *t = ten_of(th);
	struct kv_stor_entry *v;
	char (*names)[KV_STOR_NAME_MAX + 1];
	size_t i, n = 0, cap;
	int rv = 0;

	pthread_mutex_lock(&d->mu);
	cap = t->nsegs + t->nblobs;
	v = calloc(cap ? cap : 1, sizeof(*v));
	names = calloc(cap ? cap : 1, sizeof(*names));
	if (v == NULL || names == NULL) {
		pthread_mutex_unlock(&d->mu);
		free(v);
		free(names);
		return -ENOMEM;
	}
	for (i = 0; i < t->nsegs; i++)
		if (!t->segs[i]->temp)
			v[n++] = (struct kv_stor_entry){.kind = KV_STOR_SEGMENT, .id = t->segs[i]->id};
	for (i = 0; i < t->nblobs; i++) {
		memcpy(names[n], t->blobs[i].name, sizeof(names[n]));
		v[n] = (struct kv_stor_entry){.kind = t->blobs[i].kind, .id = t->blobs[i].id,
		                              .name = names[n]};
		n++;
	}
	pthread_mutex_unlock(&d->mu);
	for (i = 0; i < n && rv == 0; i++)
		rv = fn(arg, &v[i]);
	free(v);
	free(names);
	return rv;
}

/* ---- blobs ------------------------------------------------------------- */

/* Whether the cache holds every block of [off, off+len): then copied to dst. */
static bool cache_get(struct dev_storage *d, uint8_t *dst, size_t len, uint64_t off)
{
	uint64_t b = off - off % d->B;
	size_t done = 0;

	if (d->cache == NULL || len == 0)
		return false;
	for (; done < len; b += d->B) {
		size_t in = done == 0 ? (size_t)(off - b) : 0, n = d->B - in;
		if (n > len - done)
			n = len - done;
		if (!dev_cache_get(d->cache, b, in, dst + done, n))
			return false;
		done += n;
	}
	return true;
}

/* Keeps the blocks [a, e) read into buf, those below limit (invariant 6). */
static void cache_put(struct dev_storage *d, const uint8_t *buf, uint64_t a, uint64_t e,
                      uint64_t limit)
{
	uint64_t b;

	for (b = a; b < e && b + d->B <= limit && d->cache != NULL; b += d->B)
		dev_cache_put(d->cache, b, buf + (b - a));
}

/* Reads len bytes at device offset off (any alignment) into dst, through
 * the cache for the blocks below the device offset limit (invariant 6;
 * 0: none, UINT64_MAX: all). */
static int dev_read(struct dev_storage *d, void *dst, size_t len, uint64_t off, uint64_t limit)
{
	uint8_t *out = dst, *bounce = NULL;
	bool cacheable = off + len <= limit;
	int rv = 0;

	if (len == 0)
		return 0;
	if (cacheable && cache_get(d, out, len, off))
		return 0;
	{
		uint64_t a = off - off % d->B, e = round_up(off + len, d->B);
		if ((bounce = balloc(d, (size_t)(e - a))) == NULL)
			return -ENOMEM;
		rv = io_pread_full(d->base.fault, d->fd, bounce, (size_t)(e - a), a);
		if (rv == 0) {
			memcpy(out, bounce + (off - a), len);
			cache_put(d, bounce, a, e, limit);
		}
		free(bounce);
	}
	return rv;
}

/* Writes a blob of len bytes to extents of t; fills b's location. Only
 * metadata may take the extents kept for merges: a hint is an aid (without
 * it a segment is scanned), and hints taking them filled a device past the
 * point where merges could free it. Blobs up to half an extent are packed,
 * larger ones get extents of their own. */
static int blob_write(struct dev_storage *d, struct dev_tenant *t, const void *buf, size_t len,
                      struct dev_blob *b)
{
	uint64_t alen = round_up(len, d->B), off = 0;
	uint32_t n = 1, k, first = NONE;
	bool reserve = b->kind == KV_STOR_META;
	uint8_t *a;
	int rv = 0;

	if ((a = balloc(d, (size_t)alen)) == NULL)
		return -ENOMEM;
	memcpy(a, buf, len);
	memset(a + len, 0, (size_t)(alen - len));
	if (alen > d->cap / 2) {
		/* extents of its own */
		n = (uint32_t)((alen + d->cap - 1) / d->cap);
		if ((b->exts = calloc(n, sizeof(*b->exts))) == NULL) {
			free(a);
			return -ENOMEM;
		}
		for (k = 0; k < n && rv == 0; k++) {
			uint64_t part = alen - (uint64_t)k * d->cap;
			if (part > d->cap)
				part = d->cap;
			if ((rv = dev_ext_alloc(d, t, DEV_EXT_AUX, t->aux_count++, reserve,
			                        &b->exts[k])) != 0)
				break;
			b->nexts = k + 1;
			rv = io_pwrite_full(d->base.fault, d->fd, a + (uint64_t)k * d->cap, (size_t)part,
			                    data_off(d, b->exts[k]));
		}
		pthread_mutex_lock(&d->mu);
		for (k = 0; k < b->nexts; k++)
			d->ext[b->exts[k]].users++;
		pthread_mutex_unlock(&d->mu);
		b->off = 0;
		free(a);
		return rv;
	}
	/* packed into the tenant's AUX extent */
	pthread_mutex_lock(&d->mu);
	if (t->aux == NONE || t->aux_off + alen > d->cap) {
		uint32_t old = t->aux;
		pthread_mutex_unlock(&d->mu);
		if ((rv = dev_ext_alloc(d, t, DEV_EXT_AUX, t->aux_count++, reserve, &first)) != 0) {
			free(a);
			return rv;
		}
		pthread_mutex_lock(&d->mu);
		t->aux = first;
		t->aux_off = 0;
		d->ext[first].users++; /* the packing extent's own reference */
		if (old != NONE && --d->ext[old].users == 0)
			dev_ext_release(d, old);
	}
	off = t->aux_off;
	t->aux_off += alen;
	first = t->aux;
	d->ext[first].users++;
	d->changes++;
	pthread_mutex_unlock(&d->mu);
	if ((b->exts = malloc(sizeof(*b->exts))) == NULL) {
		rv = -ENOMEM;
	} else {
		b->exts[0] = first;
		b->nexts = 1;
		b->off = off;
		rv = io_pwrite_full(d->base.fault, d->fd, a, (size_t)alen, data_off(d, first) + off);
	}
	if (rv != 0 && b->exts == NULL) {
		pthread_mutex_lock(&d->mu);
		d->ext[first].users--;
		pthread_mutex_unlock(&d->mu);
	}
	free(a);
	return rv;
}

static int blob_put(struct kv_stor_tenant *th, uint8_t kind, uint32_t id, const char *name,
                    const void *buf, size_t len, bool durable)
{
	struct dev_storage *d = dev_of(th->st);
	struct dev_tenant *t = ten_of(th);
	struct dev_blob nb = {.kind = kind, .id = id}, *old;
	int rv = 0;

	if (strlen(name) > KV_STOR_NAME_MAX || len > KV_STOR_META_MAX)
		return -EINVAL;
	if ((rv = dev_writable(t)) != 0)
		return rv;
	snprintf(nb.name, sizeof(nb.name), "%s", name);
	nb.len = len;
	nb.crc = crc32c(buf, len);
	if (len <= DEV_INLINE_MAX) {
		if ((nb.data = malloc(len ? len : 1)) == NULL)
			return -ENOMEM;
		memcpy(nb.data, buf, len);
	} else if ((rv = blob_write(d, t, buf, len, &nb)) != 0) {
		pthread_mutex_lock(&d->mu);
		blob_unref(d, t, &nb);
		pthread_mutex_unlock(&d->mu);
		return rv;
	}
	pthread_mutex_lock(&d->mu);
	old = blob_find(t, kind, id, name);
	if (old != NULL) {
		blob_unref(d, t, old);
		*old = nb;
	} else if (dev_push((void **)&t->blobs, &t->nblobs, &t->capblobs, sizeof(nb)) != 0) {
		blob_unref(d, t, &nb);
		rv = -ENOMEM;
	} else {
		t->blobs[t->nblobs - 1] = nb;
	}
	d->changes++;
	pthread_mutex_unlock(&d->mu);
	if (rv == 0 && durable)
		rv = dev_cat_write(d);
	return rv;
}

static int blob_get(struct kv_stor_tenant *th, uint8_t kind, uint32_t id, const char *name,
                    size_t max, uint8_t **ret_buf, size_t *ret_len)
{
	struct dev_storage *d = dev_of(th->st);
	struct dev_tenant *t = ten_of(th);
	struct dev_blob *b, copy;
	uint32_t exts[64], *ev = exts;
	uint8_t *buf;
	uint32_t k;
	int rv = 0;

	pthread_mutex_lock(&d->mu);
	if ((b = blob_find(t, kind, id, name)) == NULL) {
		pthread_mutex_unlock(&d->mu);
		return -ENOENT;
	}
	if (b->len > max) {
		pthread_mutex_unlock(&d->mu);
		return KV_ECORRUPT;
	}
	copy = *b;
	if ((buf = malloc(b->len ? (size_t)b->len : 1)) == NULL ||
	    (b->nexts > 64 && (ev = malloc(b->nexts * sizeof(*ev))) == NULL)) {
		pthread_mutex_unlock(&d->mu);
		free(buf);
		return -ENOMEM;
	}
	if (b->nexts == 0)
		memcpy(buf, b->data, (size_t)b->len);
	else
		memcpy(ev, b->exts, b->nexts * sizeof(*ev));
	/* the extents stay ours while we read: a replaced blob's extents are
	 * only reused after a catalog write, which waits for nothing we hold,
	 * so pin them as readers */
	for (k = 0; k < copy.nexts; k++)
		d->ext[ev[k]].readers++;
	pthread_mutex_unlock(&d->mu);
	for (k = 0; k < copy.nexts && rv == 0; k++) {
		uint64_t at = (uint64_t)k * d->cap, part = copy.len - at;
		if (part > d->cap)
			part = d->cap;
		rv = dev_read(d, buf + at, (size_t)part, data_off(d, ev[k]) + (k == 0 ? copy.off : 0),
		              UINT64_MAX);
	}
	pthread_mutex_lock(&d->mu);
	for (k = 0; k < copy.nexts; k++)
		d->ext[ev[k]].readers--;
	dev_ext_settle(d);
	pthread_mutex_unlock(&d->mu);
	if (ev != exts)
		free(ev);
	if (rv == 0 && crc32c(buf, (size_t)copy.len) != copy.crc)
		rv = KV_ECORRUPT;
	if (rv != 0) {
		free(buf);
		return rv == -EIO ? KV_ECORRUPT : rv;
	}
	*ret_buf = buf;
	*ret_len = (size_t)copy.len;
	return 0;
}

static int blob_remove(struct kv_stor_tenant *th, uint8_t kind, uint32_t id, const char *name)
{
	struct dev_storage *d = dev_of(th->st);
	struct dev_tenant *t = ten_of(th);
	struct dev_blob *b;

	if (dev_writable(t) != 0)
		return -ESTALE;
	pthread_mutex_lock(&d->mu);
	if ((b = blob_find(t, kind, id, name)) == NULL) {
		pthread_mutex_unlock(&d->mu);
		return -ENOENT;
	}
	blob_drop(d, t, b);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

static int dev_meta_put(struct kv_stor_tenant *t, const char *name, const void *buf, size_t len,
                        unsigned flags)
{
	return blob_put(t, KV_STOR_META, 0, name, buf, len, flags & KV_STOR_DURABLE);
}

static int dev_meta_get(struct kv_stor_tenant *t, const char *name, size_t max, uint8_t **ret_buf,
                        size_t *ret_len)
{
	return blob_get(t, KV_STOR_META, 0, name, max, ret_buf, ret_len);
}

static int dev_meta_remove(struct kv_stor_tenant *t, const char *name)
{
	return blob_remove(t, KV_STOR_META, 0, name);
}

static int dev_hint_put(struct kv_stor_tenant *t, uint32_t id, const void *buf, size_t len)
{
	return blob_put(t, KV_STOR_HINT, id, "", buf, len, false);
}

static int dev_hint_get(struct kv_stor_tenant *t, uint32_t id, size_t max, uint8_t **ret_buf,
                        size_t *ret_len)
{
	return blob_get(t, KV_STOR_HINT, id, "", max, ret_buf, ret_len);
}

static int dev_hint_remove(struct kv_stor_tenant *t, uint32_t id)
{
	return blob_remove(t, KV_STOR_HINT, id, "");
}

/* ---- segments ---------------------------------------------------------- */

static struct dev_segment *seg_find(struct dev_tenant *t, uint32_t id)
{
	size_t i;

	for (i = 0; i < t->nsegs; i++)
		if (t->segs[i]->id == id)
			return t->segs[i];
	return NULL;
}

static int seg_handle(struct kv_stor_tenant *th, struct dev_segment *s, struct kv_stor_seg **ret)
{
	struct dev_seg_h *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return -ENOMEM;
	h->base.t = th;
	h->base.id = s->id;
	h->base.crc_seed = s->seed;
	h->base.sealed = s->sealed && s->len_known;
	/* S2 (dev_shared.c): another node's extent is never written again */
	h->base.frozen = !dev_in_range(dev_of(th->st), s->extent);
	h->seg = s;
	s->refs++;
	*ret = &h->base;
	return 0;
}

static int dev_seg_create(struct kv_stor_tenant *th, uint32_t id, unsigned flags,
                          struct kv_stor_seg **ret)
{
	struct dev_storage *d = dev_of(th->st);
	struct dev_tenant *t = ten_of(th);
	struct dev_segment *s;
	uint32_t ext;
	int rv;

	pthread_mutex_lock(&d->mu);
	s = seg_find(t, id);
	pthread_mutex_unlock(&d->mu);
	if (s != NULL)
		return -EEXIST;
	if ((s = calloc(1, sizeof(*s))) == NULL || (s->tail = balloc(d, d->B)) == NULL) {
		free(s);
		return -ENOMEM;
	}
	if ((rv = dev_ext_alloc(d, t, DEV_EXT_SEG, id, flags & KV_STOR_SEG_TEMP, &ext)) != 0) {
		free(s->tail);
		free(s);
		return rv;
	}
	s->id = id;
	s->extent = ext;
	s->temp = flags & KV_STOR_SEG_TEMP;
	s->len_known = true;
	s->tail_ok = true; /* an empty block */
	memset(s->tail, 0, d->B);
	pthread_mutex_lock(&d->mu);
	s->seed = dev_seg_seed(d->sb.uuid, ext, d->ext[ext].generation);
	if ((rv = dev_seg_add(t, s)) == 0)
		rv = seg_handle(th, s, ret);
	if (rv != 0) {
		dev_ext_release(d, ext);
		if (s->listed)
			t->nsegs--;
		free(s->tail);
		free(s);
	}
	d->changes++;
	pthread_mutex_unlock(&d->mu);
	return rv;
}

static int dev_seg_open(struct kv_stor_tenant *th, uint32_t id, struct kv_stor_seg **ret,
                        uint64_t *ret_size)
{
	struct dev_storage *d = dev_of(th->st);
	struct dev_segment *s;
	int rv = -ENOENT;

	pthread_mutex_lock(&d->mu);
	if ((s = seg_find(ten_of(th), id)) != NULL && !s->temp) {
		if (s->seed == 0)
			s->seed = dev_seg_seed(d->sb.uuid, s->extent, d->ext[s->extent].generation);
		if (s->tail == NULL && (s->tail = balloc(d, d->B)) == NULL)
			rv = -ENOMEM;
		else
			rv = seg_handle(th, s, ret);
		if (rv == 0)
			*ret_size = s->len_known ? s->len : d->cap;
	}
	pthread_mutex_unlock(&d->mu);
	return rv;
}

static void seg_put(struct dev_storage *d, struct dev_segment *s)
{
	if (--s->refs > 0)
		return;
	/* removed and no handle left: its extent goes (invariant 4) */
	dev_ext_release(d, s->extent);
	free(s->tail);
	free(s);
}

static void dev_seg_close(struct kv_stor_seg *sh)
{
	struct dev_storage *d;

	if (sh == NULL)
		return;
	d = dev_of(sh->t->st);
	pthread_mutex_lock(&d->mu);
	seg_put(d, seg_of(sh));
	pthread_mutex_unlock(&d->mu);
	free(sh);
}

static int dev_seg_remove(struct kv_stor_tenant *th, uint32_t id, unsigned flags)
{
	struct dev_storage *d = dev_of(th->st);
	struct dev_tenant *t = ten_of(th);
	size_t i;

	if (dev_writable(t) != 0)
		return -ESTALE;
	pthread_mutex_lock(&d->mu);
	for (i = 0; i < t->nsegs; i++) {
		struct dev_segment *s = t->segs[i];
		if (s->id != id || s->temp != !!(flags & KV_STOR_SEG_TEMP))
			continue;
		t->segs[i] = t->segs[--t->nsegs];
		s->listed = false;
		d->changes++;
		seg_put(d, s); /* the extent stays while handles read it */
		pthread_mutex_unlock(&d->mu);
		return 0;
	}
	pthread_mutex_unlock(&d->mu);
	return -ENOENT;
}

static int dev_seg_reopen(struct kv_stor_seg *sh)
{
	struct dev_storage *d = dev_of(sh->t->st);
	struct dev_segment *s = seg_of(sh);

	if (dev_writable(dev_ten_of(sh->t)) != 0 || sh->frozen)
		return -ESTALE;
	pthread_mutex_lock(&d->mu);
	s->sealed = false;
	s->tail_ok = false; /* its tail block is read again before the first append */
	d->changes++;
	pthread_mutex_unlock(&d->mu);
	/* what the cache holds of it is about to change (invariant 6) */
	dev_cache_drop_range(d->cache, dev_extent_off(&d->sb, s->extent), d->sb.extent_size);
	sh->sealed = false;
	return dev_cat_write(d);
}

static int dev_seg_publish(struct kv_stor_seg *sh)
{
	struct dev_storage *d = dev_of(sh->t->st);
	struct dev_segment *s = seg_of(sh);

	if (dev_writable(dev_ten_of(sh->t)) != 0)
		return -ESTALE;
	pthread_mutex_lock(&d->mu);
	s->temp = false;
	/* a merge output is complete when published (invariant 5) */
	s->sealed = true;
	d->changes++;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

/* The device bytes [a, e) of s to write: stage holds them, laid out from
 * a = the block holding off; its first block starts with the segment's own
 * bytes before off (invariant 1). Returns the staged length. */
int dev_stage_prepare(struct dev_storage *d, struct dev_segment *s, uint8_t **stage, size_t *cap,
                      const void *buf, size_t len, uint64_t off, size_t *ret_len)
{
	uint64_t a = off - off % d->B, e = round_up(off + len, d->B);
	size_t n = (size_t)(e - a), lead = (size_t)(off - a);
	int rv;

	if (off + len > d->cap)
		return -ENOSPC; /* past the extent: the engine's segment size forbids it */
	if (n > *cap) {
		uint8_t *p = balloc(d, n);
		if (p == NULL)
			return -ENOMEM;
		free(*stage);
		*stage = p;
		*cap = n;
	}
	if (lead > 0) {
		if (!s->tail_ok || off != s->len || !s->len_known) {
			/* the block as the device has it */
			rv = io_pread_full(d->base.fault, d->fd, *stage, d->B, data_off(d, s->extent) + a);
			if (rv != 0)
				return rv;
		} else {
			memcpy(*stage, s->tail, lead);
		}
	}
	memcpy(*stage + lead, buf, len);
	memset(*stage + lead + len, 0, n - lead - len);
	*ret_len = n;
	return 0;
}

/* After a write of [off, off+len) of s landed. */
void dev_stage_done(struct dev_storage *d, struct dev_segment *s, const uint8_t *stage,
                    uint64_t off, size_t len)
{
	uint64_t a = off - off % d->B, end = off + len;

	if (end % d->B != 0)
		memcpy(s->tail, stage + (end - end % d->B - a), d->B);
	else
		memset(s->tail, 0, d->B);
	pthread_mutex_lock(&d->mu);
	if (end > s->len || !s->len_known) {
		s->len = end;
		s->len_known = true;
	}
	s->tail_ok = end == s->len;
	pthread_mutex_unlock(&d->mu);
}

static int dev_seg_write(struct kv_stor_seg *sh, const void *buf, size_t len, uint64_t off)
{
	struct dev_storage *d = dev_of(sh->t->st);
	struct dev_segment *s = seg_of(sh);
	uint8_t *stage = NULL;
	size_t cap = 0, n;
	int rv;

	if ((rv = dev_writable(dev_ten_of(sh->t))) != 0 || sh->frozen)
		return rv != 0 ? rv : -ESTALE;
	if ((rv = dev_stage_prepare(d, s, &stage, &cap, buf, len, off, &n)) == 0 &&
	    (rv = io_pwrite_full(d->base.fault, d->fd, stage, n,
	                         data_off(d, s->extent) + (off - off % d->B))) == 0)
		dev_stage_done(d, s, stage, off, len);
	free(stage);
	return rv;
}

/* What a reader of s may read (its length as seg_open says it), and the
 * device offset below which its bytes may go through the cache (invariant
 * 6). */
static uint64_t seg_readable(struct dev_storage *d, struct dev_segment *s, uint64_t *ret_limit)
{
	uint64_t size, fixed;

	pthread_mutex_lock(&d->mu);
	size = s->len_known ? s->len : d->cap;
	/* sealed: its last block too (what follows its end there never changes
	 * either); else the whole blocks before the one its end is in */
	fixed = s->sealed ? round_up(size, d->B) : s->len_known ? s->len - s->len % d->B : 0;
	pthread_mutex_unlock(&d->mu);
	*ret_limit = data_off(d, s->extent) + fixed;
	return size;
}

static int seg_read_at(struct dev_storage *d, struct dev_segment *s, void *buf, size_t len,
                       uint64_t off)
{
	uint64_t limit, size = seg_readable(d, s, &limit);

	if (off > size || len > size - off)
		return -EIO;
	return dev_read(d, buf, len, data_off(d, s->extent) + off, limit);
}

static int dev_seg_read(struct kv_stor_seg *sh, void *buf, size_t len, uint64_t off)
{
	return seg_read_at(dev_of(sh->t->st), seg_of(sh), buf, len, off);
}

static int dev_seg_read_upto(struct kv_stor_seg *sh, void *buf, size_t len, uint64_t off,
                             size_t *ret_got)
{
	struct dev_storage *d = dev_of(sh->t->st);
	struct dev_segment *s = seg_of(sh);
	uint64_t limit, size = seg_readable(d, s, &limit);
	int rv;

	if (off > size)
		return -EIO;
	if (len > size - off)
		len = (size_t)(size - off);
	if ((rv = seg_read_at(d, s, buf, len, off)) == 0)
		*ret_got = len;
	return rv;
}

#define READ_CHUNK 64

/* What the cache does not hold goes to the device in one submission per
 * READ_CHUNK reads (the calling thread's io_uring ring, io_ring.c). */
static int dev_read_batch(struct kv_storage *st, struct kv_stor_rd *v, size_t n)
{
	struct dev_storage *d = dev_of(st);
	struct io_rd rd[READ_CHUNK];
	size_t idx[READ_CHUNK], i = 0, m, j;
	uint64_t limit[READ_CHUNK];
	int first = 0;

	while (i < n) {
		for (m = 0; i < n && m < READ_CHUNK; i++) {
			struct dev_segment *s = seg_of(v[i].s);
			uint64_t size = seg_readable(d, s, &limit[m]), off, a, e;
			if (v[i].off > size || v[i].len > size - v[i].off) {
				v[i].res = -EIO;
				continue;
			}
			off = data_off(d, s->extent) + v[i].off;
			if (off + v[i].len <= limit[m] && cache_get(d, v[i].buf, v[i].len, off)) {
				v[i].res = 0;
				continue;
			}
			a = off - off % d->B;
			e = round_up(off + v[i].len, d->B);
			rd[m] = (struct io_rd){d->fd, balloc(d, (size_t)(e - a)), (size_t)(e - a), a, 0};
			if (rd[m].buf == NULL) {
				v[i].res = -ENOMEM;
				continue;
			}
			idx[m++] = i;
		}
		if (m > 0)
			io_read_batch(d->base.fault, true, rd, m);
		for (j = 0; j < m; j++) {
			struct kv_stor_rd *r = &v[idx[j]];
			uint64_t off = data_off(d, seg_of(r->s)->extent) + r->off;
			r->res = rd[j].res;
			if (r->res == 0) {
				memcpy(r->buf, (uint8_t *)rd[j].buf + (off - rd[j].off), r->len);
				cache_put(d, rd[j].buf, rd[j].off, rd[j].off + rd[j].len, limit[j]);
			}
			free(rd[j].buf);
		}
	}
	for (i = 0; i < n; i++)
		if (v[i].res != 0 && first == 0)
			first = v[i].res;
	return first;
}

static int dev_seg_sync(struct kv_stor_seg *sh)
{
	return io_fdatasync(sh->t->st->fault, dev_of(sh->t->st)->fd);
}

/* Cuts s to size: the bytes after it that this process wrote become zeros
 * (so they never read as records again); a segment whose length the last
 * process left unknown only gets its length. */
static int dev_seg_truncate(struct kv_stor_seg *sh, uint64_t size)
{
	struct dev_storage *d = dev_of(sh->t->st);
	struct dev_segment *s = seg_of(sh);
	uint64_t old;
	bool known;
	int rv = 0;

	if (dev_writable(dev_ten_of(sh->t)) != 0)
		return -ESTALE;
	pthread_mutex_lock(&d->mu);
	old = s->len;
	known = s->len_known;
	pthread_mutex_unlock(&d->mu);
	if (known && old > size && sh->frozen)
		return -ESTALE; /* S2: another node's extent is not rewritten */
	if (known && old > size) {
		uint64_t a = size - size % d->B, e = round_up(old, d->B);
		/* blocks cached below the old end that this rewrites (invariant 6) */
		dev_cache_drop_range(d->cache, data_off(d, s->extent) + a, e - a);
		uint8_t *z = balloc(d, (size_t)(e - a));
		if (z == NULL)
			return -ENOMEM;
		memset(z, 0, (size_t)(e - a));
		if (size > a)
			rv = io_pread_full(d->base.fault, d->fd, z, d->B, data_off(d, s->extent) + a);
		if (rv == 0) {
			memset(z + (size - a), 0, (size_t)(e - size));
			rv = io_pwrite_full(d->base.fault, d->fd, z, (size_t)(e - a),
			                    data_off(d, s->extent) + a);
		}
		if (rv == 0)
			memcpy(s->tail, z, d->B);
		free(z);
		if (rv != 0)
			return rv;
	} else if (!known) {
		s->tail_ok = false;
	}
	pthread_mutex_lock(&d->mu);
	s->len = size;
	s->len_known = true;
	s->tail_ok = known;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

static int dev_seg_reserve(struct kv_stor_seg *sh, uint64_t off, uint64_t len)
{
	/* the extent is the segment's whole: nothing to allocate */
	return off + len <= dev_of(sh->t->st)->cap ? 0 : -ENOSPC;
}

static int dev_seg_seal(struct kv_stor_seg *sh, uint64_t size)
{
	struct dev_storage *d = dev_of(sh->t->st);
	struct dev_segment *s = seg_of(sh);
	int rv;

	if ((rv = dev_seg_truncate(sh, size)) != 0)
		return rv;
	pthread_mutex_lock(&d->mu);
	s->sealed = true;
	d->changes++;
	pthread_mutex_unlock(&d->mu);
	/* the length is durable with the next catalog write */
	return io_fdatasync(d->base.fault, d->fd);
}

/* ---- the instance ------------------------------------------------------ */

static void dev_stats(struct kv_storage *st, struct kv_stor_stats *ret)
{
	struct dev_storage *d = dev_of(st);
	uint32_t i, nfree = 0;

	pthread_mutex_lock(&d->mu);
	for (i = 0; i < d->sb.extent_count; i++)
		nfree += d->ext[i].tenant == 0 && dev_in_range(d, i);
	pthread_mutex_unlock(&d->mu);
	memset(ret, 0, sizeof(*ret));
	ret->extents = d->sb.extent_count;
	ret->extents_free = nfree;
	ret->extent_size = d->sb.extent_size;
	ret->cache_bytes = d->cache_bytes;
	ret->superblocks_damaged = d->sb_damaged;
	ret->extents_reclaimed = d->reclaimed;
	dev_cache_counts(d->cache, &ret->cache_hits, &ret->cache_misses);
}

static void dev_destroy(struct kv_storage *st)
{
	struct dev_storage *d = dev_of(st);
	size_t i;

	if (st == NULL)
		return;
	for (i = 0; i < d->ntenants; i++)
		dev_tenant_free(d->tenants[i]);
	free(d->tenants);
	free(d->ext);
	free(d->cat_buf);
	free(d->claims);
	dev_cache_free(d->cache);
	if (d->fd >= 0)
		close(d->fd);
	pthread_mutex_destroy(&d->mu);
	pthread_mutex_destroy(&d->cat_mu);
	free(d);
}

static const struct kv_storage_ops dev_ops = {
        .name = "device",
        .destroy = dev_destroy,
        .tenant_create = dev_tenant_create,
        .tenant_drop = dev_tenant_drop,
        .tenant_list = dev_tenant_list,
        .tenant_open = dev_tenant_open,
        .tenant_close = dev_tenant_close,
        .tenant_lock = dev_tenant_lock,
        .tenant_sync = dev_tenant_sync,
        .list = dev_list,
        .meta_put = dev_meta_put,
        .meta_get = dev_meta_get,
        .meta_remove = dev_meta_remove,
        .hint_put = dev_hint_put,
        .hint_get = dev_hint_get,
        .hint_remove = dev_hint_remove,
        .seg_create = dev_seg_create,
        .seg_open = dev_seg_open,
        .seg_write = dev_seg_write,
        .seg_read = dev_seg_read,
        .seg_read_upto = dev_seg_read_upto,
        .read_batch = dev_read_batch,
        .seg_sync = dev_seg_sync,
        .seg_truncate = dev_seg_truncate,
        .seg_reserve = dev_seg_reserve,
        .seg_seal = dev_seg_seal,
        .seg_reopen = dev_seg_reopen,
        .seg_publish = dev_seg_publish,
        .seg_close = dev_seg_close,
        .writer_open = dev_writer_open,
        .writer_close = dev_writer_close,
        .writer_is_uring = dev_writer_is_uring,
        .append_start = dev_append_start,
        .append_poll = dev_append_poll,
        .seg_remove = dev_seg_remove,
        .stats = dev_stats,
        .claim = dev_shared_claim,
        .disown = dev_shared_disown,
        .directory = dev_shared_directory,
};

/* Reads the superblock: block 0, else the copy in the last block. */
/* Reads the superblock: block 0, else the copy in the last block (format
 * wrote it at the device's size rounded down to a block). Counts the
 * copies that are not sound in d->sb_damaged. */
static int read_super(struct dev_storage *d, const struct dev_geometry *g, bool *ret_fallback)
{
	uint64_t end = g->size - g->size % g->block;
	struct dev_super other;
	uint8_t *b = balloc(d, g->block);
	int rv, r2;

	if (b == NULL)
		return -ENOMEM;
	*ret_fallback = false;
	d->sb_damaged = 0;
	rv = io_pread_full(d->base.fault, d->fd, b, g->block, 0);
	if (rv == 0 && (rv = dev_super_decode(b, &d->sb)) == 0 && d->sb.block_size == g->block &&
	    d->sb.device_size <= end) {
		/* the end copy too, to say when it is the one damaged */
		r2 = io_pread_full(d->base.fault, d->fd, b, g->block, d->sb.device_size - g->block);
		if (r2 == 0)
			r2 = dev_super_decode(b, &other);
		if (r2 != 0 || memcmp(other.uuid, d->sb.uuid, 16) != 0)
			d->sb_damaged = 1;
		free(b);
		return 0;
	}
	*ret_fallback = true;
	d->sb_damaged = 1;
	if (end >= g->block &&
	    (rv = io_pread_full(d->base.fault, d->fd, b, g->block, end - g->block)) == 0)
		rv = dev_super_decode(b, &d->sb);
	if (rv == 0 && (d->sb.block_size != g->block || d->sb.device_size != end))
		rv = KV_EFORMAT;
	free(b);
	return rv;
}

int kv_storage_dev_open(const char *path, uint64_t cache_bytes, bool readonly,
                        struct kv_io_fault *fault, struct kv_storage **ret)
{
	return kv_storage_dev_open_node(path, cache_bytes, readonly, 1, fault, ret);
}

int kv_storage_dev_open_node(const char *path, uint64_t cache_bytes, bool readonly,
                             uint32_t node, struct kv_io_fault *fault, struct kv_storage **ret)
{
	struct dev_geometry g;
	struct dev_storage *d;
	bool fallback;
	size_t i;
	int rv;

	if ((d = calloc(1, sizeof(*d))) == NULL)
		return -ENOMEM;
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->cat_mu, NULL);
	d->base.ops = &dev_ops;
	d->base.fault = fault;
	d->base.append_reopened = false;
	d->grace_ms = DEV_GRACE_MS_DEFAULT;
	if ((d->fd = dev_open_raw(path, readonly)) < 0) {
		rv = d->fd;
		goto fail;
	}
	if ((rv = dev_geometry(d->fd, &g)) != 0)
		goto fail;
	d->B = g.block;
	if ((rv = read_super(d, &g, &fallback)) != 0)
		goto fail;
	/* a reader or the one node of a device locks all of it; a node of a
	 * shared device its own byte; then the superblock again, as of the lock */
	d->node = readonly && d->sb.max_nodes > 1 ? 0 : node;
	if (d->sb.max_nodes > 1 && d->node > d->sb.max_nodes) {
		rv = -EINVAL; /* a node number the device has no catalog for */
		goto fail;
	}
	if ((rv = dev_lock(d->fd, !readonly, d->sb.max_nodes > 1 ? d->node : 0)) != 0 ||
	    (rv = read_super(d, &g, &fallback)) != 0)
		goto fail;
	if (d->sb.max_nodes == 1)
		d->node = 1;
	d->B = d->sb.block_size;
	d->cap = d->sb.extent_size - d->B;
	d->base.align = d->B;
	d->base.seg_max = d->cap;
	if ((d->ext = calloc(d->sb.extent_count, sizeof(*d->ext))) == NULL ||
	    (!readonly && (d->cat_buf = balloc(d, (size_t)d->sb.catalog_slot)) == NULL)) {
		rv = -ENOMEM;
		goto fail;
	}
	/* a reader of a shared device takes every node's catalog as another's */
	if (d->node != 0 && (rv = dev_cat_load(d, d->node)) != 0)
		goto fail;
	/* a crash may have left extents taken for objects the catalog never
	 * named: they are free already (their generation was counted) */
	for (i = 0; i < d->sb.extent_count; i++)
		if (d->ext[i].kind == DEV_EXT_FREE)
			d->ext[i].tenant = 0;
	d->base.shared = dev_shared(d);
	d->base.nodes = d->sb.max_nodes;
	d->base.node = d->node;
	if (dev_shared(d) && (rv = dev_shared_open(d)) != 0)
		goto fail;
	if (cache_bytes == 0)
		cache_bytes = KV_DEV_CACHE_DEFAULT;
	if ((rv = dev_cache_new(cache_bytes, d->B, &d->cache)) != 0)
		goto fail;
	d->cache_bytes = cache_bytes;
	d->durable = d->changes;
	if (!readonly && !dev_shared(d)) {
		pthread_mutex_lock(&d->mu);
		d->reclaimed = dev_ext_reclaim(d);
		pthread_mutex_unlock(&d->mu);
		/* a catalog that no longer gives them out: free from now on */
		if (d->reclaimed > 0 && (rv = dev_cat_write(d)) != 0)
			goto fail;
	}
	*ret = &d->base;
	return 0;
fail:
	dev_destroy(&d->base);
	return rv;
}

void kv_storage_dev_set_sync(struct kv_storage *st, int mode)
{
	dev_of(st)->sync_mode = mode;
}

void kv_storage_dev_set_grace(struct kv_storage *st, uint32_t ms)
{
	struct dev_storage *d = dev_of(st);
	uint64_t until;

	pthread_mutex_lock(&d->mu);
	d->grace_ms = ms ? ms : DEV_GRACE_MS_DEFAULT;
	until = dev_mono_ms() + d->grace_ms;
	/* the extents open found freed wait no longer than that either */
	for (uint32_t i = 0; i < d->sb.extent_count; i++)
		if (d->ext[i].grace_until > until)
			d->ext[i].grace_until = until;
	pthread_mutex_unlock(&d->mu);
}

int dev_storage_check_extents(struct kv_storage *st,
                              void (*report)(void *arg, uint32_t extent, uint64_t off,
                                             const char *what),
                              void *arg, uint32_t *ret_used, uint32_t *ret_free)
{
	struct dev_storage *d = dev_of(st);
	uint8_t *blk = balloc(d, d->B);
	uint32_t i, used = 0;
	int rv = 0;

	if (blk == NULL)
		return -ENOMEM;
	for (i = 0; i < d->sb.extent_count && rv == 0; i++) {
		struct dev_extent e = d->ext[i];
		struct dev_ext_header h;
		uint64_t off = dev_extent_off(&d->sb, i);
		if (e.tenant == 0)
			continue;
		used++;
		if ((rv = io_pread_full(NULL, d->fd, blk, d->B, off)) != 0)
			break;
		if (dev_ext_decode(blk, &h) != 0)
			report(arg, i, off, "extent header damaged (the catalog still names its use)");
		else if (memcmp(h.uuid, d->sb.uuid, 16) != 0 || h.tenant != e.tenant ||
		         h.generation != e.generation || h.kind != e.kind || h.position != e.position)
			report(arg, i, off, "extent header names another use than the catalog");
	}
	free(blk);
	if (rv == 0) {
		*ret_used = used;
		*ret_free = d->sb.extent_count - used;
	}
	return rv;
}
