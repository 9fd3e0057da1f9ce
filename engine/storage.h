/*
 * storage.h — the one interface between the engine and where its bytes live
 * (the role of SQLite's VFS or RocksDB's FileSystem). A backend is a table of
 * functions (struct kv_storage_ops) behind an instance (struct kv_storage),
 * chosen when a database or a store opens. storage_file.c is the `files`
 * backend: a directory per tenant, one file per segment, hint and metadata
 * blob. A block-device backend (extents, O_DIRECT, a catalog instead of
 * directories) implements the same table.
 *
 * Things are named by role, never by path:
 *   tenant      a name the backend maps to a space of its own (files: a
 *               directory, relative to the instance's root, or a path when
 *               the instance has none);
 *   segment     a 32-bit id, unique and never reused within a tenant (0 is
 *               never an id);
 *   hint        the hint data of one segment, by the segment's id;
 *   metadata    a blob by name ("META", "TENANT", "STATS", "KEYDIR",
 *               "merge-<seq>.commit"): at most KV_STOR_META_MAX bytes, read
 *               and written whole.
 * Callers hold opaque handles (struct kv_stor_tenant, struct kv_stor_seg);
 * no descriptor, directory or path crosses the interface. Each handle starts
 * with a pointer to its instance, so the stor_* wrappers below dispatch
 * without one.
 *
 * Errors: every int-returning call returns 0 (1 where it says so),
 * a negative errno or a negative KV_E* code (kvengine.h). Outputs are ret_*
 * parameters, last, untouched on failure. Common to all calls:
 *   -ENOMEM     the process is out of memory; nothing changed.
 *   -EIO        the medium failed; for a write or a sync, what it was to
 *               make durable may be lost (the caller must not assume the
 *               old contents either: see seg_sync).
 *   -ENOSPC     the medium is full; the call failed (bytes of a failed
 *               seg_write may have reached the segment: callers cut it back
 *               with seg_truncate or never read past what succeeded).
 *   -ENOENT     what was named does not exist.
 *   KV_ECORRUPT what was read is not what was written (wrong size for its
 *               kind, unreadable in a way retrying does not fix).
 *
 * Alignment: the files backend accepts any buffer, length and offset. A
 * backend that does direct I/O (O_DIRECT) works in blocks of kv_storage.align
 * bytes (a power of two; 1: none). Every backend accepts unaligned
 * requests — records are packed, so segment offsets are not aligned — and
 * a direct-I/O backend bounces them through aligned memory of its own
 * (read-modify-write of the tail block for appends); callers that pass
 * buffers, offsets and lengths aligned to align spare it the copy.
 * Metadata and hint calls take any buffer on every backend.
 *
 * Durability, per call (what survives a power cut once the call returned 0):
 *   meta_put(KV_STOR_DURABLE)  the new blob, whole, and its name. While the
 *                              system runs a reader sees the old blob or the
 *                              new one, whole, with or without the flag.
 *   meta_put(0), hint_put      nothing: after a crash the blob may be the
 *                              old one, gone or torn; readers check it
 *                              (hints carry checksums and are only a cache).
 *   meta_remove, hint_remove,  the removal becomes durable with the next
 *   seg_remove, seg_create,    tenant_sync (files: the directory's fsync);
 *   seg_publish                until then, after a crash, either state.
 *   seg_write                  nothing until seg_sync covers it.
 *   seg_sync                   every byte written to the segment before it.
 *                              A failed sync leaves the segment's durable
 *                              contents unknown: callers stop writing it.
 *   seg_truncate               nothing until seg_sync.
 *   tenant_create, tenant_drop durable on return.
 *
 * Faults: the engine's test hooks (struct kv_io_fault, io.h) sit under this
 * interface, inside each backend: every backend passes its reads, writes,
 * syncs and namespace changes through them, so the I/O-error tests run on
 * any backend. The changes are described in files terms today (struct
 * kv_io_event: descriptors and names), which the power-loss replay of
 * test_powerloss rebuilds a directory from; a device backend reports its
 * writes and flushes on the device's descriptor.
 *
 * Threads: an instance and its tenant handles may be used from any thread;
 * calls on one segment handle are not ordered against each other (the
 * engine orders them: one writer per segment, readers of what was written).
 */
#ifndef KV_STORAGE_H
#define KV_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv_io_fault;
struct kv_storage;

/* A metadata blob larger than this is damage (a merge commit holds 16
 * bytes per record the merge moved). */
#define KV_STOR_META_MAX (1u << 30)
/* Longest metadata name, terminator excluded. */
#define KV_STOR_NAME_MAX 63

/* One open tenant; backends extend it (files: its directory). */
struct kv_stor_tenant {
	struct kv_storage *st;
};

/* One open segment; backends extend it (files: its descriptor). */
struct kv_stor_seg {
	struct kv_stor_tenant *t;
	uint32_t id;
	/* XORed into the crc of every record of the segment (record.h): 0 on
	 * files; on a device, one value per use of an extent, the same for every
	 * handle of that use, so bytes an earlier use left never pass for
	 * records. */
	uint32_t crc_seed;
	/* Set by seg_open when the backend knows the segment was sealed at the
	 * size it reports (a device: seg_seal recorded it); never on files. */
	bool sealed;
	/* Set by seg_open when the segment may never be written again, not even
	 * reopened: it lies in another node's part of a shared device. */
	bool frozen;
};

enum kv_stor_kind {
	KV_STOR_SEGMENT = 1, /* id: a segment (published) */
	KV_STOR_HINT,        /* id: the hint data of a segment */
	KV_STOR_META,        /* name: a metadata blob */
	KV_STOR_PARTIAL,     /* name: what an interrupted put or create left; only ever
	                      * removed (meta_remove by its name) */
};

struct kv_stor_entry {
	enum kv_stor_kind kind;
	uint32_t id;      /* KV_STOR_SEGMENT, KV_STOR_HINT */
	const char *name; /* KV_STOR_META, KV_STOR_PARTIAL; valid during the callback */
};

/* The write path's appender: one per database, one append in flight. */
struct kv_stor_writer {
	struct kv_storage *st;
};

/* How an append ended (append_poll). */
struct kv_stor_wres {
	int err;          /* 0 or -errno */
	bool sync_failed; /* err came from the sync: what it covered may be gone */
};

/* One read of a batch (read_batch). */
struct kv_stor_rd {
	struct kv_stor_seg *s;
	void *buf;
	size_t len;
	uint64_t off;
	int res; /* out: 0 or -errno (-EIO past the end) */
};

/* An instance's figures (stats). */
struct kv_stor_stats {
	uint64_t extents, extents_free, extent_size;
	uint64_t cache_bytes, cache_hits, cache_misses;
	uint32_t superblocks_damaged; /* copies not sound when the instance opened */
	uint32_t extents_reclaimed;   /* taken but named by nothing at open: given back */
};

/* list's callback: 0 to go on, a negative error to stop the listing with. */
typedef int (*kv_stor_list_fn)(void *arg, const struct kv_stor_entry *e);

enum {
	KV_STOR_CREATE = 1u << 0, /* tenant_open: create the tenant when it is missing */
};

enum {
	KV_STOR_DURABLE = 1u << 0, /* meta_put: durable on return */
};

enum {
	KV_STOR_SEG_TEMP = 1u << 0, /* seg_create: unnamed (not listed, not openable)
	                             * until seg_publish */
};

struct kv_dev_tenant;

struct kv_storage_ops {
	const char *name; /* "files" */
	/* Releases the instance; every handle must be closed. NULL is no-op. */
	void (*destroy)(struct kv_storage *st);

	/* ---- tenants ------------------------------------------------------ */

	/* Creates a tenant holding one metadata blob (its configuration),
	 * durably: after a crash the tenant is there with the whole blob, or it
	 * is not a tenant (files: a directory without the blob, which the
	 * store skips). What a creation cut short left is taken over. -EINVAL
	 * (a name the backend cannot hold). */
	int (*tenant_create)(struct kv_storage *st, const char *tenant, const char *meta_name,
	                     const void *buf, size_t len);
	/* Removes a tenant and everything it holds. Durable on return: after a
	 * crash the tenant is gone, never half there. No handle of it may be
	 * open. -ENOENT. */
	int (*tenant_drop)(struct kv_storage *st, const char *tenant);
	/* Calls fn with the name of every tenant of the instance, in no
	 * particular order; a drop a crash interrupted is finished on the way
	 * (its tenant is not reported). Returns 0, the listing's error or the
	 * first non-zero return of fn. */
	int (*tenant_list)(struct kv_storage *st, int (*fn)(void *arg, const char *tenant),
	                   void *arg);
	/* Opens a tenant (KV_STOR_CREATE: creating it when missing; such a
	 * creation is not durable by itself: tenant_create is). -ENOENT,
	 * -ENOTDIR / -EINVAL (the name holds something else). */
	int (*tenant_open)(struct kv_storage *st, const char *tenant, unsigned flags,
	                   struct kv_stor_tenant **ret);
	/* Closes the handle; NULL is a no-op. Open segments must be closed. */
	void (*tenant_close)(struct kv_stor_tenant *t);
	/* Takes the tenant's lock for this process until tenant_close:
	 * exclusive (the one writer; KV_ELOCKED while anyone holds it) or
	 * shared (a reader that must not run beside a writer; KV_ELOCKED while
	 * a writer holds it). The lock goes with the process: a crash never
	 * leaves it held. Files: flock on the file LOCK, which an exclusive
	 * taker creates and writes its pid into; a shared taker finding no
	 * LOCK holds nothing. */
	int (*tenant_lock)(struct kv_stor_tenant *t, bool exclusive);
	/* Makes every create, publish and remove in the tenant so far durable. */
	int (*tenant_sync)(struct kv_stor_tenant *t);
	/* Calls fn once for every segment, hint, metadata blob and leftover of
	 * the tenant, in no particular order. Returns 0, the listing's error or
	 * the first non-zero return of fn. */
	int (*list)(struct kv_stor_tenant *t, kv_stor_list_fn fn, void *arg);

	/* ---- small metadata ----------------------------------------------- */

	/* Replaces (or creates) the blob `name` with len bytes of buf, whole
	 * (never half the new one); flags: KV_STOR_DURABLE. On failure the old
	 * blob, if any, is untouched. -EINVAL: a name longer than
	 * KV_STOR_NAME_MAX or len above KV_STOR_META_MAX. */
	int (*meta_put)(struct kv_stor_tenant *t, const char *name, const void *buf, size_t len,
	                unsigned flags);
	/* The whole blob, in memory the caller frees (*ret_buf is never NULL on
	 * success, even for 0 bytes). -ENOENT; KV_ECORRUPT when it is larger
	 * than max or not a blob (files: not a regular file). */
	int (*meta_get)(struct kv_stor_tenant *t, const char *name, size_t max, uint8_t **ret_buf,
	                size_t *ret_len);
	/* -ENOENT. Durable with the next tenant_sync. */
	int (*meta_remove)(struct kv_stor_tenant *t, const char *name);

	/* ---- hint data ---------------------------------------------------- */

	/* As meta_put(0) and meta_get/meta_remove, for the hint of segment id. */
	int (*hint_put)(struct kv_stor_tenant *t, uint32_t id, const void *buf, size_t len);
	int (*hint_get)(struct kv_stor_tenant *t, uint32_t id, size_t max, uint8_t **ret_buf,
	                size_t *ret_len);
	int (*hint_remove)(struct kv_stor_tenant *t, uint32_t id);

	/* ---- segments ----------------------------------------------------- */

	/* Creates segment id, empty (KV_STOR_SEG_TEMP: unnamed until
	 * seg_publish; a crash before that leaves at most a KV_STOR_PARTIAL).
	 * -EEXIST. */
	int (*seg_create)(struct kv_stor_tenant *t, uint32_t id, unsigned flags,
	                  struct kv_stor_seg **ret);
	/* Opens segment id and says how many bytes it holds. -ENOENT. */
	int (*seg_open)(struct kv_stor_tenant *t, uint32_t id, struct kv_stor_seg **ret,
	                uint64_t *ret_size);
	/* Writes len bytes at off (an append: off is the segment's length). A
	 * short write is finished or failed, never reported done. */
	int (*seg_write)(struct kv_stor_seg *s, const void *buf, size_t len, uint64_t off);
	/* Reads len bytes at off; -EIO past the end. */
	int (*seg_read)(struct kv_stor_seg *s, void *buf, size_t len, uint64_t off);
	/* Up to len bytes at off, fewer only at the end (*ret_got says how
	 * many): one read of a record whose size is only guessed. */
	int (*seg_read_upto)(struct kv_stor_seg *s, void *buf, size_t len, uint64_t off,
	                     size_t *ret_got);
	/* Runs n reads of segments of this instance, as one submission where
	 * the backend can (files: the calling thread's io_uring ring once a
	 * writer of the instance uses io_uring, else pread). Returns 0 when
	 * all succeeded, else the first error; each res says which. The reads'
	 * handles stay open meanwhile. */
	int (*read_batch)(struct kv_storage *st, struct kv_stor_rd *v, size_t n);
	/* Makes every byte written so far durable (see the top of the file). */
	int (*seg_sync)(struct kv_stor_seg *s);
	/* Sets the length (a cut after a torn write; dropping a reservation). */
	int (*seg_truncate)(struct kv_stor_seg *s, uint64_t size);
	/* Makes [off, off+len) writable without running out of space, the
	 * length unchanged. -EOPNOTSUPP where the backend cannot (then writes
	 * may fail with -ENOSPC). */
	int (*seg_reserve)(struct kv_stor_seg *s, uint64_t off, uint64_t len);
	/* Seals the segment at size bytes: its data synced and its length
	 * final (on a device, recorded durably with the next tenant_sync); no
	 * write follows. */
	int (*seg_seal)(struct kv_stor_seg *s, uint64_t size);
	/* Makes a segment opened sealed (kv_stor_seg.sealed) writable again at
	 * its end, durably: after a crash its length is found again by
	 * recovery. Only backends without append_reopened have it. */
	int (*seg_reopen)(struct kv_stor_seg *s);
	/* Gives a KV_STOR_SEG_TEMP segment its id in the namespace (durable
	 * with the next tenant_sync). */
	int (*seg_publish)(struct kv_stor_seg *s);
	/* Closes the handle; NULL is a no-op. Nothing is synced. */
	void (*seg_close)(struct kv_stor_seg *s);
	/* Maps the first len bytes of s read-only (*ret_map), so records can be
	 * copied out of memory; pages the medium cannot give raise SIGBUS,
	 * which iomap.c's copy turns into -EIO. Unmapped with seg_unmap before
	 * the handle closes. Optional: NULL (or -EOPNOTSUPP) where a backend
	 * cannot map; then every read goes through seg_read and read_batch. */
	int (*seg_map)(struct kv_stor_seg *s, size_t len, const uint8_t **ret_map);
	void (*seg_unmap)(struct kv_stor_seg *s, const uint8_t *map, size_t len);

	/* ---- the write path's appends ------------------------------------- */

	/* Opens the appender of a database. mode: an enum kv_io (kvengine.h),
	 * how appends are submitted where the backend has a choice (files:
	 * io_uring, falling back to pwrite under KV_IO_AUTO); efd >= 0 is
	 * signalled whenever a started append finishes. -ENOSYS and the like
	 * when the asked mode cannot be had. */
	int (*writer_open)(struct kv_storage *st, int mode, int efd, struct kv_stor_writer **ret);
	/* Waits for an append in flight, then closes; NULL is a no-op. */
	void (*writer_close)(struct kv_stor_writer *w);
	/* Whether appends go through io_uring (for the statistics). */
	bool (*writer_is_uring)(struct kv_stor_writer *w);
	/* Starts writing len bytes at off of s (its end) and, with sync, a
	 * seg_sync after them. Only one append is in flight per writer; s stays
	 * open until it finished. A start that fails returns -errno and
	 * nothing is in flight. */
	int (*append_start)(struct kv_stor_writer *w, struct kv_stor_seg *s, const void *buf,
	                    size_t len, uint64_t off, bool sync);
	/* 1 with *ret filled once the started append finished — all its bytes
	 * written and, when asked, synced, or an error; 0 while it runs (only
	 * without wait); -EINVAL when none was started. */
	int (*append_poll)(struct kv_stor_writer *w, bool wait, struct kv_stor_wres *ret);
	/* Figures of the instance (optional: NULL where there are none). */
	void (*stats)(struct kv_storage *st, struct kv_stor_stats *ret);
	/* Removes segment id: the published one, or with KV_STOR_SEG_TEMP
	 * the unpublished one. Open handles stay readable until closed.
	 * -ENOENT. Durable with the next tenant_sync. */
	int (*seg_remove)(struct kv_stor_tenant *t, uint32_t id, unsigned flags);

	/* ---- a device shared by several nodes (kv_storage.shared) ------------
	 * NULL on a backend that is never shared. */
	/* Makes this node the tenant's owner at epoch (kv_store_claim): 0 when
	 * it is now this node's (taken over from the node whose entry was
	 * newest, if another's), -ENOENT when no node has it (a later
	 * tenant_create makes it under epoch), -ESTALE when an entry's epoch
	 * is ≥ epoch. The tenant must have no handle open. */
	int (*claim)(struct kv_storage *st, const char *tenant, uint64_t epoch);
	/* Every later change of the tenant (NULL: of every tenant) fails with
	 * -ESTALE until claim takes it again. */
	int (*disown)(struct kv_storage *st, const char *tenant);
	/* Every tenant of every node's catalog, read now: the newest entries. */
	int (*directory)(struct kv_storage *st, struct kv_dev_tenant **ret, size_t *ret_n);

	/* ---- backups (engine/backup.c) ------------------------------------ */
	/* Makes the sealed segment id of src also segment id of dst, sharing
	 * its bytes instead of copying them (files: a hard link), where dst
	 * is a tenant of an instance of the same backend. Not durable until
	 * dst's tenant_sync. -EXDEV (another file system), -EPERM,
	 * -EOPNOTSUPP and the like: the caller copies instead. Optional:
	 * NULL where a backend cannot share bytes. */
	int (*seg_link)(struct kv_stor_tenant *src, uint32_t id, struct kv_stor_tenant *dst);
	/* The same for the hint of segment id (a hint is replaced whole, never
	 * changed in place). -ENOENT: none. Optional as seg_link. */
	int (*hint_link)(struct kv_stor_tenant *src, uint32_t id, struct kv_stor_tenant *dst);
};

struct kv_storage {
	const struct kv_storage_ops *ops;
	struct kv_io_fault *fault; /* test hooks under every call; NULL: none */
	size_t align;              /* see "Alignment" above */
	/* Bytes a segment holds at most; 0: no limit of the backend's (files).
	 * A database's segment size and largest record are bounded by it. */
	uint64_t seg_max;
	/* Whether a segment that was not sealed when its process ended may be
	 * appended to again after recovery found its end (files: yes). A
	 * device backend cannot tell bytes a crash left past that end from
	 * records, so the engine seals such a segment and starts a new one.
	 * Without it, seg_open of a segment that is not sealed
	 * (kv_stor_seg.sealed false) reports the room the segment has as its
	 * size: what follows its last record was never written by this use
	 * of the space (bytes of an earlier use fail the crc seed). */
	bool append_reopened;
	/* Formatted for several nodes: tenants are created and changed only
	 * once claimed (ops->claim). */
	bool shared;
	uint32_t nodes, node; /* nodes it is formatted for, this instance's (device) */
};

/* The files backend. root: the directory tenant names are relative to;
 * NULL: tenant names are paths. fault: borrowed, may be NULL. */
int kv_storage_file_open(const char *root, struct kv_io_fault *fault, struct kv_storage **ret);

/* The device backend (storage_dev.c) on a device kv_dev_format formatted.
 * cache_bytes: its read cache (0: KV_DEV_CACHE_DEFAULT). readonly: for
 * checking (a read lock on the whole device, refused while any node
 * serves it; nothing is written; on a shared device every node's catalog
 * is read, kv_storage_dev_open_node's node 0). KV_ELOCKED while another
 * process serves the device; KV_ECORRUPT / KV_EFORMAT when neither
 * superblock copy or neither catalog slot is sound. */
int kv_storage_dev_open(const char *device, uint64_t cache_bytes, bool readonly,
                        struct kv_io_fault *fault, struct kv_storage **ret);
/* The same as node `node` (1..nodes) of a device formatted for several;
 * node 0 reads every node's catalog and owns nothing (checking). */
int kv_storage_dev_open_node(const char *device, uint64_t cache_bytes, bool readonly,
                             uint32_t node, struct kv_io_fault *fault,
                             struct kv_storage **ret);
/* How the device backend st makes synced appends durable (enum kv_dev_sync;
 * KV_DEV_SYNC_DSYNC from open). For writers opened after the call. */
void kv_storage_dev_set_sync(struct kv_storage *st, int mode);
/* A shared device's grace period (kv_store_options.device_grace_ms). */
void kv_storage_dev_set_grace(struct kv_storage *st, uint32_t ms);

static inline void kv_storage_close(struct kv_storage *st)
{
	if (st != NULL)
		st->ops->destroy(st);
}

/* ---- calls on handles ---------------------------------------------------- */

static inline int stor_tenant_open(struct kv_storage *st, const char *tenant, unsigned flags,
                                   struct kv_stor_tenant **ret)
{
	return st->ops->tenant_open(st, tenant, flags, ret);
}

static inline void stor_tenant_close(struct kv_stor_tenant *t)
{
	if (t != NULL)
		t->st->ops->tenant_close(t);
}

static inline int stor_tenant_sync(struct kv_stor_tenant *t)
{
	return t->st->ops->tenant_sync(t);
}

static inline int stor_list(struct kv_stor_tenant *t, kv_stor_list_fn fn, void *arg)
{
	return t->st->ops->list(t, fn, arg);
}

static inline int stor_meta_put(struct kv_stor_tenant *t, const char *name, const void *buf,
                                size_t len, unsigned flags)
{
	return t->st->ops->meta_put(t, name, buf, len, flags);
}

static inline int stor_meta_get(struct kv_stor_tenant *t, const char *name, size_t max,
                                uint8_t **ret_buf, size_t *ret_len)
{
	return t->st->ops->meta_get(t, name, max, ret_buf, ret_len);
}

static inline int stor_meta_remove(struct kv_stor_tenant *t, const char *name)
{
	return t->st->ops->meta_remove(t, name);
}

static inline int stor_hint_put(struct kv_stor_tenant *t, uint32_t id, const void *buf, size_t len)
{
	return t->st->ops->hint_put(t, id, buf, len);
}

static inline int stor_hint_get(struct kv_stor_tenant *t, uint32_t id, size_t max,
                                uint8_t **ret_buf, size_t *ret_len)
{
	return t->st->ops->hint_get(t, id, max, ret_buf, ret_len);
}

static inline int stor_hint_remove(struct kv_stor_tenant *t, uint32_t id)
{
	return t->st->ops->hint_remove(t, id);
}

static inline int stor_seg_create(struct kv_stor_tenant *t, uint32_t id, unsigned flags,
                                  struct kv_stor_seg **ret)
{
	return t->st->ops->seg_create(t, id, flags, ret);
}

static inline int stor_seg_open(struct kv_stor_tenant *t, uint32_t id, struct kv_stor_seg **ret,
                                uint64_t *ret_size)
{
	return t->st->ops->seg_open(t, id, ret, ret_size);
}

static inline int stor_seg_remove(struct kv_stor_tenant *t, uint32_t id, unsigned flags)
{
	return t->st->ops->seg_remove(t, id, flags);
}

static inline int stor_seg_write(struct kv_stor_seg *s, const void *buf, size_t len, uint64_t off)
{
	return s->t->st->ops->seg_write(s, buf, len, off);
}

static inline int stor_seg_read(struct kv_stor_seg *s, void *buf, size_t len, uint64_t off)
{
	return s->t->st->ops->seg_read(s, buf, len, off);
}

static inline int stor_seg_read_upto(struct kv_stor_seg *s, void *buf, size_t len, uint64_t off,
                                     size_t *ret_got)
{
	return s->t->st->ops->seg_read_upto(s, buf, len, off, ret_got);
}

static inline int stor_read_batch(struct kv_storage *st, struct kv_stor_rd *v, size_t n)
{
	return st->ops->read_batch(st, v, n);
}

static inline int stor_append_start(struct kv_stor_writer *w, struct kv_stor_seg *s,
                                    const void *buf, size_t len, uint64_t off, bool sync)
{
	return w->st->ops->append_start(w, s, buf, len, off, sync);
}

static inline int stor_append_poll(struct kv_stor_writer *w, bool wait, struct kv_stor_wres *ret)
{
	return w->st->ops->append_poll(w, wait, ret);
}

static inline void stor_writer_close(struct kv_stor_writer *w)
{
	if (w != NULL)
		w->st->ops->writer_close(w);
}

static inline int stor_seg_sync(struct kv_stor_seg *s)
{
	return s->t->st->ops->seg_sync(s);
}

static inline int stor_seg_truncate(struct kv_stor_seg *s, uint64_t size)
{
	return s->t->st->ops->seg_truncate(s, size);
}

static inline int stor_seg_reserve(struct kv_stor_seg *s, uint64_t off, uint64_t len)
{
	return s->t->st->ops->seg_reserve(s, off, len);
}

static inline int stor_seg_seal(struct kv_stor_seg *s, uint64_t size)
{
	return s->t->st->ops->seg_seal(s, size);
}

static inline int stor_seg_publish(struct kv_stor_seg *s)
{
	return s->t->st->ops->seg_publish(s);
}

static inline void stor_seg_close(struct kv_stor_seg *s)
{
	if (s != NULL)
		s->t->st->ops->seg_close(s);
}

#endif
