/*
 * dev_catalog.c — the device backend's extents and catalog (dev_layout.h,
 * docs/FORMAT.md "Device layout"): allocating and giving back extents, the
 * catalog encoded, written to its older slot and read back, and the layout
 * kv_dev_format writes. Invariants: storage_dev.c.
 */
#include "dev_internal.h"

#include "crc.h"
#include "endian_util.h"
#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- extents ----------------------------------------------------------- */

/* An extent given back (invariant 4). [d->mu] */
void dev_ext_release(struct dev_storage *d, uint32_t i)
{
	struct dev_extent *e = &d->ext[i];

	e->tenant = 0;
	e->kind = DEV_EXT_FREE;
	e->position = 0;
	e->users = 0;
	e->pending = true;
	e->free_after = ++d->changes;
}

/* Extents whose release a durable catalog now covers become free. [d->mu] */
void dev_ext_settle(struct dev_storage *d)
{
	uint32_t i;

	for (i = 0; i < d->sb.extent_count; i++)
		if (d->ext[i].pending && d->ext[i].readers == 0 && d->ext[i].free_after <= d->durable)
			d->ext[i].pending = false;
}

/* Extents the catalog gives a tenant that none of its objects (segments,
 * blobs, the packing extent) names: taken for an object a crash kept from
 * being named (a merge output the catalog was written with before it was
 * published). Each is given back (free after the next catalog write);
 * how many. [d->mu] */
uint32_t dev_ext_reclaim(struct dev_storage *d)
{
	uint32_t n = d->sb.extent_count, i, freed = 0;
	uint8_t *named = calloc(n ? n : 1, 1);
	size_t k, j;

	if (named == NULL)
		return 0; /* they stay taken until an open has the memory */
	for (k = 0; k < d->ntenants; k++) {
		const struct dev_tenant *t = d->tenants[k];
		for (j = 0; j < t->nsegs; j++)
			if (t->segs[j]->extent < n)
				named[t->segs[j]->extent] = 1;
		for (j = 0; j < t->nblobs; j++)
			for (uint32_t e = 0; e < t->blobs[j].nexts; e++)
				if (t->blobs[j].exts[e] < n)
					named[t->blobs[j].exts[e]] = 1;
		if (t->aux != NONE && t->aux < n)
			named[t->aux] = 1;
	}
	for (i = 0; i < n; i++)
		if (d->ext[i].tenant != 0 && !named[i]) {
			dev_ext_release(d, i);
			freed++;
		}
	free(named);
	return freed;
}

/* Extents kept for merges, whose outputs must be written before the
 * segments they replace are given back: a device full of ordinary writes
 * can still be merged free, as long as what a merge writes (the live data
 * of the tenant, its hints and its commit) fits in 1/16 of the device (at
 * least 4 extents). */
static uint32_t ext_reserve(const struct dev_storage *d)
{
	uint32_t r = d->sb.extent_count / 16 / (dev_shared(d) ? d->sb.max_nodes : 1);

	return r < 4 ? 4 : r;
}

/* Whether extent i may be taken now. [d->mu] */
static bool ext_free(const struct dev_storage *d, uint32_t i, uint64_t now)
{
	const struct dev_extent *e = &d->ext[i];

	return e->tenant == 0 && !e->pending && e->grace_until <= now && dev_in_range(d, i);
}

/* Takes a free extent for tenant t: its header written (not synced: the
 * catalog write that names it syncs the device first). reserve: it may
 * take one of the extents ext_reserve keeps. -ENOSPC when the device is
 * full. */
int dev_ext_alloc(struct dev_storage *d, struct dev_tenant *t, uint8_t kind, uint32_t position,
                     bool reserve, uint32_t *ret)
{
	struct dev_ext_header h;
	uint8_t *blk;
	uint32_t i, n = d->sb.extent_count, gen;
	bool settling = false;
	uint64_t now;
	int rv;

	/* a shared device: what the other nodes hold and freed, as of now (S4) */
	if (dev_shared(d) && (rv = dev_shared_refresh(d)) != 0)
		return rv;
	if ((rv = dev_writable(t)) != 0)
		return rv;
	if ((blk = balloc(d, d->B)) == NULL)
		return -ENOMEM;
again:
	now = dev_mono_ms();
	pthread_mutex_lock(&d->mu);
	if (!reserve) {
		uint32_t nfree = 0;
		for (i = 0; i < n; i++)
			nfree += ext_free(d, i, now);
		i = nfree > ext_reserve(d) ? 0 : n;
	} else {
		i = 0;
	}
	for (; i < n; i++) {
		uint32_t k = (d->free_hint + i) % n;
		if (ext_free(d, k, now))
			break;
	}
	if (i == n) {
		bool waiting = false;
		for (i = 0; i < n && !waiting; i++)
			waiting = d->ext[i].pending && d->ext[i].readers == 0;
		pthread_mutex_unlock(&d->mu);
		if (waiting && !settling && (rv = dev_cat_write(d)) == 0) {
			/* extents given back wait for a catalog that no longer names them */
			settling = true;
			goto again;
		}
		free(blk);
		return -ENOSPC;
	}
	i = (d->free_hint + i) % n;
	d->free_hint = (i + 1) % n;
	d->ext[i].tenant = t->id; /* taken: no other caller gets it */
	d->ext[i].kind = kind;
	d->ext[i].position = position;
	d->ext[i].taking = true; /* not in a catalog before its header is written */
	gen = d->ext[i].generation;
	pthread_mutex_unlock(&d->mu);

	/* invariant 3: above what its header last said too */
	if (io_pread_full(d->base.fault, d->fd, blk, d->B, dev_extent_off(&d->sb, i)) == 0 &&
	    dev_ext_decode(blk, &h) == 0 && memcmp(h.uuid, d->sb.uuid, 16) == 0 && h.generation > gen)
		gen = h.generation;
	gen++;
	memset(blk, 0, d->B);
	h = (struct dev_ext_header){.tenant = t->id, .position = position, .generation = gen,
	                            .kind = kind, .epoch = t->epoch, .node = t->owner};
	memcpy(h.uuid, d->sb.uuid, 16);
	dev_ext_encode(blk, &h);
	rv = io_pwrite_full(d->base.fault, d->fd, blk, d->B, dev_extent_off(&d->sb, i));
	free(blk);
	dev_cache_drop_range(d->cache, dev_extent_off(&d->sb, i), d->sb.extent_size);
	pthread_mutex_lock(&d->mu);
	d->ext[i].taking = false;
	if (rv != 0) {
		d->ext[i].tenant = 0;
		d->ext[i].kind = DEV_EXT_FREE;
	} else {
		d->ext[i].generation = gen;
		d->ext[i].users = 0;
		d->changes++;
	}
	pthread_mutex_unlock(&d->mu);
	if (rv == 0)
		*ret = i;
	return rv;
}

/* ---- the catalog ------------------------------------------------------- */

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	bool over;
};

static void w_bytes(struct wbuf *w, const void *b, size_t n)
{
	if (w->len + n > w->cap) {
		w->over = true;
		return;
	}
	memcpy(w->p + w->len, b, n);
	w->len += n;
}

static void w8(struct wbuf *w, uint8_t v)
{
	w_bytes(w, &v, 1);
}

static void w32(struct wbuf *w, uint32_t v)
{
	uint8_t b[4];
	put_le32(b, v);
	w_bytes(w, b, 4);
}

static void w64(struct wbuf *w, uint64_t v)
{
	uint8_t b[8];
	put_le64(b, v);
	w_bytes(w, b, 8);
}

static void w_name(struct wbuf *w, const char *s)
{
	size_t n = strlen(s);
	w8(w, (uint8_t)n);
	w_bytes(w, s, n);
}

/* The body (docs/FORMAT.md, "Catalog"). [d->mu] */
static void cat_encode(struct dev_storage *d, struct wbuf *w)
{
	size_t i, j;
	uint32_t k;

	uint32_t nt = 0;

	for (i = 0; i < d->ntenants; i++)
		nt += !d->tenants[i]->lost;
	w32(w, nt);
	w32(w, d->next_tenant);
	w32(w, d->sb.extent_count);
	for (i = 0; i < d->ntenants; i++) {
		struct dev_tenant *t = d->tenants[i];
		uint32_t nsegs = 0;
		if (t->lost)
			continue; /* another node's entry is newer: it goes */
		for (j = 0; j < t->nsegs; j++)
			nsegs += !t->segs[j]->temp;
		w32(w, t->tomb ? 0 : t->id); /* a dropped tenant's entry: id 0, no objects */
		w_name(w, t->name);
		w32(w, t->owner);
		w64(w, t->epoch);
		w32(w, t->aux);
		w64(w, t->aux_off);
		w32(w, t->aux_count);
		w32(w, nsegs);
		w32(w, (uint32_t)t->nblobs);
		for (j = 0; j < t->nsegs; j++) {
			struct dev_segment *s = t->segs[j];
			if (s->temp)
				continue; /* an unpublished merge output is not kept */
			w32(w, s->id);
			w32(w, s->extent);
			w8(w, s->sealed);
			w64(w, s->sealed ? s->len : 0);
		}
		for (j = 0; j < t->nblobs; j++) {
			struct dev_blob *b = &t->blobs[j];
			w8(w, b->kind);
			w32(w, b->id);
			w_name(w, b->name);
			w64(w, b->len);
			w32(w, b->crc);
			w32(w, b->nexts);
			for (k = 0; k < b->nexts; k++)
				w32(w, b->exts[k]);
			w64(w, b->off);
			if (b->nexts == 0)
				w_bytes(w, b->data, (size_t)b->len);
		}
	}
	for (k = 0; k < d->sb.extent_count; k++) {
		const struct dev_extent *e = &d->ext[k];
		/* a temporary segment's extent is written as free: after a crash
		 * it is free (and its generation still counts); so is one another
		 * node's tenant holds (its catalog says so), and one being taken,
		 * whose header is not written yet (nothing names it so far) */
		bool used = e->tenant != 0 && e->tenant != DEV_FOREIGN && !e->pending && !e->taking;
		w32(w, used ? e->tenant : 0);
		w32(w, used ? e->position : 0);
		w32(w, e->generation);
		w8(w, used ? e->kind : DEV_EXT_FREE);
	}
}

/* Writes the catalog to the older slot, durably (the device flushed before,
 * so every extent and blob it names is durable first, and after). */
int dev_cat_write(struct dev_storage *d)
{
	struct dev_cat_header h = {0};
	struct wbuf w;
	uint64_t covers, off;
	uint8_t *buf;
	size_t total;
	int slot, rv;

	pthread_mutex_lock(&d->cat_mu);
	pthread_mutex_lock(&d->mu);
	if (d->durable == d->changes) {
		pthread_mutex_unlock(&d->mu);
		pthread_mutex_unlock(&d->cat_mu);
		return 0;
	}
	buf = d->cat_buf;
	w = (struct wbuf){.p = buf + DEV_CAT_HEADER,
	                  .cap = (size_t)d->sb.catalog_slot - DEV_CAT_HEADER};
	cat_encode(d, &w);
	covers = d->changes;
	pthread_mutex_unlock(&d->mu);
	if (w.over) {
		rv = -ENOSPC; /* more tenants and objects than a slot holds */
		goto out;
	}
	h.seq = d->cat_seq + 1;
	h.body_len = w.len;
	h.node = d->node ? d->node : 1;
	h.epoch = 1;
	memcpy(h.uuid, d->sb.uuid, 16);
	dev_cat_header_encode(buf, &h, 0);
	dev_cat_header_encode(buf, &h, dev_cat_crc(buf, buf + DEV_CAT_HEADER, w.len));
	total = (size_t)round_up(DEV_CAT_HEADER + w.len, d->B);
	memset(buf + DEV_CAT_HEADER + w.len, 0, total - DEV_CAT_HEADER - w.len);
	slot = d->cat_slot ^ 1;
	off = dev_slot_off(&d->sb, h.node, slot);
	/* what the catalog names first, then the catalog */
	if ((rv = io_fdatasync(d->base.fault, d->fd)) != 0)
		goto out;
	if ((rv = io_pwrite_full(d->base.fault, d->fd, buf, total, off)) != 0)
		goto out;
	if ((rv = io_fdatasync(d->base.fault, d->fd)) != 0)
		goto out;
	d->cat_seq = h.seq;
	d->cat_slot = slot;
	pthread_mutex_lock(&d->mu);
	d->durable = covers;
	dev_ext_settle(d);
	pthread_mutex_unlock(&d->mu);
out:
	pthread_mutex_unlock(&d->cat_mu);
	return rv;
}

struct rbuf {
	const uint8_t *p;
	size_t len, at;
	bool bad;
};

static const uint8_t *r_bytes(struct rbuf *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || r->len - r->at < n) {
		r->bad = true;
		return NULL;
	}
	p = r->p + r->at;
	r->at += n;
	return p;
}

static uint8_t r8(struct rbuf *r)
{
	const uint8_t *p = r_bytes(r, 1);
	return p ? p[0] : 0;
}

static uint32_t r32(struct rbuf *r)
{
	const uint8_t *p = r_bytes(r, 4);
	return p ? get_le32(p) : 0;
}

static uint64_t r64(struct rbuf *r)
{
	const uint8_t *p = r_bytes(r, 8);
	return p ? get_le64(p) : 0;
}

static void r_name(struct rbuf *r, char *dst, size_t cap)
{
	uint8_t n = r8(r);
	const uint8_t *p = r_bytes(r, n);

	if (p == NULL || n >= cap) {
		r->bad = true;
		dst[0] = '\0';
		return;
	}
	memcpy(dst, p, n);
	dst[n] = '\0';
}

void dev_blob_clear(struct dev_blob *b)
{
	free(b->data);
	free(b->exts);
	b->data = NULL;
	b->exts = NULL;
}

void dev_tenant_free(struct dev_tenant *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < t->nsegs; i++) {
		free(t->segs[i]->tail);
		free(t->segs[i]);
	}
	for (i = 0; i < t->nblobs; i++)
		dev_blob_clear(&t->blobs[i]);
	free(t->segs);
	free(t->blobs);
	free(t);
}

int dev_push(void **arr, size_t *n, size_t *cap, size_t size)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		void *p = realloc(*arr, nc * size);
		if (p == NULL)
			return -ENOMEM;
		*arr = p;
		*cap = nc;
	}
	(*n)++;
	return 0;
}

int dev_tenant_add(struct dev_storage *d, struct dev_tenant *t)
{
	if (dev_push((void **)&d->tenants, &d->ntenants, &d->captenants, sizeof(*d->tenants)) != 0)
		return -ENOMEM;
	d->tenants[d->ntenants - 1] = t;
	t->listed = true;
	return 0;
}

int dev_seg_add(struct dev_tenant *t, struct dev_segment *s)
{
	if (dev_push((void **)&t->segs, &t->nsegs, &t->capsegs, sizeof(*t->segs)) != 0)
		return -ENOMEM;
	t->segs[t->nsegs - 1] = s;
	s->listed = true;
	s->refs++;
	return 0;
}

/* Decodes a body into d (empty on entry). KV_ECORRUPT when it does not add up. */
int dev_cat_decode(struct dev_storage *d, const uint8_t *body, size_t len)
{
	struct rbuf r = {.p = body, .len = len};
	uint32_t nt, i, j, k;
	int rv = -ENOMEM;

	nt = r32(&r);
	d->next_tenant = r32(&r);
	if (r32(&r) != d->sb.extent_count)
		return KV_ECORRUPT;
	for (i = 0; i < nt && !r.bad; i++) {
		struct dev_tenant *t = calloc(1, sizeof(*t));
		uint32_t ns, nb;
		if (t == NULL)
			return -ENOMEM;
		t->id = r32(&r);
		t->tomb = t->id == 0;
		atomic_init(&t->owned, !dev_shared(d));
		r_name(&r, t->name, sizeof(t->name));
		t->owner = r32(&r);
		t->epoch = r64(&r);
		t->aux = r32(&r);
		t->aux_off = r64(&r);
		t->aux_count = r32(&r);
		ns = r32(&r);
		nb = r32(&r);
		if (dev_tenant_add(d, t) != 0) {
			dev_tenant_free(t);
			return -ENOMEM;
		}
		for (j = 0; j < ns && !r.bad; j++) {
			struct dev_segment *s = calloc(1, sizeof(*s));
			if (s == NULL || dev_seg_add(t, s) != 0) {
				free(s);
				return -ENOMEM;
			}
			s->id = r32(&r);
			s->extent = r32(&r);
			s->sealed = r8(&r) != 0;
			s->len = r64(&r);
			s->len_known = s->sealed;
			if (s->extent >= d->sb.extent_count)
				r.bad = true;
		}
		for (j = 0; j < nb && !r.bad; j++) {
			struct dev_blob *b;
			const uint8_t *p;
			if (dev_push((void **)&t->blobs, &t->nblobs, &t->capblobs, sizeof(*b)) != 0)
				return -ENOMEM;
			b = &t->blobs[t->nblobs - 1];
			memset(b, 0, sizeof(*b));
			b->kind = r8(&r);
			b->id = r32(&r);
			r_name(&r, b->name, sizeof(b->name));
			b->len = r64(&r);
			b->crc = r32(&r);
			b->nexts = r32(&r);
			if (b->nexts > d->sb.extent_count) {
				r.bad = true;
				break;
			}
			if (b->nexts > 0 && (b->exts = calloc(b->nexts, sizeof(*b->exts))) == NULL)
				return -ENOMEM;
			for (k = 0; k < b->nexts; k++)
				if ((b->exts[k] = r32(&r)) >= d->sb.extent_count)
					r.bad = true;
			b->off = r64(&r);
			if (b->nexts == 0) {
				if (b->len > DEV_INLINE_MAX || (p = r_bytes(&r, (size_t)b->len)) == NULL) {
					r.bad = true;
					break;
				}
				if ((b->data = malloc(b->len ? (size_t)b->len : 1)) == NULL)
					return -ENOMEM;
				memcpy(b->data, p, (size_t)b->len);
			}
		}
	}
	for (k = 0; k < d->sb.extent_count && !r.bad; k++) {
		d->ext[k].tenant = r32(&r);
		d->ext[k].position = r32(&r);
		d->ext[k].generation = r32(&r);
		d->ext[k].kind = r8(&r);
	}
	if (r.bad || r.at != r.len)
		return KV_ECORRUPT;
	/* AUX users, counted from the blobs */
	for (i = 0; i < d->ntenants; i++) {
		struct dev_tenant *t = d->tenants[i];
		if (t->aux != NONE && t->aux < d->sb.extent_count)
			d->ext[t->aux].users++;
		for (j = 0; j < t->nblobs; j++)
			for (k = 0; k < t->blobs[j].nexts; k++)
				d->ext[t->blobs[j].exts[k]].users++;
	}
	rv = 0;
	return rv;
}

/* Reads both slots; the valid one with the highest sequence wins. */
int dev_cat_slot_read(int fd, struct kv_io_fault *fault, const struct dev_super *sb,
                      uint32_t node, int slot, uint8_t **ret_buf, struct dev_cat_header *ret)
{
	uint64_t off = dev_slot_off(sb, node, slot);
	uint32_t B = sb->block_size, crc;
	struct dev_cat_header h;
	uint8_t *buf = NULL;
	size_t n;
	int rv;

	if (posix_memalign((void **)&buf, B, B) != 0)
		return -ENOMEM;
	if ((rv = io_pread_full(fault, fd, buf, B, off)) != 0)
		goto out;
	rv = 1;
	if (dev_cat_header_decode(buf, &h, &crc) != 0 || memcmp(h.uuid, sb->uuid, 16) != 0 ||
	    h.body_len > sb->catalog_slot - DEV_CAT_HEADER)
		goto out;
	n = (size_t)round_up(DEV_CAT_HEADER + h.body_len, B);
	free(buf);
	if (posix_memalign((void **)&buf, B, n) != 0)
		return -ENOMEM;
	if ((rv = io_pread_full(fault, fd, buf, n, off)) != 0)
		goto out;
	if (dev_cat_crc(buf, buf + DEV_CAT_HEADER, (size_t)h.body_len) != crc) {
		rv = 2;
		goto out;
	}
	*ret_buf = buf;
	*ret = h;
	return 0;
out:
	free(buf);
	return rv;
}

int dev_cat_load(struct dev_storage *d, uint32_t node)
{
	struct dev_cat_header h[2];
	uint8_t *buf[2] = {NULL, NULL};
	int slot, best = -1, rv = 0;

	for (slot = 0; slot < 2 && rv >= 0; slot++) {
		rv = dev_cat_slot_read(d->fd, d->base.fault, &d->sb, node, slot, &buf[slot],
		                       &h[slot]);
		if (rv == 0 && (best < 0 || h[slot].seq > h[best].seq))
			best = slot;
	}
	if (rv < 0)
		goto out;
	if (best < 0) {
		rv = KV_ECORRUPT; /* neither slot: not a catalog */
		goto out;
	}
	if ((rv = dev_cat_decode(d, buf[best] + DEV_CAT_HEADER, (size_t)h[best].body_len)) == 0) {
		d->cat_seq = h[best].seq;
		d->cat_slot = best;
	}
out:
	free(buf[0]);
	free(buf[1]);
	return rv;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- format ------------------------------------------------------------ */

int dev_write_fresh(int fd, const struct dev_geometry *g, uint64_t extent_size, uint32_t nodes,
                    char *err, size_t errlen)
{
	struct dev_storage d = {.fd = fd, .B = g->block};
	struct dev_super *sb = &d.sb;
	uint64_t slot, span;
	uint8_t *buf;
	int rv = 0;

	memset(sb, 0, sizeof(*sb));
	sb->version = DEV_FORMAT_VERSION;
	sb->block_size = g->block;
	sb->logical_block = g->logical_block;
	sb->physical_block = g->physical_block;
	sb->device_size = g->size - g->size % g->block;
	sb->extent_size = extent_size;
	sb->max_nodes = nodes;
	sb->created_ms = now_ms();
	{
		FILE *f = fopen("/dev/urandom", "rb");
		size_t got = f ? fread(sb->uuid, 1, 16, f) : 0;
		if (f)
			fclose(f);
		if (got != 16) {
			snprintf(err, errlen, "no random bytes for the device uuid");
			return -EIO;
		}
	}
	/* a catalog slot: 1/64 of the device (shared by the nodes' slot
	 * pairs), between 1 and 64 MiB, and room for twice the extent table */
	slot = sb->device_size / 64 / nodes;
	if (slot < (1u << 20))
		slot = 1u << 20;
	if (slot > (64u << 20))
		slot = 64u << 20;
	sb->catalog_off = g->block;
	sb->catalog_slot = round_up(slot, g->block);
	sb->data_off = round_up(sb->catalog_off + 2ull * nodes * sb->catalog_slot, 1u << 20);
	if (sb->device_size < sb->data_off + 2 * extent_size + g->block) {
		snprintf(err, errlen,
		         "the device (%llu bytes) is too small for two extents of %llu bytes",
		         (unsigned long long)g->size, (unsigned long long)extent_size);
		return -EINVAL;
	}
	sb->extent_count = (uint32_t)((sb->device_size - g->block - sb->data_off) / extent_size);
	if ((uint64_t)sb->extent_count * 13 * 2 + 65536 > sb->catalog_slot) {
		snprintf(err, errlen, "too many extents (%u) for the catalog: use a larger extent size",
		         sb->extent_count);
		return -EINVAL;
	}
	span = DEV_ZERO_SPAN;
	if ((buf = balloc(&d, (size_t)span)) == NULL)
		return -ENOMEM;
	memset(buf, 0, (size_t)span);
	/* the first and last MiB (old signatures), both catalog slot headers */
	if ((rv = io_pwrite_full(NULL, fd, buf, (size_t)span, 0)) == 0)
		rv = io_pwrite_full(NULL, fd, buf, (size_t)span, sb->device_size - span);
	for (uint32_t k = 1; k <= nodes && rv == 0; k++)
		rv = io_pwrite_full(NULL, fd, buf, g->block, dev_slot_off(sb, k, 1));
	for (uint32_t node = 1; node <= nodes && rv == 0; node++) {
		/* each node's empty catalog, then the superblocks: the end copy first */
		struct dev_cat_header h = {.seq = 1, .node = node, .epoch = 1};
		struct wbuf w = {.p = buf + DEV_CAT_HEADER, .cap = (size_t)span - DEV_CAT_HEADER};
		uint32_t k;
		w32(&w, 0);
		w32(&w, 1);
		w32(&w, sb->extent_count);
		for (k = 0; k < sb->extent_count && !w.over; k++) {
			w32(&w, 0);
			w32(&w, 0);
			w32(&w, 0);
			w8(&w, 0);
		}
		if (w.over) {
			rv = -EINVAL;
			snprintf(err, errlen, "too many extents for the catalog");
		} else {
			h.body_len = w.len;
			memcpy(h.uuid, sb->uuid, 16);
			dev_cat_header_encode(buf, &h, 0);
			dev_cat_header_encode(buf, &h, dev_cat_crc(buf, buf + DEV_CAT_HEADER, w.len));
			rv = io_pwrite_full(NULL, fd, buf,
			                    (size_t)round_up(DEV_CAT_HEADER + w.len, g->block),
			                    dev_slot_off(sb, node, 0));
		}
	}
	if (rv == 0)
		rv = io_fdatasync(NULL, fd);
	if (rv == 0) {
		memset(buf, 0, g->block);
		dev_super_encode(buf, sb);
		rv = io_pwrite_full(NULL, fd, buf, g->block, sb->device_size - g->block);
		if (rv == 0)
			rv = io_fdatasync(NULL, fd);
		if (rv == 0)
			rv = io_pwrite_full(NULL, fd, buf, g->block, 0);
		if (rv == 0)
			rv = io_fdatasync(NULL, fd);
	}
	if (rv != 0 && err[0] == '\0')
		snprintf(err, errlen, "writing the device: %s", strerror(-rv));
	free(buf);
	return rv;
}
