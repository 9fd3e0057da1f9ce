/*
 * dev_internal.h — the device backend's state in memory, shared by
 * storage_dev.c (the storage interface: tenants, blobs, segments, appends)
 * and dev_catalog.c (extents, the catalog, a fresh layout). Its invariants
 * are at the top of storage_dev.c.
 */
#ifndef KV_DEV_INTERNAL_H
#define KV_DEV_INTERNAL_H

#include "dev_cache.h"
#include "dev_layout.h"
#include "kvengine.h"
#include "storage.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>

#define DEV_INLINE_MAX 4096u
#define NONE UINT32_MAX
/* dev_extent.tenant of an extent a tenant of another node holds, or one
 * this node may not allocate (another node's range) */
#define DEV_FOREIGN (UINT32_MAX - 1)
#define DEV_GRACE_MS_DEFAULT 10000u

struct dev_segment {
	uint32_t id;
	uint32_t extent;
	bool temp;
	bool sealed;
	bool listed;     /* in its tenant's table (false once removed) */
	uint32_t refs;   /* handles + 1 while listed */
	uint64_t len;    /* sealed: the length; else bytes written by this process */
	bool len_known;  /* false: not sealed when the last process ended (invariant 5) */
	uint32_t seed;
	/* the block holding byte len (invariant 1); tail_ok: tail holds it */
	uint8_t *tail;
	bool tail_ok;
};

struct dev_blob {
	uint8_t kind; /* KV_STOR_HINT, KV_STOR_META */
	uint32_t id;
	char name[KV_STOR_NAME_MAX + 1];
	uint64_t len;
	uint32_t crc;
	uint8_t *data;   /* inline: the bytes (len ≤ DEV_INLINE_MAX) */
	uint32_t *exts;  /* else: its extents (one when packed) */
	uint32_t nexts;
	uint64_t off;    /* where it starts in exts[0]'s data */
};

struct dev_tenant {
	uint32_t id;
	char name[KV_TENANT_NAME_MAX + 1];
	uint32_t owner;
	uint64_t epoch;
	struct dev_segment **segs;
	size_t nsegs, capsegs;
	struct dev_blob *blobs;
	size_t nblobs, capblobs;
	uint32_t aux;     /* the AUX extent blobs are packed into; NONE */
	uint64_t aux_off; /* bytes of its data used */
	uint32_t aux_count;
	int lock;          /* >0: shared holders, -1: exclusive */
	uint32_t handles;
	bool listed;
	/* a shared device (dev_shared.c): */
	atomic_bool owned; /* claimed by this node: changes allowed (always, unshared) */
	bool lost;         /* another node's entry is newer: not listed, never written */
	bool tomb;         /* dropped: an entry with no objects (id 0 on the device) */
};

struct dev_extent {
	uint32_t tenant; /* 0: free */
	uint32_t position;
	uint32_t generation;
	uint8_t kind;
	uint32_t users;      /* AUX: blobs in it (+1 while it is the packing extent) */
	uint32_t readers;    /* blob_get calls reading it right now (not reused meanwhile) */
	uint64_t free_after; /* invariant 4: free once a catalog of this change count is durable */
	bool pending;
	bool taking; /* dev_ext_alloc took it and its header is not written yet: a catalog
	                written meanwhile keeps it free */
	uint64_t grace_until; /* shared: freed by another node; free from then (CLOCK_MONOTONIC ms) */
};

/* A claim of a tenant no node has (dev_shared.c): its epoch, for creating it. */
struct dev_claim {
	char name[KV_TENANT_NAME_MAX + 1];
	uint64_t epoch;
};

struct dev_storage {
	struct kv_storage base;
	int fd;
	struct dev_super sb;
	uint32_t B;      /* block size */
	uint64_t cap;    /* data bytes of an extent */
	pthread_mutex_t mu;
	struct dev_tenant **tenants;
	size_t ntenants, captenants;
	struct dev_extent *ext;
	uint32_t next_tenant;
	uint32_t free_hint; /* where the search for a free extent starts */
	uint64_t changes;       /* bumped by every change to the catalog in memory */
	uint64_t durable;       /* the change count the last durable catalog covers */
	pthread_mutex_t cat_mu; /* orders catalog writes */
	uint64_t cat_seq;       /* sequence of the newest valid slot */
	int cat_slot;
	uint8_t *cat_buf;       /* a slot's worth, for cat_write [cat_mu] */
	struct dev_cache *cache;
	uint64_t cache_bytes;
	uint32_t sb_damaged; /* superblock copies found not sound at open */
	uint32_t reclaimed;  /* extents dev_ext_reclaim gave back at open */
	int sync_mode;       /* enum kv_dev_sync */
	/* a shared device (sb.max_nodes > 1; dev_shared.c) */
	uint32_t node;       /* this instance's (1..max_nodes), 0: a reader of all */
	uint32_t grace_ms;   /* extents another node freed wait this long */
	struct dev_claim *claims;
	size_t nclaims, capclaims;
};

static inline bool dev_shared(const struct dev_storage *d)
{
	return d->sb.max_nodes > 1;
}

/* Whether this node allocates extent i (its range of a shared device). */
static inline bool dev_in_range(const struct dev_storage *d, uint32_t i)
{
	return !dev_shared(d) || d->node == 0 || i % d->sb.max_nodes == d->node - 1;
}

/* -ESTALE when t may not change (a shared device's tenant not claimed). */
static inline int dev_writable(const struct dev_tenant *t)
{
	return atomic_load(&t->owned) ? 0 : -ESTALE;
}

static inline uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static inline uint64_t data_off(struct dev_storage *d, uint32_t extent)
{
	return dev_extent_off(&d->sb, extent) + d->B;
}

static inline void *balloc(struct dev_storage *d, size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, d->B, len ? len : d->B) != 0)
		return NULL;
	return p;
}

struct dev_tenant_h {
	struct kv_stor_tenant base;
	struct dev_tenant *t;
	int lock; /* what this handle holds: 0, 1 shared, -1 exclusive */
};

static inline struct dev_tenant *dev_ten_of(struct kv_stor_tenant *t)
{
	return ((struct dev_tenant_h *)t)->t;
}

struct dev_seg_h {
	struct kv_stor_seg base;
	struct dev_segment *seg;
};

static inline struct dev_storage *dev_of(struct kv_storage *st)
{
	return (struct dev_storage *)st;
}

static inline struct dev_segment *seg_of(struct kv_stor_seg *s)
{
	return ((struct dev_seg_h *)s)->seg;
}

/* ---- storage_dev.c ------------------------------------------------------ */

/* The device bytes [a, e) of s that writing len bytes of buf at segment
 * offset off takes, staged in *stage (grown to *cap as needed), from a =
 * the block holding off (invariant 1); their length in *ret_len. */
int dev_stage_prepare(struct dev_storage *d, struct dev_segment *s, uint8_t **stage, size_t *cap,
                      const void *buf, size_t len, uint64_t off, size_t *ret_len);
/* After a write of [off, off+len) of s landed. */
void dev_stage_done(struct dev_storage *d, struct dev_segment *s, const uint8_t *stage,
                    uint64_t off, size_t len);

/* ---- dev_append.c: the storage interface's writer calls ----------------- */

int dev_writer_open(struct kv_storage *st, int mode, int efd, struct kv_stor_writer **ret);
void dev_writer_close(struct kv_stor_writer *wh);
bool dev_writer_is_uring(struct kv_stor_writer *w);
int dev_append_start(struct kv_stor_writer *wh, struct kv_stor_seg *sh, const void *buf,
                     size_t len, uint64_t off, bool sync);
int dev_append_poll(struct kv_stor_writer *wh, bool wait, struct kv_stor_wres *ret);

/* ---- dev_catalog.c ------------------------------------------------------ */

/* Takes a free extent for tenant t, its header written (not synced: the
 * catalog write that names it flushes the device first). reserve: it may
 * take one of the extents kept for merges. -ENOSPC: the device is full. */
int dev_ext_alloc(struct dev_storage *d, struct dev_tenant *t, uint8_t kind, uint32_t position,
                  bool reserve, uint32_t *ret);
/* An extent given back: free once a durable catalog no longer names it
 * (invariant 4). [d->mu] */
void dev_ext_release(struct dev_storage *d, uint32_t i);
/* Gives back extents the catalog gives a tenant that no object of it names
 * (a crash's leftovers); how many. [d->mu] */
uint32_t dev_ext_reclaim(struct dev_storage *d);
/* Extents whose release a durable catalog now covers become free. [d->mu] */
void dev_ext_settle(struct dev_storage *d);
/* Writes the catalog to the older slot, durably, when it changed. */
int dev_cat_write(struct dev_storage *d);
/* Reads both slots of node `node` into d (empty on entry, its sb set): the
 * valid one with the highest sequence. KV_ECORRUPT: neither is valid. */
int dev_cat_load(struct dev_storage *d, uint32_t node);
/* Decodes a slot's body into d (empty on entry). */
int dev_cat_decode(struct dev_storage *d, const uint8_t *body, size_t len);

/* ---- dev_shared.c --------------------------------------------------------- */

/* At open, after this node's catalog is in d: every other node's catalog
 * read, the newest entry of each tenant kept (node 0: all of them, as they
 * are), this node's older entries dropped, extents marked. */
int dev_shared_open(struct dev_storage *d);
/* A new tenant of a shared device: only one this node claimed (-ESTALE
 * otherwise), under the claim's epoch. [d->mu] */
int dev_shared_tenant_new(struct dev_storage *d, const char *name, struct dev_tenant **ret);
int dev_shared_claim(struct kv_storage *st, const char *tenant, uint64_t epoch);
int dev_shared_disown(struct kv_storage *st, const char *tenant);
int dev_shared_directory(struct kv_storage *st, struct kv_dev_tenant **ret, size_t *ret_n);
/* Before an extent is allocated: the other catalogs read again. */
int dev_shared_refresh(struct dev_storage *d);
uint64_t dev_mono_ms(void);

void dev_blob_clear(struct dev_blob *b);
void dev_tenant_free(struct dev_tenant *t);
/* Appends an element to a growing array (*n grows by one). -ENOMEM. */
int dev_push(void **arr, size_t *n, size_t *cap, size_t size);
int dev_tenant_add(struct dev_storage *d, struct dev_tenant *t);
int dev_seg_add(struct dev_tenant *t, struct dev_segment *s);

#endif
